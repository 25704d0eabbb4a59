//! Rust core of `overlay-lookup-live`.
pub mod select;
pub mod store;
pub mod wire;

mod node;
