//! Canonical selected base URL (BRC-194 §1 and §6).
//!
//! The manifest's `baseURL` must be the canonical form, and endpoint URLs are
//! formed by appending a literal suffix to it. We normalize the harmless
//! spellings the spec lists (uppercase host, default port, terminal slash,
//! lowercase percent escapes, raw non-ASCII path bytes) and reject everything
//! that could make two routers disagree about path boundaries.
use std::net::{Ipv4Addr, Ipv6Addr};

const MAX_BASE_BYTES: usize = 2048;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrlError(pub String);

impl std::fmt::Display for BaseUrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid base URL: {}", self.0)
    }
}

impl std::error::Error for BaseUrlError {}

fn err<T>(why: &str) -> Result<T, BaseUrlError> {
    Err(BaseUrlError(why.to_string()))
}

/// Returns the canonical base for `input`. HTTP is accepted only when the
/// caller's own local configuration allows it (`allow_local_http`), never
/// because an advertisement says so.
pub fn canonical_base_url(input: &str, allow_local_http: bool) -> Result<String, BaseUrlError> {
    if input.contains(['?', '#']) {
        return err("query and fragment are not allowed");
    }
    if input.contains(['\\', '\0']) {
        return err("backslash or NUL");
    }
    let (scheme, rest) = match input.split_once("://") {
        Some((s, r)) => (s.to_ascii_lowercase(), r),
        None => return err("missing scheme"),
    };
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" if allow_local_http => 80,
        "http" => return err("http requires explicit local configuration"),
        _ => return err("scheme must be https"),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return err("user information is not allowed");
    }
    let (host, port) = split_host_port(authority)?;
    let host = canonical_host(host)?;
    let port = canonical_port(port, default_port)?;
    let path = canonical_path(path)?;
    let out = format!("{scheme}://{host}{port}{path}");
    if out.len() > MAX_BASE_BYTES {
        return err("longer than 2048 bytes");
    }
    Ok(out)
}

fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), BaseUrlError> {
    if authority.starts_with('[') {
        let end = match authority.find(']') {
            Some(e) => e,
            None => return err("unterminated IPv6 literal"),
        };
        let after = &authority[end + 1..];
        return match after.strip_prefix(':') {
            Some(p) => Ok((&authority[..=end], Some(p))),
            None if after.is_empty() => Ok((&authority[..=end], None)),
            None => err("garbage after IPv6 literal"),
        };
    }
    Ok(match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    })
}

fn canonical_host(host: &str) -> Result<String, BaseUrlError> {
    if host.is_empty() {
        return err("empty host");
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        // Zone identifiers ('%') fail to parse; Display is RFC 5952 form.
        return match inner.parse::<Ipv6Addr>() {
            Ok(addr) => Ok(format!("[{addr}]")),
            Err(_) => err("invalid IPv6 literal"),
        };
    }
    if !host.is_ascii() {
        return err("host must be ASCII (apply IDNA first)");
    }
    let host = host.to_ascii_lowercase();
    if host.len() > 253 {
        return err("host too long");
    }
    let labels: Vec<&str> = host.split('.').collect();
    for label in &labels {
        let ok_chars = label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if label.is_empty() || label.len() > 63 || !ok_chars || label.starts_with('-') || label.ends_with('-') {
            return err("invalid host label (empty label, trailing dot or bad character)");
        }
    }
    // An all-numeric name is an IPv4 address; only its plain dotted form is
    // accepted, so octal/short spellings cannot alias another host.
    if labels.iter().all(|l| l.bytes().all(|b| b.is_ascii_digit())) {
        match host.parse::<Ipv4Addr>() {
            Ok(addr) if addr.to_string() == host => {}
            _ => return err("non-canonical IPv4 address"),
        }
    }
    Ok(host)
}

fn canonical_port(port: Option<&str>, default_port: u16) -> Result<String, BaseUrlError> {
    let Some(port) = port else { return Ok(String::new()) };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || (port.len() > 1 && port.starts_with('0')) {
        return err("port must be a decimal number without leading zeros");
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => err("port out of range"),
        Ok(p) if p == default_port => Ok(String::new()),
        Ok(p) => Ok(format!(":{p}")),
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Raw characters allowed in a path segment besides unreserved ones.
fn is_raw_pchar(b: u8) -> bool {
    matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b':' | b'@')
}

fn canonical_path(path: &str) -> Result<String, BaseUrlError> {
    // Root slash becomes empty; one terminal slash is removed.
    let trimmed = path.strip_suffix('/').unwrap_or(path);
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    let mut out = String::with_capacity(trimmed.len());
    for segment in trimmed[1..].split('/') {
        out.push('/');
        out.push_str(&canonical_segment(segment)?);
    }
    Ok(out)
}

fn canonical_segment(segment: &str) -> Result<String, BaseUrlError> {
    if segment.is_empty() {
        return err("empty path segment");
    }
    if segment == "." || segment == ".." {
        return err("dot segment");
    }
    let bytes = segment.as_bytes();
    let mut out = String::with_capacity(segment.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = segment.get(i + 1..i + 3).filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
            let Some(hex) = hex else { return err("bad percent escape") };
            let decoded = u8::from_str_radix(hex, 16).expect("two hex digits");
            // Escapes that could change route boundaries or alias a plain
            // character are refused rather than decoded.
            if is_unreserved(decoded) || matches!(decoded, b'/' | b'\\' | b'%' | 0) {
                return err("percent escape of a reserved or unreserved character");
            }
            out.push('%');
            out.push_str(&hex.to_ascii_uppercase());
            i += 3;
        } else if b >= 0x80 {
            out.push_str(&format!("%{b:02X}"));
            i += 1;
        } else if is_unreserved(b) || is_raw_pchar(b) {
            out.push(b as char);
            i += 1;
        } else {
            return err("character not allowed in path");
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(input: &str) -> String {
        canonical_base_url(input, false).unwrap_or_else(|e| panic!("{input}: {e}"))
    }

    #[test]
    fn spec_examples() {
        assert_eq!(ok("https://EXAMPLE.test:443/api/"), "https://example.test/api");
        assert_eq!(ok("https://example.test:8443/a%20b"), "https://example.test:8443/a%20b");
        assert_eq!(ok("https://[2001:db8::1]:8443/api"), "https://[2001:db8::1]:8443/api");
        assert_eq!(ok("https://xn--bcher-kva.example/api"), "https://xn--bcher-kva.example/api");
        assert_eq!(ok("https://example.test/"), "https://example.test");
        assert_eq!(ok("https://example.test"), "https://example.test");
        for bad in ["https://example.test./", "https://example.test/a/../b", "https://example.test/a%2Fb", "https://example.test/%2e/"] {
            assert!(canonical_base_url(bad, false).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn other_normalizations_and_rejections() {
        assert_eq!(ok("https://example.test/a%c3%a9"), "https://example.test/a%C3%A9");
        assert_eq!(ok("https://example.test/caf\u{e9}"), "https://example.test/caf%C3%A9");
        assert_eq!(ok("https://[2001:DB8:0:0::1]"), "https://[2001:db8::1]");
        assert_eq!(canonical_base_url("http://127.0.0.1:80/x", true).unwrap(), "http://127.0.0.1/x");
        assert_eq!(canonical_base_url("http://localhost:3000", true).unwrap(), "http://localhost:3000");
        for bad in [
            "http://example.test", "ftp://example.test", "example.test", "https://u:p@example.test",
            "https://example.test/a?b", "https://example.test/#x", "https://example.test/a//b",
            "https://example.test//", "https://example.test:0443/", "https://example.test:/",
            "https://example.test:70000", "https://exa%6dple.test", "https://[fe80::1%25eth0]",
            "https://example..test", "https://-x.test", "https://example.test/a%41",
            "https://example.test/a%25", "https://example.test/a\\b", "https://010.0.0.1",
            "https://example.test/a b", "https://example.test/%zz",
        ] {
            assert!(canonical_base_url(bad, false).is_err(), "{bad} accepted");
        }
        let long = format!("https://example.test/{}", "a".repeat(2100));
        assert!(canonical_base_url(&long, false).is_err());
    }
}
