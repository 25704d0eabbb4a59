//! Commit, visibility, restart, epochs, caps, expiries, compaction and session records of the
//! store, against real sled databases in temporary directories.
mod store_common;

use std::collections::BTreeMap;
use std::sync::Arc;

use overlay_lookup_live::select::Selection;
use overlay_lookup_live::store::{Change, Outpoint, RemoveReason, Store, StoreConfig, StoreError};
use serde_json::json;
use store_common::*;

#[test]
fn create_commit_close_reopen_keeps_epoch_log_and_rows() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let epoch = s.epoch();
    let secret = s.secret();
    assert_eq!(epoch.len(), 32);
    assert!(epoch.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_eq!(s.high_water(), 0);
    assert_eq!(s.commit(vec![admit("ls", 1, json!({"a": "x"}))]).unwrap(), Some(1));
    assert_eq!(s.commit(vec![admit("ls", 2, json!({"a": "y"})), admit("ls", 3, json!({}))]).unwrap(), Some(2));
    assert_eq!(s.commit(vec![remove("ls", 1, RemoveReason::Evicted)]).unwrap(), Some(3));
    assert_eq!(s.high_water(), 3);
    let before = scan_ops(&s, "ls", &Selection::all(), 3);
    assert_eq!(before, vec![op(2), op(3)]);
    s.close().unwrap();
    assert!(matches!(s.commit(vec![admit("ls", 9, json!({}))]), Err(StoreError::Closed)));
    drop(s);

    let s = reopen(dir.path());
    assert_eq!(s.epoch(), epoch);
    assert_eq!(s.secret(), secret);
    assert_eq!(s.high_water(), 3);
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), 3), before);
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), 1), vec![op(1)]);
    let groups: Vec<_> = s.log_after(0, 3).map(|g| g.unwrap()).collect();
    assert_eq!(groups.iter().map(|(q, g)| (*q, g.changes.len())).collect::<Vec<_>>(), vec![(1, 1), (2, 2), (3, 1)]);
    assert_eq!(groups[2].1.changes[0].reason, Some(RemoveReason::Evicted));
    // Sequences continue after a restart.
    assert_eq!(s.commit(vec![admit("ls", 4, json!({}))]).unwrap(), Some(4));
    let st = s.stats().unwrap();
    assert_eq!((st.rows, st.log_groups, st.high_water), (3, 4, 4));
}

#[test]
fn missing_store_without_create_is_an_error_that_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nothing-here");
    let err = Store::open(StoreConfig::new(&path)).err().unwrap();
    assert!(matches!(err, StoreError::Missing { .. }));
    assert!(err.to_string().contains("create: true"), "{err}");
    assert!(!path.exists(), "a failed open must not create the store");
}

#[test]
fn foreign_or_damaged_stores_are_refused_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign");
    {
        let db = sled::open(&path).unwrap();
        db.insert(b"hello", b"world".to_vec()).unwrap();
        db.flush().unwrap();
    }
    let mut cfg = StoreConfig::new(&path);
    cfg.create = true;
    let err = Store::open(cfg.clone()).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");

    // A store whose schema record was tampered with.
    let path2 = dir.path().join("tampered");
    let mut cfg2 = StoreConfig::new(&path2);
    cfg2.create = true;
    Store::open(cfg2.clone()).unwrap().close().unwrap();
    {
        let db = sled::open(&path2).unwrap();
        db.insert(b"mschema", 99u32.to_be_bytes().to_vec()).unwrap();
        db.flush().unwrap();
    }
    let err = Store::open(cfg2.clone()).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    // A store of the earlier schema 1 (separate blob reference records) is refused by name.
    {
        let db = sled::open(&path2).unwrap();
        db.insert(b"mschema", 1u32.to_be_bytes().to_vec()).unwrap();
        db.flush().unwrap();
    }
    let err = Store::open(cfg2).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt { .. }) && err.to_string().contains("schema 1 is not supported"), "{err}");
    // A non-empty directory that is not a store is not taken over.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"mine").unwrap();
    let mut cfg3 = StoreConfig::new(&other);
    cfg3.create = true;
    assert!(matches!(Store::open(cfg3), Err(StoreError::Corrupt { .. })));
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);
    // The data is still there: nothing was replaced.
    let db = sled::open(&path).unwrap();
    assert_eq!(db.get(b"hello").unwrap().unwrap().as_ref(), b"world");
}

#[test]
fn subscribers_wake_only_after_publish_and_no_change_takes_no_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut rx = s.subscribe();
    assert!(!rx.has_changed().unwrap());
    assert_eq!(s.commit(vec![admit("ls", 1, json!({"k": 1}))]).unwrap(), Some(1));
    assert!(rx.has_changed().unwrap());
    assert_eq!(*rx.borrow_and_update(), 1);
    // Identical re-admission, removal of an absent row, empty group: nothing changes.
    assert_eq!(s.commit(vec![admit("ls", 1, json!({"k": 1}))]).unwrap(), None);
    assert_eq!(s.commit(vec![remove("ls", 7, RemoveReason::Spent)]).unwrap(), None);
    assert_eq!(s.commit(vec![]).unwrap(), None);
    assert!(!rx.has_changed().unwrap());
    assert_eq!(s.high_water(), 1);
    assert_eq!(s.commit(vec![admit("ls", 1, json!({"k": 2}))]).unwrap(), Some(2));
    assert_eq!(*rx.borrow_and_update(), 2);
}

#[test]
fn concurrent_writers_share_flushes_and_get_consecutive_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut handles = Vec::new();
    for t in 0..8u32 {
        let s = Arc::clone(&s);
        handles.push(std::thread::spawn(move || {
            (0..40u32)
                .map(|i| {
                    let n = t * 1000 + i;
                    (s.commit(vec![admit("ls", n, json!({"t": t}))]).unwrap().unwrap(), n)
                })
                .collect::<Vec<_>>()
        }));
    }
    let mut acked: BTreeMap<u64, u32> = BTreeMap::new();
    for h in handles {
        for (seq, n) in h.join().unwrap() {
            assert!(acked.insert(seq, n).is_none(), "sequence {seq} acknowledged twice");
        }
    }
    assert_eq!(acked.keys().copied().collect::<Vec<_>>(), (1..=320).collect::<Vec<_>>());
    // Each sequence holds exactly the change its writer was told about.
    for r in s.log_after(0, 320) {
        let (seq, g) = r.unwrap();
        assert_eq!(g.changes.len(), 1);
        assert_eq!(g.changes[0].outpoint, op(acked[&seq]));
    }
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), 320).len(), 320);
}

#[test]
fn reset_epoch_discards_log_and_rows_but_keeps_session_records() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.commit(vec![admit("ls", 1, json!({}))]).unwrap();
    s.aux_write(vec![(b"fence/1".to_vec(), Some(b"kept".to_vec()))]).unwrap();
    let old = s.epoch();
    let rx = s.subscribe();
    let new = s.reset_epoch().unwrap();
    assert_ne!(new, old);
    assert_eq!(s.epoch(), new);
    assert_eq!(s.high_water(), 0);
    assert!(rx.has_changed().unwrap());
    assert!(!s.service_has_rows("ls").unwrap());
    assert!(scan_ops(&s, "ls", &Selection::all(), 0).is_empty());
    assert_eq!(s.aux_get(b"fence/1").unwrap().unwrap().as_ref(), b"kept");
    assert_eq!(s.commit(vec![admit("ls", 2, json!({}))]).unwrap(), Some(1));
    let st = s.stats().unwrap();
    assert_eq!((st.rows, st.log_groups), (1, 1));
    s.close().unwrap();
    let s = reopen(dir.path());
    assert_eq!(s.epoch(), new);
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), 1), vec![op(2)]);
}

#[test]
fn reset_with_a_first_group_publishes_the_new_epoch_with_it_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    // Shared evidence between the old and new epoch: the blob must be stored again.
    s.commit(vec![admit("ls", 1, json!({})), admit("ls", 2, json!({}))]).unwrap();
    let old = s.epoch();
    let mut rx = s.subscribe();
    rx.borrow_and_update();
    let (epoch, seq) = s.reset_epoch_with(None, vec![admit("ls", 2, json!({})), admit("ls", 3, json!({}))]).unwrap();
    assert_ne!(epoch, old);
    assert_eq!(seq, Some(1));
    // One publication: the new epoch is never observed at highWater 0.
    assert!(rx.has_changed().unwrap());
    assert_eq!(*rx.borrow_and_update(), 1);
    assert_eq!(s.high_water(), 1);
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), 1), vec![op(2), op(3)]);
    let (_, g) = s.log_after(0, 1).next().unwrap().unwrap();
    assert_eq!(g.changes.len(), 2);
    for c in &g.changes {
        assert!(c.old.is_none(), "the first group of an epoch replaces nothing");
        assert!(s.blob_at(&c.new.as_ref().unwrap().beef).unwrap().is_some());
    }
    let st = s.stats().unwrap();
    assert_eq!((st.rows, st.log_groups), (2, 1));
    assert_eq!(s.commit(vec![admit("ls", 4, json!({}))]).unwrap(), Some(2));
    s.close().unwrap();
    let s = reopen(dir.path());
    assert_eq!(s.epoch(), epoch);
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), 2), vec![op(2), op(3), op(4)]);
    // A first group that changes nothing leaves the new epoch empty at 0; bad changes reset nothing.
    let (_, none) = s.reset_epoch_with(None, vec![remove("ls", 9, RemoveReason::Evicted)]).unwrap();
    assert_eq!((none, s.high_water()), (None, 0));
    let before = s.epoch();
    assert!(s.reset_epoch_with(None, vec![Change::Refresh { service: "".into(), outpoint: op(1), beef: vec![1] }]).is_err());
    assert_eq!(s.epoch(), before);
}

#[test]
fn caps_fail_the_whole_group_with_an_explicit_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path().join("store"));
    cfg.create = true;
    cfg.max_rows = Some(2);
    let s = Store::open(cfg).unwrap();
    let err = s
        .commit(vec![admit("ls", 1, json!({})), admit("ls", 2, json!({})), admit("ls", 3, json!({}))])
        .unwrap_err();
    assert!(matches!(err, StoreError::Limit { what: "rows", limit: 2 }), "{err}");
    assert_eq!(s.high_water(), 0);
    assert!(scan_ops(&s, "ls", &Selection::all(), 0).is_empty());
    assert!(!s.service_has_rows("ls").unwrap());
    assert_eq!(s.commit(vec![admit("ls", 1, json!({})), admit("ls", 2, json!({}))]).unwrap(), Some(1));
    assert!(matches!(s.commit(vec![admit("ls", 3, json!({}))]), Err(StoreError::Limit { .. })));
    // Replacing a row does not grow the row count; removing always works.
    assert_eq!(s.commit(vec![admit("ls", 2, json!({"v": 1}))]).unwrap(), Some(2));
    assert_eq!(s.commit(vec![remove("ls", 1, RemoveReason::Evicted), admit("ls", 3, json!({}))]).unwrap(), Some(3));
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), 3), vec![op(2), op(3)]);
    s.close().unwrap();

    let mut cfg = StoreConfig::new(dir.path().join("bytes"));
    cfg.create = true;
    cfg.max_retained_bytes = Some(4096);
    let s = Store::open(cfg).unwrap();
    let big = admit_full("ls", 1, "tm", json!({}), vec![7u8; 5000], None, None);
    assert!(matches!(s.commit(vec![big]), Err(StoreError::Limit { what: "retained bytes", .. })));
    assert_eq!(s.stats().unwrap().blob_bytes, 0);
    assert_eq!(s.commit(vec![admit("ls", 1, json!({}))]).unwrap(), Some(1));
}

#[test]
fn recorded_groups_go_beyond_caps_and_never_discard_retained_history() {
    // What an Engine already applied is recorded: beyond the row cap it commits (noted), and
    // beyond the retained-bytes cap too, with every retained log group kept (BRC-193 §4:
    // promised history is not discarded to make room; the session layer refuses new opens
    // while the store is over the budget instead).
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path().join("rows"));
    cfg.create = true;
    cfg.max_rows = Some(1);
    let s = Store::open(cfg).unwrap();
    let r = s.commit_recorded(vec![admit("ls", 1, json!({})), admit("ls", 2, json!({}))]).unwrap();
    assert_eq!((r.sequence, r.over_cap), (Some(1), true));
    assert_eq!(s.stats().unwrap().rows, 2);
    s.close().unwrap();

    let mut cfg = StoreConfig::new(dir.path().join("bytes"));
    cfg.create = true;
    cfg.max_retained_bytes = Some(20_000);
    let s = Store::open(cfg).unwrap();
    // Five versions of one row: each replacement keeps the old version and its log group.
    for v in 0..5u8 {
        let c = admit_full("ls", 1, "tm", json!({ "v": v }), vec![v; 3000], None, None);
        assert!(!s.commit_recorded(vec![c]).unwrap().over_cap);
    }
    assert_eq!(s.over_retained(), None);
    let c = admit_full("ls", 1, "tm", json!({ "v": 5 }), vec![5; 3000], None, None);
    let refused = s.commit(vec![c.clone()]).unwrap_err();
    assert!(matches!(refused, StoreError::Limit { what: "retained bytes", .. }), "{refused}");
    let r = s.commit_recorded(vec![c]).unwrap();
    assert_eq!((r.sequence, r.over_cap), (Some(6), true));
    let after = s.stats().unwrap();
    assert_eq!((after.log_groups, after.compacted_through), (6, 0), "nothing was reclaimed");
    assert_eq!(after.retained_bytes, after.log_bytes + after.row_bytes + after.blob_bytes);
    let (retained, limit) = s.over_retained().expect("over the budget");
    assert_eq!((retained, limit), (after.retained_bytes, 20_000));
    // Every group is still served from the start.
    assert_eq!(s.log_after(0, 6).count(), 6);
    // Compaction of history nobody needs brings the store back under the budget.
    while s.compact_step(6, 1000).unwrap() {}
    assert_eq!(s.over_retained(), None);
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), 6), vec![op(1)]);
}

#[test]
fn expiries_commit_one_group_ordered_by_time_service_outpoint() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.commit(vec![
        admit_full("lsb", 5, "t", json!({}), beef(5), None, Some(10)),
        admit_full("lsa", 4, "t", json!({}), beef(4), None, Some(20)),
        admit_full("lsa", 3, "t", json!({}), beef(3), None, Some(10)),
        admit_full("lsa", 2, "t", json!({}), beef(2), None, Some(30)),
        admit_full("lsa", 1, "t", json!({}), beef(1), None, None),
        admit_full("lsa", 6, "t", json!({}), beef(6), None, Some(10)),
    ])
    .unwrap();
    // Re-admission with a later expiry moves the timer.
    s.commit(vec![admit_full("lsa", 6, "t", json!({}), beef(6), None, Some(50))]).unwrap();
    assert_eq!(s.apply_expiries(9).unwrap(), None);
    let seq = s.apply_expiries(20).unwrap().unwrap();
    let (_, g) = s.log_after(seq - 1, seq).next().unwrap().unwrap();
    let got: Vec<_> = g.changes.iter().map(|c| (c.service.clone(), c.outpoint.clone(), c.reason)).collect();
    let exp = Some(RemoveReason::Expired);
    assert_eq!(
        got,
        vec![("lsa".into(), op(3), exp), ("lsb".into(), op(5), exp), ("lsa".into(), op(4), exp)]
    );
    assert_eq!(scan_ops(&s, "lsa", &Selection::all(), seq), vec![op(1), op(2), op(6)]);
    assert_eq!(s.apply_expiries(20).unwrap(), None);
    // Exclusive: due exactly at expiresAt.
    let seq2 = s.apply_expiries(30).unwrap().unwrap();
    assert_eq!(seq2, seq + 1);
    assert_eq!(scan_ops(&s, "lsa", &Selection::all(), seq2), vec![op(1), op(6)]);
}

#[test]
fn a_timer_committed_after_the_earliest_was_remembered_is_still_applied() {
    // `apply_expiries` remembers the earliest timer between calls; timers added later,
    // earlier than the remembered one or into an empty timer table, must not be missed.
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    assert_eq!(s.apply_expiries(5).unwrap(), None); // remembers: no timer at all
    s.commit(vec![admit_full("ls", 1, "t", json!({}), beef(1), None, Some(100))]).unwrap();
    assert_eq!(s.apply_expiries(50).unwrap(), None); // remembers: earliest is 100
    s.commit(vec![admit_full("ls", 2, "t", json!({}), beef(2), None, Some(60))]).unwrap();
    let seq = s.apply_expiries(70).unwrap().expect("the timer at 60 is due at 70");
    let (_, g) = s.log_after(seq - 1, seq).next().unwrap().unwrap();
    assert_eq!(g.changes.iter().map(|c| c.outpoint.clone()).collect::<Vec<_>>(), vec![op(2)]);
    assert_eq!(s.apply_expiries(99).unwrap(), None);
    assert!(s.apply_expiries(100).unwrap().is_some());
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), s.high_water()), Vec::<Outpoint>::new());
}

#[test]
fn compaction_keeps_everything_a_reader_after_the_horizon_needs() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for n in 0..20 {
        s.commit(vec![admit("ls", n, json!({"k": n % 4}))]).unwrap();
    }
    for n in 0..10 {
        s.commit(vec![admit("ls", n, json!({"k": 9}))]).unwrap(); // replace
    }
    s.commit(vec![spend("ls", 15, 0xAB), remove("ls", 16, RemoveReason::NotRetained)]).unwrap();
    let horizon = s.high_water();
    for n in 20..25 {
        s.commit(vec![admit("ls", n, json!({"k": 1}))]).unwrap();
    }
    s.commit(vec![remove("ls", 0, RemoveReason::Evicted)]).unwrap();
    let hw = s.high_water();
    let k1 = sel(json!({"where": {"eq": ["k", 1]}}));
    let views: Vec<_> = (horizon..=hw)
        .map(|w| (scan_ops(&s, "ls", &Selection::all(), w), scan_ops(&s, "ls", &k1, w)))
        .collect();
    let log_tail: Vec<_> = s.log_after(horizon, hw).map(|g| g.unwrap()).collect();
    let before = s.stats().unwrap();

    let mut steps = 0;
    while s.compact_step(horizon, 3).unwrap() {
        steps += 1;
        assert!(steps < 1000);
    }
    assert!(steps > 3, "bounded steps");
    assert_eq!(s.compacted_through(), horizon);
    let after = s.stats().unwrap();
    assert_eq!(after.rows, before.rows);
    assert_eq!(after.log_groups, hw - horizon);
    assert!(after.row_bytes < before.row_bytes && after.blob_bytes < before.blob_bytes && after.log_bytes < before.log_bytes);
    // Readers after the horizon see exactly what they saw before.
    for (i, w) in (horizon..=hw).enumerate() {
        assert_eq!((scan_ops(&s, "ls", &Selection::all(), w), scan_ops(&s, "ls", &k1, w)), views[i]);
    }
    assert_eq!(s.log_after(horizon, hw).map(|g| g.unwrap()).collect::<Vec<_>>(), log_tail);
    assert!(matches!(s.log_after(0, hw).next(), Some(Err(StoreError::Gone(_)))));
    assert!(matches!(s.snapshot("ls", &Selection::all(), horizon - 1, None), Err(StoreError::Gone(_))));
    // The spend evidence's blob went with its log group; live rows keep theirs.
    assert!(s.blob(&sha(&[0xAB, 1, 2, 3])).unwrap().is_none());
    assert!(s.blob(&sha(&beef(16))).unwrap().is_none());
    assert!(s.blob(&sha(&beef(3))).unwrap().is_some());
    assert!(s.blob(&sha(&beef(0))).unwrap().is_some(), "row 0's version is removed only after the horizon");
    // Compaction survives a restart and continues to the end.
    s.close().unwrap();
    let s = reopen(dir.path());
    assert_eq!(s.compacted_through(), horizon);
    while s.compact_step(u64::MAX, 1000).unwrap() {}
    assert_eq!(s.compacted_through(), hw);
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), hw), views.last().unwrap().0);
    let st = s.stats().unwrap();
    assert_eq!((st.log_groups, st.log_bytes), (0, 0));
    assert!(s.blob(&sha(&beef(0))).unwrap().is_none());
    assert_eq!(s.commit(vec![admit("ls", 99, json!({}))]).unwrap(), Some(hw + 1));
}

/// A BEEF is stored once, where the first group that named it put it: later references share
/// those bytes (and say where they are), the count survives a restart, and the bytes go with
/// the last reference. Small and large BEEFs alike.
#[test]
fn small_and_large_blobs_are_shared_and_dropped_with_their_last_reference() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let big: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let small = beef(3);
    let row = |n: u32, b: &[u8]| admit_full("ls", n, "tm", json!({}), b.to_vec(), None, None);
    s.commit(vec![row(1, &big)]).unwrap();
    s.commit(vec![row(2, &big), row(3, &small)]).unwrap();
    // Per blob: its record (key 33 + value 24 bytes) and its bytes (key 41 bytes).
    let expect_bytes = (98 + big.len() + 98 + small.len()) as u64;
    assert_eq!(s.stats().unwrap().blob_bytes, expect_bytes);
    let at = |s: &Store| -> Vec<(u32, u64)> {
        let rows = s.snapshot("ls", &Selection::all(), s.high_water(), None).unwrap();
        rows.map(|r| r.unwrap()).map(|r| (u32::from_be_bytes(r.outpoint.txid[28..].try_into().unwrap()), r.beef.at)).collect()
    };
    assert_eq!(at(&s), vec![(1, 1), (2, 1), (3, 2)], "row 2 shares the bytes group 1 stored");
    s.close().unwrap();
    let s = reopen(dir.path());
    assert_eq!(s.blob(&sha(&big)).unwrap().as_deref(), Some(big.as_slice()));
    assert_eq!(s.blob(&sha(&small)).unwrap().as_deref(), Some(small.as_slice()));
    assert_eq!(s.stats().unwrap().blob_bytes, expect_bytes);

    // Row 1 goes; its log group and version are compacted: row 2 still holds the large blob.
    s.commit(vec![remove("ls", 1, RemoveReason::Evicted)]).unwrap();
    while s.compact_step(s.high_water(), 1000).unwrap() {}
    assert_eq!(s.blob(&sha(&big)).unwrap().as_deref(), Some(big.as_slice()));
    assert_eq!(s.stats().unwrap().blob_bytes, expect_bytes);

    s.commit(vec![remove("ls", 2, RemoveReason::Evicted), remove("ls", 3, RemoveReason::Evicted)]).unwrap();
    while s.compact_step(s.high_water(), 1000).unwrap() {}
    assert!(s.blob(&sha(&big)).unwrap().is_none());
    assert!(s.blob(&sha(&small)).unwrap().is_none());
    assert_eq!(s.stats().unwrap().blob_bytes, 0);
    // Re-admitting stores the bytes again.
    let seq = s.commit(vec![row(4, &big)]).unwrap().unwrap();
    assert_eq!(s.blob(&sha(&big)).unwrap().as_deref(), Some(big.as_slice()));
    assert_eq!(at(&s), vec![(4, seq)]);
}

fn sha(b: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(b).into()
}

#[test]
fn session_records_are_atomic_durable_and_namespaced() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.commit(vec![admit("ls", 1, json!({}))]).unwrap();
    s.aux_write(vec![
        (b"s/a".to_vec(), Some(b"1".to_vec())),
        (b"s/b".to_vec(), Some(b"2".to_vec())),
        (b"t/a".to_vec(), Some(b"3".to_vec())),
    ])
    .unwrap();
    s.aux_write(vec![(b"s/a".to_vec(), None), (b"s/c".to_vec(), Some(b"4".to_vec()))]).unwrap();
    let scan = |s: &Store| -> Vec<(Vec<u8>, Vec<u8>)> {
        s.aux_scan_prefix(b"s/").map(|r| r.map(|(k, v)| (k, v.to_vec())).unwrap()).collect()
    };
    let want = vec![(b"s/b".to_vec(), b"2".to_vec()), (b"s/c".to_vec(), b"4".to_vec())];
    assert_eq!(scan(&s), want);
    // The empty prefix sees only session records, never the store's own tables.
    assert_eq!(s.aux_scan_prefix(b"").count(), 3);
    s.close().unwrap();
    let s = reopen(dir.path());
    assert_eq!(scan(&s), want);
    assert_eq!(s.aux_get(b"t/a").unwrap().unwrap().as_ref(), b"3");
}

#[test]
fn malformed_changes_are_invalid_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let bad = vec![
        admit("l\0s", 1, json!({})),
        admit("", 1, json!({})),
        admit_full("ls", 1, "", json!({}), beef(1), None, None),
        admit_full("ls", 1, "t", json!({}), vec![], None, None),
        Change::Remove {
            service: "ls".into(),
            outpoint: op(1),
            reason: RemoveReason::Evicted,
            spend: Some(overlay_lookup_live::store::SpendInput { spending_txid: [1; 32], beef: vec![1] }),
        },
    ];
    for c in bad {
        let e = s.commit(vec![admit("ls", 2, json!({})), c]).unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{e}");
    }
    let mut a = store_common::attrs(json!({}));
    a.insert("x".into(), overlay_lookup_live::select::AttrValue::List(vec![overlay_lookup_live::select::AttrValue::List(vec![])]));
    let nested = Change::Admit {
        service: "ls".into(),
        outpoint: op(1),
        topic: "t".into(),
        attributes: a,
        beef: beef(1),
        context: None,
        expires_at: None,
    };
    assert!(matches!(s.commit(vec![nested]), Err(StoreError::Invalid(_))));
    assert_eq!(s.high_water(), 0);
    assert!(!s.service_has_rows("ls").unwrap());
}

#[test]
fn close_releases_the_path_for_an_in_process_reopen() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3u64 {
        let s = if round == 0 { open(dir.path()) } else { reopen(dir.path()) };
        assert_eq!(s.high_water(), round);
        s.commit(vec![admit("ls", round as u32, json!({}))]).unwrap();
        assert!(s.service_has_rows("ls").unwrap());
        assert!(!s.service_has_rows("other").unwrap());
        s.close().unwrap();
        s.close().unwrap(); // idempotent
        assert!(matches!(s.blob(&[0; 32]), Err(StoreError::Closed)));
    }
}

#[test]
fn range_plans_agree_whether_or_not_the_range_is_selective() {
    // 10,050 rows: a range over all of them exceeds the collect bound and walks the rows; a
    // narrow one is collected from the index. Both must equal the rows' own evaluation.
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let changes: Vec<Change> = (0..10_050u32).map(|n| admit("ls", n, json!({"v": (n * 7919) % 10_050, "p": format!("{:05}", n % 997)}))).collect();
    s.commit(changes[..5000].to_vec()).unwrap();
    s.commit(changes[5000..].to_vec()).unwrap();
    let w = s.high_water();
    for (q, lo, hi) in [("wide", 0u32, 10_050u32), ("narrow", 100, 140)] {
        let got = scan_ops(&s, "ls", &sel(json!({"where": {"range": ["v", {"gte": lo, "lt": hi}]}})), w);
        let want: Vec<_> = (0..10_050u32).filter(|n| (lo..hi).contains(&((n * 7919) % 10_050))).map(op).collect();
        assert_eq!(got, want, "{q}");
    }
    let got = scan_ops(&s, "ls", &sel(json!({"where": {"prefix": ["p", "0099"]}})), w);
    let want: Vec<_> = (0..10_050u32).filter(|n| format!("{:05}", n % 997).starts_with("0099")).map(op).collect();
    assert_eq!(got, want);
}

#[test]
fn snapshots_stay_fixed_while_writers_and_compaction_run_concurrently() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for n in 0..300u32 {
        s.commit(vec![admit("ls", n, json!({"k": n % 5}))]).unwrap();
    }
    // Versions replaced or removed before W are what compaction deletes under the readers.
    for n in 0..150u32 {
        let c = if n % 10 == 0 { remove("ls", n, RemoveReason::Evicted) } else { admit("ls", n, json!({"k": (n + 2) % 5})) };
        s.commit(vec![c]).unwrap();
    }
    let w = s.high_water();
    let k2 = sel(json!({"where": {"eq": ["k", 2]}}));
    let by_k = sel(json!({"where": {"all": true}, "order": {"attribute": "k", "direction": "desc"}}));
    let base: Vec<_> = [Selection::all(), k2.clone(), by_k.clone()].iter().map(|q| scan_ops(&s, "ls", q, w)).collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2u32)
        .map(|t| {
            let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let n = (i * 7 + t) % 300;
                    let c = if i % 3 == 0 { remove("ls", n, RemoveReason::Evicted) } else { admit("ls", n, json!({"k": (n + i) % 5})) };
                    s.commit(vec![c, admit("ls", 1000 + t * 100_000 + i, json!({"k": 2}))]).unwrap();
                    i += 1;
                }
            })
        })
        .collect();
    let compactor = {
        let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                s.compact_step(w, 50).unwrap();
            }
        })
    };
    let mut round = 0;
    while round < 30 || s.high_water() < w + 20 {
        round += 1;
        for (q, want) in [Selection::all(), k2.clone(), by_k.clone()].iter().zip(&base) {
            assert_eq!(&scan_ops(&s, "ls", q, w), want, "round {round}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
    compactor.join().unwrap();
    assert!(s.high_water() > w, "writers made progress");
    while s.compact_step(w, 1000).unwrap() {}
    assert_eq!(s.compacted_through(), w);
    for (q, want) in [Selection::all(), k2, by_k].iter().zip(&base) {
        assert_eq!(&scan_ops(&s, "ls", q, w), want);
    }
}
