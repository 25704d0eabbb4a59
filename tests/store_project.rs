//! Projection of committed log groups onto (service, selection): BRC-193 §3 membership
//! transitions, with groups produced by real commits and read back from the log.
mod store_common;

use overlay_lookup_live::select::Selection;
use overlay_lookup_live::store::{BlobRef, Context, LogGroup, Projected, RemoveReason, Store};
use serde_json::json;
use store_common::*;

fn sha(b: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(b).into()
}

/// Commit `changes` and return the committed group as read back from the log.
fn commit_group(s: &Store, changes: Vec<overlay_lookup_live::store::Change>) -> LogGroup {
    let seq = s.commit(changes).unwrap().expect("an effective change");
    let (got, g) = s.log_after(seq - 1, seq).next().unwrap().unwrap();
    assert_eq!(got, seq);
    g
}

/// An output observation of row `n` whose evidence `beef` was stored by group `at`.
fn out(n: u32, beef: &[u8], at: u64, ctx: Option<&str>) -> Projected {
    Projected::Output {
        outpoint: op(n),
        topic: "tm".into(),
        beef: BlobRef { hash: sha(beef), at },
        context: ctx.map(|c| Context { schema: "urn:test:ctx".into(), bytes: c.as_bytes().to_vec() }),
    }
}

fn wd(n: u32, reason: &'static str) -> Projected {
    Projected::Withdraw { outpoint: op(n), reason }
}

#[test]
fn admission_of_a_selected_row_is_an_output_and_others_are_irrelevant() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let red = sel(json!({"where": {"eq": ["color", "red"]}}));
    let g = commit_group(
        &s,
        vec![
            admit_full("ls", 1, "tm", json!({"color": "red"}), beef(1), Some("c1"), None),
            admit_full("ls", 2, "tm", json!({"color": "blue"}), beef(2), None, None),
            admit_full("other", 3, "tm", json!({"color": "red"}), beef(3), None, None),
        ],
    );
    assert_eq!(s.project(&g, "ls", &red), vec![out(1, &beef(1), 1, Some("c1"))]);
    assert_eq!(s.project(&g, "other", &red), vec![out(3, &beef(3), 1, None)]);
    let g2 = commit_group(&s, vec![admit_full("ls", 4, "tm", json!({"color": "green"}), beef(4), None, None)]);
    assert!(s.project(&g2, "ls", &red).is_empty(), "irrelevant group");
    assert!(s.project(&g2, "nobody", &Selection::all()).is_empty());
}

#[test]
fn spend_of_a_member_with_its_replacement_is_withdraw_spend_output_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    commit_group(&s, vec![admit_full("ls", 1, "tm", json!({"k": "v"}), beef(1), None, None)]);
    let g = commit_group(
        &s,
        vec![spend("ls", 1, 0x22), admit_full("ls", 2, "tm", json!({"k": "v"}), beef(2), None, None)],
    );
    let all = Selection::all();
    assert_eq!(
        s.project(&g, "ls", &all),
        vec![
            wd(1, "spent"),
            Projected::Spend { previous: op(1), spending_txid: [0x22; 32], beef: BlobRef { hash: sha(&[0x22, 1, 2, 3]), at: 2 } },
            out(2, &beef(2), 2, None),
        ]
    );
    // The spend evidence is retrievable by its hash.
    assert_eq!(s.blob(&sha(&[0x22, 1, 2, 3])).unwrap().unwrap().as_ref(), &[0x22, 1, 2, 3]);
    // A session that never selected the spent row sees neither withdraw nor spend.
    let none = sel(json!({"where": {"eq": ["k", "other"]}}));
    assert!(s.project(&g, "ls", &none).is_empty());
}

#[test]
fn eviction_not_retained_and_expiry_withdraw_with_their_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    commit_group(
        &s,
        vec![
            admit("ls", 1, json!({})),
            admit("ls", 2, json!({})),
            admit_full("ls", 3, "tm", json!({}), beef(3), None, Some(200)),
            admit_full("ls", 4, "tm", json!({}), beef(4), None, Some(100)),
            admit_full("ls", 5, "tm", json!({}), beef(5), None, Some(300)),
        ],
    );
    let all = Selection::all();
    let g = commit_group(&s, vec![remove("ls", 1, RemoveReason::Evicted), remove("ls", 2, RemoveReason::NotRetained)]);
    assert_eq!(s.project(&g, "ls", &all), vec![wd(1, "evicted"), wd(2, "removed")]);
    let seq = s.apply_expiries(250).unwrap().unwrap();
    let (_, g) = s.log_after(seq - 1, seq).next().unwrap().unwrap();
    assert_eq!(s.project(&g, "ls", &all), vec![wd(4, "expired"), wd(3, "expired")]);
}

#[test]
fn attribute_changes_move_rows_in_and_out_of_a_selection() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let hot = sel(json!({"where": {"range": ["score", {"gte": 10}]}}));
    let a = |n: u32, v: serde_json::Value| admit_full("ls", n, "tm", v, beef(n), None, None);
    commit_group(&s, vec![a(1, json!({"score": 12})), a(2, json!({"score": 3}))]);
    let g = commit_group(&s, vec![a(1, json!({"score": 5})), a(2, json!({"score": 50}))]);
    assert_eq!(s.project(&g, "ls", &hot), vec![wd(1, "not-selected"), out(2, &beef(2), 1, None)]);
    // Staying selected with the same evidence and context: nothing to say.
    let g = commit_group(&s, vec![a(2, json!({"score": 51}))]);
    assert!(s.project(&g, "ls", &hot).is_empty());
    // Under attribute order a row that loses the order attribute leaves the selection.
    let by_score = sel(json!({"where": {"all": true}, "order": {"attribute": "score"}}));
    let g = commit_group(&s, vec![a(2, json!({"other": 1}))]);
    assert_eq!(s.project(&g, "ls", &by_score), vec![wd(2, "not-selected")]);
}

#[test]
fn changed_context_or_evidence_of_a_member_is_a_new_output() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let all = Selection::all();
    commit_group(&s, vec![admit_full("ls", 1, "tm", json!({}), beef(1), Some("v1"), None)]);
    let g = commit_group(&s, vec![admit_full("ls", 1, "tm", json!({}), beef(1), Some("v2"), None)]);
    assert_eq!(s.project(&g, "ls", &all), vec![out(1, &beef(1), 1, Some("v2"))]);
    let g = commit_group(&s, vec![admit_full("ls", 1, "tm", json!({}), b"better-proof".to_vec(), Some("v2"), None)]);
    assert_eq!(s.project(&g, "ls", &all), vec![out(1, b"better-proof", 3, Some("v2"))]);
    // Only the expiry changed: a new version, but no observation.
    let g = commit_group(&s, vec![admit_full("ls", 1, "tm", json!({}), b"better-proof".to_vec(), Some("v2"), Some(9))]);
    assert!(s.project(&g, "ls", &all).is_empty());
}

#[test]
fn topic_filters_and_same_group_churn_follow_change_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let t2 = sel(json!({"where": {"topic": "t2"}}));
    let g = commit_group(
        &s,
        vec![
            admit_full("ls", 1, "t1", json!({}), beef(1), None, None),
            admit_full("ls", 2, "t2", json!({}), beef(2), None, None),
            remove("ls", 2, RemoveReason::Evicted),
            admit_full("ls", 1, "t2", json!({}), beef(1), None, None),
        ],
    );
    assert_eq!(
        s.project(&g, "ls", &t2),
        vec![
            Projected::Output { outpoint: op(2), topic: "t2".into(), beef: BlobRef { hash: sha(&beef(2)), at: 1 }, context: None },
            wd(2, "evicted"),
            Projected::Output { outpoint: op(1), topic: "t2".into(), beef: BlobRef { hash: sha(&beef(1)), at: 1 }, context: None },
        ]
    );
    // The row created and removed inside one group is in no snapshot.
    let seq = s.high_water();
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), seq), vec![op(1)]);
}

fn refresh(svc: &str, n: u32, beef: Vec<u8>) -> overlay_lookup_live::store::Change {
    overlay_lookup_live::store::Change::Refresh { service: svc.into(), outpoint: op(n), beef }
}

fn invalidate(svc: &str, ctx: &str) -> overlay_lookup_live::store::Change {
    overlay_lookup_live::store::Change::Invalidate { service: svc.into(), context_id: ctx.into(), reason: "reorg".into() }
}

fn inv(ctx: &str) -> Projected {
    Projected::Invalidated { context_id: ctx.into(), reason: "reorg".into() }
}

#[test]
fn refresh_replaces_only_the_evidence_of_a_member_as_a_new_output() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let red = sel(json!({"where": {"eq": ["color", "red"]}}));
    let g1 = commit_group(&s, vec![admit_full("ls", 1, "tm", json!({"color": "red"}), beef(1), Some("c1"), Some(4_000_000_000))]);
    let proven = b"proven evidence".to_vec();
    let g = commit_group(&s, vec![refresh("ls", 1, proven.clone())]);
    // Same topic and context, new evidence: a new output observation.
    assert_eq!(s.project(&g, "ls", &red), vec![out(1, &proven, 2, Some("c1"))]);
    // The earlier group still reads back unchanged (its evidence blob is retained).
    let (_, again) = s.log_after(0, 1).next().unwrap().unwrap();
    assert_eq!(again, g1);
    assert!(s.blob(&sha(&beef(1))).unwrap().is_some());
    // The row keeps its attributes, context and expiry: the snapshot shows the new evidence.
    let rows: Vec<_> = s.snapshot("ls", &red, s.high_water(), None).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].beef, BlobRef { hash: sha(&proven), at: 2 });
    assert_eq!(rows[0].context, Some(Context { schema: "urn:test:ctx".into(), bytes: b"c1".to_vec() }));
    assert_eq!(s.blob(&sha(&proven)).unwrap().unwrap().as_ref(), &proven[..]);
    // The expiry timer followed the row: it still expires.
    assert!(s.apply_expiries(4_000_000_000).unwrap().is_some());
}

#[test]
fn refresh_of_an_absent_row_or_with_the_same_evidence_takes_no_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    commit_group(&s, vec![admit_full("ls", 1, "tm", json!({"k": 1}), beef(1), None, None)]);
    let hw = s.high_water();
    assert_eq!(s.commit(vec![refresh("ls", 2, beef(9))]).unwrap(), None, "non-member: never admitted");
    assert_eq!(s.commit(vec![refresh("other", 1, beef(9))]).unwrap(), None, "other service");
    assert_eq!(s.commit(vec![refresh("ls", 1, beef(1))]).unwrap(), None, "same evidence");
    commit_group(&s, vec![remove("ls", 1, RemoveReason::Evicted)]);
    assert_eq!(s.commit(vec![refresh("ls", 1, beef(9))]).unwrap(), None, "removed row stays removed");
    assert_eq!(s.high_water(), hw + 1);
    assert!(s.blob(&sha(&beef(9))).unwrap().is_none(), "no blob of a no-op refresh is kept");
    assert!(s.commit(vec![overlay_lookup_live::store::Change::Refresh { service: "ls".into(), outpoint: op(1), beef: vec![] }]).is_err());
}

#[test]
fn invalidation_projects_first_to_every_session_of_its_service() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let red = sel(json!({"where": {"eq": ["color", "red"]}}));
    let blue = sel(json!({"where": {"eq": ["color", "blue"]}}));
    commit_group(
        &s,
        vec![
            admit_full("ls", 1, "tm", json!({"color": "red"}), beef(1), None, None),
            admit_full("ls", 2, "tm", json!({"color": "blue"}), beef(2), None, None),
        ],
    );
    let reproven = b"reassessed".to_vec();
    let g = commit_group(&s, vec![invalidate("ls", "chain-view/0"), refresh("ls", 1, reproven.clone())]);
    assert_eq!(s.project(&g, "ls", &red), vec![inv("chain-view/0"), out(1, &reproven, 2, None)]);
    // Whatever the selection: the chain view is under the whole collection.
    assert_eq!(s.project(&g, "ls", &blue), vec![inv("chain-view/0")]);
    assert!(s.project(&g, "other", &Selection::all()).is_empty());
    // Never a withdraw or spend: membership is unchanged.
    let hw = s.high_water();
    assert_eq!(scan_ops(&s, "ls", &Selection::all(), hw), vec![op(2), op(1)]);
    let first = s.high_water();
    assert_eq!(s.view_since().unwrap(), first, "the view begins with the invalidating group");
    commit_group(&s, vec![admit_full("ls", 3, "tm", json!({}), beef(3), None, None)]);
    assert_eq!(s.view_since().unwrap(), first, "ordinary groups do not start a view");
    // An invalidation alone is an effective group, and survives a reopen.
    let g2 = commit_group(&s, vec![invalidate("ls", "chain-view/1")]);
    assert_eq!(s.project(&g2, "ls", &red), vec![inv("chain-view/1")]);
    let seq = s.high_water();
    s.close().unwrap();
    drop(s);
    let s = reopen(dir.path());
    let (_, back) = s.log_after(seq - 1, seq).next().unwrap().unwrap();
    assert_eq!(back, g2);
    assert_eq!(s.view_since().unwrap(), seq);
    s.reset_epoch().unwrap();
    assert_eq!(s.view_since().unwrap(), 0, "a new epoch starts at view 0");
}

#[test]
fn invalidations_must_precede_row_changes_and_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let hw = s.high_water();
    assert!(s.commit(vec![refresh("ls", 1, beef(1)), invalidate("ls", "chain-view/0")]).is_err());
    assert!(s.commit(vec![invalidate("ls", "")]).is_err());
    assert!(s.commit(vec![invalidate("ls", &"x".repeat(1025))]).is_err());
    assert!(s.commit(vec![invalidate("ls", &"x".repeat(1024))]).unwrap().is_some());
    assert_eq!(s.high_water(), hw + 1);
}

#[test]
fn compaction_passes_over_invalidations_and_refreshes() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    commit_group(&s, vec![admit_full("ls", 1, "tm", json!({}), beef(1), None, None)]);
    commit_group(&s, vec![invalidate("ls", "chain-view/0"), refresh("ls", 1, beef(2))]);
    let hw = s.high_water();
    while s.compact_step(hw, 1).unwrap() {}
    assert_eq!(s.compacted_through(), hw);
    // Only the current evidence remains; the superseded blob went with its last reference.
    assert!(s.blob(&sha(&beef(1))).unwrap().is_none());
    assert!(s.blob(&sha(&beef(2))).unwrap().is_some());
    let rows: Vec<_> = s.snapshot("ls", &Selection::all(), hw, None).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].beef, BlobRef { hash: sha(&beef(2)), at: 2 });
}
