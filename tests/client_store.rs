//! The durable ClientDb on a real redb file on disk (BRC-193 §4, §8, §9;
//! BRC-192 §2): commit with cursor, replay no-op, equivocation quarantine, stale
//! cursor refusal, restart, generations (an access change among them) and two sources.

mod client_common;

use client_common::fixture::{self, hex32};
use overlay_lookup_live::client::{ClientDb, CommitOptions, ErrorCode, Membership, SourceKey};
use serde_json::Value;

fn sc(provider: &str, epoch: &str) -> Value {
    fixture::scope(provider, "ls_notes", "q", "public", epoch)
}

fn opts() -> CommitOptions {
    CommitOptions::default()
}

struct Fx {
    dir: tempfile::TempDir,
    store: Option<ClientDb>,
}

impl Fx {
    fn new() -> Fx {
        let dir = tempfile::tempdir().unwrap();
        let store = Some(ClientDb::open(dir.path().join("s")).unwrap());
        Fx { dir, store }
    }
    fn s(&self) -> &ClientDb {
        self.store.as_ref().unwrap()
    }
    fn restart(&mut self) {
        self.store.take().unwrap().close().unwrap();
        self.store = Some(ClientDb::open(self.dir.path().join("s")).unwrap());
    }
}

fn txid() -> String {
    hex32("tx1")
}

/// open (snapshot with one output, complete), then live batch withdrawing it.
fn open_body(s: &Value) -> Vec<u8> {
    let g = fixture::group("snap-1", 10, vec![fixture::output("so-1", s, &txid(), 0, Some("{\"v\":1}"))]);
    fixture::batch("sess", s, "snapshot", vec![g], "c1", true, 10, 12)
}

fn live_body(s: &Value, seq: u64, id: &str, obs: Vec<Value>, cursor: &str) -> Vec<u8> {
    fixture::batch("sess", s, "live", vec![fixture::group(id, seq, obs)], cursor, true, seq, seq)
}

#[test]
fn commit_advances_cursor_and_publishes_after_snapshot() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    assert!(fx.s().checkpoint(&key).unwrap().is_none());
    let g = fx.s().begin_generation(&key, Some("label-1")).unwrap();
    assert_eq!(g, 0);
    assert_eq!(fx.s().source_for_label("label-1").unwrap(), Some(key.clone()));
    let out = fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    assert_eq!((out.applied, out.accepted, out.swapped), (1, 1, true));
    let cp = fx.s().checkpoint(&key).unwrap().unwrap();
    assert_eq!((cp.cursor.as_deref(), cp.through, cp.snapshot_complete), (Some("c1"), 10, true));
    let m = fx.s().members(&key).unwrap();
    assert_eq!(m.len(), 1);
    assert!(m[0].row.present && !m[0].stale);
    assert_eq!(m[0].row.context.as_ref().unwrap()["bytes"], "eyJ2IjoxfQ==");

    let w = fixture::withdraw("lw-13", &s, &txid(), 0);
    let out = fx.s().commit_batch(&key, g, Some("c1"), &live_body(&s, 13, "l13", vec![w], "c2"), &opts()).unwrap();
    assert_eq!((out.applied, out.accepted), (1, 1));
    let m = fx.s().members(&key).unwrap();
    assert!(!m[0].row.present);
    assert_eq!((m[0].row.sequence, m[0].row.observation_id.as_str()), (13, "lw-13"));
    assert!(out.revision > 0);
}

#[test]
fn first_generation_is_not_published_until_its_snapshot_completes() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    let p1 = fixture::batch("sess", &s, "snapshot", vec![fixture::group("p1", 7, vec![fixture::output("o1", &s, &txid(), 0, None)])], "c1", false, 7, 7);
    fx.s().commit_batch(&key, g, None, &p1, &opts()).unwrap();
    assert!(fx.s().members(&key).unwrap().is_empty());
    let partial = fx.s().partial_members(&key).unwrap();
    assert_eq!(partial.len(), 1);
    assert!(partial[0].partial);
    let p2 = fixture::batch("sess", &s, "snapshot", vec![], "c2", true, 7, 7);
    let out = fx.s().commit_batch(&key, g, Some("c1"), &p2, &opts()).unwrap();
    assert!(out.swapped);
    assert_eq!(fx.s().members(&key).unwrap().len(), 1);
    assert!(fx.s().partial_members(&key).unwrap().is_empty());
}

#[test]
fn replay_of_a_committed_batch_is_a_no_op_even_after_restart() {
    let mut fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    let live = live_body(&s, 13, "l13", vec![fixture::withdraw("lw-13", &s, &txid(), 0)], "c2");
    fx.s().commit_batch(&key, g, Some("c1"), &live, &opts()).unwrap();
    let rev = fx.s().revision().unwrap();
    fx.restart();
    // The same read (session, c1) answered again with the same bytes.
    let out = fx.s().commit_batch(&key, g, Some("c1"), &live, &opts()).unwrap();
    assert_eq!((out.applied, out.duplicates, out.accepted, out.revision), (0, 1, 0, rev));
    // The open retried with the same requestId returns the saved first batch.
    let out = fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    assert_eq!((out.applied, out.duplicates), (0, 1));
    assert_eq!(fx.s().checkpoint(&key).unwrap().unwrap().cursor.as_deref(), Some("c2"));
    assert!(!fx.s().members(&key).unwrap()[0].row.present, "the replayed output did not revive the row");
    assert_eq!(fx.s().state(&key).unwrap().received, 2);
}

#[test]
fn a_cursor_whose_batch_was_not_committed_is_refused() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    // c-unknown was never committed: a batch read from it cannot be committed.
    let b = live_body(&s, 13, "l13", vec![fixture::output("o13", &s, &txid(), 1, None)], "c2");
    let e = fx.s().commit_batch(&key, g, Some("c-unknown"), &b, &opts()).unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    // Two reads from the same committed cursor: only the first commit advances it.
    fx.s().commit_batch(&key, g, Some("c1"), &b, &opts()).unwrap();
    let b2 = live_body(&s, 14, "l14", vec![fixture::output("o14", &s, &txid(), 2, None)], "c3");
    let e = fx.s().commit_batch(&key, g, Some("c1"), &b2, &opts()).unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
    assert_eq!(fx.s().checkpoint(&key).unwrap().unwrap().cursor.as_deref(), Some("c2"));
    // An empty live poll against a stale cursor would move the cursor back: refused.
    let empty = fixture::batch("sess", &s, "live", vec![], "c9", true, 20, 20);
    assert_eq!(fx.s().commit_batch(&key, g, Some("c1"), &empty, &opts()).unwrap_err().code, ErrorCode::Conflict);
}

#[test]
fn invalid_batches_leave_nothing_behind() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    let rev = fx.s().revision().unwrap();
    let bad = live_body(&s, 9, "l9", vec![fixture::output("o9", &s, &txid(), 1, None)], "c2");
    assert_eq!(fx.s().commit_batch(&key, g, Some("c1"), &bad, &opts()).unwrap_err().code, ErrorCode::Invalid);
    let big = live_body(&s, 13, "l13", vec![fixture::output("o13", &s, &txid(), 1, None)], "c2");
    let small = CommitOptions { max_bytes: big.len() - 1, ..opts() };
    assert_eq!(fx.s().commit_batch(&key, g, Some("c1"), &big, &small).unwrap_err().code, ErrorCode::Limited);
    assert_eq!(fx.s().commit_batch(&key, g, Some("c1"), b"{\"version\":1", &opts()).unwrap_err().code, ErrorCode::Invalid);
    assert_eq!(fx.s().revision().unwrap(), rev);
    assert_eq!(fx.s().checkpoint(&key).unwrap().unwrap().cursor.as_deref(), Some("c1"));
    // The same batch within limits then commits.
    fx.s().commit_batch(&key, g, Some("c1"), &big, &opts()).unwrap();
}

#[test]
fn equivocation_is_quarantined_and_invalidates_continuity() {
    let mut fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    let live = live_body(&s, 13, "l13", vec![fixture::output("o13", &s, &txid(), 1, None)], "c2");
    fx.s().commit_batch(&key, g, Some("c1"), &live, &opts()).unwrap();
    // Same group id and observation id, different bytes.
    let forged = live_body(&s, 13, "l13", vec![fixture::output("o13", &s, &txid(), 2, None)], "c2");
    let e = fx.s().commit_batch(&key, g, Some("c1"), &forged, &opts()).unwrap_err();
    assert_eq!(e.code, ErrorCode::Equivocation);
    fx.restart();
    let st = fx.s().state(&key).unwrap();
    assert_eq!((st.invalidated.as_deref(), st.quarantined, st.stale), (Some("equivocation"), 1, true));
    // Membership kept the first claim; the forged one did not overwrite it.
    let m = fx.s().members(&key).unwrap();
    assert!(m.iter().any(|r| r.row.outpoint.output_index == 1 && r.row.present));
    assert!(!m.iter().any(|r| r.row.outpoint.output_index == 2));
    // The generation no longer receives; a new generation is required.
    let next = live_body(&s, 14, "l14", vec![], "c3");
    assert_eq!(fx.s().commit_batch(&key, g, Some("c2"), &next, &opts()).unwrap_err().code, ErrorCode::ResetRequired);
    assert!(fx.s().checkpoint(&key).unwrap().unwrap().invalidated.is_some());
    let g1 = fx.s().begin_generation(&key, None).unwrap();
    assert_eq!(g1, 1);
    assert!(fx.s().checkpoint(&key).unwrap().unwrap().invalidated.is_none());
}

#[test]
fn observation_id_reused_in_another_group_is_equivocation() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    let b = live_body(&s, 13, "l13", vec![fixture::output("so-1", &s, &txid(), 0, Some("{\"v\":1}"))], "c2");
    assert_eq!(fx.s().commit_batch(&key, g, Some("c1"), &b, &opts()).unwrap_err().code, ErrorCode::Equivocation);
}

#[test]
fn reset_keeps_old_generation_stale_then_swaps_removing_only_unseen() {
    let fx = Fx::new();
    let s0 = sc("02aa", "e1");
    let key = fixture::source_key(&s0);
    let g0 = fx.s().begin_generation(&key, None).unwrap();
    let open = fixture::batch(
        "sess",
        &s0,
        "snapshot",
        vec![fixture::group(
            "snap",
            10,
            vec![fixture::output("a", &s0, &txid(), 0, None), fixture::output("b", &s0, &txid(), 1, None)],
        )],
        "c1",
        true,
        10,
        10,
    );
    fx.s().commit_batch(&key, g0, None, &open, &opts()).unwrap();
    // reset-required: a new generation under a new epoch and session.
    let s1 = sc("02aa", "e2");
    let g1 = fx.s().begin_generation(&key, None).unwrap();
    let p1 = fixture::batch("sess2", &s1, "snapshot", vec![fixture::group("n1", 3, vec![fixture::output("x", &s1, &txid(), 1, None)])], "d1", false, 3, 3);
    fx.s().commit_batch(&key, g1, None, &p1, &opts()).unwrap();
    let st = fx.s().state(&key).unwrap();
    assert_eq!((st.current_generation, st.pending_generation, st.stale), (Some(g0), Some(g1), true));
    let old = fx.s().members(&key).unwrap();
    assert_eq!(old.len(), 2);
    assert!(old.iter().all(|m| m.stale && m.row.present && m.generation == g0));
    // Late work of the superseded generation changes nothing.
    let late = live_body(&s0, 11, "late", vec![fixture::withdraw("lw", &s0, &txid(), 0)], "c2");
    let out = fx.s().commit_batch(&key, g0, Some("c1"), &late, &opts()).unwrap();
    assert!(out.ignored);
    assert!(fx.s().members(&key).unwrap().iter().all(|m| m.row.present));
    // The replacement completes: one revision swaps it in; output 0 (unseen) is gone.
    let p2 = fixture::batch("sess2", &s1, "snapshot", vec![], "d2", true, 3, 3);
    let out = fx.s().commit_batch(&key, g1, Some("d1"), &p2, &opts()).unwrap();
    assert!(out.swapped);
    let m = fx.s().members(&key).unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!((m[0].row.outpoint.output_index, m[0].generation, m[0].stale), (1, g1, false));
    let out = fx.s().commit_batch(&key, g0, Some("c1"), &late, &opts()).unwrap();
    assert!(out.ignored, "a retired generation stays fenced");
}

#[test]
fn two_sources_keep_separate_receipts_and_memberships_for_one_outpoint() {
    let mut fx = Fx::new();
    let sa = sc("02aa", "e1");
    let sb = sc("02bb", "e1");
    let (ka, kb) = (fixture::source_key(&sa), fixture::source_key(&sb));
    let ga = fx.s().begin_generation(&ka, None).unwrap();
    let gb = fx.s().begin_generation(&kb, None).unwrap();
    assert_eq!((ga, gb), (0, 0));
    // Both report the same outpoint under the same observation id.
    fx.s().commit_batch(&ka, ga, None, &open_body(&sa), &opts()).unwrap();
    fx.s().commit_batch(&kb, gb, None, &open_body(&sb), &opts()).unwrap();
    // Source a withdraws; b still asserts it.
    fx.s().commit_batch(&ka, ga, Some("c1"), &live_body(&sa, 13, "l13", vec![fixture::withdraw("w", &sa, &txid(), 0)], "c2"), &opts()).unwrap();
    fx.restart();
    let (ma, mb) = (fx.s().members(&ka).unwrap(), fx.s().members(&kb).unwrap());
    assert_eq!((ma.len(), mb.len()), (1, 1));
    assert_eq!(ma[0].row.outpoint, mb[0].row.outpoint);
    assert!(!ma[0].row.present && mb[0].row.present);
    assert_eq!((fx.s().state(&ka).unwrap().received, fx.s().state(&kb).unwrap().received), (2, 1));
    // The batch of one source cannot be committed to the other.
    let e = fx.s().commit_batch(&kb, gb, Some("c1"), &live_body(&sa, 14, "l14", vec![], "c3"), &opts()).unwrap_err();
    assert_eq!(e.code, ErrorCode::Invalid);
}

#[test]
fn pending_group_blocks_later_membership_but_not_receipt() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &fixture::batch("sess", &s, "snapshot", vec![], "c1", true, 1, 1), &opts()).unwrap();
    let unverified = CommitOptions { membership: Membership::Manual, ..opts() };
    fx.s().commit_batch(&key, g, Some("c1"), &live_body(&s, 2, "l2", vec![fixture::output("o2", &s, &txid(), 0, None)], "c2"), &unverified).unwrap();
    let out = fx.s().commit_batch(&key, g, Some("c2"), &live_body(&s, 3, "l3", vec![fixture::output("o3", &s, &txid(), 1, None)], "c3"), &opts()).unwrap();
    assert_eq!((out.applied, out.accepted), (1, 0));
    assert_eq!(fx.s().checkpoint(&key).unwrap().unwrap().cursor.as_deref(), Some("c3"), "receipt advanced");
    assert!(fx.s().members(&key).unwrap().is_empty());
    let st = fx.s().state(&key).unwrap();
    assert_eq!(st.pending_count, 2);
    assert_eq!(st.pending_groups.iter().map(|p| p.group_id.as_str()).collect::<Vec<_>>(), ["l2", "l3"]);
    let out = fx.s().mark_verified(&key, g, "l2").unwrap();
    assert_eq!(out.accepted, 2);
    assert_eq!(fx.s().members(&key).unwrap().len(), 2);
    assert_eq!(fx.s().mark_verified(&key, g, "nope").unwrap_err().code, ErrorCode::Invalid);
}

#[test]
fn unknown_source_or_generation_is_invalid_and_second_open_of_a_path_fails() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    assert_eq!(fx.s().commit_batch(&key, 0, None, &open_body(&s), &opts()).unwrap_err().code, ErrorCode::Invalid);
    fx.s().begin_generation(&key, None).unwrap();
    assert_eq!(fx.s().commit_batch(&key, 5, None, &open_body(&s), &opts()).unwrap_err().code, ErrorCode::Invalid);
    let bad = SourceKey { query_digest: "xyz".into(), ..key };
    assert_eq!(fx.s().begin_generation(&bad, None).unwrap_err().code, ErrorCode::Invalid);
    let e = ClientDb::open(fx.dir.path().join("s")).err().expect("one open store per path");
    assert_eq!(e.code, ErrorCode::Unavailable);
}

/// BRC-193 §4: two cursors are never advanced concurrently for one branch. Many
/// threads commit different batches read from the same committed cursor; exactly one
/// wins and the rest are refused.
#[test]
fn concurrent_commits_from_one_cursor_advance_it_once() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    let store = fx.s();
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8u32)
            .map(|i| {
                let (s, key) = (s.clone(), key.clone());
                scope.spawn(move || {
                    let seq = 20 + u64::from(i);
                    let body = live_body(&s, seq, &format!("l{i}"), vec![fixture::output(&format!("o{i}"), &s, &txid(), i + 1, None)], &format!("c-{i}"));
                    store.commit_batch(&key, g, Some("c1"), &body, &opts())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(results.iter().filter_map(|r| r.as_ref().err()).all(|e| e.code == ErrorCode::Conflict));
    assert_eq!(fx.s().state(&key).unwrap().received, 2);
    assert_eq!(fx.s().members(&key).unwrap().len(), 2);
}

/// BRC-193 §5, §9: a provider that changes the client's access partition serves the same
/// source under a new generation. The old generation's rows stay listed, stale, while the
/// replacement snapshot arrives; its acceptance swaps them in one commit and retires the old
/// generation; batches keep their generation's access.
#[test]
fn an_access_change_is_a_new_generation_of_the_same_source() {
    let mut fx = Fx::new();
    let wide = fixture::scope("02aa", "ls_notes", "q", "partition-wide", "e1");
    let narrow = fixture::scope("02aa", "ls_notes", "q", "partition-narrow", "e1");
    let key = fixture::source_key(&wide);
    assert_eq!(fixture::source_key(&narrow), key, "access is not part of the source");
    let g0 = fx.s().begin_generation(&key, Some("follow")).unwrap();
    let open = fixture::batch(
        "sess-w",
        &wide,
        "snapshot",
        vec![fixture::group("w", 10, vec![fixture::output("a", &wide, &txid(), 0, None), fixture::output("b", &wide, &txid(), 1, None)])],
        "w1",
        true,
        10,
        10,
    );
    fx.s().commit_batch(&key, g0, None, &open, &opts()).unwrap();
    assert_eq!(fx.s().checkpoint(&key).unwrap().unwrap().access.as_deref(), Some("partition-wide"));
    // Inside a generation the access cannot change.
    let moved = live_body(&narrow, 11, "l11", vec![], "w2");
    let e = fx.s().commit_batch(&key, g0, Some("w1"), &moved, &opts()).unwrap_err();
    assert_eq!(e.code, ErrorCode::Invalid);

    // The provider's policy narrowed the partition (reset-required): a new generation.
    let g1 = fx.s().begin_generation(&key, Some("follow")).unwrap();
    assert_eq!(g1, g0 + 1);
    let page = fixture::batch("sess-n", &narrow, "snapshot", vec![fixture::group("n", 12, vec![fixture::output("x", &narrow, &txid(), 1, None)])], "n1", false, 12, 12);
    let out = fx.s().commit_batch(&key, g1, None, &page, &opts()).unwrap();
    assert!(!out.swapped);
    fx.restart();
    let st = fx.s().state(&key).unwrap();
    assert_eq!((st.current_generation, st.pending_generation, st.stale), (Some(g0), Some(g1), true));
    let old = fx.s().members(&key).unwrap();
    assert_eq!(old.len(), 2);
    assert!(old.iter().all(|m| m.stale && m.row.present && m.generation == g0), "the old rows are listed, stale");
    let partial = fx.s().partial_members(&key).unwrap();
    assert_eq!(partial.iter().map(|m| (m.row.outpoint.output_index, m.generation, m.partial)).collect::<Vec<_>>(), [(1, g1, true)]);
    let cp = fx.s().checkpoint(&key).unwrap().unwrap();
    assert_eq!((cp.generation, cp.access.as_deref()), (g1, Some("partition-narrow")));
    assert_eq!(fx.s().source_for_label("follow").unwrap(), Some(key.clone()));

    // The replacement snapshot is accepted: one commit swaps it in and retires the old one.
    let last = fixture::batch("sess-n", &narrow, "snapshot", vec![], "n2", true, 12, 12);
    let out = fx.s().commit_batch(&key, g1, Some("n1"), &last, &opts()).unwrap();
    assert!(out.swapped);
    let st = fx.s().state(&key).unwrap();
    assert_eq!((st.current_generation, st.pending_generation, st.stale), (Some(g1), None, false));
    let now = fx.s().members(&key).unwrap();
    assert_eq!(now.iter().map(|m| (m.row.outpoint.output_index, m.generation, m.stale)).collect::<Vec<_>>(), [(1, g1, false)]);
    assert!(fx.s().partial_members(&key).unwrap().is_empty());
    // Retired: late work of the old access is a no-op, now and after a restart.
    let late = live_body(&wide, 11, "late", vec![fixture::withdraw("lw", &wide, &txid(), 1)], "w2");
    assert!(fx.s().commit_batch(&key, g0, Some("w1"), &late, &opts()).unwrap().ignored);
    fx.restart();
    assert!(fx.s().commit_batch(&key, g0, Some("w1"), &late, &opts()).unwrap().ignored);
    assert_eq!(fx.s().members(&key).unwrap().len(), 1);
    // The store-wide membership lists the source once, under its new access.
    let chain = serde_json::from_value(narrow["chain"].clone()).unwrap();
    let rows = fx.s().memberships_json(&chain).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["scope"]["access"], "partition-narrow");
    assert_eq!(rows[0]["generation"], g1.to_string());
}

#[test]
fn opening_an_existing_store_writes_nothing() {
    // Only a new file gets a commit at open (its table); an existing store opens with reads,
    // so an open costs no sync and leaves the file as it was.
    let mut fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    let file = fx.dir.path().join("s").join(overlay_lookup_live::client::db::FILE);
    fx.restart();
    let before = std::fs::read(&file).unwrap();
    fx.restart();
    fx.restart();
    assert!(before == std::fs::read(&file).unwrap(), "reopening changed {}", file.display());
    assert_eq!(fx.s().checkpoint(&key).unwrap().unwrap().cursor.as_deref(), Some("c1"));
}

#[test]
fn space_usage_counts_every_row_once() {
    let fx = Fx::new();
    let s = sc("02aa", "e1");
    let key = fixture::source_key(&s);
    let g = fx.s().begin_generation(&key, None).unwrap();
    fx.s().commit_batch(&key, g, None, &open_body(&s), &opts()).unwrap();
    let rows = fx.s().raw_rows().unwrap();
    let usage = fx.s().space_usage().unwrap();
    assert_eq!(usage.values().map(|(n, _)| n).sum::<u64>(), rows.len() as u64);
    assert_eq!(usage.values().map(|(_, b)| b).sum::<u64>(), rows.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum::<u64>());
    assert_eq!(usage.get("R").map(|(n, _)| *n), Some(1), "one group record: {usage:?}");
}
