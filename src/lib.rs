//! Rust core of `overlay-lookup-live`.
pub mod wire;

mod node;
