//! The one place where Rust errors become JavaScript errors.
//!
//! A [`WireError`] becomes a JS `Error` whose `code` is the wire code string
//! (`'invalid'`, `'reset-required'`, ...) and whose `message` is the error's
//! message: napi-rs uses the string "status" of `napi::Error<String>` as the JS
//! `code`. The HTTP status is added by `js/wire.js` from [`crate::wire::ErrorCode`]'s
//! table, exported natively so it is not duplicated in JS.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::wire::{ErrorCode, WireError};

/// Result type of native entry points that can fail with a wire error. (In
/// `#[napi]` signatures spell it `napi::Result<T, String>`: the macro recognizes
/// a literal `Result` only, not an alias.)
pub(crate) type JsResult<T> = std::result::Result<T, napi::Error<String>>;

/// Maps a wire error to the JS error thrown by the addon.
pub(crate) fn js_error(e: WireError) -> napi::Error<String> {
    napi::Error::new(e.code.as_str().to_string(), e.message)
}

/// Runs a native entry point so that a panic never unwinds into Node: it is
/// reported as `unavailable` (an internal failure of the provider, not of the
/// request), without the panic payload, which could carry private data.
pub(crate) fn guard<T>(f: impl FnOnce() -> Result<T, WireError>) -> JsResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result.map_err(js_error),
        Err(_) => Err(js_error(WireError::new(ErrorCode::Unavailable, "internal error"))),
    }
}

/// An error with an explicit code, for failures that are not wire errors
/// (configuration, storage): JS sees `err.code === code`.
pub(crate) fn coded(code: &str, message: impl Into<String>) -> napi::Error<String> {
    napi::Error::new(code.to_string(), message.into())
}

/// A bad argument from the JS layer.
pub(crate) fn invalid_arg(message: impl Into<String>) -> napi::Error<String> {
    coded("invalid", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_errors_keep_their_code_and_panics_become_unavailable() {
        let err = guard::<()>(|| Err(WireError::invalid("bad"))).unwrap_err();
        assert_eq!((err.status.as_str(), err.reason.as_str()), ("invalid", "bad"));
        let err = guard::<()>(|| panic!("secret detail")).unwrap_err();
        assert_eq!((err.status.as_str(), err.reason.as_str()), ("unavailable", "internal error"));
        assert_eq!(guard(|| Ok(7)).unwrap(), 7);
    }
}
