//! Native session benchmarks (issue "Sessions"): the provider without Node in the way.
//!
//! - open-to-first-batch latency at 1k, 100k and (unless OLL_BENCH_1M=0) 1M rows, for first
//!   pages of 10, 100 and 1024 observations: `Provider::open` until its body is in hand,
//!   which includes the flushed write of the fence and session. One store per size, all
//!   open at once and measured in alternating rounds (after 2 s idle and 5 untimed rounds);
//! - commit-to-wake latency with 1,000 and 10,000 long polls parked on a 2-worker tokio
//!   runtime (the runtime shape the Node addon uses on this machine): from just before
//!   `Store::commit` (which returns once the group is flushed and published) and from its
//!   return, until each poll's response body is in hand (polls are started with
//!   `Provider::read_into`, as the Node binding does, so a parked poll has no task); also the on-CPU time of all the
//!   process's threads from the commit until the last poll is answered, per poll.
//!
//! `cargo bench --profile ci --bench session` (OLL_BENCH_QUICK=1 for a tiny run; OLL_BENCH_ONLY=first|wake
//! for one part; OLL_BENCH_WAITERS=1000,10000 for the waiter counts; OLL_BENCH_1M=0 to skip 1M rows).
//! For the first batch alone: OLL_BENCH_ROWS=1000,1000000 for the catalogue sizes, OLL_BENCH_PAGES and
//! OLL_BENCH_OPENS for the page sizes and opens per figure, and OLL_BENCH_KEEP=dir to keep the stores
//! in `dir`, so a later run (a fresh process) measures them again without loading them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use overlay_lookup_live::select::AttrValue;
use overlay_lookup_live::session::{CancelToken, Caller, Caps, Provider, ProviderConfig};
use overlay_lookup_live::store::{Change, Outpoint, Store, StoreConfig};
use overlay_lookup_live::wire::Limits;
use serde_json::{json, Value};

#[path = "common.rs"]
mod common;
use common::{quick, tempdir, threads_cpu_seconds};

fn provider(dir: &std::path::Path) -> Arc<Provider> {
    let mut cfg = StoreConfig::new(dir.join("store"));
    cfg.create = true;
    let store = Store::open(cfg).unwrap();
    let caps = Caps { max_sessions_per_principal: 1_000_000, max_waiters: 100_000, max_waiters_per_principal: 16, max_concurrent_work: 64 };
    let p = Provider::new(
        store,
        ProviderConfig {
            provider: "https://bench.example".into(),
            network: "test".into(),
            genesis_hash: "00".repeat(32),
            session_seconds: 3600,
            replay_seconds: 600,
            limits: Limits::provider(4 * 1024 * 1024, 1024, 25_000).unwrap(),
            caps,
        },
    )
    .unwrap();
    p.register_service("ls_bench", &json!({"id": "urn:bench:rules", "parameters": {}})).unwrap();
    p
}

/// Row n: its own txid, a 503-byte BEEF (the size of the demo's note transactions) and
/// a small context, as the JS benchmarks' rows.
fn admit(n: u64) -> Change {
    let mut txid = [0u8; 32];
    txid[..8].copy_from_slice(&n.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    txid[24..].copy_from_slice(&n.to_be_bytes());
    let mut beef = vec![0xbe; 503];
    beef[495..].copy_from_slice(&n.to_be_bytes());
    Change::Admit {
        service: "ls_bench".into(),
        outpoint: Outpoint { txid, output_index: 0 },
        topic: "tm_bench".into(),
        attributes: BTreeMap::from([("author".to_string(), AttrValue::Str(format!("author-{}", n % 4)))]),
        beef,
        context: None,
        expires_at: None,
    }
}

fn load(p: &Provider, from: u64, to: u64) {
    let mut n = from;
    while n < to {
        let end = (n + 5000).min(to);
        // A bulk load: 5000 rows are more than one batch carries, so the provider splits them
        // into groups that fit (one store batch, as one group was).
        p.store().commit_divisible((n..end).map(admit).collect()).unwrap();
        n = end;
    }
}

fn public() -> Caller {
    Caller { principal: String::new(), authenticated: false }
}

fn principal(i: usize) -> Caller {
    Caller { principal: format!("02{:064x}", i + 1), authenticated: true }
}

fn open_body(request: u64, max_obs: u32) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 1, "requestId": format!("bench-{request:016x}"), "service": "ls_bench", "query": {},
        "limits": {"maxBytes": 4 * 1024 * 1024, "maxObservations": max_obs, "waitMs": 0}
    }))
    .unwrap()
}

fn read_body(session: &str, cursor: &str, wait_ms: u32) -> Vec<u8> {
    serde_json::to_vec(&json!({"version": 1, "session": session, "cursor": cursor,
        "limits": {"maxBytes": 65536, "maxObservations": 100, "waitMs": wait_ms}}))
    .unwrap()
}

fn close_body(session: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"version": 1, "session": session})).unwrap()
}

fn parse(status: u16, body: &[u8]) -> Value {
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(body));
    serde_json::from_slice(body).unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p / 100.0).round() as usize]
}

fn summary(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!("p50 {:>8.3}  min {:>8.3}  max {:>8.3}  (n={})", percentile(&v, 50.0), v[0], v[v.len() - 1], v.len())
}

const ALL: &str = r#"{"where": {"all": true}}"#;

/// Idle time after the loads, and untimed rounds before each page size. Right after a bulk
/// load, sled's background threads are still writing back and cleaning segments on the same
/// two cores; the first opens would time that rather than the open.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);
const WARMUP_ROUNDS: usize = 5;

/// First batches at each catalogue size, one store per size, all open at once and measured
/// in rounds: each round opens once on every store in turn. Timing the sizes one after the
/// other instead let this shared machine's drift (other tenants, frequency, the allocator's
/// state after a load) decide the ratio between them. Under `root/rows-N`; a store that a
/// kept `root` (OLL_BENCH_KEEP) already holds is not loaded again.
fn first_batch(root: &std::path::Path, sizes: &[u64], opens: usize) {
    let sel: Value = serde_json::from_str(ALL).unwrap();
    let stores: Vec<(u64, Arc<Provider>)> = sizes
        .iter()
        .map(|&rows| {
            let dir = root.join(format!("rows-{rows}"));
            let p = provider(&dir);
            let marker = dir.join("loaded");
            if !marker.exists() {
                let t = Instant::now();
                load(&p, 0, rows);
                std::fs::write(&marker, rows.to_string()).unwrap();
                println!("loaded {rows} rows in {:.1}s", t.elapsed().as_secs_f64());
            }
            (rows, p)
        })
        .collect();
    std::thread::sleep(SETTLE);
    // Request ids unique across runs: a kept store keeps the opening fences of earlier runs.
    let mut request = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    for &page in &list_env("OLL_BENCH_PAGES", &[10, 100, 1024]) {
        let mut ms = vec![Vec::with_capacity(opens); stores.len()];
        for round in 0..WARMUP_ROUNDS + opens {
            for (i, (rows, p)) in stores.iter().enumerate() {
                request += 1;
                let body = open_body(request, page);
                let t = Instant::now();
                let res = p.open(&body, &public(), "public", &sel);
                let el = t.elapsed();
                let b = parse(res.status, &res.body);
                let got: usize = b["groups"].as_array().unwrap().len();
                assert_eq!(got as u64, (page as u64).min(*rows), "first page size");
                if round >= WARMUP_ROUNDS {
                    ms[i].push(el.as_secs_f64() * 1e3);
                }
                p.close(&close_body(b["session"].as_str().unwrap()), &public());
            }
        }
        for ((rows, _), ms) in stores.iter().zip(ms) {
            println!("first batch ms  rows={rows:<8} page={page:<5} {}", summary(ms));
        }
    }
}

/// Opens `n` sessions (one principal each) and drains their snapshots; returns (caller, session, cursor).
fn sessions(p: &Arc<Provider>, n: usize) -> Vec<(Caller, String, String)> {
    let sel: Value = serde_json::from_str(ALL).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    (0..n)
        .map(|i| {
            let caller = principal(i);
            let res = p.open(&open_body(1_000_000 + i as u64, 100), &caller, "public", &sel);
            let mut b = parse(res.status, &res.body);
            while !b["snapshotComplete"].as_bool().unwrap() {
                let body = read_body(b["session"].as_str().unwrap(), b["cursor"].as_str().unwrap(), 0);
                let r = rt.block_on(p.read(body, caller.clone(), "public".into(), CancelToken::new()));
                b = parse(r.status, &r.body);
            }
            (caller, b["session"].as_str().unwrap().to_string(), b["cursor"].as_str().unwrap().to_string())
        })
        .collect()
}

fn wake(n: usize, runs: usize) {
    let dir = tempdir();
    let p = provider(dir.path());
    load(&p, 0, 10);
    let mut s = sessions(&p, n);
    let workers = std::env::var("OLL_BENCH_WORKERS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap();
    let (mut p50, mut p99, mut p50_ack, mut p99_ack, mut ack) = (vec![], vec![], vec![], vec![], vec![]);
    let mut cpu_per_poll = vec![];
    let mut next = 10;
    for run in 0..=runs {
        // Parked 32 at a time: a poll's first scan is store work, and more than
        // max_concurrent_work new requests at once would be refused.
        // Each poll's answer is recorded by the closure it is parked with, as the Node
        // binding delivers it (a waiting poll has no task of its own).
        let answered: Arc<Mutex<Vec<(usize, Instant, u16, Vec<u8>)>>> = Arc::new(Mutex::new(Vec::with_capacity(n)));
        let all_answered = Arc::new(tokio::sync::Notify::new());
        let mut parked = 0;
        for chunk in s.chunks(32) {
            for (caller, session, cursor) in chunk {
                let i = parked;
                parked += 1;
                let (p, caller, body) = (p.clone(), caller.clone(), read_body(session, cursor, 25_000));
                let (answered, all_answered) = (answered.clone(), all_answered.clone());
                rt.spawn(async move {
                    let answer = Box::new(move |r: overlay_lookup_live::session::Response| {
                        let at = Instant::now();
                        let mut a = answered.lock().unwrap();
                        a.push((i, at, r.status, r.body));
                        if a.len() == n {
                            all_answered.notify_one();
                        }
                    });
                    p.read_into(body, caller, "public".into(), CancelToken::new(), answer).await;
                });
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while p.waiters.total() < parked {
                assert!(Instant::now() < deadline, "polls were not parked (refused?)");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
        let cpu0 = threads_cpu_seconds(None);
        let t0 = Instant::now();
        p.store().commit(vec![admit(next)]).unwrap();
        let t_ack = Instant::now();
        next += 1;
        // Every answer is collected before any is parsed: parsing here would compete for
        // the two cores with the polls still being answered.
        rt.block_on(all_answered.notified());
        let cpu = threads_cpu_seconds(None) - cpu0;
        let answers = std::mem::take(&mut *answered.lock().unwrap());
        let mut from_commit = Vec::with_capacity(n);
        let mut from_ack = Vec::with_capacity(n);
        for (i, at, status, body) in answers {
            let b = parse(status, &body);
            assert_eq!(b["groups"].as_array().unwrap().len(), 1, "every poll gets exactly the committed group");
            s[i].2 = b["cursor"].as_str().unwrap().to_string();
            from_commit.push((at - t0).as_secs_f64() * 1e3);
            // Signed: a poll can be answered before the committing thread returns.
            let after_ack = if at >= t_ack { (at - t_ack).as_secs_f64() } else { -(t_ack - at).as_secs_f64() };
            from_ack.push(after_ack * 1e3);
        }
        if run == 0 {
            continue; // warm-up
        }
        cpu_per_poll.push(cpu / n as f64 * 1e6);
        from_commit.sort_by(|a, b| a.partial_cmp(b).unwrap());
        from_ack.sort_by(|a, b| a.partial_cmp(b).unwrap());
        p50.push(percentile(&from_commit, 50.0));
        p99.push(percentile(&from_commit, 99.0));
        p50_ack.push(percentile(&from_ack, 50.0));
        p99_ack.push(percentile(&from_ack, 99.0));
        ack.push((t_ack - t0).as_secs_f64() * 1e3);
    }
    println!("commit-to-wake ms, {n} waiters, from the commit call: p50 of runs {}", summary(p50));
    println!("                                                   p99 of runs {}", summary(p99));
    println!("                              from the commit's return: p50 of runs {}", summary(p50_ack));
    println!("                                                   p99 of runs {}", summary(p99_ack));
    println!("                              commit (flushed, published)  {}", summary(ack));
    println!("  on-CPU µs per woken poll, all threads (commit included)    {}", summary(cpu_per_poll));
    drop(rt);
}

/// A comma-separated list of numbers from the environment variable `name`, or `default`.
fn list_env<T: std::str::FromStr + Copy>(name: &str, default: &[T]) -> Vec<T> {
    match std::env::var(name) {
        Ok(v) => v.split(',').map(|x| x.trim().parse().unwrap_or_else(|_| panic!("{name}: comma-separated numbers"))).collect(),
        Err(_) => default.to_vec(),
    }
}

fn main() {
    let scale = if quick() { 100 } else { 1 };
    println!("session bench ({} mode); native Provider, no Node", if quick() { "quick" } else { "full" });
    let mut sizes = vec![1_000 / scale.min(10), 100_000 / scale];
    if std::env::var("OLL_BENCH_1M").as_deref() != Ok("0") && !quick() {
        sizes.push(1_000_000);
    }
    let sizes = list_env("OLL_BENCH_ROWS", &sizes);
    let only = std::env::var("OLL_BENCH_ONLY").unwrap_or_default();
    if only != "wake" {
        let keep = std::env::var("OLL_BENCH_KEEP").ok().map(std::path::PathBuf::from);
        let dir = tempdir();
        let opens = std::env::var("OLL_BENCH_OPENS").ok().and_then(|v| v.parse().ok());
        first_batch(keep.as_deref().unwrap_or(dir.path()), &sizes, opens.unwrap_or(if quick() { 5 } else { 50 }));
    }
    if only != "first" {
        for n in list_env("OLL_BENCH_WAITERS", &[1_000usize, 10_000]) {
            let n = (n / scale as usize).max(1);
            wake(n, if quick() { 2 } else { 5 });
        }
    }
}
