//! Rust core of `overlay-lookup-live`.
pub mod bitcoin;
pub mod client;
pub mod crypto;
pub mod manifest;
pub mod select;
pub mod session;
pub mod store;
pub mod wallet;
pub mod wire;

mod node;

mod alloc;

#[global_allocator]
static ALLOCATOR: alloc::Allocator = alloc::Allocator;
