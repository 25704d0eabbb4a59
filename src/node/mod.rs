//! napi glue: the only place that knows about Node.
#![cfg_attr(test, allow(dead_code))] // the napi exports are used from JS, not by the Rust unit tests
use napi_derive::napi;

mod bitcoin;
mod client;
mod delivery;
mod error;
mod live;
mod manifest;
mod verify;
mod wallet;
mod wire;

#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
