//! The batch invariants a client checks before committing (src/client/checks.rs,
//! BRC-193 §3, §8), on batch bodies built by the test fixture.

mod client_common;

use client_common::fixture::*;
use overlay_lookup_live::client::checks::*;
use overlay_lookup_live::client::parse::parse_batch;
use overlay_lookup_live::client::{ClientError, ErrorCode};

fn lim() -> BatchLimits {
    BatchLimits::new(PROFILE_MAX_BYTES, PROFILE_MAX_OBSERVATIONS)
}

fn sc() -> serde_json::Value {
    scope("02aa", "ls_notes", "q", "public", "e1")
}

fn run(prev: &Position, body: &[u8]) -> Result<(), ClientError> {
    let b = parse_batch(body)?;
    check_batch(prev, &source_key(&sc()), &b, &lim())
}

fn after(body: &[u8]) -> Position {
    let b = parse_batch(body).unwrap();
    Position {
        session: Some(b.session),
        scope: Some(b.scope),
        phase: Some(b.phase),
        snapshot_complete: b.snapshot_complete,
        through: b.through,
        expires_at: b.expires_at,
        replay_until: b.replay_until,
    }
}

fn out(id: &str) -> serde_json::Value {
    output(id, &sc(), &hex32("t"), 0, None)
}

#[test]
fn valid_snapshot_then_boundary_then_live() {
    let s = sc();
    let p0 = Position::default();
    let b1 = batch("s", &s, "snapshot", vec![group("g1", 5, vec![out("o1")])], "c1", false, 5, 7);
    run(&p0, &b1).unwrap();
    let b2 = batch("s", &s, "snapshot", vec![], "c2", true, 5, 8);
    run(&after(&b1), &b2).unwrap();
    let b3 = batch("s", &s, "live", vec![group("l6", 6, vec![out("o2")])], "c3", true, 8, 8);
    run(&after(&b2), &b3).unwrap();
}

#[test]
fn snapshot_group_sequence_must_be_w() {
    let b = batch("s", &sc(), "snapshot", vec![group("g1", 4, vec![out("o1")])], "c1", false, 5, 7);
    assert_eq!(run(&Position::default(), &b).unwrap_err().code, ErrorCode::Invalid);
}

#[test]
fn open_must_start_in_the_snapshot() {
    let b = batch("s", &sc(), "live", vec![], "c1", true, 5, 7);
    assert!(run(&Position::default(), &b).is_err());
}

#[test]
fn live_before_snapshot_complete_and_snapshot_after_are_refused() {
    let s = sc();
    let b1 = batch("s", &s, "snapshot", vec![], "c1", false, 5, 5);
    assert!(run(&after(&b1), &batch("s", &s, "live", vec![], "c2", true, 5, 5)).is_err());
    let done = batch("s", &s, "snapshot", vec![], "c1", true, 5, 5);
    assert!(run(&after(&done), &batch("s", &s, "snapshot", vec![], "c2", true, 5, 5)).is_err());
    assert!(run(&after(&done), &batch("s", &s, "live", vec![], "c2", false, 5, 5)).is_err());
}

#[test]
fn snapshot_w_cannot_change_between_pages() {
    let s = sc();
    let b1 = batch("s", &s, "snapshot", vec![], "c1", false, 5, 5);
    assert!(run(&after(&b1), &batch("s", &s, "snapshot", vec![], "c2", true, 6, 6)).is_err());
}

#[test]
fn live_sequences_increase_past_through_and_stay_within_it() {
    let s = sc();
    let done = after(&batch("s", &s, "snapshot", vec![], "c1", true, 10, 10));
    let eq = batch("s", &s, "live", vec![group("l10", 10, vec![out("o")])], "c2", true, 12, 12);
    assert!(run(&done, &eq).is_err(), "sequence equal to previous through");
    let dec = batch("s", &s, "live", vec![group("a", 12, vec![out("o")]), group("b", 11, vec![out("p")])], "c2", true, 12, 12);
    assert!(run(&done, &dec).is_err(), "decreasing within a batch");
    let above = batch("s", &s, "live", vec![group("a", 13, vec![out("o")])], "c2", true, 12, 14);
    assert!(run(&done, &above).is_err(), "sequence above through");
    let sparse = batch("s", &s, "live", vec![group("a", 11, vec![out("o")]), group("b", 15, vec![out("p")])], "c2", true, 20, 25);
    run(&done, &sparse).unwrap();
}

#[test]
fn through_bounds() {
    let s = sc();
    let done = after(&batch("s", &s, "snapshot", vec![], "c1", true, 10, 10));
    assert!(run(&done, &batch("s", &s, "live", vec![], "c2", true, 9, 10)).is_err(), "through decreased");
    assert!(run(&done, &batch("s", &s, "live", vec![], "c2", true, 12, 11)).is_err(), "through > highWater");
    run(&done, &batch("s", &s, "live", vec![], "c2", true, 10, 10)).unwrap();
}

#[test]
fn scope_and_session_are_fixed() {
    let s = sc();
    let done = after(&batch("s", &s, "snapshot", vec![], "c1", true, 10, 10));
    assert!(run(&done, &batch("other", &s, "live", vec![], "c2", true, 10, 10)).is_err());
    let s2 = scope("02aa", "ls_notes", "q", "public", "e2");
    assert!(run(&done, &batch("s", &s2, "live", vec![], "c2", true, 10, 10)).is_err(), "epoch changed");
    let s3 = scope("02bb", "ls_notes", "q", "public", "e1");
    assert!(run(&Position::default(), &batch("s", &s3, "snapshot", vec![], "c1", true, 1, 1)).is_err(), "other source");
}

#[test]
fn observation_scope_must_equal_batch_scope() {
    let s = sc();
    let other = scope("02aa", "ls_notes", "q", "public", "e9");
    let g = group("g", 5, vec![output("o", &other, &hex32("t"), 0, None)]);
    assert!(parse_batch(&batch("s", &s, "snapshot", vec![g], "c1", true, 5, 5)).is_err());
}

#[test]
fn duplicate_ids_in_a_batch_are_refused() {
    let s = sc();
    let b = batch("s", &s, "snapshot", vec![group("g", 5, vec![out("o")]), group("h", 5, vec![out("o")])], "c", true, 5, 5);
    assert!(run(&Position::default(), &b).is_err());
    let b = batch("s", &s, "snapshot", vec![group("g", 5, vec![out("o")]), group("g", 5, vec![out("p")])], "c", true, 5, 5);
    assert!(run(&Position::default(), &b).is_err());
}

#[test]
fn size_and_count_limits_use_the_actual_body() {
    let s = sc();
    let b = batch("s", &s, "snapshot", vec![group("g", 5, vec![out("o"), out("p")])], "c", true, 5, 5);
    assert!(check_size(b.len(), &BatchLimits::new(b.len(), 10)).is_ok());
    assert_eq!(check_size(b.len(), &BatchLimits::new(b.len() - 1, 10)).unwrap_err().code, ErrorCode::Limited);
    let parsed = parse_batch(&b).unwrap();
    let e = check_batch(&Position::default(), &source_key(&s), &parsed, &BatchLimits::new(1 << 20, 1)).unwrap_err();
    assert_eq!(e.code, ErrorCode::Limited);
    assert_eq!(BatchLimits::new(usize::MAX, usize::MAX).max_bytes, PROFILE_MAX_BYTES);
}

#[test]
fn malformed_bodies_are_invalid_not_panics() {
    for body in [
        &b""[..],
        b"{}",
        b"[]",
        b"{\"version\":1}",
        b"\xff\xfe",
        b"{\"version\":1,\"session\":\"s\",\"session\":\"t\"}",
    ] {
        assert!(parse_batch(body).is_err());
    }
    let s = sc();
    let mut v: serde_json::Value = serde_json::from_slice(&batch("s", &s, "snapshot", vec![], "c", true, 5, 5)).unwrap();
    let body = String::from_utf8(serde_json::to_vec(&v).unwrap()).unwrap();
    let dup = body.replacen("\"kind\":\"output\"", "\"kind\":\"output\",\"kind\":\"output\"", 1);
    let with_obs = String::from_utf8(batch("s", &s, "snapshot", vec![group("g", 5, vec![out("o")])], "c", true, 5, 5)).unwrap();
    assert!(parse_batch(with_obs.as_bytes()).is_ok());
    let dup_nested = with_obs.replacen("\"outputIndex\":0", "\"outputIndex\":0,\"outputIndex\":1", 1);
    assert_ne!(dup_nested, with_obs);
    assert!(parse_batch(dup_nested.as_bytes()).is_err(), "duplicate key inside a payload");
    let _ = dup;
    v["through"] = serde_json::json!(5);
    assert!(parse_batch(&serde_json::to_vec(&v).unwrap()).is_err(), "U64 must be a string");
    v["through"] = serde_json::json!("05");
    assert!(parse_batch(&serde_json::to_vec(&v).unwrap()).is_err(), "leading zero");
    v["through"] = serde_json::json!("5");
    v["unknown"] = serde_json::json!(1);
    assert!(parse_batch(&serde_json::to_vec(&v).unwrap()).is_err(), "closed object");
    v.as_object_mut().unwrap().remove("unknown");
    v["version"] = serde_json::json!(2);
    assert_eq!(parse_batch(&serde_json::to_vec(&v).unwrap()).unwrap_err().code, ErrorCode::Unsupported);
    v["version"] = serde_json::json!(1);
    v["extensions"] = serde_json::json!({"urn:x": 1});
    v["critical"] = serde_json::json!(["urn:x"]);
    assert_eq!(parse_batch(&serde_json::to_vec(&v).unwrap()).unwrap_err().code, ErrorCode::Unsupported);
}

#[test]
fn bad_payloads_are_invalid() {
    let s = sc();
    let mut o = out("o");
    o["payload"]["evidence"]["txid"] = serde_json::json!("ABC");
    assert!(parse_batch(&batch("s", &s, "snapshot", vec![group("g", 5, vec![o])], "c", true, 5, 5)).is_err());
    let mut w = withdraw("w", &s, &hex32("t"), 0);
    w["payload"]["outpoint"]["chain"]["network"] = serde_json::json!("test");
    assert!(parse_batch(&batch("s", &s, "snapshot", vec![group("g", 5, vec![w])], "c", true, 5, 5)).is_err());
    let mut o = out("o");
    o["payload"]["evidence"]["beef"] = serde_json::json!("AQI");
    assert!(parse_batch(&batch("s", &s, "snapshot", vec![group("g", 5, vec![o])], "c", true, 5, 5)).is_err());
    let mut o = out("o");
    o["kind"] = serde_json::json!("mystery");
    assert!(parse_batch(&batch("s", &s, "snapshot", vec![group("g", 5, vec![o])], "c", true, 5, 5)).is_err());
}

#[test]
fn normalized_digest_ignores_key_order_only() {
    let s = sc();
    let a = out("o");
    let mut b = serde_json::Map::new();
    for k in ["payload", "kind", "scope", "id"] {
        b.insert(k.into(), a[k].clone());
    }
    let pa = parse_batch(&batch("s", &s, "snapshot", vec![group("g", 5, vec![a.clone()])], "c", true, 5, 5)).unwrap();
    let pb = parse_batch(&batch("s", &s, "snapshot", vec![group("g", 5, vec![serde_json::Value::Object(b)])], "c", true, 5, 5)).unwrap();
    assert_eq!(pa.groups[0].digest, pb.groups[0].digest);
    let mut c = a;
    c["payload"]["evidence"]["outputIndex"] = serde_json::json!(1);
    let pc = parse_batch(&batch("s", &s, "snapshot", vec![group("g", 5, vec![c])], "c", true, 5, 5)).unwrap();
    assert_ne!(pa.groups[0].digest, pc.groups[0].digest);
}
