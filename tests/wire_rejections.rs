//! One test per input rule of BRC-192 §1/§9 and BRC-193 §2/§8 for the request parsers.

use overlay_lookup_live::wire::{parse_close, parse_open, parse_read, ErrorCode, WireError};
use serde_json::{json, Value};

const RID: &str = "req_0123456789abcdef";

fn open_value() -> Value {
    json!({
        "version": 1,
        "requestId": RID,
        "service": "ls_notes",
        "query": {"author": "alice", "tags": ["x", "y"], "n": 3},
        "limits": {"maxBytes": 65536, "maxObservations": 100, "waitMs": 1000}
    })
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn open_with(f: impl FnOnce(&mut Value)) -> Result<overlay_lookup_live::wire::Open, WireError> {
    let mut v = open_value();
    f(&mut v);
    parse_open(&bytes(&v))
}

fn code(r: Result<impl std::fmt::Debug, WireError>) -> ErrorCode {
    r.expect_err("expected a rejection").code
}

fn invalid_text(s: &str) {
    let e = parse_open(s.as_bytes()).expect_err(s);
    assert_eq!(e.code, ErrorCode::Invalid, "{s}: {}", e.message);
}

/// Replaces the `"n":3` member of the sample Open text, to test raw JSON spellings.
fn open_text_with_query_member(member: &str) -> String {
    format!(
        r#"{{"version":1,"requestId":"{RID}","service":"ls_notes","query":{{{member}}},"limits":{{"maxBytes":65536,"maxObservations":100,"waitMs":1000}}}}"#
    )
}

#[test]
fn valid_open_parses_and_normalizes() {
    let open = parse_open(&bytes(&open_value())).unwrap();
    assert_eq!(open.request_id, RID);
    assert_eq!(open.service, "ls_notes");
    assert_eq!(open.query, json!({"author": "alice", "tags": ["x", "y"], "n": 3}));
    assert_eq!(open.limits.max_bytes, 65536);
    assert!(open.required_rules_digest.is_none() && open.extensions.is_none() && open.critical.is_none());
    // Serialization of the normalized Open parses back to the same value.
    let again = parse_open(&serde_json::to_vec(&open).unwrap()).unwrap();
    assert_eq!(again, open);
}

#[test]
fn duplicate_member_names_are_rejected() {
    invalid_text(&open_text_with_query_member(r#""a":1,"a":1"#));
    let t = r#"{"version":1,"version":1,"session":"s"}"#;
    assert_eq!(code(parse_close(t.as_bytes())), ErrorCode::Invalid);
}

#[test]
fn duplicate_member_names_are_compared_after_unescaping() {
    invalid_text(&open_text_with_query_member(r#""a":1,"\u0061":2"#));
    invalid_text(&open_text_with_query_member(r#""😀":1,"\ud83d\ude00":2"#));
    invalid_text(&open_text_with_query_member(r#""\/":1,"/":2"#));
    let t = r#"{"version":1,"session":"a","s\u0065ssion":"b"}"#;
    assert_eq!(code(parse_close(t.as_bytes())), ErrorCode::Invalid);
}

#[test]
fn unsafe_integers_are_rejected() {
    invalid_text(&open_text_with_query_member(r#""n":9007199254740992"#));
    invalid_text(&open_text_with_query_member(r#""n":-9007199254740992"#));
    invalid_text(&open_text_with_query_member(r#""n":1e16"#));
    let ok = parse_open(open_text_with_query_member(r#""n":9007199254740991"#).as_bytes()).unwrap();
    assert_eq!(ok.query["n"], json!(9007199254740991i64));
}

#[test]
fn fractional_values_are_rejected_everywhere() {
    invalid_text(&open_text_with_query_member(r#""n":1.5"#));
    invalid_text(&open_text_with_query_member(r#""n":1e-1"#));
    let e = open_with(|v| v["limits"]["waitMs"] = json!(0.5)).unwrap_err();
    assert_eq!(e.code, ErrorCode::Invalid);
}

#[test]
fn integral_numeric_spellings_are_the_integer() {
    // BRC-192 §9: spelling is not a canonical-input rule.
    let t = format!(
        r#"{{"version":1e0,"requestId":"{RID}","service":"s","query":[-0,1.0,1e0,25E2],"limits":{{"maxBytes":6.5536e4,"maxObservations":1.00,"waitMs":-0}}}}"#
    );
    let open = parse_open(t.as_bytes()).unwrap();
    assert_eq!(open.query, json!([0, 1, 1, 2500]));
    assert_eq!((open.limits.max_bytes, open.limits.max_observations, open.limits.wait_ms), (65536, 1, 0));
}

#[test]
fn escaped_lone_surrogates_are_rejected() {
    invalid_text(&open_text_with_query_member(r#""s":"\ud800""#));
    invalid_text(&open_text_with_query_member(r#""s":"\udc00""#));
    invalid_text(&open_text_with_query_member(r#""s":"\ud800\u0041""#));
    invalid_text(&open_text_with_query_member(r#""s":"\ud800x""#));
    invalid_text(&open_text_with_query_member(r#""\ud83d":1"#));
    let ok = parse_open(open_text_with_query_member(r#""s":"\ud83d\ude00""#).as_bytes()).unwrap();
    assert_eq!(ok.query["s"], json!("😀"));
}

#[test]
fn invalid_utf8_is_rejected() {
    let mut b = open_text_with_query_member(r#""s":"XX""#).into_bytes();
    let i = b.windows(2).position(|w| w == b"XX").unwrap();
    b[i] = 0xFF;
    assert_eq!(code(parse_open(&b)), ErrorCode::Invalid);
    // A raw UTF-8-encoded surrogate (CESU style) is malformed UTF-8, too.
    b[i] = 0xED;
    b[i + 1] = 0xA0;
    let mut b2 = b[..i + 2].to_vec();
    b2.push(0x80);
    b2.extend_from_slice(&b[i + 2..]);
    assert_eq!(code(parse_open(&b2)), ErrorCode::Invalid);
}

#[test]
fn byte_order_mark_is_rejected() {
    let mut b = vec![0xEF, 0xBB, 0xBF];
    b.extend_from_slice(&bytes(&open_value()));
    assert_eq!(code(parse_open(&b)), ErrorCode::Invalid);
}

#[test]
fn raw_control_characters_in_strings_are_rejected() {
    invalid_text(&open_text_with_query_member("\"s\":\"a\u{1}b\""));
    invalid_text(&open_text_with_query_member("\"s\":\"a\nb\""));
}

#[test]
fn malformed_json_is_rejected() {
    for t in [
        "",
        "{",
        "[]",
        "null",
        "{\"version\":1,\"session\":\"s\"} x",
        "{\"version\":1,\"session\":\"s\",}",
        "{\"version\":1 \"session\":\"s\"}",
        "{'version':1}",
        "{\"version\":01,\"session\":\"s\"}",
        "{\"version\":1,\"session\":\"s\\x\"}",
    ] {
        assert_eq!(code(parse_close(t.as_bytes())), ErrorCode::Invalid, "{t}");
    }
}

#[test]
fn unknown_top_level_members_are_rejected() {
    assert_eq!(code(open_with(|v| v["extra"] = json!(1))), ErrorCode::Invalid);
    assert_eq!(code(parse_close(br#"{"version":1,"session":"s","cursor":"c"}"#)), ErrorCode::Invalid);
    assert_eq!(
        code(parse_read(br#"{"version":1,"session":"s","cursor":"c","limits":{"maxBytes":1,"maxObservations":1,"waitMs":0},"x":null}"#)),
        ErrorCode::Invalid
    );
}

#[test]
fn unknown_nested_members_are_rejected() {
    assert_eq!(code(open_with(|v| v["limits"]["extra"] = json!(1))), ErrorCode::Invalid);
}

#[test]
fn query_and_extension_values_are_open() {
    let open = open_with(|v| {
        v["query"] = json!({"anything": {"deep": [1, {"x": null}]}});
        v["extensions"] = json!({"urn:example:ext": {"whatever": [true]}, "https://example.com/e#v1": 1});
    })
    .unwrap();
    assert_eq!(open.extensions.unwrap().len(), 2);
    // query can be any JSON value, including null.
    assert_eq!(open_with(|v| v["query"] = Value::Null).unwrap().query, Value::Null);
}

fn nested_arrays(levels: usize) -> String {
    format!("{}{}", "[".repeat(levels), "]".repeat(levels))
}

#[test]
fn depth_32_is_accepted_and_33_rejected() {
    // The root object is level 1 and query's value sits at level 2.
    let ok = open_text_with_query_member(&format!("\"d\":{}", nested_arrays(30)));
    assert!(parse_open(ok.as_bytes()).is_ok());
    let bad = open_text_with_query_member(&format!("\"d\":{}", nested_arrays(31)));
    invalid_text(&bad);
    // Scalars do not add a level.
    let ok = open_text_with_query_member(&format!("\"d\":{}1{}", "[".repeat(30), "]".repeat(30)));
    assert!(parse_open(ok.as_bytes()).is_ok());
}

#[test]
fn arrays_over_4096_elements_are_rejected() {
    let ok = open_with(|v| v["query"] = Value::Array(vec![json!(0); 4096])).unwrap();
    assert_eq!(ok.query.as_array().unwrap().len(), 4096);
    assert_eq!(code(open_with(|v| v["query"] = Value::Array(vec![json!(0); 4097]))), ErrorCode::Invalid);
}

#[test]
fn objects_over_256_members_are_rejected() {
    let obj = |n: usize| Value::Object((0..n).map(|i| (format!("k{i}"), json!(i))).collect());
    assert!(open_with(|v| v["query"] = obj(256)).is_ok());
    assert_eq!(code(open_with(|v| v["query"] = obj(257))), ErrorCode::Invalid);
}

#[test]
fn requests_over_1_mib_are_limited() {
    let sized = |total: usize| {
        let base = bytes(&open_with_string(""));
        let b = bytes(&open_with_string(&"a".repeat(total - base.len())));
        assert_eq!(b.len(), total);
        b
    };
    assert!(parse_open(&sized(1024 * 1024)).is_ok());
    let e = parse_open(&sized(1024 * 1024 + 1)).unwrap_err();
    assert_eq!((e.code, e.http_status(), e.limit), (ErrorCode::Limited, 413, None));
    assert_eq!(code(parse_read(&vec![b' '; 1024 * 1024 + 1])), ErrorCode::Limited);
    assert_eq!(code(parse_close(&vec![b' '; 1024 * 1024 + 1])), ErrorCode::Limited);
}

fn open_with_string(s: &str) -> Value {
    let mut v = open_value();
    // Strings inside query may exceed the 1024-byte text bound (BRC-192 §9).
    v["query"] = json!({"s": s});
    v
}

#[test]
fn request_id_is_16_to_128_safe_characters() {
    for ok in ["a".repeat(16), "Z".repeat(128), "aZ09_-aZ09_-aZ09".to_string()] {
        assert!(open_with(|v| v["requestId"] = json!(ok)).is_ok(), "{ok}");
    }
    for bad in ["a".repeat(15), "a".repeat(129), "a".repeat(15) + ".", "a".repeat(15) + "é", "a".repeat(15) + " "] {
        assert_eq!(code(open_with(|v| v["requestId"] = json!(bad))), ErrorCode::Invalid, "{bad}");
    }
    assert_eq!(code(open_with(|v| v["requestId"] = json!(1234567890123456i64))), ErrorCode::Invalid);
    assert_eq!(code(open_with(|v| v.as_object_mut().unwrap().remove("requestId").map(|_| ()).unwrap())), ErrorCode::Invalid);
}

#[test]
fn text_fields_are_nonempty_and_at_most_1024_bytes() {
    let read = |session: &str, cursor: &str| {
        parse_read(&bytes(&json!({"version": 1, "session": session, "cursor": cursor,
            "limits": {"maxBytes": 1, "maxObservations": 1, "waitMs": 0}})))
    };
    assert!(read(&"é".repeat(512), &"c".repeat(1024)).is_ok());
    assert_eq!(code(read("", "c")), ErrorCode::Invalid);
    assert_eq!(code(read("s", "")), ErrorCode::Invalid);
    assert_eq!(code(read(&("é".repeat(512) + "x"), "c")), ErrorCode::Invalid);
    assert_eq!(code(read("s", &"c".repeat(1025))), ErrorCode::Invalid);
    assert_eq!(code(open_with(|v| v["service"] = json!(""))), ErrorCode::Invalid);
    assert_eq!(code(open_with(|v| v["service"] = json!("s".repeat(1025)))), ErrorCode::Invalid);
    assert_eq!(code(parse_close(&bytes(&json!({"version": 1, "session": 5})))), ErrorCode::Invalid);
}

#[test]
fn null_is_not_a_missing_optional_member() {
    assert_eq!(code(open_with(|v| v["requiredRulesDigest"] = Value::Null)), ErrorCode::Invalid);
    assert_eq!(code(open_with(|v| v["extensions"] = Value::Null)), ErrorCode::Invalid);
    assert_eq!(code(open_with(|v| v["critical"] = Value::Null)), ErrorCode::Invalid);
}

#[test]
fn required_rules_digest_is_hex32() {
    let d = "ab".repeat(32);
    let open = open_with(|v| v["requiredRulesDigest"] = json!(d)).unwrap();
    assert_eq!(open.required_rules_digest.unwrap().to_hex(), d);
    for bad in ["AB".repeat(32), "ab".repeat(31), "ab".repeat(32) + "a", "g".repeat(64)] {
        assert_eq!(code(open_with(|v| v["requiredRulesDigest"] = json!(bad))), ErrorCode::Invalid);
    }
}

#[test]
fn extension_keys_are_absolute_iris_and_bounded() {
    for bad in ["no-scheme", "1http://x", ":x", "http:", "urn:has space", "urn:a<b"] {
        assert_eq!(code(open_with(|v| v["extensions"] = json!({bad: 1}))), ErrorCode::Invalid, "{bad}");
    }
    let many = |n: usize| Value::Object((0..n).map(|i| (format!("urn:x:{i}"), json!(i))).collect());
    assert!(open_with(|v| v["extensions"] = many(32)).is_ok());
    assert_eq!(code(open_with(|v| v["extensions"] = many(33))), ErrorCode::Invalid);
    assert_eq!(code(open_with(|v| v["extensions"] = json!([1]))), ErrorCode::Invalid);
}

#[test]
fn critical_must_be_duplicate_free_keys_of_extensions() {
    let with = |ext: Value, crit: Value| open_with(|v| {
        v["extensions"] = ext;
        v["critical"] = crit;
    });
    assert_eq!(code(with(json!({"urn:a": 1}), json!(["urn:a", "urn:a"]))), ErrorCode::Invalid);
    assert_eq!(code(with(json!({"urn:a": 1}), json!(["urn:b"]))), ErrorCode::Invalid);
    assert_eq!(code(with(json!({"urn:a": 1}), json!([1]))), ErrorCode::Invalid);
    assert_eq!(code(open_with(|v| v["critical"] = json!(["urn:a"]))), ErrorCode::Invalid);
    // An empty list is fine; non-critical extensions are retained.
    let ok = with(json!({"urn:a": 1}), json!([])).unwrap();
    assert_eq!(ok.critical, Some(vec![]));
}

#[test]
fn any_critical_extension_is_unsupported() {
    let e = open_with(|v| {
        v["extensions"] = json!({"urn:a": 1});
        v["critical"] = json!(["urn:a"]);
    })
    .unwrap_err();
    assert_eq!((e.code, e.http_status()), (ErrorCode::Unsupported, 422));
}

#[test]
fn integer_versions_other_than_1_are_unsupported() {
    for ver in [json!(2), json!(0), json!(-1), json!(9007199254740991i64)] {
        let e = open_with(|v| v["version"] = ver.clone()).unwrap_err();
        assert_eq!((e.code, e.http_status()), (ErrorCode::Unsupported, 422), "{ver}");
    }
    // Unsupported wins over fields a future version might define.
    assert_eq!(code(parse_close(br#"{"version":2,"future":true}"#)), ErrorCode::Unsupported);
    assert_eq!(code(parse_close(br#"{"version":2.0}"#)), ErrorCode::Unsupported);
}

#[test]
fn malformed_versions_are_invalid() {
    for ver in [json!("1"), json!(true), json!(null), json!([1]), json!({"v": 1})] {
        assert_eq!(code(open_with(|v| v["version"] = ver.clone())), ErrorCode::Invalid, "{ver}");
    }
    assert_eq!(code(parse_close(br#"{"session":"s"}"#)), ErrorCode::Invalid);
    assert_eq!(code(parse_close(br#"{"version":1.5,"session":"s"}"#)), ErrorCode::Invalid);
    assert_eq!(code(parse_close(br#"{"version":9007199254740993,"session":"s"}"#)), ErrorCode::Invalid);
}

#[test]
fn limits_are_u32_positive_and_clamped() {
    let lim = |b: Value, o: Value, w: Value| open_with(|v| v["limits"] = json!({"maxBytes": b, "maxObservations": o, "waitMs": w}));
    assert_eq!(code(lim(json!(0), json!(1), json!(0))), ErrorCode::Invalid);
    assert_eq!(code(lim(json!(1), json!(0), json!(0))), ErrorCode::Invalid);
    assert_eq!(code(lim(json!(-1), json!(1), json!(0))), ErrorCode::Invalid);
    assert_eq!(code(lim(json!(4294967296u64), json!(1), json!(0))), ErrorCode::Invalid);
    assert_eq!(code(lim(json!("1"), json!(1), json!(0))), ErrorCode::Invalid);
    assert_eq!(code(open_with(|v| { v["limits"].as_object_mut().unwrap().remove("waitMs"); })), ErrorCode::Invalid);
    let open = lim(json!(4294967295u64), json!(4294967295u64), json!(4294967295u64)).unwrap();
    assert_eq!((open.limits.max_bytes, open.limits.max_observations, open.limits.wait_ms), (4194304, 1024, 25000));
    // Two requests differing only above the maxima normalize identically.
    let other = lim(json!(5000000), json!(2000), json!(30000)).unwrap();
    assert_eq!(open, other);
    assert_eq!(open.normalized_bytes(), other.normalized_bytes());
}

#[test]
fn read_and_close_parse() {
    let r = parse_read(br#"{"version":1,"session":"s1","cursor":"c1","limits":{"maxBytes":70000,"maxObservations":5,"waitMs":25001}}"#).unwrap();
    assert_eq!((r.session.as_str(), r.cursor.as_str(), r.limits.wait_ms), ("s1", "c1", 25000));
    assert_eq!(code(parse_read(br#"{"version":1,"session":"s1","limits":{"maxBytes":1,"maxObservations":1,"waitMs":0}}"#)), ErrorCode::Invalid);
    assert_eq!(parse_close(br#"{"version":1,"session":"s1"}"#).unwrap().session, "s1");
}
