//! Groups bounded by the provider's own limits and expiry applied by the store's timer
//! (BRC-193 §3, §8; issue 21 items 3–5), on real sled stores.

mod session_common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use overlay_lookup_live::session::{Caller, Caps, Provider};
use overlay_lookup_live::store::{Change, Outpoint, RemoveReason, Store, StoreError};
use overlay_lookup_live::wire::Limits;
use serde_json::{json, Value};

fn provider(dir: &Path, max_observations: u32, max_bytes: u32) -> Arc<Provider> {
    session_common::provider_with_limits(dir, Caps::default(), Limits::provider(max_bytes, max_observations, 25_000).unwrap())
}

fn outpoint(n: u32) -> Outpoint {
    let mut txid = [0u8; 32];
    txid[..4].copy_from_slice(&n.to_be_bytes());
    Outpoint { txid, output_index: 0 }
}

fn admit(n: u32, beef_len: usize, expires_at: Option<u64>) -> Change {
    Change::Admit {
        service: "svc".into(),
        outpoint: outpoint(n),
        topic: "tm".into(),
        attributes: Default::default(),
        beef: vec![n as u8; beef_len.max(1)],
        context: None,
        expires_at,
    }
}

fn caller() -> Caller {
    Caller { principal: "alice".into(), authenticated: true }
}

/// Opens a session selecting everything and returns (session, live cursor).
fn open(p: &Provider) -> (String, String) {
    let body = serde_json::to_vec(&json!({
        "version": 1, "requestId": "open-request-limits-0001", "service": "svc", "query": {},
        "limits": {"maxBytes": 65536, "maxObservations": 100, "waitMs": 0}
    }))
    .unwrap();
    let res = p.open(&body, &caller(), "public", &json!({"where": {"all": true}}));
    let b: Value = serde_json::from_slice(&res.body).unwrap();
    assert_eq!(b["snapshotComplete"], true, "{b}");
    (b["session"].as_str().unwrap().into(), b["cursor"].as_str().unwrap().into())
}

async fn read(p: &Arc<Provider>, session: &str, cursor: &str, max_observations: u32) -> (u16, Value) {
    let body = serde_json::to_vec(&json!({
        "version": 1, "session": session, "cursor": cursor,
        "limits": {"maxBytes": 4 * 1024 * 1024, "maxObservations": max_observations, "waitMs": 0}
    }))
    .unwrap();
    let r = p.read(body, caller(), "public".into(), overlay_lookup_live::session::CancelToken::new()).await;
    (r.status, serde_json::from_slice(&r.body).unwrap())
}

/// (sequence, number of changes, removal reasons) of every log group after `after`.
fn log(store: &Store, after: u64) -> Vec<(u64, usize, Vec<Option<RemoveReason>>)> {
    store
        .log_after(after, u64::MAX)
        .map(|g| {
            let (seq, g) = g.unwrap();
            (seq, g.changes.len(), g.changes.iter().map(|c| c.reason).collect())
        })
        .collect()
}

#[test]
fn expiries_due_together_are_split_into_groups_the_provider_can_serve() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), 10, 4 * 1024 * 1024);
    let at = p.now() + 1000;
    for chunk in (0..30).collect::<Vec<u32>>().chunks(10) {
        p.store().commit(chunk.iter().map(|n| admit(*n, 100, Some(at))).collect()).unwrap();
    }
    let before = p.store().high_water();
    let last = p.store().apply_expiries(at).unwrap().unwrap();
    let groups = log(p.store(), before);
    assert_eq!(groups.iter().map(|g| g.1).collect::<Vec<_>>(), vec![10, 10, 10]);
    assert_eq!(groups.last().unwrap().0, last);
    assert!(groups.iter().all(|g| g.2.iter().all(|r| *r == Some(RemoveReason::Expired))));
}

#[test]
fn a_group_no_session_could_be_served_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), 5, 64 * 1024);
    let hw = p.store().high_water();
    let six: Vec<Change> = (0..6).map(|n| admit(n, 10, None)).collect();
    let e = p.store().commit(six.clone()).unwrap_err();
    assert!(matches!(e, StoreError::TooLarge(_)), "{e}");
    assert!(e.to_string().starts_with("permanent-group: "), "{e}");
    // Bytes: two 40 KB outputs cannot share a 64 KiB batch; one can.
    let e = p.store().commit(vec![admit(10, 40_000, None), admit(11, 40_000, None)]).unwrap_err();
    assert!(matches!(e, StoreError::TooLarge(_)), "{e}");
    assert_eq!(p.store().high_water(), hw);
    assert!(p.store().commit(six[..5].to_vec()).unwrap().is_some());
    assert!(p.store().commit(vec![admit(10, 40_000, None)]).unwrap().is_some());
    // A divisible commit splits where the budget needs it, and a change that cannot fit alone
    // fails the whole call.
    let before = p.store().high_water();
    p.store().commit_divisible((20..32).map(|n| admit(n, 10, None)).collect()).unwrap();
    assert_eq!(log(p.store(), before).iter().map(|g| g.1).collect::<Vec<_>>(), vec![5, 5, 2]);
    // Re-admissions with other attributes are changes too (a narrower selection sees them
    // enter or leave), and are split alike; identical ones are no change.
    let before = p.store().high_water();
    let changed: Vec<Change> = (20..32)
        .map(|n| match admit(n, 10, None) {
            Change::Admit { service, outpoint, topic, beef, context, expires_at, .. } => Change::Admit {
                service, outpoint, topic, beef, context, expires_at,
                attributes: [("k".to_string(), overlay_lookup_live::select::AttrValue::Int(n as i64))].into(),
            },
            other => other,
        })
        .collect();
    p.store().commit_divisible(changed.clone()).unwrap();
    assert_eq!(log(p.store(), before).iter().map(|g| g.1).collect::<Vec<_>>(), vec![5, 5, 2]);
    assert_eq!(p.store().commit_divisible(changed).unwrap(), None);
    let before = p.store().high_water();
    let e = p.store().commit_divisible(vec![admit(40, 10, None), admit(41, 70_000, None)]).unwrap_err();
    assert!(matches!(e, StoreError::TooLarge(_)), "{e}");
    assert_eq!(p.store().high_water(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_committed_under_larger_limits_is_permanent_group_for_every_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (session, cursor) = {
        let p = provider(dir.path(), 1024, 4 * 1024 * 1024);
        let opened = open(&p);
        p.store().commit((0..6).map(|n| admit(n, 10, None)).collect()).unwrap();
        p.store().close().unwrap();
        opened
    };
    let p = provider(dir.path(), 5, 4 * 1024 * 1024);
    for max_observations in [1, 5, 6, 1024] {
        let (status, body) = read(&p, &session, &cursor, max_observations).await;
        assert_eq!(status, 413, "{body}");
        assert_eq!(body["error"]["limit"], json!({"kind": "permanent-group"}), "{body}");
    }
    p.store().close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timer_commits_a_due_expiry_without_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), 1024, 4 * 1024 * 1024);
    // The timer sleeps until the far timer; committing a nearer one wakes it early.
    p.store().commit(vec![admit(9, 10, Some(p.now() + 3600))]).unwrap();
    let due = p.now() + 1;
    let seq = p.store().commit(vec![admit(1, 10, Some(due))]).unwrap().unwrap();
    let mut rx = p.store().subscribe();
    rx.borrow_and_update();
    // A liveness bound, not a timing assertion: the timer is due within about two seconds.
    tokio::time::timeout(Duration::from_secs(20), rx.changed()).await.expect("the timer committed the expiry").unwrap();
    let groups = log(p.store(), seq);
    assert_eq!(groups, vec![(seq + 1, 1, vec![Some(RemoveReason::Expired)])]);
    p.store().close().unwrap();
}

#[test]
fn a_due_expiry_is_numbered_before_a_group_committed_after_its_due_time() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), 1024, 4 * 1024 * 1024);
    let at = p.now() + 100;
    let first = p.store().commit(vec![admit(1, 10, Some(at))]).unwrap().unwrap();
    p.advance_clock_ms(200_000);
    let later = p.store().commit(vec![admit(2, 10, None)]).unwrap().unwrap();
    let groups = log(p.store(), first);
    assert_eq!(groups, vec![(first + 1, 1, vec![Some(RemoveReason::Expired)]), (later, 1, vec![None])]);
    assert_eq!(later, first + 2);
}

#[test]
fn closing_stops_the_timer_and_the_directory_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), 1024, 4 * 1024 * 1024);
    p.store().commit(vec![admit(1, 10, Some(p.now() + 3600))]).unwrap();
    p.store().close().unwrap();
    drop(p);
    let p = provider(dir.path(), 1024, 4 * 1024 * 1024);
    assert_eq!(p.store().high_water(), 1);
}
