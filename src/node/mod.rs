//! napi glue: the only place that knows about Node.
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
