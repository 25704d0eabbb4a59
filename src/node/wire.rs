//! napi exports of the wire module: request parsers, canonical JSON, digests,
//! error bodies and the code → HTTP status table. `js/common/wire.js` wraps them.

// The #[napi] registrations are compiled out of unit-test builds.
#![cfg_attr(test, allow(dead_code))]

use napi::bindgen_prelude::{Buffer, Either};
use napi_derive::napi;
use serde_json::Value;

use super::error::guard;
use crate::wire::{self, ErrorCode, Limit, LimitKind, NumberMode, WireError};

fn body_bytes(body: &Either<String, Buffer>) -> &[u8] {
    match body {
        Either::A(s) => s.as_bytes(),
        Either::B(b) => b.as_ref(),
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, WireError> {
    serde_json::to_value(v).map_err(|e| WireError::new(ErrorCode::Unavailable, format!("serialization failed: {e}")))
}

/// Parses and validates an Open body; returns the normalized request.
#[napi(js_name = "wireParseOpen")]
pub fn wire_parse_open(body: Either<String, Buffer>) -> napi::Result<Value, String> {
    guard(|| to_value(&wire::parse_open(body_bytes(&body))?))
}

/// Parses and validates a Read body.
#[napi(js_name = "wireParseRead")]
pub fn wire_parse_read(body: Either<String, Buffer>) -> napi::Result<Value, String> {
    guard(|| to_value(&wire::parse_read(body_bytes(&body))?))
}

/// Parses and validates a Close body.
#[napi(js_name = "wireParseClose")]
pub fn wire_parse_close(body: Either<String, Buffer>) -> napi::Result<Value, String> {
    guard(|| to_value(&wire::parse_close(body_bytes(&body))?))
}

/// Generic JSON text (as produced by `JSON.stringify`) parsed without the
/// protocol's integer rule, so fractional numbers canonicalize as ECMAScript would.
fn generic(json: &str) -> Result<Value, WireError> {
    wire::parse_strict(json.as_bytes(), NumberMode::Finite)
}

/// RFC 8785 canonical form of a JSON text.
#[napi(js_name = "wireCanonicalizeJson")]
pub fn wire_canonicalize_json(json: String) -> napi::Result<String, String> {
    guard(|| wire::canonicalize(&generic(&json)?))
}

/// `digest(T, B)` of a JSON text `B` (BRC-192 §1), lowercase hex.
#[napi(js_name = "wireDigestJson")]
pub fn wire_digest_json(packet_type: String, json: String) -> napi::Result<String, String> {
    guard(|| wire::try_digest(&packet_type, &generic(&json)?))
}

/// The profile's constants, defined once in `wire::limits` (BRC-193 §1, §2, §8):
/// `{profile, maxRequestBytes, maxResponseBytes, minResponseBytes, maxObservations,
/// maxWaitMs, maxErrorBodyBytes, maxHeaderBytes}`.
#[napi(js_name = "wireProfile")]
pub fn wire_profile() -> Value {
    use crate::wire::limits::*;
    serde_json::json!({
        "profile": PROFILE,
        "maxRequestBytes": MAX_REQUEST_BYTES,
        "maxResponseBytes": PROFILE_MAX_BYTES,
        "minResponseBytes": PROVIDER_MIN_BYTES,
        "maxObservations": PROFILE_MAX_OBSERVATIONS,
        "maxWaitMs": PROFILE_MAX_WAIT_MS,
        "maxErrorBodyBytes": crate::wire::MAX_ERROR_BODY_BYTES,
        "maxHeaderBytes": MAX_HEADER_BYTES,
    })
}

/// HTTP status of every error code, `{ invalid: 400, ... }`.
#[napi(js_name = "wireErrorStatuses")]
pub fn wire_error_statuses() -> Value {
    Value::Object(
        ErrorCode::ALL
            .iter()
            .map(|c| (c.as_str().to_string(), Value::from(c.http_status())))
            .collect(),
    )
}

/// The `limit` member of a `limited` error.
#[napi(object)]
pub struct WireLimit {
    /// `'envelope' | 'group' | 'permanent-group'`
    pub kind: String,
    pub minimum_bytes: Option<u32>,
    pub minimum_observations: Option<u32>,
}

/// Optional members of an error body.
#[napi(object)]
pub struct WireErrorOptions {
    pub retryable: Option<bool>,
    pub retry_after_ms: Option<u32>,
    pub limit: Option<WireLimit>,
}

/// The complete error response body (at most 4096 bytes) for a code and message.
#[napi(js_name = "wireErrorBody")]
pub fn wire_error_body(code: String, message: String, options: Option<WireErrorOptions>) -> napi::Result<Buffer, String> {
    guard(|| {
        let code = ErrorCode::parse(&code)
            .ok_or_else(|| WireError::invalid(format!("unknown error code {:?}", truncate(&code, 64))))?;
        let mut err = WireError::new(code, message);
        if let Some(o) = options {
            if let Some(r) = o.retryable {
                err.retryable = r;
            }
            err.retry_after_ms = o.retry_after_ms;
            if let Some(l) = o.limit {
                let kind = match l.kind.as_str() {
                    "envelope" => LimitKind::Envelope,
                    "group" => LimitKind::Group,
                    "permanent-group" => LimitKind::PermanentGroup,
                    other => return Err(WireError::invalid(format!("unknown limit kind {:?}", truncate(other, 64)))),
                };
                err.limit = Some(Limit {
                    kind,
                    minimum_bytes: l.minimum_bytes,
                    minimum_observations: l.minimum_observations,
                });
            }
        }
        Ok(Buffer::from(err.to_body()))
    })
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
