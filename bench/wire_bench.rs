//! Wire throughput: Open parse+validate per second, digest(T,B) of a ~1 KiB body, and the
//! client's parse of a received snapshot page (1,024 outputs, each with a ~940-byte BEEF, as
//! bench/RESULTS.md section 16 serves them).
//!
//! Run: `cargo bench --profile ci --bench wire` (single thread; 5 runs each,
//! min / median / max reported). Timings live here, never in test assertions.

use std::hint::black_box;
use std::time::Instant;

use overlay_lookup_live::wire;
use serde_json::{json, Value};

const RUNS: usize = 5;

fn measure(name: &str, iterations: usize, bytes_per_op: Option<usize>, mut op: impl FnMut()) {
    // Warm-up, so the first run is not penalized by cold caches.
    for _ in 0..iterations / 10 {
        op();
    }
    let mut rates: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                op();
            }
            iterations as f64 / start.elapsed().as_secs_f64()
        })
        .collect();
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (min, med, max) = (rates[0], rates[RUNS / 2], rates[RUNS - 1]);
    print!("{name:<34} ops/s  min {min:>10.0}  median {med:>10.0}  max {max:>10.0}");
    if let Some(b) = bytes_per_op {
        print!("   (median {:.1} MiB/s)", med * b as f64 / (1024.0 * 1024.0));
    }
    println!();
}

fn open_body() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 1,
        "requestId": "req_0123456789abcdefghij",
        "service": "ls_notes",
        "query": {"author": "02ab5e6f1c3d8a9b", "tags": ["music", "jazz"], "limit": 50},
        "requiredRulesDigest": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
        "limits": {"maxBytes": 1048576, "maxObservations": 256, "waitMs": 20000}
    }))
    .unwrap()
}

/// A body whose canonical form is about 1 KiB, with nested objects, arrays,
/// numbers and non-ASCII strings so every JCS path is exercised.
fn kib_body() -> Value {
    let mut items = Vec::new();
    for i in 0..17 {
        items.push(json!({"name": format!("entry-{i}-é"), "n": i * 1000 + 7, "ok": i % 2 == 0, "tag": "x"}));
    }
    let v = json!({"service": "ls_notes", "query": {"items": items, "filter": {"author": "alice", "since": "1700000000"}}});
    let len = wire::canonicalize(&v).unwrap().len();
    assert!((900..=1200).contains(&len), "body is {len} bytes");
    v
}

/// A snapshot page as the section-16 catalogue provider serves it: 1,024 groups of one
/// output each, every observation repeating the batch scope, evidence of 937 bytes (seeded
/// bytes: parsing does not look inside a BEEF).
fn page_body() -> Vec<u8> {
    use base64::Engine;
    let scope = json!({
        "chain": {"network": "test", "genesisHash": "00".repeat(32)},
        "provider": "http://127.0.0.1:39275", "service": "ls_notes",
        "queryDigest": "d4".repeat(32), "rulesDigest": "ed".repeat(32), "access": "d2".repeat(32),
        "epoch": "9df6910750e90b8ee5e0b8edd97a57d6"
    });
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let groups: Vec<Value> = (0..1024)
        .map(|i| {
            let beef: Vec<u8> = (0..937).map(|_| next() as u8).collect();
            let txid: String = (0..4).map(|_| format!("{:016x}", next())).collect();
            json!({"id": format!("s-{:040x}", i), "sequence": "100", "observations": [{
                "id": format!("s-{:040x}.0", i), "scope": scope, "kind": "output",
                "payload": {"evidence": {"txid": txid, "outputIndex": 0,
                    "beef": base64::engine::general_purpose::STANDARD.encode(beef)}}
            }]})
        })
        .collect();
    serde_json::to_vec(&json!({
        "version": 1, "session": "8eaf8c09522ed9623ed2ead4dcb94143", "scope": scope, "phase": "snapshot",
        "groups": groups, "cursor": "AY6vjAlSLtliPtLq1Ny5QUOd9pEHUOkLjuXguO3ZelfWAQ", "snapshotComplete": false,
        "through": "100", "highWater": "100", "expiresAt": "1796552314", "replayUntil": "1796555914",
        "limits": {"maxBytes": 4194304, "maxObservations": 1024, "waitMs": 0}
    }))
    .unwrap()
}

fn main() {
    let body = open_body();
    println!("Open body: {} bytes", body.len());
    measure("parse_open (parse + validate)", 200_000, Some(body.len()), || {
        black_box(wire::parse_open(black_box(&body)).unwrap());
    });
    measure("parse_open + query_digest", 100_000, None, || {
        let open = wire::parse_open(black_box(&body)).unwrap();
        black_box(open.query_digest());
    });

    let v = kib_body();
    let n = wire::canonicalize(&v).unwrap().len();
    println!("digest body: {n} canonical bytes");
    measure("digest (JCS + SHA-256), 1 KiB", 100_000, Some(n), || {
        black_box(wire::digest(black_box("lookup-query"), black_box(&v)));
    });
    measure("canonicalize only, 1 KiB", 100_000, Some(n), || {
        black_box(wire::canonicalize(black_box(&v)).unwrap());
    });

    let page = page_body();
    println!("snapshot page: {} bytes, 1,024 outputs", page.len());
    measure("client parse of a snapshot page", 100, Some(page.len()), || {
        black_box(overlay_lookup_live::client::parse::parse_batch(black_box(&page)).unwrap());
    });
}
