//! Wire throughput: Open parse+validate per second, and digest(T,B) of a ~1 KiB body.
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
}
