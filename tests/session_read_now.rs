//! The synchronous caught-up read (`Provider::read_now`): it answers exactly what the
//! async read answers, and only for reads that neither wait, write nor examine a
//! group; every other read is left (None) to `read_into`, which then answers it.

mod session_common;

use std::collections::BTreeMap;

use overlay_lookup_live::select::AttrValue;
use overlay_lookup_live::session::{CancelToken, Caller, Response};
use overlay_lookup_live::store::{Change, Outpoint};
use serde_json::{json, Value};

use session_common::{error_code, parse, world, World};

fn body(session: &str, cursor: &str, wait_ms: u32) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 1, "session": session, "cursor": cursor,
        "limits": {"maxBytes": 65536, "maxObservations": 100, "waitMs": wait_ms}
    }))
    .unwrap()
}

async fn read_async(w: &World, caller: &Caller, body: &[u8], access: &str) -> Response {
    w.provider.read(body.to_vec(), caller.clone(), access.into(), CancelToken::new()).await
}

fn same(a: &Response, b: &Response) {
    assert_eq!(a.status, b.status);
    let (x, y): (Value, Value) = (serde_json::from_slice(&a.body).unwrap(), serde_json::from_slice(&b.body).unwrap());
    assert_eq!(x, y);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caught_up_read_is_answered_now_and_as_the_async_read_answers_it() {
    let mut w = world();
    w.admit(1);
    let (caller, session, cursor) = w.open("alice", 1);
    // The open ran the snapshot to completion at highWater; its cursor is caught up.
    let b = body(&session, &cursor, 0);
    let now = w.provider.read_now(&b, &caller, "public").expect("a caught-up read qualifies");
    let batch = parse(&now);
    assert_eq!(batch["groups"].as_array().unwrap().len(), 0);
    assert_eq!(batch["cursor"], cursor.as_str(), "nothing new: the cursor stays");
    same(&now, &read_async(&w, &caller, &b, "public").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_that_would_examine_a_group_or_wait_are_left_to_the_async_path() {
    let mut w = world();
    let (caller, session, cursor) = w.open("alice", 1);
    assert!(w.provider.read_now(&body(&session, &cursor, 5), &caller, "public").is_none(), "a read that may wait");
    w.admit(1);
    let b = body(&session, &cursor, 0);
    assert!(w.provider.read_now(&b, &caller, "public").is_none(), "a group was published after the cursor");
    let batch = parse(&read_async(&w, &caller, &b, "public").await);
    assert_eq!(batch["groups"].as_array().unwrap().len(), 1, "the async read delivers it");
    let next = body(&session, batch["cursor"].as_str().unwrap(), 0);
    assert!(w.provider.read_now(&next, &caller, "public").is_some(), "caught up again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_and_writes_are_left_to_the_async_path() {
    let w = world();
    let (caller, session, cursor) = w.open("alice", 1);
    let b = body(&session, &cursor, 0);
    let bob = Caller { principal: "bob".into(), authenticated: true };
    for (what, bad, who) in [
        ("not JSON", b"{".to_vec(), &caller),
        ("a forged cursor", body(&session, "AAAA", 0), &caller),
        ("another principal's session", b.clone(), &bob),
    ] {
        assert!(w.provider.read_now(&bad, who, "public").is_none(), "{what}");
        assert_ne!(read_async(&w, who, &bad, "public").await.status, 200, "{what}: the async read refuses it");
    }
    // Another access partition ends the session (reset-required), which is a write: not taken here.
    assert!(w.provider.read_now(&b, &caller, "gold").is_none());
    assert_eq!(error_code(&read_async(&w, &caller, &b, "gold").await), "reset-required");
    assert!(w.provider.read_now(&b, &caller, "public").is_none(), "the session has ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_session_and_a_shut_down_provider_are_left_to_the_async_path() {
    let w = world();
    let (caller, session, cursor) = w.open("alice", 1);
    let (carol, other, other_cursor) = w.open("carol", 2);
    let close = serde_json::to_vec(&json!({"version": 1, "session": session})).unwrap();
    assert_eq!(w.provider.close(&close, &caller).status, 200);
    assert!(w.provider.read_now(&body(&session, &cursor, 0), &caller, "public").is_none());
    assert_eq!(error_code(&read_async(&w, &caller, &body(&session, &cursor, 0), "public").await), "expired");
    assert!(w.provider.read_now(&body(&other, &other_cursor, 0), &carol, "public").is_some());
    w.provider.shut_down();
    assert!(w.provider.read_now(&body(&other, &other_cursor, 0), &carol, "public").is_none());
    assert_eq!(error_code(&read_async(&w, &carol, &body(&other, &other_cursor, 0), "public").await), "unavailable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_timer_is_applied_by_the_async_path_not_here() {
    let w = world();
    let (caller, session, cursor) = w.open("alice", 1);
    // A row that expired long ago: its timer is due at once.
    let change = Change::Admit {
        service: "svc".into(),
        outpoint: Outpoint { txid: [7; 32], output_index: 0 },
        topic: "tm".into(),
        attributes: BTreeMap::from([("k".to_string(), AttrValue::Int(1))]),
        beef: b"beef-expiring".to_vec(),
        context: None,
        expires_at: Some(1),
    };
    w.provider.store().commit(vec![change]).unwrap();
    let b = body(&session, &cursor, 0);
    assert!(w.provider.read_now(&b, &caller, "public").is_none());
    let batch = parse(&read_async(&w, &caller, &b, "public").await);
    let next = body(&session, batch["cursor"].as_str().unwrap(), 0);
    // The async read applied the expiry (a committed group); caught up now, no timer left.
    let high = w.provider.store().high_water();
    assert!(high >= 2, "the admission and its expiry are both published (highWater {high})");
    let mut cursor = next;
    for _ in 0..4 {
        if let Some(r) = w.provider.read_now(&cursor, &caller, "public") {
            assert_eq!(parse(&r)["groups"].as_array().unwrap().len(), 0);
            return;
        }
        let b = parse(&read_async(&w, &caller, &cursor, "public").await);
        cursor = body(&session, b["cursor"].as_str().unwrap(), 0);
    }
    panic!("the read never caught up after the expiry");
}
