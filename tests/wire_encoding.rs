//! BRC-192 §1/§9 scalar encodings, effective limits and the bounded error body.

use overlay_lookup_live::wire::limits::{PROFILE_MAX_BYTES, PROFILE_MAX_OBSERVATIONS};
use overlay_lookup_live::wire::{
    parse_strict, Bytes, ErrorCode, Hex32, Identity, Limit, LimitKind, Limits, NumberMode, WireError, U64,
};

#[test]
fn base64_accepts_only_the_canonical_padded_form() {
    assert_eq!(Bytes::parse("YQ==").unwrap().0, b"a");
    assert_eq!(Bytes::parse("YWI=").unwrap().0, b"ab");
    assert_eq!(Bytes::parse("YWJj").unwrap().0, b"abc");
    assert_eq!(Bytes::parse("").unwrap().0, b"");
    assert_eq!(Bytes::parse("+/8=").unwrap().0, vec![0xfb, 0xff]);
    for bad in [
        "YR==",   // nonzero pad bits
        "YWJ=",   // nonzero pad bits
        "YQ",     // missing padding
        "YQ=",    // short padding
        "YQ===",  // extra padding
        "Y Q==",  // whitespace
        "YQ==\n", // line break
        "-_8=",   // URL-safe alphabet
        "YQ==YQ==",
        "=",
    ] {
        assert!(Bytes::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn base64_round_trips() {
    for n in 0..40u8 {
        let data: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect();
        let b = Bytes(data.clone());
        let s = b.to_base64();
        assert_eq!(Bytes::parse(&s).unwrap().0, data);
        assert_eq!(serde_json::to_value(&b).unwrap(), serde_json::json!(s));
    }
}

#[test]
fn identity_is_a_point_on_the_curve() {
    // The public key of private key 1 is the generator G.
    let sk = secp256k1::SecretKey::from_byte_array([
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
    ])
    .unwrap();
    let pk = secp256k1::PublicKey::from_secret_key_global(&sk);
    let hex = hex::encode(pk.serialize());
    assert_eq!(hex, "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798");
    let id = Identity::parse(&hex).unwrap();
    assert_eq!(id.to_hex(), hex);

    // x = 5 has no y on secp256k1 (5^3 + 7 is a non-residue mod p).
    let off_curve = format!("02{:064x}", 5);
    assert!(Identity::parse(&off_curve).is_err());
    // x = 1 is on the curve, so the same shape with x = 1 is accepted.
    assert!(Identity::parse(&format!("02{:064x}", 1)).is_ok());
    // Uppercase, wrong prefix, uncompressed length.
    assert!(Identity::parse(&hex.to_uppercase()).is_err());
    assert!(Identity::parse(&format!("04{}", &hex[2..])).is_err());
    assert!(Identity::parse(&hex::encode(pk.serialize_uncompressed())).is_err());
    assert!(Identity::parse(&hex[..64]).is_err());
}

#[test]
fn hex32_is_64_lowercase_hex() {
    let h = Hex32::parse(&"0f".repeat(32)).unwrap();
    assert_eq!(h.as_bytes(), &[0x0f; 32]);
    assert_eq!(serde_json::to_string(&h).unwrap(), format!("\"{}\"", "0f".repeat(32)));
    for bad in ["0F".repeat(32), "0f".repeat(31), "0f".repeat(33), format!("{}x", "0".repeat(63)), String::new()] {
        assert!(Hex32::parse(&bad).is_err(), "{bad}");
    }
}

#[test]
fn u64_is_a_strict_decimal_string_with_checked_arithmetic() {
    assert_eq!(U64::parse("0").unwrap(), U64(0));
    assert_eq!(U64::parse("18446744073709551615").unwrap(), U64::MAX);
    for bad in ["", "00", "01", "-1", "+1", "1e3", " 1", "1 ", "18446744073709551616", "1.0", "0x1"] {
        assert!(U64::parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(serde_json::to_string(&U64(42)).unwrap(), "\"42\"");
    assert_eq!(U64::MAX.checked_add(1), None);
    assert_eq!(U64(0).checked_sub(1), None);
    assert_eq!(U64(1 << 63).checked_mul(2), None);
    assert_eq!(U64(5).checked_add(7), Some(U64(12)));
}

#[test]
fn u32_fields_reject_out_of_range_values() {
    use overlay_lookup_live::wire::parse_u32;
    let v = |s: &str| parse_strict(s.as_bytes(), NumberMode::Finite).unwrap();
    assert_eq!(parse_u32(&v("4294967295")).unwrap(), u32::MAX);
    assert_eq!(parse_u32(&v("7.0")).unwrap(), 7);
    for bad in ["4294967296", "-1", "1.5", "\"1\"", "null"] {
        assert!(parse_u32(&v(bad)).is_err(), "{bad}");
    }
}

#[test]
fn effective_limits_are_the_componentwise_minimum() {
    let provider = Limits::provider(1 << 20, 100, 20_000).unwrap();
    let req = Limits { max_bytes: 2 << 20, max_observations: 10, wait_ms: 25_000 };
    assert_eq!(Limits::effective(req, provider), Limits { max_bytes: 1 << 20, max_observations: 10, wait_ms: 20_000 });
    let huge = Limits { max_bytes: u32::MAX, max_observations: u32::MAX, wait_ms: u32::MAX };
    let full = Limits::provider(PROFILE_MAX_BYTES, PROFILE_MAX_OBSERVATIONS, 25_000).unwrap();
    assert_eq!(Limits::effective(huge, full), Limits::PROFILE_MAX);
    let zero_wait = Limits { max_bytes: 1, max_observations: 1, wait_ms: 0 };
    assert_eq!(Limits::effective(zero_wait, full), zero_wait);
}

#[test]
fn provider_limits_must_cover_the_minimum_allowance() {
    assert!(Limits::provider(64 * 1024, 1, 0).is_ok());
    let e = Limits::provider(64 * 1024 - 1, 1, 0).unwrap_err();
    assert!(e.contains("65536"), "{e}");
    assert!(Limits::provider(64 * 1024, 0, 0).unwrap_err().contains("maxObservations"));
    assert!(Limits::provider(PROFILE_MAX_BYTES + 1, 1, 0).is_err());
    assert!(Limits::provider(64 * 1024, 1025, 0).is_err());
    assert!(Limits::provider(64 * 1024, 1, 25_001).is_err());
}

#[test]
fn error_codes_map_to_http_statuses() {
    let table: Vec<(&str, u16)> = ErrorCode::ALL.iter().map(|c| (c.as_str(), c.http_status())).collect();
    assert_eq!(
        table,
        vec![
            ("invalid", 400),
            ("unsupported", 422),
            ("unauthorized", 401),
            ("conflict", 409),
            ("equivocation", 409),
            ("limited", 413),
            ("unavailable", 503),
            ("expired", 410),
            ("reset-required", 409),
            ("cancelled", 503),
            ("context-changed", 409),
            ("not-found", 404),
        ]
    );
    for c in ErrorCode::ALL {
        assert_eq!(ErrorCode::parse(c.as_str()), Some(c));
    }
    assert_eq!(ErrorCode::parse("nope"), None);
}

fn body_of(e: &WireError) -> serde_json::Value {
    let b = e.to_body();
    assert!(b.len() <= 4096, "body is {} bytes", b.len());
    parse_strict(&b, NumberMode::SafeInteger).expect("error body is strict JSON")
}

#[test]
fn error_body_shape() {
    let e = WireError::limited("too small").with_retry_after_ms(250).with_limit(Limit {
        kind: LimitKind::Group,
        minimum_bytes: Some(70000),
        minimum_observations: Some(3),
    });
    assert_eq!(
        String::from_utf8(e.to_body()).unwrap(),
        r#"{"version":1,"error":{"code":"limited","message":"too small","retryable":false,"retryAfterMs":250,"limit":{"kind":"group","minimumBytes":70000,"minimumObservations":3}}}"#
    );
    let v = body_of(&WireError::new(ErrorCode::Unavailable, ""));
    assert_eq!(v["error"]["message"], "unavailable");
    assert_eq!(v["error"]["retryable"], true);
}

#[test]
fn error_body_never_exceeds_4096_bytes() {
    let long = "x".repeat(100_000);
    let v = body_of(&WireError::invalid(long.clone()));
    let m = v["error"]["message"].as_str().unwrap();
    assert!(!m.is_empty() && long.starts_with(m) && m.len() <= 1024);

    // Every character escapes to six bytes.
    let v = body_of(&WireError::invalid("\u{1}".repeat(100_000)).with_retry_after_ms(u32::MAX));
    assert!(v["error"]["message"].as_str().unwrap().chars().all(|c| c == '\u{1}'));

    // Multi-byte characters are cut on a boundary.
    for s in ["é".repeat(60_000), "😀".repeat(30_000), format!("a{}", "😀".repeat(30_000))] {
        let v = body_of(&WireError::invalid(s.clone()));
        assert!(s.starts_with(v["error"]["message"].as_str().unwrap()));
    }
}

#[test]
fn limit_minimums_never_exceed_the_hard_maxima() {
    let e = WireError::limited("group too large").with_limit(Limit {
        kind: LimitKind::Group,
        minimum_bytes: Some(PROFILE_MAX_BYTES + 1),
        minimum_observations: Some(2),
    });
    let v = body_of(&e);
    assert_eq!(v["error"]["limit"], serde_json::json!({"kind": "permanent-group", "minimumObservations": 2}));
    let e = WireError::limited("x").with_limit(Limit {
        kind: LimitKind::Envelope,
        minimum_bytes: Some(PROFILE_MAX_BYTES),
        minimum_observations: Some(PROFILE_MAX_OBSERVATIONS + 1),
    });
    assert_eq!(body_of(&e)["error"]["limit"], serde_json::json!({"kind": "permanent-group", "minimumBytes": 4194304}));
}
