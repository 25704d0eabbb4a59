//! The client store's write pattern at catalogue scale, by record layout and storage engine
//! (issue 47's question: is a target out of sled's reach, and what would reach it). Run:
//!   cargo bench --profile ci --bench client_layout
//! Optional: OLL_BENCH_OUTPUTS=<outputs, default 100352>, OLL_BENCH_QUICK=1 (2,048),
//! OLL_BENCH_DIR=<dir>, OLL_BENCH_LAYOUTS=<comma-separated, default all>,
//! OLL_BENCH_ENGINES=<sled,redb>, OLL_BENCH_DERIVE=<pages per derived commit, default 16>.
//!
//! Each row receives N outputs in pages of 1,024, one durable commit per page (sled:
//! `apply_batch` then `flush`; redb: one write transaction, committed with its default
//! durability, which syncs), in a fresh process so its peak RSS is its own, with a 64 MiB
//! cache on both engines. Keys are random where the store's keys are hashes (txids,
//! outpoints, identities) and sequential where they are ordinals or positions. Values are
//! opaque bytes of the sizes the store writes.
//!
//! Layouts:
//! - `today`: the store as it is, 10 keys per received output with a verifying reconciler
//!   (sizes as `CheckpointStore.spaceUsage()` reports them with the record codec; evidence
//!   955 bytes, an Atomic BEEF of a P2PKH spend and its proven parent): group identity (I),
//!   observation identity (O), group record (R), member row (M), transaction record (Xt),
//!   evidence bytes (Xb), the proven parent as an anchor (Xa), a spend edge (Xe), a
//!   singleton component (Xk) and its context marker (Xs);
//! - `page`: one record per received page holding its observations and evidence, appended,
//!   plus one small key per member outpoint and one per transaction pointing into it;
//! - `rows`: the same, the page record split into one appended record per observation;
//! - `today-evlog`, `today-seqev`, `today-noio`: today's with one change each (the evidence
//!   bytes in an appended file synced before the commit, with a 20-byte locator in the
//!   engine; the evidence keyed in receipt order, as the store now keeps it; no identity keys);
//! - `today-local`: `today-seqev` with the keys placed by a hash clustered by transaction,
//!   by spent parent and by group (three scattered places per output instead of six);
//!   `today-local-m` the same with the member row left where it is (four places);
//! - `today-seqtx`: `today-seqev` with the transaction record appended under its first
//!   receipt's position and a 12-byte txid index placed by the hash (format 3 of the store);
//! - `derive`: one appended record per page, and today's index keys (all but the evidence)
//!   of every `OLL_BENCH_DERIVE` pages written in one commit, as a background indexer would.
//!
//! Reported per row: wall time, the first and the last tenth of the pages (does a commit
//! get slower as the store grows), bytes on disk per output (and, for redb, after
//! `Database::compact`), peak RSS.
use std::time::{Duration, Instant};

#[path = "common.rs"]
mod common;

const PAGE: u64 = 1024;
const EVIDENCE: usize = 955;

const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("client");

#[derive(Clone)]
struct Rng(u64);

fn derive_every() -> u64 {
    std::env::var("OLL_BENCH_DERIVE").ok().and_then(|v| v.parse().ok()).unwrap_or(16)
}
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn h32(&mut self) -> Vec<u8> {
        (0..4).flat_map(|_| self.next().to_le_bytes()).collect()
    }
}

fn k(tag: &[u8], rest: &[&[u8]]) -> Vec<u8> {
    let mut v = tag.to_vec();
    for r in rest {
        v.extend_from_slice(r);
    }
    v
}

/// The (key, value) writes of page `p` in `layout`.
fn page(layout: &str, p: u64, rng: &mut Rng) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut w = Vec::new();
    let vout = 0u32.to_be_bytes();
    match layout {
        "today" => {
            for i in 0..PAGE {
                let ord = (p * PAGE + i).to_be_bytes();
                let txid = rng.h32();
                w.push((k(b"I", &[&rng.h32()]), vec![1; 8]));
                w.push((k(b"O", &[&rng.h32()]), vec![1; 8]));
                w.push((k(b"R", &[&ord]), vec![2; 520]));
                w.push((k(b"M", &[&txid, &vout]), vec![3; 210]));
                w.push((k(b"Xt", &[&txid]), vec![4; 880]));
                w.push((k(b"Xb", &[&rng.h32()]), vec![5; EVIDENCE]));
                w.push((k(b"Xa", &[&rng.h32()]), vec![6; 145]));
                w.push((k(b"Xe", &[&rng.h32(), &vout, &txid]), vec![]));
                w.push((k(b"Xk", &[&ord]), vec![7; 80]));
                w.push((k(b"Xs", &[&ord]), vec![]));
            }
        }
        // `today` with the evidence bytes appended to a log file outside the engine (synced
        // before the page's commit); the engine keeps a 20-byte locator per variant.
        "today-evlog" => {
            for (key, v) in page("today", p, rng) {
                let v = if key.starts_with(b"Xb") { vec![5; 20] } else { v };
                w.push((key, v));
            }
        }
        "today-seqev" => {
            for (i, (key, v)) in page("today", p, rng).into_iter().enumerate() {
                let key = if key.starts_with(b"Xb") { k(b"Xb", &[&(p * PAGE * 10 + i as u64).to_be_bytes()]) } else { key };
                w.push((key, v));
            }
        }
        // `today-seqev` with the keys placed by a hash clustered: a transaction's record and
        // its member row under its txid, the spend edge and the parent's anchor under the
        // parent's txid, a group's identity next to its observation's (as when observation ids
        // extend their group's id). Three scattered places per output instead of six.
        "today-local" => {
            let mut parent = Vec::new();
            let mut child = Vec::new();
            let mut identity = Vec::new();
            for (key, v) in page("today-seqev", p, rng) {
                let key = match &key[..2] {
                    [b'I', _] => {
                        identity = key[1..].to_vec();
                        k(b"I", &[&identity, b"g"])
                    }
                    [b'O', _] => k(b"I", &[&identity, b"o"]),
                    [b'M', _] => {
                        child = key[1..33].to_vec();
                        k(b"T", &[&child, b"m", &key[33..]])
                    }
                    b"Xt" => k(b"T", &[&child, b"t"]),
                    b"Xa" => {
                        parent = key[2..].to_vec();
                        k(b"P", &[&parent, b"a"])
                    }
                    b"Xe" => k(b"P", &[&parent, b"e", &key[34..]]),
                    _ => key,
                };
                w.push((key, v));
            }
        }
        // `today-local` with the member row left in its generation's key space (where a
        // generation's rows are listed): four scattered places per output instead of six.
        "today-local-m" => {
            let rows: Vec<_> = page("today-seqev", p, &mut rng.clone()).into_iter().filter(|(key, _)| key.starts_with(b"M")).collect();
            w.extend(page("today-local", p, rng).into_iter().filter(|(key, _)| !(key.starts_with(b"T") && key[33] == b'm')));
            w.extend(rows);
        }
        // `today-seqev` with the transaction record appended under its first receipt's
        // position and a small txid index key (12-byte value) placed by the hash instead.
        "today-seqtx" => {
            for (i, (key, v)) in page("today-seqev", p, rng).into_iter().enumerate() {
                if key.starts_with(b"Xt") {
                    w.push((k(b"Xi", &[&key[2..]]), vec![8; 12]));
                    w.push((k(b"Xu", &[&(p * PAGE * 10 + i as u64).to_be_bytes()]), v));
                } else {
                    w.push((key, v));
                }
            }
        }
        "today-noio" => {
            w.extend(page("today", p, rng).into_iter().filter(|(key, _)| !key.starts_with(b"I") && !key.starts_with(b"O")));
        }
        // One appended record per page (what receipt makes durable), and every
        // `OLL_BENCH_DERIVE` pages (16 by default) today's index keys of those pages derived
        // in one commit (what a background indexer would write).
        "derive" => {
            let every = derive_every();
            w.extend(page("page", p, &mut rng.clone()).into_iter().filter(|(key, _)| key.starts_with(b"B")));
            if (p + 1) % every == 0 {
                for q in p + 1 - every..=p {
                    w.extend(page("today", q, rng).into_iter().filter(|(key, _)| !key.starts_with(b"Xb")));
                }
            }
        }
        "page" => {
            let mut record = Vec::with_capacity(PAGE as usize * (EVIDENCE + 120));
            for _ in 0..PAGE {
                let txid = rng.h32();
                record.extend(std::iter::repeat(9).take(EVIDENCE + 120));
                w.push((k(b"M", &[&txid, &vout]), vec![3; 24]));
                w.push((k(b"T", &[&txid]), vec![4; 40]));
            }
            w.push((k(b"B", &[&p.to_be_bytes()]), record));
        }
        "rows" => {
            for i in 0..PAGE {
                let txid = rng.h32();
                w.push((k(b"B", &[&(p * PAGE + i).to_be_bytes()]), vec![9; EVIDENCE + 120]));
                w.push((k(b"M", &[&txid, &vout]), vec![3; 24]));
                w.push((k(b"T", &[&txid]), vec![4; 40]));
            }
        }
        _ => panic!("unknown layout {layout}"),
    }
    w
}

/// One row, in this process: returns (wall, first tenth, last tenth, disk bytes, disk
/// bytes after the engine's compaction).
fn row(engine: &str, layout: &str, pages: u64) -> (Duration, Duration, Duration, u64, u64) {
    let dir = common::tempdir();
    let mut rng = Rng(88172645463325252);
    let tenth = (pages / 10).max(1);
    let (mut first, mut last) = (Duration::ZERO, Duration::ZERO);
    let start = Instant::now();
    enum Db {
        Sled(sled::Db, sled::Tree),
        Redb(redb::Database),
    }
    let mut db = match engine {
        "sled" => {
            let db = sled::Config::new().path(dir.path().join("db")).cache_capacity(64 << 20).open().unwrap();
            let tree = db.open_tree("client").unwrap();
            Db::Sled(db, tree)
        }
        "redb" => Db::Redb(redb::Database::builder().set_cache_size(64 << 20).create(dir.path().join("db.redb")).unwrap()),
        _ => panic!("unknown engine {engine}"),
    };
    let mut evlog = layout.ends_with("-evlog").then(|| std::fs::File::create(dir.path().join("evidence.log")).unwrap());
    for p in 0..pages {
        let t = Instant::now();
        let writes = page(layout, p, &mut rng);
        if let Some(f) = evlog.as_mut() {
            use std::io::Write;
            f.write_all(&vec![5u8; EVIDENCE * PAGE as usize]).unwrap();
            f.sync_data().unwrap();
        }
        match &db {
            Db::Sled(db, tree) => {
                let mut b = sled::Batch::default();
                for (k, v) in writes {
                    b.insert(k, v);
                }
                tree.apply_batch(b).unwrap();
                db.flush().unwrap();
            }
            Db::Redb(db) => {
                let w = db.begin_write().unwrap();
                {
                    let mut t = w.open_table(TABLE).unwrap();
                    for (k, v) in writes {
                        t.insert(k.as_slice(), v.as_slice()).unwrap();
                    }
                }
                w.commit().unwrap();
            }
        }
        if p < tenth {
            first += t.elapsed();
        }
        if p >= pages - tenth {
            last += t.elapsed();
        }
    }
    let wall = start.elapsed();
    let disk = du(dir.path());
    // What the engine's own compaction gives back (redb: `Database::compact`; sled has
    // none to call, its segments are reclaimed in the background).
    let compacted = match &mut db {
        Db::Redb(d) => {
            d.compact().unwrap();
            du(dir.path())
        }
        Db::Sled(..) => disk,
    };
    drop(db);
    (wall, first, last, disk, compacted)
}

fn du(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                du(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

fn peak_rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok());
    kb.unwrap_or(0.0) / 1024.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // A row runs in a child process (its own peak RSS): `<exe> --row engine layout pages`.
    if let Some(i) = args.iter().position(|a| a == "--row") {
        let (engine, layout, pages) = (&args[i + 1], &args[i + 2], args[i + 3].parse().unwrap());
        let (wall, first, last, disk, compacted) = row(engine, layout, pages);
        println!("{} {} {} {} {} {}", wall.as_secs_f64(), first.as_secs_f64(), last.as_secs_f64(), disk, peak_rss_mib(), compacted);
        return;
    }
    let outputs: u64 = if common::quick() {
        2048
    } else {
        std::env::var("OLL_BENCH_OUTPUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_352)
    };
    let pages = (outputs / PAGE).max(1);
    let n = pages * PAGE;
    println!("{n} outputs in pages of {PAGE}, one durable commit per page, 64 MiB cache");
    println!("| layout | engine | keys per output | time | first / last tenth of the pages | disk per output | after compaction | peak RSS |");
    println!("|---|---|---|---|---|---|---|---|");
    let exe = std::env::current_exe().unwrap();
    let list = |var: &str, all: &str| std::env::var(var).unwrap_or_else(|_| all.into()).split(',').map(String::from).collect::<Vec<_>>();
    for layout in list("OLL_BENCH_LAYOUTS", "today,today-evlog,page,rows") {
        let layout = layout.as_str();
        let keys = page(layout, 0, &mut Rng(1)).len() as f64 / PAGE as f64;
        for engine in list("OLL_BENCH_ENGINES", "sled,redb") {
            let engine = engine.as_str();
            let out = std::process::Command::new(&exe).args(["--row", engine, layout, &pages.to_string()]).output().unwrap();
            assert!(out.status.success(), "{engine} {layout}: {}", String::from_utf8_lossy(&out.stderr));
            let f: Vec<f64> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(|v| v.parse().unwrap()).collect();
            println!(
                "| {layout} | {engine} | {keys:.1} | {:.2} s | {:.2} / {:.2} s | {:.0} B | {} | {:.0} MiB |",
                f[0],
                f[1],
                f[2],
                f[3] / n as f64,
                if engine == "redb" { format!("{:.0} B", f[5] / n as f64) } else { "-".into() },
                f[4]
            );
        }
    }
}
