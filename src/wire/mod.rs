//! Wire format of lookup-live-v1: BRC-192 encodings, strict JSON, RFC 8785
//! canonical JSON and digests, request/response types and protocol errors.
//!
//! - [`json`]: strict JSON parser (duplicate keys, surrogates, UTF-8, BOM, hard limits).
//! - [`jcs`]: canonical JSON and `digest(T,B)` (BRC-192 §1).
//! - [`encoding`]: Hex32, U64, U32, Bytes, Identity and bounded strings (BRC-192 §1, §9).
//! - [`types`]: Open/Read/Close parsers and Batch/Group/Observation serialization (BRC-193 §2).
//! - [`response`]: strict parsing of Batch and error responses (for clients and tests).
//! - [`limits`]: hard limits and effective session limits (BRC-193 §2, §8).
//! - [`error`]: error codes, HTTP statuses and the bounded error body (BRC-193 §6, §8).
//!
//! ```
//! use overlay_lookup_live::wire::{self, ErrorCode};
//!
//! let open = wire::parse_open(br#"{"version":1,"requestId":"r-0123456789abcdef",
//!     "service":"ls_notes","query":{"author":"alice"},
//!     "limits":{"maxBytes":99999999,"maxObservations":10,"waitMs":0}}"#).unwrap();
//! assert_eq!(open.limits.max_bytes, 4 * 1024 * 1024); // clamped to the profile maximum
//! assert_eq!(open.query_digest().to_hex().len(), 64);
//!
//! // Duplicate keys are rejected even when spelled with different escapes.
//! let err = wire::parse_close(br#"{"version":1,"session":"a","s\u0065ssion":"b"}"#).unwrap_err();
//! assert_eq!((err.code, err.http_status()), (ErrorCode::Invalid, 400));
//!
//! let body = serde_json::json!({"b": 1, "a": [true, null]});
//! assert_eq!(wire::canonicalize(&body).unwrap(), r#"{"a":[true,null],"b":1}"#);
//! assert_eq!(wire::digest("lookup-query", &body).len(), 64);
//! ```

pub mod encoding;
pub mod error;
pub mod jcs;
pub mod json;
pub mod limits;
pub mod response;
pub mod types;

pub use encoding::{check_absolute_iri, check_request_id, check_text, parse_u32, Bytes, Hex32, Identity, U64};
pub use error::{ErrorCode, Limit, LimitKind, WireError, MAX_ERROR_BODY_BYTES};
pub use jcs::{canonicalize, digest, digest_bytes, preimage, try_digest};
pub use json::{parse_strict, NumberMode};
pub use limits::Limits;
pub use response::{parse_batch, parse_error_body, parse_received_batch, ReceivedBatch};
pub use types::{
    canonical_bytes, parse_close, parse_open, parse_read, response_bytes, Batch, Chain, Close, Closed, ClosedTrue,
    Evidence, Group, Observation, Open, Outpoint, OutputContext, Payload, Phase, Read, Scope, V1,
};
