//! BRC-192 §1 scalar encodings: Hex32, U64, U32, Bytes, Identity and bounded strings.
//!
//! Each type parses strictly (anything not in canonical form is `invalid`) and
//! serializes to exactly the canonical JSON form, so parse ∘ serialize is identity.

use std::fmt;

use base64::Engine as _;
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::error::WireError;
use super::limits::MAX_TEXT_BYTES;

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// 32 bytes written as exactly 64 lowercase hexadecimal characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hex32(pub [u8; 32]);

impl Hex32 {
    pub fn parse(s: &str) -> Result<Hex32, WireError> {
        if s.len() != 64 || !is_lower_hex(s) {
            return Err(WireError::invalid("expected 64 lowercase hexadecimal characters"));
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out)
            .map_err(|_| WireError::invalid("expected 64 lowercase hexadecimal characters"))?;
        Ok(Hex32(out))
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl From<[u8; 32]> for Hex32 {
    fn from(b: [u8; 32]) -> Hex32 {
        Hex32(b)
    }
}

impl fmt::Display for Hex32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Hex32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hex32({})", self.to_hex())
    }
}

impl Serialize for Hex32 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

/// An unsigned 64-bit integer written as a decimal string `0|[1-9][0-9]*`.
///
/// Arithmetic is checked (BRC-192 §1): the helpers return `None` on overflow
/// or underflow, never wrap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct U64(pub u64);

impl U64 {
    pub const MAX: U64 = U64(u64::MAX);

    /// Strict decimal form: no sign, no leading zero, no exponent, at most u64::MAX.
    pub fn parse(s: &str) -> Result<U64, WireError> {
        let bad = || WireError::invalid("expected a U64 decimal string");
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0')) {
            return Err(bad());
        }
        s.parse::<u64>().map(U64).map_err(|_| bad())
    }

    pub fn get(self) -> u64 {
        self.0
    }

    pub fn checked_add(self, rhs: u64) -> Option<U64> {
        self.0.checked_add(rhs).map(U64)
    }

    pub fn checked_sub(self, rhs: u64) -> Option<U64> {
        self.0.checked_sub(rhs).map(U64)
    }

    pub fn checked_mul(self, rhs: u64) -> Option<U64> {
        self.0.checked_mul(rhs).map(U64)
    }
}

impl From<u64> for U64 {
    fn from(v: u64) -> U64 {
        U64(v)
    }
}

impl fmt::Display for U64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for U64 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// A U32 (BRC-192 §1): a JSON integer from 0 through 4294967295.
///
/// Values from [`super::json::parse_strict`] are already safe integers; values
/// built elsewhere may hold floats, which are refused unless integral.
pub fn parse_u32(v: &Value) -> Result<u32, WireError> {
    let bad = || WireError::invalid("expected an integer from 0 through 4294967295");
    let n = v.as_number().ok_or_else(bad)?;
    if let Some(u) = n.as_u64() {
        return u32::try_from(u).map_err(|_| bad());
    }
    if n.is_f64() {
        let f = n.as_f64().ok_or_else(bad)?;
        if f.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&f) {
            return Ok(f as u32);
        }
    }
    Err(bad())
}

/// Opaque bytes written as canonical padded standard base64 (RFC 4648 §4).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
    /// Accepts only the unique canonical encoding: required padding, zero pad
    /// bits, no whitespace or line breaks (BRC-192 §9), confirmed by re-encoding.
    pub fn parse(s: &str) -> Result<Bytes, WireError> {
        let bad = || WireError::invalid("expected canonical padded base64");
        let bytes = base64::engine::general_purpose::STANDARD.decode(s).map_err(|_| bad())?;
        if base64::engine::general_purpose::STANDARD.encode(&bytes) != s {
            return Err(bad());
        }
        Ok(Bytes(bytes))
    }

    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.0)
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes(v)
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes)", self.0.len())
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_base64())
    }
}

/// A compressed secp256k1 public key as 66 lowercase hex characters, checked to
/// be a point on the curve (BRC-192 §9), not just by length and prefix.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity(pub [u8; 33]);

impl Identity {
    pub fn parse(s: &str) -> Result<Identity, WireError> {
        if s.len() != 66 || !is_lower_hex(s) {
            return Err(WireError::invalid("expected an identity key of 66 lowercase hexadecimal characters"));
        }
        let mut out = [0u8; 33];
        hex::decode_to_slice(s, &mut out)
            .map_err(|_| WireError::invalid("expected an identity key of 66 lowercase hexadecimal characters"))?;
        // A 33-byte slice is accepted only in compressed form (02/03 prefix) and
        // only when x has a matching y on the curve.
        secp256k1::PublicKey::from_slice(&out)
            .map_err(|_| WireError::invalid("identity key is not a valid compressed secp256k1 point"))?;
        Ok(Identity(out))
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity({})", self.to_hex())
    }
}

impl Serialize for Identity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

/// A string without a narrower constraint: nonempty, at most 1024 UTF-8 bytes
/// (BRC-192 §1).
pub fn check_text(s: &str) -> Result<(), WireError> {
    if s.is_empty() {
        return Err(WireError::invalid("expected a nonempty string"));
    }
    if s.len() > MAX_TEXT_BYTES {
        return Err(WireError::invalid(format!("string longer than {MAX_TEXT_BYTES} bytes")));
    }
    Ok(())
}

/// An Open request ID: 16–128 ASCII letters, digits, `_` or `-` (BRC-193 §2).
pub fn check_request_id(s: &str) -> Result<(), WireError> {
    let ok = (16..=128).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(WireError::invalid("expected 16 to 128 characters of A-Z, a-z, 0-9, '_' or '-'"))
    }
}

/// An extension key: an absolute IRI (BRC-192 §1), i.e. an RFC 3987 scheme,
/// `:`, then a nonempty remainder free of spaces, controls and the characters
/// IRIs never contain literally (`<>"{}|\^` and backtick). A fragment is allowed,
/// since the profile identifiers of this packet carry one. Bounded as text.
pub fn check_absolute_iri(s: &str) -> Result<(), WireError> {
    check_text(s)?;
    let bad = || WireError::invalid("expected an absolute IRI");
    let (scheme, rest) = s.split_once(':').ok_or_else(bad)?;
    let mut sb = scheme.bytes();
    let scheme_ok = sb.next().is_some_and(|b| b.is_ascii_alphabetic())
        && sb.all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.');
    let rest_ok = !rest.is_empty()
        && rest.chars().all(|c| {
            !c.is_control() && !c.is_whitespace() && !matches!(c, '<' | '>' | '"' | '{' | '}' | '|' | '\\' | '^' | '`')
        });
    if scheme_ok && rest_ok {
        Ok(())
    } else {
        Err(bad())
    }
}
