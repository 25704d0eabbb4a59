//! Builders for well-formed batch bodies, for the client tests (`tests/client_*.rs`)
//! and the conformance runner.

use serde_json::{json, Value};

pub const GENESIS: &str = "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f";

pub fn hex32(seed: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(seed.as_bytes()))
}

pub fn scope(provider: &str, service: &str, query: &str, access: &str, epoch: &str) -> Value {
    json!({
        "chain": {"network": "main", "genesisHash": GENESIS},
        "provider": provider, "service": service,
        "queryDigest": hex32(query), "rulesDigest": hex32("rules"),
        "access": access, "epoch": epoch
    })
}

pub fn source_key(scope: &Value) -> overlay_lookup_live::client::SourceKey {
    overlay_lookup_live::client::SourceKey {
        provider: scope["provider"].as_str().unwrap().into(),
        service: scope["service"].as_str().unwrap().into(),
        query_digest: scope["queryDigest"].as_str().unwrap().into(),
    }
}

pub fn output(id: &str, scope: &Value, txid: &str, index: u32, context: Option<&str>) -> Value {
    output_with(id, scope, txid, index, context, "AQID")
}

/// A BEEF V1 bundle of these raw transactions, none proven (base64).
pub fn beef_v1(raws: &[&[u8]]) -> String {
    use base64::Engine;
    let mut b = vec![0x01, 0x00, 0xbe, 0xef, 0x00, raws.len() as u8];
    for r in raws {
        b.extend_from_slice(r);
        b.push(0);
    }
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// An `output` observation whose evidence is `beef` (base64).
pub fn output_with(id: &str, scope: &Value, txid: &str, index: u32, context: Option<&str>, beef: &str) -> Value {
    let mut payload = json!({"evidence": {"txid": txid, "outputIndex": index, "beef": beef}});
    if let Some(c) = context {
        use base64::Engine;
        payload["context"] = json!({
            "schema": "https://bsv.brc.dev/apps/0192#legacy-lookup-context-json-v1",
            "bytes": base64::engine::general_purpose::STANDARD.encode(c)
        });
    }
    json!({"id": id, "scope": scope, "kind": "output", "payload": payload})
}

pub fn withdraw(id: &str, scope: &Value, txid: &str, index: u32) -> Value {
    json!({"id": id, "scope": scope, "kind": "withdraw",
        "payload": {"outpoint": {"chain": scope["chain"], "txid": txid, "outputIndex": index}, "reason": "removed"}})
}

pub fn spend(id: &str, scope: &Value, txid: &str, index: u32, spending: &str) -> Value {
    json!({"id": id, "scope": scope, "kind": "spend",
        "payload": {"previous": {"chain": scope["chain"], "txid": txid, "outputIndex": index},
                    "spendingTxid": spending, "beef": "AQID"}})
}

pub fn group(id: &str, sequence: u64, observations: Vec<Value>) -> Value {
    json!({"id": id, "sequence": sequence.to_string(), "observations": observations})
}

/// A batch body. `phase` is "snapshot" or "live".
#[allow(clippy::too_many_arguments)]
pub fn batch(
    session: &str,
    scope: &Value,
    phase: &str,
    groups: Vec<Value>,
    cursor: &str,
    snapshot_complete: bool,
    through: u64,
    high_water: u64,
) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 1, "session": session, "scope": scope, "phase": phase, "groups": groups,
        "cursor": cursor, "snapshotComplete": snapshot_complete,
        "through": through.to_string(), "highWater": high_water.to_string(),
        "expiresAt": "4000000000", "replayUntil": "4000003600",
        "limits": {"maxBytes": 65536, "maxObservations": 64, "waitMs": 0}
    }))
    .unwrap()
}
