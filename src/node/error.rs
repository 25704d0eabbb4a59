//! The one place where Rust errors become JavaScript errors.
//!
//! Every error the addon throws or rejects with is built here from a [`Coded`]: the
//! `wire::ErrorCode` (BRC-192 §6 codes plus `not-found`), the message, whether a retry can
//! help, and where they apply `retryAfterMs`, the BRC-193 §8 limit kind and the cause chain.
//! napi can only give a JS error a message (class methods and promise rejections carry no
//! custom code), so those fields travel in a first line of the message,
//! `oll-error {json}`, which `js/common/native.js` (the one loader of the binding) turns into
//! `err.code`, `err.status`, `err.retryable`, `err.retryAfterMs`, `err.limit` and
//! `err.cause` before any caller sees the error. JS never reads message text.

use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::{json, Map, Value};

use crate::wire::{ErrorCode, WireError};

/// Result type of native entry points that can fail with a wire error. (In
/// `#[napi]` signatures spell it `napi::Result<T, String>`: the macro recognizes
/// a literal `Result` only, not an alias.)
pub(crate) type JsResult<T> = std::result::Result<T, napi::Error<String>>;

/// What a JS error carries.
#[derive(Debug, Clone)]
pub(crate) struct Coded {
    pub code: ErrorCode,
    pub message: String,
    pub retryable: bool,
    pub retry_after_ms: Option<u32>,
    /// BRC-193 §8 limit kind (`envelope`, `group`, `permanent-group`).
    pub limit: Option<&'static str>,
    /// The underlying failure (an I/O error, say), outermost first.
    pub cause: Option<String>,
}

impl Coded {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Coded {
        Coded {
            code,
            message: message.into(),
            retryable: code.default_retryable(),
            retry_after_ms: None,
            limit: None,
            cause: None,
        }
    }

    /// The message with its fields in the first line, as `js/common/native.js` reads it.
    fn encode(&self) -> String {
        let mut meta = Map::new();
        meta.insert("code".into(), json!(self.code.as_str()));
        meta.insert("retryable".into(), json!(self.retryable));
        if let Some(ms) = self.retry_after_ms {
            meta.insert("retryAfterMs".into(), json!(ms));
        }
        if let Some(kind) = self.limit {
            meta.insert("limit".into(), json!(kind));
        }
        if let Some(cause) = &self.cause {
            meta.insert("cause".into(), json!(cause));
        }
        format!("oll-error {}\n{}", Value::Object(meta), self.message)
    }
}

impl From<WireError> for Coded {
    fn from(e: WireError) -> Coded {
        Coded {
            retryable: e.retryable,
            retry_after_ms: e.retry_after_ms,
            limit: e.limit.map(|l| l.kind.as_str()),
            ..Coded::new(e.code, e.message)
        }
    }
}

impl From<crate::client::ClientError> for Coded {
    fn from(e: crate::client::ClientError) -> Coded {
        Coded::new(e.code, e.message)
    }
}

impl From<crate::manifest::ManifestError> for Coded {
    fn from(e: crate::manifest::ManifestError) -> Coded {
        Coded::new(e.code, e.message)
    }
}

/// Wallet failures are the caller's bad arguments (unknown counterparty, bad key, bad
/// invoice): `invalid`, with the SDK-compatible message kept as it is.
impl From<crate::wallet::WalletError> for Coded {
    fn from(e: crate::wallet::WalletError) -> Coded {
        Coded::new(ErrorCode::Invalid, e.to_string())
    }
}

impl From<crate::store::StoreError> for Coded {
    fn from(e: crate::store::StoreError) -> Coded {
        use crate::store::StoreError as E;
        let (code, limit) = match &e {
            // A configured cap: explicit, and not worth retrying as is.
            E::Limit { .. } => (ErrorCode::Limited, None),
            // A group the provider's limits can never serve (BRC-193 §8).
            E::TooLarge(_) => (ErrorCode::Limited, Some("permanent-group")),
            E::Missing { .. } | E::Invalid(_) => (ErrorCode::Invalid, None),
            E::Gone(_) => (ErrorCode::ResetRequired, None),
            E::Cancelled => (ErrorCode::Cancelled, None),
            _ => (ErrorCode::Unavailable, None),
        };
        let cause = std::error::Error::source(&e).map(|s| s.to_string());
        Coded { limit, cause, ..Coded::new(code, e.to_string()) }
    }
}

/// The error of a synchronous function (its JS `code` is also the napi status).
pub(crate) fn js_error(e: impl Into<Coded>) -> napi::Error<String> {
    let c = e.into();
    napi::Error::new(c.code.as_str().to_string(), c.encode())
}

/// The error of a class method or an async function (napi gives those a plain status).
pub(crate) fn status_error(e: impl Into<Coded>) -> napi::Error {
    napi::Error::new(napi::Status::GenericFailure, e.into().encode())
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
/// (configuration, storage).
pub(crate) fn coded(code: ErrorCode, message: impl Into<String>) -> napi::Error<String> {
    js_error(Coded::new(code, message))
}

/// A bad argument from the JS layer.
pub(crate) fn invalid_arg(message: impl Into<String>) -> napi::Error<String> {
    coded(ErrorCode::Invalid, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_errors_keep_their_code_and_panics_become_unavailable() {
        let err = guard::<()>(|| Err(WireError::invalid("bad"))).unwrap_err();
        assert_eq!(err.status.as_str(), "invalid");
        assert_eq!(err.reason, "oll-error {\"code\":\"invalid\",\"retryable\":false}\nbad");
        let err = guard::<()>(|| panic!("secret detail")).unwrap_err();
        assert_eq!(err.status.as_str(), "unavailable");
        assert!(err.reason.ends_with("\ninternal error") && !err.reason.contains("secret"));
        assert_eq!(guard(|| Ok(7)).unwrap(), 7);
    }
}
