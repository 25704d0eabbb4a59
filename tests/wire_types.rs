//! Response objects serialize to the exact JSON shapes of BRC-193 §2 and BRC-192 §2.

use overlay_lookup_live::wire::{
    self, response_bytes, Batch, Bytes, Chain, Closed, Evidence, Group, Hex32, Limits, Observation, Outpoint,
    OutputContext, Payload, Phase, Scope, U64, V1,
};
use serde_json::json;

fn chain() -> Chain {
    Chain { network: "main".into(), genesis_hash: Hex32([0x11; 32]) }
}

fn scope() -> Scope {
    Scope {
        chain: chain(),
        provider: "https://overlay.example".into(),
        service: "ls_notes".into(),
        query_digest: Hex32([0x22; 32]),
        rules_digest: Hex32([0x33; 32]),
        access: "public".into(),
        epoch: "e1".into(),
    }
}

fn outpoint() -> Outpoint {
    Outpoint { chain: chain(), txid: Hex32([0x44; 32]), output_index: 7 }
}

fn batch() -> Batch {
    let obs = |id: &str, payload: Payload| Observation { id: id.into(), scope: scope(), payload };
    Batch {
        version: V1,
        session: "sess".into(),
        scope: scope(),
        phase: Phase::Live,
        groups: vec![Group {
            id: "g1".into(),
            sequence: U64(18446744073709551615),
            observations: vec![
                obs("o1", Payload::Output {
                    evidence: Evidence { txid: Hex32([0x44; 32]), output_index: 0, beef: Bytes(vec![1, 2, 3]) },
                    context: Some(OutputContext { schema: "urn:x".into(), bytes: Bytes(b"{}".to_vec()) }),
                }),
                obs("o2", Payload::Output {
                    evidence: Evidence { txid: Hex32([0x44; 32]), output_index: 1, beef: Bytes(vec![]) },
                    context: None,
                }),
                obs("o3", Payload::Spend { previous: outpoint(), spending_txid: Hex32([0x55; 32]), beef: Bytes(vec![0xff]) }),
                obs("o4", Payload::Withdraw { outpoint: outpoint(), reason: "spent".into() }),
                obs("o5", Payload::AssessmentInvalidated { context_id: "ctx".into(), reason: "reorg".into() }),
            ],
        }],
        cursor: "cur".into(),
        snapshot_complete: true,
        through: U64(5),
        high_water: U64(6),
        expires_at: U64(100),
        replay_until: U64(200),
        limits: Limits { max_bytes: 65536, max_observations: 10, wait_ms: 0 },
    }
}

#[test]
fn batch_serializes_in_spec_order_with_spec_encodings() {
    let h = |b: &str| b.repeat(32);
    let sc = json!({"chain": {"network": "main", "genesisHash": h("11")}, "provider": "https://overlay.example",
        "service": "ls_notes", "queryDigest": h("22"), "rulesDigest": h("33"), "access": "public", "epoch": "e1"});
    let op = json!({"chain": {"network": "main", "genesisHash": h("11")}, "txid": h("44"), "outputIndex": 7});
    let want = json!({
        "version": 1, "session": "sess", "scope": sc, "phase": "live",
        "groups": [{"id": "g1", "sequence": "18446744073709551615", "observations": [
            {"id": "o1", "scope": sc, "kind": "output", "payload": {"evidence": {"txid": h("44"), "outputIndex": 0, "beef": "AQID"}, "context": {"schema": "urn:x", "bytes": "e30="}}},
            {"id": "o2", "scope": sc, "kind": "output", "payload": {"evidence": {"txid": h("44"), "outputIndex": 1, "beef": ""}}},
            {"id": "o3", "scope": sc, "kind": "spend", "payload": {"previous": op, "spendingTxid": h("55"), "beef": "/w=="}},
            {"id": "o4", "scope": sc, "kind": "withdraw", "payload": {"outpoint": op, "reason": "spent"}},
            {"id": "o5", "scope": sc, "kind": "assessment-invalidated", "payload": {"contextId": "ctx", "reason": "reorg"}}
        ]}],
        "cursor": "cur", "snapshotComplete": true, "through": "5", "highWater": "6",
        "expiresAt": "100", "replayUntil": "200",
        "limits": {"maxBytes": 65536, "maxObservations": 10, "waitMs": 0}
    });
    let bytes = response_bytes(&batch()).unwrap();
    // Byte-exact: field order as in the spec's listing (serde_json keeps insertion order).
    assert_eq!(String::from_utf8(bytes.clone()).unwrap(), serde_json::to_string(&want).unwrap());
    // And the bytes are acceptable to the strict parser.
    wire::parse_strict(&bytes, wire::NumberMode::SafeInteger).unwrap();
    // Deterministic.
    assert_eq!(bytes, response_bytes(&batch()).unwrap());
}

#[test]
fn closed_response() {
    assert_eq!(response_bytes(&Closed::default()).unwrap(), br#"{"version":1,"closed":true}"#);
}

#[test]
fn query_digest_is_the_lookup_query_digest_of_service_and_query() {
    let open = wire::parse_open(br#"{"version":1,"requestId":"abcdefghijklmnop","service":"svc","query":{"b":[1,"x"],"a":null},"limits":{"maxBytes":1,"maxObservations":1,"waitMs":0}}"#).unwrap();
    let body = json!({"query": {"a": null, "b": [1, "x"]}, "service": "svc"});
    assert_eq!(open.query_digest().to_hex(), wire::digest("lookup-query", &body));
    let pre = wire::preimage("lookup-query", &body);
    assert_eq!(pre, b"BRC-OUTPUT/1/lookup-query\0{\"query\":{\"a\":null,\"b\":[1,\"x\"]},\"service\":\"svc\"}".to_vec());
}

#[test]
fn batches_parse_back_strictly() {
    let b = batch();
    let bytes = response_bytes(&b).unwrap();
    assert_eq!(wire::parse_batch(&bytes).unwrap(), b);

    let text = String::from_utf8(bytes).unwrap();
    let reject = |from: &str, to: &str| {
        assert!(text.contains(from), "{from}");
        let e = wire::parse_batch(text.replacen(from, to, 1).as_bytes()).unwrap_err();
        e.code
    };
    use wire::ErrorCode::{Invalid, Unsupported};
    assert_eq!(reject("\"beef\":\"AQID\"", "\"beef\":\"AQI\""), Invalid); // non-canonical base64
    assert_eq!(reject("\"sequence\":\"18446744073709551615\"", "\"sequence\":\"18446744073709551616\""), Invalid);
    assert_eq!(reject("\"through\":\"5\"", "\"through\":\"05\""), Invalid);
    assert_eq!(reject("\"through\":\"5\"", "\"through\":5"), Invalid);
    assert_eq!(reject("\"kind\":\"withdraw\"", "\"kind\":\"teleport\""), Invalid);
    assert_eq!(reject("\"kind\":\"withdraw\"", "\"kind\":\"proposal\""), Unsupported);
    assert_eq!(reject("\"reason\":\"spent\"", "\"reason\":\"spent\",\"extra\":1"), Invalid);
    assert_eq!(reject("\"phase\":\"live\"", "\"phase\":\"Live\""), Invalid);
    assert_eq!(reject("\"txid\":\"4444", "\"txid\":\"444G"), Invalid);
    assert_eq!(reject("\"id\":\"o1\"", "\"id\":\"o1\",\"extensions\":{\"urn:a\":1},\"critical\":[\"urn:a\"]"), Unsupported);
    assert_eq!(reject("\"maxObservations\":10", "\"maxObservations\":2000"), Invalid);
    // Non-critical observation extensions are accepted.
    let ok = text.replacen("\"id\":\"o1\"", "\"id\":\"o1\",\"extensions\":{\"urn:a\":1}", 1);
    assert!(wire::parse_batch(ok.as_bytes()).is_ok());
}

#[test]
fn error_bodies_parse_back() {
    use wire::{ErrorCode, Limit, LimitKind, WireError};
    let e = WireError::limited("too big")
        .with_retry_after_ms(9)
        .with_limit(Limit { kind: LimitKind::Envelope, minimum_bytes: Some(70000), minimum_observations: None });
    assert_eq!(wire::parse_error_body(&e.to_body()).unwrap(), e);
    let plain = WireError::new(ErrorCode::ResetRequired, "gone");
    assert_eq!(wire::parse_error_body(&plain.to_body()).unwrap(), plain);
    assert!(wire::parse_error_body(br#"{"version":1,"error":{"code":"nope","message":"m","retryable":false}}"#).is_err());
    assert!(wire::parse_error_body(br#"{"version":1,"error":{"code":"invalid","message":"m"}}"#).is_err());
}
