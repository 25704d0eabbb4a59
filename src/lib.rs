//! Rust core of `overlay-lookup-live`.
pub mod client;
pub mod wire;

mod node;
