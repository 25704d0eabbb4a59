//! Client reconciliation benchmark (BRC-192 §10) on the real durable store (redb in a
//! temporary directory). Run:
//!   cargo bench --profile ci --bench reconcile
//! Optional: OLL_BENCH_SIZES=10000,1000000 (tracked outputs; default both),
//! OLL_BENCH_QUICK=1 (1,000 only), OLL_BENCH_DIR=<dir>, OLL_BENCH_RECEIVE=<txs per receive, default 1000>.
//!
//! Workload per size N: N/1000 anchors of 1,000 outputs each; N spend transactions
//! (one input, one output: N tracked outputs), received in journal receives of
//! OLL_BENCH_RECEIVE transactions, then verified through the verification port in
//! batches of the same size (each receive and each verification batch is one durable
//! commit with its recomputed components). 1% of the spends carry a Merkle placement
//! in block A1 of chain A. Reported:
//! - observations accepted per second: receives (raw transactions journaled) and
//!   verification results accepted, separately and together (wall clock and CPU);
//! - resident memory (VmRSS, VmHWM) and bytes on disk after loading;
//! - the reorg: switching from view A (A1 on chain) to view B (a fork without A1)
//!   reassesses exactly the 1% components whose result can depend on the view; time
//!   to rebuild the current view, and a check that those spends went from `included`
//!   to `selected-final`.
//!
//!
//! Then churn (OLL_BENCH_CHURN=<chains>x<length>, default 10x1000; 0 skips it;
//! OLL_BENCH_CACHE_MB sets the store's page cache for it): each chain
//! is a sequence of 1-input spends, every spend of the previous one's output (an output
//! updated again and again, or a wallet's change chain); each step receives one new spend
//! per chain and accepts their verification, as a live follow does. Every chain is one
//! reconciliation component (parents and children are connected); each new spend is a
//! leaf step (src/client/incremental.rs), whose cost should not grow with the history
//! behind it. Reported: the wall time of each tenth of the run, and the last over the
//! first, and the store's size on disk.
//!
//! Synthetic transactions are structurally valid but unsigned: the bench answers the
//! verification port itself (Script checking is not part of this measurement).
use std::time::Instant;

use overlay_lookup_live::client::chain::Finality;
use overlay_lookup_live::client::journal::{Anchor, Placement, Status};
use overlay_lookup_live::client::reconcile::{Received, ReconcilerConfig, VerificationResult, VerificationStatus};
use overlay_lookup_live::bitcoin::tx::{Hash32, Txid};
use overlay_lookup_live::client::ClientDb as CheckpointStore;
use sha2::{Digest, Sha256};

#[path = "common.rs"]
mod common;
use common::{cpu_seconds, quick, tempdir};

fn varint(n: usize, out: &mut Vec<u8>) {
    if n < 0xfd {
        out.push(n as u8);
    } else {
        out.push(0xfd);
        out.extend_from_slice(&(n as u16).to_le_bytes());
    }
}

/// A raw transaction spending `inputs` (wire-order txid, vout) with `outputs` outputs.
fn raw_tx(inputs: &[([u8; 32], u32)], outputs: usize, tag: u64) -> Vec<u8> {
    let mut t = 1u32.to_le_bytes().to_vec();
    varint(inputs.len(), &mut t);
    for (txid, vout) in inputs {
        t.extend_from_slice(txid);
        t.extend_from_slice(&vout.to_le_bytes());
        t.push(0); // empty unlocking script
        t.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    varint(outputs, &mut t);
    for i in 0..outputs {
        t.extend_from_slice(&(1000 + i as u64 + tag).to_le_bytes());
        t.push(1);
        t.push(0x51); // OP_TRUE
    }
    t.extend_from_slice(&0u32.to_le_bytes());
    t
}

/// The port's answer that `raw` (received without evidence: its variant is the digest of the
/// bytes) verified in context "start"; the bench answers the port itself.
fn verified(txid: Txid, raw: &[u8]) -> VerificationResult {
    VerificationResult {
        txid,
        variant: Hash32(Sha256::digest(raw).into()),
        context_id: "start".into(),
        status: VerificationStatus::Verified,
        raw: Some(raw.to_vec()),
        placement: None,
        reason: "bench".into(),
        policy: None,
    }
}

fn wire(t: &Txid) -> [u8; 32] {
    let mut w = t.0;
    w.reverse();
    w
}

/// An easy-PoW header (bits 0x207fffff) on `prev` with timestamp `time`.
fn header(prev: [u8; 32], time: u32, salt: u8) -> (Vec<u8>, Hash32) {
    for nonce in 0u32.. {
        let mut h = 1u32.to_le_bytes().to_vec();
        h.extend_from_slice(&prev);
        h.extend_from_slice(&[salt; 32]);
        h.extend_from_slice(&time.to_le_bytes());
        h.extend_from_slice(&0x207f_ffffu32.to_le_bytes());
        h.extend_from_slice(&nonce.to_le_bytes());
        let hash = Hash32::of_double_sha256(&h);
        if hash.0[0] < 0x7f {
            return (h, hash);
        }
    }
    unreachable!()
}

fn rss() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |k: &str| s.lines().find(|l| l.starts_with(k)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0);
    (kb("VmRSS:"), kb("VmHWM:"))
}

fn disk(p: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let m = e.metadata().unwrap();
        n += if m.is_dir() { disk(&e.path()) } else { m.len() };
    }
    n
}

fn run(n: usize, per_receive: usize) {
    let dir = tempdir();
    let store = CheckpointStore::open(dir.path().join("store")).unwrap();
    // Chain: genesis G; A1 on G (view "a"); B1 on G (view "b").
    let (g, gh) = header([0; 32], 1_000_000, 0);
    let (a1, a1h) = header(wire(&gh), 1_000_600, 1);
    let (b1, b1h) = header(wire(&gh), 1_000_600, 2);
    store.add_headers(&[g, a1, b1]).unwrap();
    store.define_view("a", a1h).unwrap();
    store.define_view("b", b1h).unwrap();
    store.define_context("start", Finality { tip_height: 1, mtp: 1_000_000 }).unwrap();
    store.configure_reconciler(&ReconcilerConfig { journal_id: "bench".into(), non_final: true, initial_context: "start".into() }).unwrap();

    let t0 = Instant::now();
    let anchors = n.div_ceil(1000);
    let mut anchor_ids = Vec::with_capacity(anchors);
    for a in 0..anchors {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&(a as u64).to_be_bytes());
        let raw = raw_tx(&[(seed, 0)], 1000, a as u64);
        anchor_ids.push(Hash32::of_double_sha256(&raw));
        store.add_anchor(&raw, Anchor::Preverified).unwrap();
    }
    let anchor_s = t0.elapsed().as_secs_f64();

    let spends: Vec<Vec<u8>> = (0..n).map(|i| raw_tx(&[(wire(&anchor_ids[i / 1000]), (i % 1000) as u32)], 1, i as u64)).collect();
    let txids: Vec<Txid> = spends.iter().map(|r| Hash32::of_double_sha256(r)).collect();

    let (c0, w0) = (cpu_seconds(), Instant::now());
    for chunk in spends.chunks(per_receive) {
        let items: Vec<Received> = chunk.iter().map(|r| Received { raw: r.clone(), evidence: vec![] }).collect();
        store.receive_transactions("bench-source", &items).unwrap();
    }
    let (recv_s, recv_cpu) = (w0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    // 1% of the spends are placed in block A1 (height 1).
    for i in (0..n).step_by(100) {
        store.add_placement(&txids[i], Placement { block: a1h, height: 1 }).unwrap();
    }
    let (c1, w1) = (cpu_seconds(), Instant::now());
    for (chunk, ids) in spends.chunks(per_receive).zip(txids.chunks(per_receive)) {
        let results: Vec<VerificationResult> = chunk.iter().zip(ids).map(|(raw, t)| verified(*t, raw)).collect();
        store.accept_verifications(&results).unwrap();
    }
    let (ver_s, ver_cpu) = (w1.elapsed().as_secs_f64(), cpu_seconds() - c1);
    let (rss_kb, hwm_kb) = rss();
    let bytes = disk(&dir.path().join("store"));

    let w2 = Instant::now();
    let to_a = store.set_context("a").unwrap();
    let to_a_s = w2.elapsed().as_secs_f64();
    let placed = txids[0];
    assert_eq!(store.transaction(&placed).unwrap().unwrap().published.unwrap().status, Status::Included);
    let w3 = Instant::now();
    let to_b = store.set_context("b").unwrap();
    let reorg_s = w3.elapsed().as_secs_f64();
    assert_eq!(store.transaction(&placed).unwrap().unwrap().published.unwrap().status, Status::SelectedFinal);
    assert_eq!(store.transaction(&txids[1]).unwrap().unwrap().published.unwrap().status, Status::SelectedFinal);
    assert_eq!(to_b.components, n.div_ceil(100), "the reorg reassesses exactly the placed 1%");

    println!("tracked outputs {n} (spends), {anchors} anchors of 1000 outputs, {per_receive} txs per receive/verification commit");
    println!("  anchors:              {:.2} s", anchor_s);
    println!(
        "  receive:              {:.0} observations/s wall ({:.1} s), {:.0}/s per CPU second",
        n as f64 / recv_s,
        recv_s,
        n as f64 / recv_cpu.max(1e-9)
    );
    println!(
        "  verification accept:  {:.0} results/s wall ({:.1} s), {:.0}/s per CPU second",
        n as f64 / ver_s,
        ver_s,
        n as f64 / ver_cpu.max(1e-9)
    );
    println!("  receive + accept:     {:.0} observations accepted/s end to end", n as f64 / (recv_s + ver_s));
    println!("  memory after load:    VmRSS {:.1} MiB, VmHWM {:.1} MiB; on disk {:.1} MiB", rss_kb as f64 / 1024.0, hwm_kb as f64 / 1024.0, bytes as f64 / 1048576.0);
    println!("  view start -> a:      {:.3} s ({} components reassessed)", to_a_s, to_a.components);
    println!("  reorg a -> b (1%):    {:.3} s to rebuild the current view ({} components reassessed)", reorg_s, to_b.components);
    store.close().unwrap();
}

/// Bytes of the files under `dir`.
fn file_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map(|es| es.flatten().filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()).unwrap_or(0)
}

/// The churn workload (see the crate doc): `chains` chains of `length` spends each.
fn churn(chains: usize, length: usize) {
    let dir = tempdir();
    // `OLL_BENCH_CACHE_MB`: the store's page cache (default: the store's own default).
    let cache = std::env::var("OLL_BENCH_CACHE_MB").ok().and_then(|v| v.parse::<u64>().ok()).map_or(overlay_lookup_live::client::db::DEFAULT_CACHE_BYTES, |m| m << 20);
    let store = CheckpointStore::open_with(dir.path().join("store"), cache).unwrap();
    store.define_context("start", Finality { tip_height: 1, mtp: 1_000_000 }).unwrap();
    store.configure_reconciler(&ReconcilerConfig { journal_id: "churn".into(), non_final: true, initial_context: "start".into() }).unwrap();
    let mut heads: Vec<Txid> = (0..chains)
        .map(|c| {
            let mut seed = [0u8; 32];
            seed[..8].copy_from_slice(&(c as u64 + 1).to_be_bytes());
            let raw = raw_tx(&[(seed, 0)], 1, c as u64);
            store.add_anchor(&raw, Anchor::Preverified).unwrap();
            Hash32::of_double_sha256(&raw)
        })
        .collect();
    let tenth = (length / 10).max(1);
    let mut windows = Vec::new();
    let mut t = Instant::now();
    for step in 0..length {
        let mut items = Vec::with_capacity(chains);
        let mut results = Vec::with_capacity(chains);
        for head in heads.iter_mut() {
            let raw = raw_tx(&[(wire(head), 0)], 1, (chains + step * chains) as u64);
            *head = Hash32::of_double_sha256(&raw);
            results.push(verified(*head, &raw));
            items.push(Received { raw, evidence: vec![] });
        }
        store.receive_transactions("churn-source", &items).unwrap();
        store.accept_verifications(&results).unwrap();
        if (step + 1) % tenth == 0 {
            windows.push((t.elapsed().as_secs_f64(), file_bytes(&dir.path().join("store"))));
            t = Instant::now();
        }
    }
    let last = store.transaction(&heads[0]).unwrap().unwrap();
    assert_eq!(last.published.unwrap().status, Status::SelectedFinal, "the newest spend of a chain is selected");
    let per_step = |w: f64| w / tenth as f64 * 1000.0;
    let (leaf, whole) = overlay_lookup_live::client::incremental::counts();
    println!("  component steps: {leaf} from their leaf, {whole} whole (process total)");
    println!("churn: {chains} chains of {length} spends ({} transactions), one spend per chain per step", chains * length);
    for (i, (w, disk)) in windows.iter().enumerate() {
        println!(
            "  steps {:>6}-{:<6} {:.1} ms per step ({} spends per chain behind it), store {:.1} MiB on disk",
            i * tenth + 1,
            (i + 1) * tenth,
            per_step(*w),
            (i + 1) * tenth,
            *disk as f64 / 1048576.0
        );
    }
    if let (Some(first), Some(last)) = (windows.first(), windows.last()) {
        println!("  last tenth / first tenth: {:.1}x", last.0 / first.0);
    }
    let stored: u64 = store.space_usage().unwrap().values().map(|(_, b)| b).sum();
    println!("  records: {:.0} bytes per spend ({} spends)", stored as f64 / (chains * length) as f64, chains * length);
    store.close().unwrap();
}

fn main() {
    let per_receive: usize = std::env::var("OLL_BENCH_RECEIVE").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let sizes: Vec<usize> = if quick() {
        vec![1000]
    } else {
        std::env::var("OLL_BENCH_SIZES")
            .ok()
            .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
            .unwrap_or_else(|| vec![10_000, 1_000_000])
    };
    for n in sizes {
        run(n, per_receive);
    }
    let (chains, length) = match std::env::var("OLL_BENCH_CHURN").ok().as_deref() {
        Some("0") => return,
        Some(v) => v.split_once('x').and_then(|(c, l)| Some((c.parse().ok()?, l.parse().ok()?))).expect("OLL_BENCH_CHURN=<chains>x<length>"),
        None if quick() => (2, 20),
        None => (10, 1000),
    };
    churn(chains, length);
}
