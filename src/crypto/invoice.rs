//! BRC-43 invoice numbers, with the validation rules of `@bsv/sdk` 2.1.0
//! (`KeyDeriver.computeInvoiceNumber`), so that every protocol ID and key ID
//! gets the same accept/reject answer and the same message as `ProtoWallet`.
//!
//! Lengths are counted in UTF-16 code units and whitespace is trimmed with the
//! ECMAScript set, because that is what the SDK's JavaScript does. Strings
//! arrive from JS with lone surrogates already replaced by U+FFFD (one code
//! unit, like the surrogate), which is also what the SDK's UTF-8 encoder does
//! before hashing the invoice.
/// Why a protocol ID or key ID is refused, in `ProtoWallet`'s words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoiceError(pub String);

impl InvoiceError {
    fn new(m: &str) -> InvoiceError {
        InvoiceError(m.to_string())
    }
}

impl std::fmt::Display for InvoiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// ECMAScript `String.prototype.trim` whitespace: WhiteSpace and LineTerminator.
fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{0009}'..='\u{000D}'
            | '\u{0020}'
            | '\u{00A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}

fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// The invoice number `"<level>-<protocol name>-<key ID>"` (BRC-43).
/// `level` is the JS number given as the security level.
pub fn invoice_number(level: f64, protocol_name: &str, key_id: &str) -> Result<String, InvoiceError> {
    if level.fract() != 0.0 || !(0.0..=2.0).contains(&level) {
        return Err(InvoiceError::new("Protocol security level must be 0, 1, or 2"));
    }
    let name = protocol_name.to_lowercase();
    let name = name.trim_matches(is_js_whitespace);
    let key_len = utf16_len(key_id);
    if key_len > 800 {
        return Err(InvoiceError::new("Key IDs must be 800 characters or less"));
    }
    if key_len < 1 {
        return Err(InvoiceError::new("Key IDs must be 1 character or more"));
    }
    let name_len = utf16_len(name);
    if name_len > 400 {
        // Only the specific linkage revelation protocol may embed another protocol ID.
        if name.starts_with("specific linkage revelation ") {
            if name_len > 430 {
                return Err(InvoiceError::new(
                    "Specific linkage revelation protocol names must be 430 characters or less",
                ));
            }
        } else {
            return Err(InvoiceError::new("Protocol names must be 400 characters or less"));
        }
    }
    if name_len < 5 {
        return Err(InvoiceError::new("Protocol names must be 5 characters or more"));
    }
    if name.contains("  ") {
        return Err(InvoiceError::new(
            "Protocol names cannot contain multiple consecutive spaces (\"  \")",
        ));
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b' ') {
        return Err(InvoiceError::new("Protocol names can only contain letters, numbers and spaces"));
    }
    if name.ends_with(" protocol") {
        return Err(InvoiceError::new("No need to end your protocol name with \" protocol\""));
    }
    Ok(format!("{}-{}-{}", level as u8, name, key_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(level: f64, name: &str, key: &str) -> String {
        invoice_number(level, name, key).unwrap_err().to_string()
    }

    #[test]
    fn normalizes_like_the_sdk() {
        assert_eq!(invoice_number(2.0, "auth message signature", "a b").unwrap(), "2-auth message signature-a b");
        assert_eq!(invoice_number(-0.0, "  Server HMAC\u{FEFF}", "k").unwrap(), "0-server hmac-k");
        // KELVIN SIGN lower-cases to ASCII k in JavaScript as in Rust.
        assert_eq!(invoice_number(1.0, "\u{212A}eyed", "x").unwrap(), "1-keyed-x");
    }

    #[test]
    fn rejects_what_the_sdk_rejects() {
        assert!(err(3.0, "hello world", "1").contains("security level"));
        assert!(err(1.5, "hello world", "1").contains("security level"));
        assert!(err(f64::NAN, "hello world", "1").contains("security level"));
        assert!(err(1.0, "hello world", "").contains("1 character"));
        assert!(err(1.0, "hello world", &"x".repeat(801)).contains("800"));
        assert!(invoice_number(1.0, "hello world", &"\u{1F600}".repeat(400)).is_ok());
        assert!(err(1.0, "hello world", &"\u{1F600}".repeat(401)).contains("800"));
        assert!(err(1.0, "four", "1").contains("5 characters"));
        assert!(err(1.0, "two  spaces", "1").contains("consecutive"));
        assert!(err(1.0, "dash-name", "1").contains("letters"));
        assert!(err(1.0, "caf\u{E9} name", "1").contains("letters"));
        assert!(err(1.0, "my fine protocol", "1").contains("protocol"));
        assert!(err(1.0, &"a".repeat(401), "1").contains("400"));
        let long = format!("specific linkage revelation {}", "a".repeat(380));
        assert!(invoice_number(2.0, &long, "1").is_ok());
        let too_long = format!("specific linkage revelation {}", "a".repeat(403));
        assert!(err(2.0, &too_long, "1").contains("430"));
    }
}
