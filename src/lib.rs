//! Rust core of `overlay-lookup-live`.
pub mod manifest;
pub mod wire;

mod node;
