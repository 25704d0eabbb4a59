//! Crash tests: a child process (this test binary re-executed on the ignored `crash_child` test)
//! commits groups from three writer threads and prints each acknowledged sequence. It is killed
//! with SIGKILL at a named fail point (`OLL_CRASH_POINT=<point>:<n>`) or by the parent after a
//! number of acknowledgements. After every kill the parent reopens the store and checks:
//! - the epoch never changes;
//! - every acknowledged group is in the log at its acknowledged sequence, exactly once;
//! - no group is torn: each logged group has all of its changes, and its rows are visible in
//!   the snapshot at its sequence (all-or-nothing);
//! - sequences are consecutive, highWater is the last one, and the counters match the data.
//!
//! Points: before-write, after-write (applied, not flushed), after-flush (durable, not
//! published), compaction (a compaction batch applied, not flushed), plus external kills.
mod store_common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use overlay_lookup_live::select::{AttrValue, Attributes, Selection};
use overlay_lookup_live::store::{Change, Outpoint, RemoveReason, Store, StoreConfig};

const CHILD_DIR: &str = "OLL_CRASH_CHILD_DIR";
const CHILD_COMPACT: &str = "OLL_CRASH_CHILD_COMPACT";
const KILLS_PER_POINT: u64 = 50;
const CHANGES_PER_GROUP: u32 = 3;

/// Outpoints of group `id` (unique per group id).
fn group_op(id: u64, j: u32) -> Outpoint {
    let mut txid = [0u8; 32];
    txid[..8].copy_from_slice(&id.to_be_bytes());
    txid[8] = 0xC5;
    Outpoint { txid, output_index: j }
}

fn group_changes(id: u64) -> Vec<Change> {
    (0..CHANGES_PER_GROUP)
        .map(|j| {
            let mut a = Attributes::new();
            a.insert("group".into(), AttrValue::Str(id.to_string()));
            a.insert("j".into(), AttrValue::Int(j as i64));
            Change::Admit {
                service: "ls".into(),
                outpoint: group_op(id, j),
                topic: "tm".into(),
                attributes: a,
                beef: format!("beef-{id}-{j}").into_bytes(),
                context: None,
                expires_at: None,
            }
        })
        .collect()
}

/// The child: three writers commit fresh groups (and now and then remove a row of one of
/// their earlier groups, so drains also rewrite older versions), printing `ack <seq> <id>`.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let mut cfg = StoreConfig::new(Path::new(&dir));
    cfg.create = true;
    let s = Store::open(cfg).unwrap();
    let compact = std::env::var(CHILD_COMPACT).is_ok();
    let base: u64 = (std::process::id() as u64) << 32 | (s.high_water() & 0xFFFF) << 16;
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let threads: Vec<_> = (0..3u64)
        .map(|t| {
            let s = Arc::clone(&s);
            let out = Arc::clone(&out);
            std::thread::spawn(move || {
                for i in 0..40u64 {
                    let id = base + t * 1000 + i;
                    let mut changes = group_changes(id);
                    if i % 3 == 2 {
                        let earlier = id - 1;
                        changes.push(Change::Remove {
                            service: "ls".into(),
                            outpoint: group_op(earlier, 0),
                            reason: RemoveReason::Evicted,
                            spend: None,
                        });
                    }
                    let seq = s.commit(changes).unwrap().unwrap();
                    use std::io::Write;
                    let mut o = out.lock().unwrap();
                    writeln!(o, "ack {seq} {id}").unwrap();
                    o.flush().unwrap();
                    drop(o);
                    if compact && t == 0 && i % 2 == 1 {
                        s.compact_step(s.high_water().saturating_sub(3), 5).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    println!("done");
}

/// Run one child; returns the acknowledged (seq, id) pairs and whether it was killed.
fn run_child(dir: &Path, point: Option<String>, compact: bool, kill_after: Option<usize>) -> (Vec<(u64, u64)>, bool) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["crash_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd.env_remove(overlay_lookup_live::store::crash::ENV);
    if let Some(p) = point {
        cmd.env(overlay_lookup_live::store::crash::ENV, p);
    }
    if compact {
        cmd.env(CHILD_COMPACT, "1");
    }
    let mut child = cmd.spawn().unwrap();
    let mut acks = Vec::new();
    let reader = BufReader::new(child.stdout.take().unwrap());
    for line in reader.lines() {
        let Ok(line) = line else { break };
        if let Some(rest) = line.strip_prefix("ack ") {
            let mut it = rest.split(' ').map(|x| x.parse::<u64>().unwrap());
            acks.push((it.next().unwrap(), it.next().unwrap()));
            if kill_after == Some(acks.len()) {
                child.kill().unwrap(); // SIGKILL
            }
        }
    }
    let status = child.wait().unwrap();
    (acks, !status.success())
}

/// Reopen and check every invariant listed in the module docs.
fn verify(dir: &Path, epoch: &mut Option<String>, acked: &BTreeMap<u64, u64>) {
    let s = Store::open(StoreConfig::new(dir)).unwrap();
    match epoch {
        None => *epoch = Some(s.epoch()),
        Some(e) => assert_eq!(&s.epoch(), e, "epoch changed across a crash"),
    }
    let hw = s.high_water();
    let from = s.compacted_through();
    let mut seen_ids = BTreeSet::new();
    let mut logged = BTreeMap::new();
    for r in s.log_after(from, hw) {
        let (seq, g) = r.unwrap();
        let adm: Vec<_> = g.changes.iter().filter(|c| c.new.is_some()).collect();
        assert_eq!(adm.len(), CHANGES_PER_GROUP as usize, "group {seq} is torn");
        let id = adm[0].outpoint.txid[..8].try_into().map(u64::from_be_bytes).unwrap();
        for (j, c) in adm.iter().enumerate() {
            assert_eq!(c.outpoint, group_op(id, j as u32), "group {seq} mixes groups");
        }
        assert!(seen_ids.insert(id), "group id {id} committed twice");
        logged.insert(seq, id);
        // All-or-nothing in the index too: the group's rows are in the snapshot at its seq.
        let rows: BTreeSet<Outpoint> = s
            .snapshot("ls", &Selection::from_json(&serde_json::json!({"where": {"eq": ["group", id.to_string()]}})).unwrap(), seq, None)
            .unwrap()
            .map(|r| r.unwrap().outpoint)
            .collect();
        assert_eq!(rows.len(), CHANGES_PER_GROUP as usize, "rows of group {seq} are torn");
    }
    assert_eq!(logged.keys().copied().collect::<Vec<_>>(), (from + 1..=hw).collect::<Vec<_>>());
    for (seq, id) in acked {
        if *seq > from {
            assert_eq!(logged.get(seq), Some(id), "acknowledged group {seq} lost or changed");
        }
    }
    let st = s.stats().unwrap();
    assert_eq!(st.log_groups, hw - from);
    let present = s.snapshot("ls", &Selection::all(), hw, None).unwrap().count() as u64;
    assert_eq!(st.rows, present, "row counter disagrees with the data");
    s.close().unwrap();
}

fn crash_loop(point: Option<&str>, compact: bool, external: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut epoch = None;
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut kills = 0;
    for iter in 0..KILLS_PER_POINT {
        // Vary where in the child's life the kill lands.
        let nth = 1 + (iter * 7) % if compact { 8 } else { 13 };
        let (acks, killed) = run_child(
            &path,
            point.map(|p| format!("{p}:{nth}")),
            compact,
            external.then_some(1 + (iter as usize * 5) % 17),
        );
        assert!(killed, "child was not killed at {point:?}:{nth}");
        kills += 1;
        for (seq, id) in acks {
            assert!(acked.insert(seq, id).is_none(), "sequence {seq} acknowledged twice across restarts");
        }
        verify(&path, &mut epoch, &acked);
    }
    assert_eq!(kills, KILLS_PER_POINT);
    assert!(!acked.is_empty());
}

#[test]
fn kill_before_write() {
    crash_loop(Some("before-write"), false, false);
}

#[test]
fn kill_after_write_before_flush() {
    crash_loop(Some("after-write"), false, false);
}

#[test]
fn kill_after_flush_before_publish() {
    crash_loop(Some("after-flush"), false, false);
}

#[test]
fn kill_during_compaction() {
    crash_loop(Some("compaction"), true, false);
}

#[test]
fn kill_from_outside_at_arbitrary_moments() {
    crash_loop(None, true, true);
}

#[test]
fn kill_right_after_creation_keeps_a_usable_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (acks, killed) = run_child(&path, Some("open:1".into()), false, None);
    assert!(killed && acks.is_empty());
    let mut epoch = None;
    verify(&path, &mut epoch, &BTreeMap::new());
    let (acks, killed) = run_child(&path, Some("before-write:3".into()), false, None);
    assert!(killed);
    verify(&path, &mut epoch, &acks.into_iter().collect());
}
