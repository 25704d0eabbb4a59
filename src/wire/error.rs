//! Error codes, their HTTP statuses and the bounded error response body.
//!
//! Codes are the BRC-192 §6 set plus `not-found` (BRC-193 §6). The body shape
//! is BRC-193 §6, with the optional `limit` member of BRC-193 §8.

use std::fmt;

use super::jcs::write_json_string;
use super::limits::{PROFILE_MAX_BYTES, PROFILE_MAX_OBSERVATIONS};

/// Hard upper bound of a serialized error body (BRC-193 §8), whatever the message.
pub const MAX_ERROR_BODY_BYTES: usize = 4096;

/// Upper bound of the `message` string: an unconstrained protocol string (BRC-192 §1).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// Every error code the wire layer can emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    Invalid,
    Unsupported,
    Unauthorized,
    Conflict,
    Equivocation,
    Limited,
    Unavailable,
    Expired,
    ResetRequired,
    Cancelled,
    ContextChanged,
    NotFound,
}

impl ErrorCode {
    /// All codes, in a fixed order (used to export the code → status table).
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::Invalid,
        ErrorCode::Unsupported,
        ErrorCode::Unauthorized,
        ErrorCode::Conflict,
        ErrorCode::Equivocation,
        ErrorCode::Limited,
        ErrorCode::Unavailable,
        ErrorCode::Expired,
        ErrorCode::ResetRequired,
        ErrorCode::Cancelled,
        ErrorCode::ContextChanged,
        ErrorCode::NotFound,
    ];

    /// The wire spelling of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Invalid => "invalid",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Equivocation => "equivocation",
            ErrorCode::Limited => "limited",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Expired => "expired",
            ErrorCode::ResetRequired => "reset-required",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::ContextChanged => "context-changed",
            ErrorCode::NotFound => "not-found",
        }
    }

    /// Parses the wire spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    /// HTTP status per BRC-193 §6.
    ///
    /// `cancelled` has no mapping in the spec (a transport cancellation is local
    /// and never answered). When the provider itself abandons a request — e.g. a
    /// long poll cut short by shutdown — the request did not fail on its merits
    /// and repeating it is safe, so it is reported like a transient outage: 503.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::Invalid => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict
            | ErrorCode::Equivocation
            | ErrorCode::ResetRequired
            | ErrorCode::ContextChanged => 409,
            ErrorCode::Expired => 410,
            ErrorCode::Limited => 413,
            ErrorCode::Unsupported => 422,
            ErrorCode::Unavailable | ErrorCode::Cancelled => 503,
        }
    }

    /// Default `retryable` flag: only transient provider conditions are retryable
    /// as-is; every other code needs a changed request or a new session.
    pub fn default_retryable(self) -> bool {
        matches!(self, ErrorCode::Unavailable | ErrorCode::Cancelled)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a `limited` error says did not fit (BRC-193 §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitKind {
    Envelope,
    Group,
    PermanentGroup,
}

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Envelope => "envelope",
            LimitKind::Group => "group",
            LimitKind::PermanentGroup => "permanent-group",
        }
    }
}

/// The optional `limit` member of a `limited` error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub kind: LimitKind,
    pub minimum_bytes: Option<u32>,
    pub minimum_observations: Option<u32>,
}

impl Limit {
    /// The advertised form: a minimum above the profile hard maxima can never be
    /// satisfied, so it is not advertised (BRC-193 §8) and the failure is
    /// permanent for this profile.
    pub fn normalized(self) -> Limit {
        let over_bytes = self.minimum_bytes.is_some_and(|b| b > PROFILE_MAX_BYTES);
        let over_obs = self
            .minimum_observations
            .is_some_and(|o| o > PROFILE_MAX_OBSERVATIONS);
        Limit {
            kind: if over_bytes || over_obs { LimitKind::PermanentGroup } else { self.kind },
            minimum_bytes: self.minimum_bytes.filter(|_| !over_bytes),
            minimum_observations: self.minimum_observations.filter(|_| !over_obs),
        }
    }
}

/// A protocol error: code, human-readable message and the optional BRC-193 fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
    pub retryable: bool,
    pub retry_after_ms: Option<u32>,
    pub limit: Option<Limit>,
}

impl WireError {
    /// An error with the code's default retryability and no optional fields.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> WireError {
        WireError {
            code,
            message: message.into(),
            retryable: code.default_retryable(),
            retry_after_ms: None,
            limit: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> WireError {
        WireError::new(ErrorCode::Invalid, message)
    }

    pub fn unsupported(message: impl Into<String>) -> WireError {
        WireError::new(ErrorCode::Unsupported, message)
    }

    pub fn limited(message: impl Into<String>) -> WireError {
        WireError::new(ErrorCode::Limited, message)
    }

    pub fn with_retryable(mut self, retryable: bool) -> WireError {
        self.retryable = retryable;
        self
    }

    pub fn with_retry_after_ms(mut self, ms: u32) -> WireError {
        self.retry_after_ms = Some(ms);
        self
    }

    pub fn with_limit(mut self, limit: Limit) -> WireError {
        self.limit = Some(limit);
        self
    }

    /// HTTP status of this error (BRC-193 §6).
    pub fn http_status(&self) -> u16 {
        self.code.http_status()
    }

    /// The complete JSON error body, `{version:1, error:{...}}`.
    ///
    /// Invariant: the result is at most [`MAX_ERROR_BODY_BYTES`] bytes, whatever the
    /// message; the message is cut on a UTF-8 character boundary to at most
    /// [`MAX_MESSAGE_BYTES`] bytes and to what still fits once escaped. An empty
    /// message is replaced by the code, since protocol strings are nonempty.
    pub fn to_body(&self) -> Vec<u8> {
        let mut tail = String::new();
        tail.push_str(",\"retryable\":");
        tail.push_str(if self.retryable { "true" } else { "false" });
        if let Some(ms) = self.retry_after_ms {
            tail.push_str(",\"retryAfterMs\":");
            tail.push_str(&ms.to_string());
        }
        if let Some(limit) = self.limit {
            let limit = limit.normalized();
            tail.push_str(",\"limit\":{\"kind\":\"");
            tail.push_str(limit.kind.as_str());
            tail.push('"');
            if let Some(b) = limit.minimum_bytes {
                tail.push_str(",\"minimumBytes\":");
                tail.push_str(&b.to_string());
            }
            if let Some(o) = limit.minimum_observations {
                tail.push_str(",\"minimumObservations\":");
                tail.push_str(&o.to_string());
            }
            tail.push('}');
        }
        tail.push_str("}}");

        let head = format!("{{\"version\":1,\"error\":{{\"code\":\"{}\",\"message\":", self.code.as_str());
        // Two quotes around the message are part of the fixed cost.
        let budget = MAX_ERROR_BODY_BYTES - head.len() - tail.len() - 2;
        let message = if self.message.is_empty() { self.code.as_str() } else { &self.message };
        let message = fit_message(message, budget);

        let mut out = String::with_capacity(head.len() + message.len() + tail.len() + 8);
        out.push_str(&head);
        write_json_string(&mut out, message);
        out.push_str(&tail);
        debug_assert!(out.len() <= MAX_ERROR_BODY_BYTES);
        out.into_bytes()
    }
}

/// Longest prefix of `message`, ending on a char boundary, that is at most
/// [`MAX_MESSAGE_BYTES`] raw bytes and at most `escaped_budget` bytes once escaped
/// (without its quotes).
fn fit_message(message: &str, escaped_budget: usize) -> &str {
    let mut escaped = 0usize;
    let mut end = 0usize;
    for (i, c) in message.char_indices() {
        let raw = c.len_utf8();
        let cost = match c {
            '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
            c if (c as u32) < 0x20 => 6,
            _ => raw,
        };
        if i + raw > MAX_MESSAGE_BYTES || escaped + cost > escaped_budget {
            break;
        }
        escaped += cost;
        end = i + raw;
    }
    &message[..end]
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for WireError {}
