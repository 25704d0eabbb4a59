//! RFC 8785 (JCS) canonical JSON and the BRC-192 §1 packet digest.
//!
//! JCS sorts object members by the UTF-16 code units of their names and writes
//! numbers and strings the way ECMAScript `JSON.stringify` does (BRC-192 §9: a
//! generic sorted JSON encoder is not a substitute).

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::error::WireError;
use super::limits::MAX_DEPTH;

/// Domain prefix of every packet preimage (BRC-192 §1).
pub const DIGEST_PREFIX: &str = "BRC-OUTPUT/1/";

/// Canonical JSON (RFC 8785) of `value`.
///
/// Errors (`invalid`) where JCS output would not faithfully represent the value:
/// an integer that an IEEE-754 double cannot hold exactly (JCS would silently
/// round it), or nesting deeper than the BRC-192 §9 hard limit of 32.
pub fn canonicalize(value: &Value) -> Result<String, WireError> {
    check(value, 1)?;
    Ok(canonical_string(value))
}

/// `preimage(T,B)` of BRC-192 §1: `UTF8("BRC-OUTPUT/1/"+T) || 0x00 || UTF8(JCS(B))`.
///
/// Total: it never fails. Use it for values that are valid protocol data
/// (produced by the strict parser or built from the wire types); for arbitrary
/// values validate with [`canonicalize`] first (or use [`try_digest`]).
pub fn preimage(packet_type: &str, body: &Value) -> Vec<u8> {
    let canonical = canonical_string(body);
    let mut out = Vec::with_capacity(DIGEST_PREFIX.len() + packet_type.len() + 1 + canonical.len());
    out.extend_from_slice(DIGEST_PREFIX.as_bytes());
    out.extend_from_slice(packet_type.as_bytes());
    out.push(0);
    out.extend_from_slice(canonical.as_bytes());
    out
}

/// `digest(T,B)` of BRC-192 §1: lowercase hex SHA-256 of [`preimage`]. Total, like `preimage`.
pub fn digest(packet_type: &str, body: &Value) -> String {
    hex::encode(digest_bytes(packet_type, body))
}

/// The raw 32 bytes of [`digest`].
pub fn digest_bytes(packet_type: &str, body: &Value) -> [u8; 32] {
    Sha256::digest(preimage(packet_type, body)).into()
}

/// [`digest`] after the checks of [`canonicalize`], for untrusted input. The
/// packet type must be nonempty and free of NUL, which separates it from the body.
pub fn try_digest(packet_type: &str, body: &Value) -> Result<String, WireError> {
    if packet_type.is_empty() || packet_type.contains('\0') {
        return Err(WireError::invalid("packet type must be nonempty and contain no NUL"));
    }
    check(body, 1)?;
    Ok(digest(packet_type, body))
}

/// Rejects values JCS cannot represent exactly, and excessive nesting.
fn check(value: &Value, depth: usize) -> Result<(), WireError> {
    match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                if (i as f64) as i128 != i as i128 {
                    return Err(inexact(i as i128));
                }
            } else if let Some(u) = n.as_u64() {
                if (u as f64) as i128 != u as i128 {
                    return Err(inexact(u as i128));
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            if depth > MAX_DEPTH {
                return Err(too_deep());
            }
            items.iter().try_for_each(|v| check(v, depth + 1))
        }
        Value::Object(map) => {
            if depth > MAX_DEPTH {
                return Err(too_deep());
            }
            map.values().try_for_each(|v| check(v, depth + 1))
        }
        _ => Ok(()),
    }
}

fn inexact(i: i128) -> WireError {
    WireError::invalid(format!("integer {i} is not exactly representable in canonical JSON"))
}

fn too_deep() -> WireError {
    WireError::invalid(format!("JSON nesting deeper than {MAX_DEPTH}"))
}

fn canonical_string(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            // serde_json numbers are always finite. Integers go through f64 exactly
            // as an ECMAScript engine would hold them.
            let f = if let Some(i) = n.as_i64() {
                i as f64
            } else if let Some(u) = n.as_u64() {
                u as f64
            } else {
                n.as_f64().unwrap_or(0.0)
            };
            write_number(out, f);
        }
        Value::String(s) => write_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| utf16_cmp(a.0, b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, k);
                out.push(':');
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

/// Order of two strings by UTF-16 code units (RFC 8785 §3.2.3).
///
/// UTF-8 byte order equals code point order, which differs from UTF-16 order
/// only between a supplementary character (4-byte UTF-8, lead byte >= 0xF0)
/// and one in U+E000..=U+FFFF (lead byte 0xEE or 0xEF). Strings without such
/// lead bytes, e.g. all ASCII keys, are compared bytewise.
fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let simple = |s: &str| s.bytes().all(|x| x < 0xEE);
    if simple(a) && simple(b) {
        a.as_bytes().cmp(b.as_bytes())
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

/// A JSON string literal as ECMAScript `JSON.stringify` writes it: `"` and `\`
/// escaped, the five short control escapes, other C0 controls as `\u00xx`
/// (lowercase hex), everything else verbatim.
pub(crate) fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut run_start = 0;
    // One scan to the next byte that needs an escape; the run before it is copied whole.
    while let Some(n) = bytes[run_start..].iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        let i = run_start + n;
        // Escaped bytes are ASCII, so slicing here is on a char boundary.
        out.push_str(&s[run_start..i]);
        match bytes[i] {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b => out.push_str(&format!("\\u{:04x}", b)),
        }
        run_start = i + 1;
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

/// ECMAScript Number::toString for a finite double (RFC 8785 §3.2.2.3).
pub(crate) fn write_number(out: &mut String, f: f64) {
    if f == 0.0 || !f.is_finite() {
        // -0 serializes as 0; non-finite values cannot occur in serde_json values.
        out.push('0');
        return;
    }
    // Fast path: below 2^53 an integral double's shortest round-trip digits are
    // its exact decimal digits, which ECMAScript prints as a plain integer.
    // (Above 2^53 it may print fewer digits padded with zeros: 2^60 is
    // "1152921504606847000", so those take the generic path.)
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        use std::fmt::Write as _;
        let _ = write!(out, "{}", f as i64);
        return;
    }
    if f < 0.0 {
        out.push('-');
    }
    // `{:e}` yields the shortest round-tripping digits: "d[.ddd]e<exp>".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if let Some(even) = tie_to_even(f.abs(), &digits, exp) {
        digits = even;
    }
    let k = digits.len() as i32;
    let n = exp + 1; // position of the decimal point relative to the digits
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.push_str(&"0".repeat((n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
}

/// ECMAScript breaks an exact tie between two shortest digit strings toward
/// the even one (Number::toString, step 5); Rust's shortest formatting may pick
/// the other. `digits` (shortest, decimal exponent `exp` of its first digit) is
/// replaced only when the exact value of `a` lies exactly halfway between it
/// and its even neighbour, and that neighbour also round-trips to `a`.
fn tie_to_even(a: f64, digits: &str, exp: i32) -> Option<String> {
    let k = digits.len();
    if digits.as_bytes()[k - 1] % 2 == 0 {
        return None;
    }
    // A tie needs the exact expansion to be the k digits then a single 5.
    // Cheap screen at 40 digits, then confirmation with the full expansion
    // (a double has at most 767 significant decimal digits).
    let halfway = |precision: usize| {
        let exact = format!("{:.*e}", precision, a);
        let (m, e) = exact.split_once('e')?;
        if e.parse::<i32>().ok()? != exp {
            return None;
        }
        let ex: Vec<u8> = m.bytes().filter(|c| *c != b'.').collect();
        (ex.len() > k + 1 && ex[k] == b'5' && ex[k + 1..].iter().all(|&d| d == b'0')).then(|| ex[..k].to_vec())
    };
    halfway(40)?;
    let lower = halfway(800)?;
    let other = if lower == digits.as_bytes() { increment(&lower)? } else { lower };
    let other = String::from_utf8(other).ok()?;
    let round_trips = format!("0.{other}e{}", exp + 1).parse::<f64>().ok() == Some(a);
    round_trips.then_some(other)
}

/// Decimal digit string plus one in the last place; `None` if it would gain a digit.
fn increment(d: &[u8]) -> Option<Vec<u8>> {
    let mut out = d.to_vec();
    for i in (0..out.len()).rev() {
        if out[i] == b'9' {
            out[i] = b'0';
        } else {
            out[i] += 1;
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(f: f64) -> String {
        let mut s = String::new();
        write_number(&mut s, f);
        s
    }

    #[test]
    #[allow(clippy::excessive_precision)] // exact binary values are the point of these cases
    fn numbers_follow_ecmascript() {
        // Expected strings are what ECMAScript's Number.prototype.toString produces.
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (9007199254740991.0, "9007199254740991"),
            (9007199254740992.0, "9007199254740992"),
            (1152921504606846976.0, "1152921504606847000"),
            (-1152921504606846976.0, "-1152921504606847000"),
            (18446744073709551615.0, "18446744073709552000"),
            (1e300, "1e+300"),
            // Exact ties between two shortest forms go to the even digit.
            (1658206780088562.25, "1658206780088562.2"),
            (233115890514796.125, "233115890514796.12"),
            (0.000001234, "0.000001234"),
            (333333333.33333329, "333333333.3333333"),
            (4.5, "4.5"),
            (2e-3, "0.002"),
        ];
        for (f, want) in cases {
            assert_eq!(num(*f), *want, "for {f:e}");
        }
    }

    #[test]
    fn strings_escape_like_json_stringify() {
        let mut s = String::new();
        write_json_string(&mut s, "a\"\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é\u{2028}😀/");
        assert_eq!(s, "\"a\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}é\u{2028}😀/\"");
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+E000 sorts after U+1F600 in UTF-16 (0xE000 > 0xD83D) but before it in UTF-8/chars.
        let v: Value = serde_json::json!({"\u{e000}": 1, "😀": 2, "a": 3, "": 4});
        assert_eq!(canonicalize(&v).unwrap(), "{\"\":4,\"a\":3,\"😀\":2,\"\u{e000}\":1}");
    }

    #[test]
    fn inexact_integers_and_deep_nesting_are_rejected() {
        let v = serde_json::json!([9007199254740993u64]);
        assert_eq!(canonicalize(&v).unwrap_err().code, super::super::ErrorCode::Invalid);
        let ok = serde_json::json!([9007199254740992u64, -9007199254740992i64]);
        assert_eq!(canonicalize(&ok).unwrap(), "[9007199254740992,-9007199254740992]");
        let mut deep = Value::Null;
        for _ in 0..33 {
            deep = Value::Array(vec![deep]);
        }
        assert!(canonicalize(&deep).is_err());
        let Value::Array(mut inner) = deep else { unreachable!() };
        assert!(canonicalize(&inner.pop().unwrap()).is_ok());
    }
}
