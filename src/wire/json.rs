//! Strict JSON parser for protocol input (BRC-192 §1, §9).
//!
//! A small recursive-descent parser over bytes, because a general-purpose
//! parser silently keeps the last of duplicate keys and has no hook for the
//! BRC-192 hard limits. It rejects, with `invalid`:
//! - a byte order mark, malformed UTF-8, raw control characters in strings;
//! - duplicate member names, compared after unescaping (`"a"` and `"\u0061"` collide);
//! - unpaired surrogates, including escaped ones such as a lone `\ud800`;
//! - nesting deeper than [`MAX_DEPTH`], arrays over [`MAX_ARRAY_ELEMENTS`]
//!   elements, objects over [`MAX_OBJECT_KEYS`] members;
//! - in [`NumberMode::SafeInteger`], any number whose value is not a safe integer.
//!
//! Numbers are judged by value, not spelling (BRC-192 §9): `-0`, `1.0` and `1e0`
//! are the integers 0, 1 and 1, while `1.5`, `1e-400` or `9007199254740992`
//! are refused. The result is a `serde_json::Value` whose integers are `i64`.

use serde_json::{Map, Number, Value};

use super::error::WireError;
use super::limits::{MAX_ARRAY_ELEMENTS, MAX_DEPTH, MAX_OBJECT_KEYS};

/// Largest safe integer, 2^53 - 1.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// Which numbers the parser admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberMode {
    /// Protocol objects: only values that are safe integers (BRC-192 §1, §9).
    SafeInteger,
    /// Generic JSON (e.g. application values to canonicalize): any finite number;
    /// integral values within the safe range become integers, others `f64`
    /// (correctly rounded, as ECMAScript would hold them).
    Finite,
}

/// Parses one complete JSON text under the rules in the module documentation.
pub fn parse_strict(input: &[u8], mode: NumberMode) -> Result<Value, WireError> {
    if input.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(WireError::invalid("JSON must not start with a byte order mark"));
    }
    let text = std::str::from_utf8(input).map_err(|e| {
        WireError::invalid(format!("JSON is not valid UTF-8 (at byte {})", e.valid_up_to()))
    })?;
    let mut p = Parser { s: text, b: input, pos: 0, mode };
    p.ws();
    let v = p.value(1)?;
    p.ws();
    if p.pos != input.len() {
        return Err(p.err("unexpected data after the JSON value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    mode: NumberMode,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &str) -> WireError {
        WireError::invalid(format!("invalid JSON at byte {}: {what}", self.pos))
    }

    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if c == b' ' || c == b'\n' || c == b'\r' || c == b'\t' {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// `depth` is the nesting level a container starting here would have.
    fn value(&mut self, depth: usize) -> Result<Value, WireError> {
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, WireError> {
        if self.b[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, WireError> {
        if depth > MAX_DEPTH {
            return Err(self.err(&format!("nesting deeper than {MAX_DEPTH}")));
        }
        self.pos += 1; // '{'
        let mut map = Map::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a member name"));
            }
            let key_pos = self.pos;
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return Err(self.err("expected ':'"));
            }
            self.pos += 1;
            self.ws();
            let v = self.value(depth + 1)?;
            if map.contains_key(&key) {
                self.pos = key_pos;
                return Err(self.err("duplicate member name"));
            }
            if map.len() == MAX_OBJECT_KEYS {
                return Err(self.err(&format!("object has more than {MAX_OBJECT_KEYS} members")));
            }
            map.insert(key, v);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, WireError> {
        if depth > MAX_DEPTH {
            return Err(self.err(&format!("nesting deeper than {MAX_DEPTH}")));
        }
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.ws();
            if items.len() == MAX_ARRAY_ELEMENTS {
                return Err(self.err(&format!("array has more than {MAX_ARRAY_ELEMENTS} elements")));
            }
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    /// A string starting at the opening quote; returns its decoded content.
    fn string(&mut self) -> Result<String, WireError> {
        self.pos += 1; // '"'
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            // Skip the plain bytes in one scan (most of a batch is long base64 and hex
            // strings); what stops it is handled below.
            self.pos += self.b[self.pos..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).unwrap_or(self.b.len() - self.pos);
            let Some(c) = self.peek() else {
                return Err(self.err("unterminated string"));
            };
            match c {
                b'"' => {
                    // Quote and backslash are ASCII: slicing at them is on a char boundary.
                    out.push_str(&self.s[run..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.s[run..self.pos]);
                    self.escape(&mut out)?;
                    run = self.pos;
                }
                // The scan stops only at a quote, a backslash or a control byte.
                _ => return Err(self.err("raw control character in string")),
            }
        }
    }

    /// An escape sequence starting at the backslash.
    fn escape(&mut self, out: &mut String) -> Result<(), WireError> {
        self.pos += 1;
        let Some(c) = self.peek() else {
            return Err(self.err("unterminated escape"));
        };
        self.pos += 1;
        let ch = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                match hi {
                    0xD800..=0xDBFF => {
                        if !self.b[self.pos..].starts_with(b"\\u") {
                            return Err(self.err("unpaired surrogate"));
                        }
                        self.pos += 2;
                        let lo = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return Err(self.err("unpaired surrogate"));
                        }
                        let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                        char::from_u32(cp).ok_or_else(|| self.err("invalid escape"))?
                    }
                    0xDC00..=0xDFFF => return Err(self.err("unpaired surrogate")),
                    _ => char::from_u32(hi).ok_or_else(|| self.err("invalid escape"))?,
                }
            }
            _ => return Err(self.err("invalid escape")),
        };
        out.push(ch);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, WireError> {
        let Some(h) = self.b.get(self.pos..self.pos + 4) else {
            return Err(self.err("truncated \\u escape"));
        };
        let mut v = 0u32;
        for &d in h {
            let n = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.err("invalid \\u escape")),
            };
            v = v * 16 + n as u32;
        }
        self.pos += 4;
        Ok(v)
    }

    /// JSON number grammar, then judged by value (see module docs).
    fn number(&mut self) -> Result<Value, WireError> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("invalid number")),
        }
        let int_digits = &self.b[int_start..self.pos];
        let mut frac_digits: &[u8] = &[];
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let f = self.pos;
            self.digits();
            if self.pos == f {
                return Err(self.err("invalid number: digits expected after '.'"));
            }
            frac_digits = &self.b[f..self.pos];
        }
        let mut exp: i64 = 0;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            let exp_negative = match self.peek() {
                Some(b'-') => {
                    self.pos += 1;
                    true
                }
                Some(b'+') => {
                    self.pos += 1;
                    false
                }
                _ => false,
            };
            let e = self.pos;
            self.digits();
            if self.pos == e {
                return Err(self.err("invalid number: digits expected in exponent"));
            }
            for &d in &self.b[e..self.pos] {
                // Saturate: any exponent this large already decides the outcome.
                exp = (exp * 10 + (d - b'0') as i64).min(1_000_000_000);
            }
            if exp_negative {
                exp = -exp;
            }
        }
        match self.mode {
            NumberMode::SafeInteger => {
                match safe_integer(negative, int_digits, frac_digits, exp) {
                    Some(i) => Ok(Value::Number(Number::from(i))),
                    None => {
                        self.pos = start;
                        Err(self.err("number is not a safe integer"))
                    }
                }
            }
            NumberMode::Finite => {
                if let Some(i) = safe_integer(negative, int_digits, frac_digits, exp) {
                    return Ok(Value::Number(Number::from(i)));
                }
                let f: f64 = self.s[start..self.pos]
                    .parse()
                    .map_err(|_| self.err("invalid number"))?;
                Number::from_f64(f).map(Value::Number).ok_or_else(|| {
                    WireError::invalid(format!("invalid JSON at byte {start}: number is not finite"))
                })
            }
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }
}

/// Exact value of `±int.frac × 10^exp` if it is an integer of magnitude at most
/// 2^53 − 1; `None` otherwise. Negative zero is 0.
fn safe_integer(negative: bool, int: &[u8], frac: &[u8], exp: i64) -> Option<i64> {
    // Common case: plain integer spelling of at most 15 digits, always safe.
    if frac.is_empty() && exp == 0 && int.len() <= 15 {
        let v = int.iter().fold(0i64, |acc, d| acc * 10 + (d - b'0') as i64);
        return Some(if negative { -v } else { v });
    }
    // Significant digits of int||frac with the decimal exponent adjusted.
    let all = int.iter().chain(frac.iter());
    let mut digits: Vec<u8> = all.copied().skip_while(|&d| d == b'0').collect();
    if digits.is_empty() {
        return Some(0);
    }
    let mut e = exp - frac.len() as i64;
    while digits.last() == Some(&b'0') {
        digits.pop();
        e += 1;
    }
    if e < 0 {
        return None; // a fractional value
    }
    if digits.len() as i64 + e > 16 {
        return None; // at least 10^16, beyond 2^53
    }
    let mut v: u64 = 0;
    for &d in &digits {
        v = v * 10 + (d - b'0') as u64;
    }
    for _ in 0..e {
        v *= 10;
    }
    if v > MAX_SAFE_INTEGER {
        return None;
    }
    let v = v as i64;
    Some(if negative { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Value, WireError> {
        parse_strict(s.as_bytes(), NumberMode::SafeInteger)
    }

    #[test]
    fn numeric_spelling_is_judged_by_value() {
        assert_eq!(p("-0").unwrap(), serde_json::json!(0));
        assert_eq!(p("1.0").unwrap(), serde_json::json!(1));
        assert_eq!(p("1e0").unwrap(), serde_json::json!(1));
        assert_eq!(p("10E-1").unwrap(), serde_json::json!(1));
        assert_eq!(p("0.00e999999999999").unwrap(), serde_json::json!(0));
        assert_eq!(p("9007199254740991").unwrap(), serde_json::json!(9007199254740991i64));
        assert_eq!(p("-9007199254740991").unwrap(), serde_json::json!(-9007199254740991i64));
        assert_eq!(p("90071992547409.91e2").unwrap(), serde_json::json!(9007199254740991i64));
        for bad in ["1.5", "9007199254740992", "1e16", "1e-400", "1e400", "0.1e1000000000000", "-1.01"] {
            assert!(p(bad).is_err(), "{bad}");
        }
        for bad in ["01", "1.", ".5", "+1", "1e", "-", "NaN", "Infinity", "0x10"] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn finite_mode_keeps_fractions() {
        let v = parse_strict(b"[1.5,1e21,-0,2.0,1e400]", NumberMode::Finite);
        assert!(v.is_err(), "1e400 is not finite");
        let v = parse_strict(b"[1.5,1e21,-0,2.0,0.1]", NumberMode::Finite).unwrap();
        assert_eq!(v[0].as_f64(), Some(1.5));
        assert_eq!(v[1].as_f64(), Some(1e21));
        assert_eq!(v[2].as_i64(), Some(0));
        assert_eq!(v[3].as_i64(), Some(2));
        assert_eq!(v[4].as_f64(), Some(0.1));
    }
}
