//! Test support shared by the client tests and the conformance runner
//! (`examples/conformance_client.rs`): batch body builders and the replay of the
//! reconciliation corpus through the durable store. Kept out of the shipped library.
#![allow(dead_code)]

pub mod conformance;
pub mod fixture;
