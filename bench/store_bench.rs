//! Store benchmarks (real sled on disk in a temp directory). Run:
//!   cargo bench --profile ci --bench store
//! Optional: OLL_BENCH_QUICK=1 (smaller sizes), OLL_BENCH_DIR=<dir> (where stores are created),
//! OLL_BENCH_ONLY=ceiling|commit|scan (run one part), OLL_BENCH_CASES=8x1,1x10 (commit cases to run,
//! writers x outputs/group; default all four), OLL_BENCH_RUNS=n (repetitions, default 5),
//! OLL_BENCH_SCAN_ONLY=1 (scan part without the replace-and-compact step), OLL_BENCH_1M=0 (skip the 1M-row part, which is
//! most of the ~5-6 minutes: loading 1M rows through `commit` takes 3.5-5 min on a shared
//! 2-core VM).
//! Prints min/median/max over repeated runs for:
//! - durable commit groups/s, 1 and 8 concurrent writers, 1-output and 10-output groups;
//! - snapshot scan rows/s at 100k and 1M rows (unfiltered, admission order);
//! - bytes on disk per row before/after compaction (after replacing half of the rows);
//! - time to the first row of a selective indexed `eq` query at 1M rows;
//! - the engine's ceiling (also alone: OLL_BENCH_ONLY=ceiling): raw sled `apply_batch` of the eight keys a
//!   1-output group writes (same prefixes, lengths and order as the store's), one thread, with
//!   and without a flush per batch. No store code runs, so this bounds what any schema of
//!   eight keys per group can reach on this machine.
//!
//! Each output has three indexed attributes; 10 outputs of a transaction share one BEEF.
use std::sync::Arc;
use std::time::{Duration, Instant};

use overlay_lookup_live::select::{AttrValue, Attributes, Selection};
use overlay_lookup_live::store::{Change, Outpoint, Store, StoreConfig};

#[path = "common.rs"]
mod common;
use common::{cpu_seconds, quick, tempdir, threads_cpu_seconds};

fn open(dir: &std::path::Path) -> Arc<Store> {
    let mut cfg = StoreConfig::new(dir.join("store"));
    cfg.create = true;
    Store::open(cfg).unwrap()
}

fn op(n: u64) -> Outpoint {
    let mut txid = [0u8; 32];
    txid[..8].copy_from_slice(&n.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    txid[24..].copy_from_slice(&n.to_be_bytes());
    Outpoint { txid, output_index: (n % 4) as u32 }
}

/// A realistic-ish row: owner (1 of 1000), kind (1 of 4), a numeric score. Outputs come in
/// transactions of 10 sharing one 400-byte BEEF (as a transaction's outputs do).
fn row(n: u64, version: u64) -> Change {
    let mut a = Attributes::new();
    a.insert("owner".into(), AttrValue::Str(format!("owner-{:04}", n % 1000)));
    a.insert("kind".into(), AttrValue::Str(["note", "post", "like", "tag"][(n % 4) as usize].into()));
    a.insert("score".into(), AttrValue::Int((n * 7919 % 100_000) as i64 + version as i64));
    let mut beef = vec![0u8; 400];
    beef[..8].copy_from_slice(&(n / 10).to_be_bytes());
    beef[8..16].copy_from_slice(&version.to_be_bytes());
    Change::Admit {
        service: "ls_bench".into(),
        outpoint: op(n),
        topic: "tm_bench".into(),
        attributes: a,
        beef,
        context: None,
        expires_at: None,
    }
}

fn stats(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!("min {:>12.1}  median {:>12.1}  max {:>12.1}  (n={})", v[0], v[v.len() / 2], v[v.len() - 1], v.len())
}

/// Durable groups/s with `writers` threads each committing `per_writer` groups of `outputs`;
/// also returns CPU seconds used per group (all threads) and on-CPU seconds per group of the
/// committer thread (the serial stage, which bounds the rate).
fn commit_rate(writers: u64, outputs: u64, per_writer: u64) -> (f64, f64, f64) {
    let dir = tempdir();
    let s = open(dir.path());
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let hs: Vec<_> = (0..writers)
        .map(|w| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                for g in 0..per_writer {
                    let base = (w * per_writer + g) * 10; // one transaction (BEEF) per group
                    let changes = (0..outputs).map(|i| row(base + i, 0)).collect();
                    s.commit(changes).unwrap().unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let el = start.elapsed();
    let cpu = cpu_seconds() - cpu0;
    let committer = threads_cpu_seconds(Some("oll-committer"));
    assert_eq!(s.high_water(), writers * per_writer);
    s.close().unwrap();
    let groups = (writers * per_writer) as f64;
    (groups / el.as_secs_f64(), cpu / groups, committer / groups)
}

/// The keys and values one 1-output group writes (shapes from `store::keys`): log record, row
/// version, current pointer, three index entries, blob record and blob bytes.
fn raw_group(n: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let o = op(n);
    let mut op_bytes = o.txid.to_vec();
    op_bytes.extend_from_slice(&o.output_index.to_be_bytes());
    let svc = b"ls_bench\0";
    let key = |table: u8, parts: &[&[u8]]| {
        let mut k = vec![table];
        k.extend_from_slice(svc);
        for p in parts {
            k.extend_from_slice(p);
        }
        k
    };
    let seq = n.to_be_bytes();
    let owner = format!("owner-{:04}", n % 1000);
    let mut hash = [0u8; 32];
    hash[..8].copy_from_slice(&n.to_be_bytes());
    let blob_ref = [&[b'h'][..], &hash].concat();
    let blob_key = [&[b'b'][..], &seq, &hash].concat();
    vec![
        ([&[b'l'][..], &seq].concat(), vec![7u8; 262]),
        (key(b'r', &[&seq, &op_bytes]), vec![5u8; 148]),
        (key(b'c', &[&op_bytes]), seq.to_vec()),
        (key(b'i', &[b"owner\0", owner.as_bytes(), &seq, &op_bytes]), Vec::new()),
        (key(b'i', &[b"kind\0", b"post", &seq, &op_bytes]), Vec::new()),
        (key(b'i', &[b"score\0", &(n * 7919 % 100_000).to_be_bytes(), &seq, &op_bytes]), Vec::new()),
        (blob_ref, vec![3u8; 24]),
        (blob_key, vec![3u8; 400]),
    ]
}

/// Groups/s of raw sled batches of `per_batch` groups each (one thread), flushing after every
/// batch or never, plus the CPU µs per group of the whole process (sled's I/O threads included).
fn raw_sled_rate(groups: u64, per_batch: u64, flush: bool) -> (f64, f64) {
    let dir = tempdir();
    let db = sled::Config::new().path(dir.path().join("raw")).mode(sled::Mode::HighThroughput).open().unwrap();
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let mut n = 0;
    while n < groups {
        let mut batch = sled::Batch::default();
        for g in n..(n + per_batch).min(groups) {
            for (k, v) in raw_group(g) {
                batch.insert(k, v);
            }
        }
        batch.insert(&b"mstate"[..], n.to_be_bytes().to_vec());
        db.apply_batch(batch).unwrap();
        if flush {
            db.flush().unwrap();
        }
        n += per_batch;
    }
    let el = start.elapsed();
    let cpu = cpu_seconds() - cpu0;
    drop(db);
    (groups as f64 / el.as_secs_f64(), cpu / groups as f64)
}

fn load(s: &Store, rows: u64) {
    let chunk = 5000;
    let mut n = 0;
    while n < rows {
        let end = (n + chunk).min(rows);
        s.commit((n..end).map(|i| row(i, 0)).collect()).unwrap();
        n = end;
    }
}

/// On-CPU nanoseconds of the calling thread (Linux schedstat); 0 elsewhere. A scan runs on the
/// calling thread, so rows per on-CPU second is a rate that other load on the machine (which
/// preempts the scan) disturbs far less than wall-clock time.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// (rows per wall-clock second, rows per on-CPU second of the scanning thread).
fn scan_rate(s: &Store, rows: u64) -> (f64, f64) {
    let w = s.high_water();
    let cpu0 = thread_cpu_ns();
    let start = Instant::now();
    let mut count = 0u64;
    for r in s.snapshot("ls_bench", &Selection::all(), w, None).unwrap() {
        r.unwrap();
        count += 1;
    }
    let el = start.elapsed();
    let cpu = (thread_cpu_ns() - cpu0) as f64 / 1e9;
    assert_eq!(count, rows);
    (count as f64 / el.as_secs_f64(), if cpu > 0.0 { count as f64 / cpu } else { 0.0 })
}

fn first_selective_row(s: &Store, q: u64, by_score: bool) -> Duration {
    let owner = format!("owner-{:04}", q % 1000);
    let sel = if by_score {
        serde_json::json!({"where": {"eq": ["owner", owner]}, "order": {"attribute": "score", "direction": "desc"}})
    } else {
        serde_json::json!({"where": {"eq": ["owner", owner]}})
    };
    let sel = Selection::from_json(&sel).unwrap();
    let w = s.high_water();
    let start = Instant::now();
    let first = s.snapshot("ls_bench", &sel, w, None).unwrap().next().unwrap().unwrap();
    let el = start.elapsed();
    assert!(!first.key.is_empty());
    el
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    let runs: usize = std::env::var("OLL_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5).max(1);
    let cases = std::env::var("OLL_BENCH_CASES").unwrap_or_default();
    let scale = if quick() { 10 } else { 1 };
    println!("store bench ({} mode); durable = applied as one sled batch and flushed before ack", if quick() { "quick" } else { "full" });

    let only = std::env::var("OLL_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "ceiling" {
        let groups = 20_000 / scale;
        for (per_batch, flush) in [(4u64, false), (4, true), (8, true), (64, true)] {
            let r: Vec<(f64, f64)> = (0..runs).map(|_| raw_sled_rate(groups, per_batch, flush)).collect();
            let how = if flush { "flushed after each batch" } else { "never flushed" };
            println!("raw sled groups/s, {per_batch} groups of 8 keys per batch, {how:<24} {}", stats(r.iter().map(|x| x.0).collect()));
            println!("  CPU µs/group (all threads)                         {}", stats(r.iter().map(|x| x.1 * 1e6).collect()));
        }
        if only == "ceiling" {
            return;
        }
    }
    for (writers, outputs, per) in [(1u64, 1u64, 1000u64), (8, 1, 500), (1, 10, 500), (8, 10, 250)] {
        if only == "scan" {
            break;
        }
        if !cases.is_empty() && !cases.split(',').any(|c| c.trim() == format!("{writers}x{outputs}")) {
            continue;
        }
        let per = (per / scale).max(10);
        let r: Vec<(f64, f64, f64)> = (0..runs).map(|_| commit_rate(writers, outputs, per)).collect();
        println!("commit groups/s  writers={writers} outputs/group={outputs:<2} groups={:<6} {}", writers * per, stats(r.iter().map(|x| x.0).collect()));
        println!("  CPU µs/group (all threads)                         {}", stats(r.iter().map(|x| x.1 * 1e6).collect()));
        println!("  committer thread on-CPU µs/group                   {}", stats(r.iter().map(|x| x.2 * 1e6).collect()));
    }

    for rows in [100_000u64, 1_000_000] {
        if only == "commit" || (rows == 1_000_000 && std::env::var("OLL_BENCH_1M").as_deref() == Ok("0")) {
            break;
        }
        let rows = rows / scale;
        let dir = tempdir();
        let s = open(dir.path());
        let t = Instant::now();
        load(&s, rows);
        println!("loaded {rows} rows in {:.1}s", t.elapsed().as_secs_f64());
        let (v, cpu): (Vec<f64>, Vec<f64>) = (0..runs).map(|_| scan_rate(&s, rows)).unzip();
        println!("snapshot scan rows/s at {rows:>8} rows: {}", stats(v));
        println!("  rows per on-CPU second of the scanning thread:    {}", stats(cpu));
        if rows == 1_000_000 / scale {
            let v: Vec<f64> = (0..50).map(|q| first_selective_row(&s, q * 37, false).as_secs_f64() * 1e6).collect();
            println!("first row of selective eq (owner = 1 of 1000, ~{} matches) at {rows} rows, µs: {}", rows / 1000, stats(v));
            let v: Vec<f64> = (0..50).map(|q| first_selective_row(&s, q * 37, true).as_secs_f64() * 1e6).collect();
            println!("  same, ordered by score desc (collect + sort the matches), µs:      {}", stats(v));
        }
        if rows == 100_000 / scale && std::env::var("OLL_BENCH_SCAN_ONLY").is_err() {
            let st = s.stats().unwrap();
            println!(
                "bytes/row after load:            disk {:>8.0}  retained(log+rows+index+blobs) {:>6.0}",
                st.disk_bytes as f64 / rows as f64,
                (st.log_bytes + st.row_bytes + st.blob_bytes) as f64 / rows as f64
            );
            // Replace every other row (new version, new evidence), then compact everything.
            let mut n = 0;
            while n < rows {
                let end = (n + 5000).min(rows);
                s.commit((n..end).step_by(2).map(|i| row(i, 1)).collect()).unwrap();
                n = end;
            }
            let st = s.stats().unwrap();
            println!(
                "bytes/row after 50% replaced:    disk {:>8.0}  retained {:>6.0}",
                st.disk_bytes as f64 / rows as f64,
                (st.log_bytes + st.row_bytes + st.blob_bytes) as f64 / rows as f64
            );
            let t = Instant::now();
            while s.compact_step(s.high_water(), 20_000).unwrap() {}
            let ct = t.elapsed();
            s.close().unwrap(); // let sled settle its segments
            let s2 = Store::open(StoreConfig::new(dir.path().join("store"))).unwrap();
            let st = s2.stats().unwrap();
            println!(
                "bytes/row after compaction:      disk {:>8.0}  retained {:>6.0}  (compaction took {:.2}s)",
                st.disk_bytes as f64 / rows as f64,
                (st.log_bytes + st.row_bytes + st.blob_bytes) as f64 / rows as f64,
                ct.as_secs_f64()
            );
            s2.close().unwrap();
        } else {
            s.close().unwrap();
        }
    }
}
