//! Access control in the provider (BRC-193 §5, §8) on real sled stores: prohibitions in
//! force during a snapshot drain, a waiting poll and the replay of an old cursor, and across a
//! restart; policy changes ending the sessions they affect with reset-required; visibility per
//! access partition sharing one observation array per (query, partition).

mod session_common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use overlay_lookup_live::select::AttrValue;
use overlay_lookup_live::session::{CancelToken, Caller, Provider, Response};
use overlay_lookup_live::store::{Change, Outpoint, RemoveReason};
use serde_json::{json, Value};

use session_common::{error_code, parse, provider_in};

fn outpoint(n: u64) -> Outpoint {
    let mut txid = [0u8; 32];
    txid[..8].copy_from_slice(&n.to_be_bytes());
    Outpoint { txid, output_index: 0 }
}

fn op_text(n: u64) -> String {
    format!("{}.0", hex::encode(outpoint(n).txid))
}

fn admit(n: u64, attrs: &[(&str, &str)]) -> Change {
    let attributes: BTreeMap<String, AttrValue> = attrs.iter().map(|(k, v)| (k.to_string(), AttrValue::Str(v.to_string()))).collect();
    Change::Admit {
        service: "svc".into(),
        outpoint: outpoint(n),
        topic: "tm".into(),
        attributes,
        beef: format!("beef-{n}").into_bytes(),
        context: None,
        expires_at: None,
    }
}

fn spend(n: u64) -> Change {
    Change::Remove { service: "svc".into(), outpoint: outpoint(n), reason: RemoveReason::Spent, spend: None }
}

fn caller(who: &str) -> Caller {
    Caller { principal: who.to_string(), authenticated: true }
}

/// Opens a session of `who` in `partition` with `selection` and pages of `page` observations.
fn open(p: &Provider, who: &str, partition: &str, selection: Value, page: u32) -> Value {
    let body = serde_json::to_vec(&json!({
        "version": 1, "requestId": format!("access-request-{who:0>8}-{}", rand_suffix()), "service": "svc", "query": {},
        "limits": {"maxBytes": 65536, "maxObservations": page, "waitMs": 0}
    }))
    .unwrap();
    parse(&p.open(&body, &caller(who), partition, &selection))
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{:016}", N.fetch_add(1, Ordering::Relaxed))
}

async fn read(p: &Arc<Provider>, who: &str, partition: &str, b: &Value, page: u32, wait_ms: u32) -> Response {
    let body = serde_json::to_vec(&json!({
        "version": 1, "session": b["session"], "cursor": b["cursor"],
        "limits": {"maxBytes": 65536, "maxObservations": page, "waitMs": wait_ms}
    }))
    .unwrap();
    p.read(body, caller(who), partition.into(), CancelToken::new()).await
}

/// `txid.outputIndex` of every output observation in a batch, in order.
fn outputs(b: &Value) -> Vec<String> {
    b["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["observations"].as_array().unwrap().iter())
        .filter(|o| o["kind"] == "output")
        .map(|o| format!("{}.{}", o["payload"]["evidence"]["txid"].as_str().unwrap(), o["payload"]["evidence"]["outputIndex"]))
        .collect()
}

fn all() -> Value {
    json!({"where": {"all": true}})
}

/// Drains a snapshot to its end; returns every batch.
async fn drain(p: &Arc<Provider>, who: &str, first: Value, page: u32) -> Vec<Value> {
    let mut out = vec![first];
    while out.last().unwrap()["snapshotComplete"] != true {
        let r = read(p, who, "public", out.last().unwrap(), page, 0).await;
        out.push(parse(&r));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prohibition_ends_a_snapshot_drain_before_the_row_is_served_and_sessions_that_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider_in(dir.path());
    for n in 1..=6 {
        p.commit(vec![admit(n, &[("team", if n == 5 { "red" } else { "blue" })])]).unwrap();
    }
    // Draining at two rows a page: rows 1-2 served, 5 still ahead.
    let draining = open(&p, "alice", "public", all(), 2);
    assert_eq!(outputs(&draining), vec![op_text(1), op_text(2)]);
    // Another session has drained past row 5 already: its snapshot holds it.
    let drained = drain(&p, "bob", open(&p, "bob", "public", all(), 2), 2).await;
    assert!(drained.iter().any(|b| outputs(b).contains(&op_text(5))));
    // A session whose selection never held row 5 keeps going.
    let blue = open(&p, "carol", "public", json!({"where": {"eq": ["team", "blue"]}}), 100);

    let out = p.prohibit(None, "svc", vec![op_text(5)], None, "test").unwrap();
    assert_eq!((out.rows, out.sessions), (1, 2), "{out:?}");

    let r = read(&p, "alice", "public", &draining, 2, 0).await;
    assert_eq!(error_code(&r), "reset-required");
    let r = read(&p, "bob", "public", drained.last().unwrap(), 2, 0).await;
    assert_eq!(error_code(&r), "reset-required");
    // Carol's session continues, and the withdrawal of a row she never held is no group of hers.
    let c = parse(&read(&p, "carol", "public", &blue, 100, 0).await);
    assert_eq!(c["groups"], json!([]));
    // A new snapshot never holds it.
    let again = drain(&p, "alice", open(&p, "alice", "public", all(), 100), 100).await;
    let rows: Vec<String> = again.iter().flat_map(outputs).collect();
    assert_eq!(rows, [1, 2, 3, 4, 6].map(op_text).to_vec());
    p.store().close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prohibition_answers_a_waiting_poll_and_stops_replay_of_a_historical_live_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider_in(dir.path());
    p.commit(vec![admit(1, &[])]).unwrap();
    let a = drain(&p, "alice", open(&p, "alice", "public", all(), 100), 100).await.pop().unwrap();
    let old_cursor = a.clone();
    // Row 2 arrives live; alice reads it, then waits at her new cursor.
    p.commit(vec![admit(2, &[])]).unwrap();
    let live = parse(&read(&p, "alice", "public", &a, 100, 0).await);
    assert_eq!(outputs(&live), vec![op_text(2)]);
    let poll = {
        let (p, live) = (p.clone(), live.clone());
        tokio::spawn(async move { read(&p, "alice", "public", &live, 100, 20_000).await })
    };
    // Bob opens after row 2 was admitted: his snapshot holds it.
    let b = drain(&p, "bob", open(&p, "bob", "public", json!({"where": {"all": true}, "order": "admission"}), 100), 100).await.pop().unwrap();
    let (pw, pb) = (p.clone(), b.clone());
    let bob_reads_later = async move { read(&pw, "bob", "public", &pb, 100, 0).await };
    for _ in 0..200 {
        if p.waiters.total() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(p.waiters.total(), 1);

    let out = tokio::task::spawn_blocking({
        let p = p.clone();
        move || p.prohibit(None, "svc", vec![op_text(2)], None, "test").unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.rows, 1);
    // The waiting poll ends now, well before its 20 s bound.
    let answered = tokio::time::timeout(Duration::from_secs(10), poll).await.expect("the poll was answered").unwrap();
    assert_eq!(error_code(&answered), "reset-required");
    // Replaying the historical live output from the old cursor: refused, not served.
    let replay = read(&p, "alice", "public", &old_cursor, 100, 0).await;
    assert_eq!(error_code(&replay), "reset-required");
    // Bob's snapshot (opened after row 2) holds it, so his session ended too.
    assert_eq!(error_code(&bob_reads_later.await), "reset-required");
    p.store().close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_prohibition_covers_rows_only_the_retained_log_holds_survives_a_restart_and_refuses_readmission() {
    let dir = tempfile::tempdir().unwrap();
    let (held, unaffected) = {
        let p = provider_in(dir.path());
        p.commit(vec![admit(1, &[("author", "ann")])]).unwrap();
        let held = drain(&p, "alice", open(&p, "alice", "public", all(), 100), 100).await.pop().unwrap();
        // Mallory's row enters and leaves after alice's watermark: only the log holds it.
        p.commit(vec![admit(2, &[("author", "mallory")])]).unwrap();
        p.commit(vec![spend(2)]).unwrap();
        let unaffected = drain(&p, "bob", open(&p, "bob", "public", all(), 100), 100).await.pop().unwrap();
        p.commit(vec![admit(3, &[("author", "mallory")])]).unwrap();
        let out = p.prohibit(None, "svc", vec![], Some(json!({"eq": ["author", "mallory"]})), "test").unwrap();
        // Row 3 is present and withdrawn; alice's log holds rows 2 and 3, bob's row 3.
        assert_eq!((out.rows, out.sessions), (1, 2), "{out:?}");
        p.store().close().unwrap();
        (held, unaffected)
    };
    let p = provider_in(dir.path());
    assert_eq!(error_code(&read(&p, "alice", "public", &held, 100, 0).await), "reset-required");
    assert_eq!(error_code(&read(&p, "bob", "public", &unaffected, 100, 0).await), "reset-required");
    // After the restart, admissions matching the filter (new or old rows) are refused.
    let before = p.store().high_water();
    assert_eq!(p.commit(vec![admit(3, &[("author", "mallory")])]).unwrap(), None);
    assert_eq!(p.commit(vec![admit(4, &[("author", "mallory")]), admit(5, &[("author", "ann")])]).unwrap(), Some(before + 1));
    let fresh = drain(&p, "carol", open(&p, "carol", "public", all(), 100), 100).await;
    let rows: Vec<String> = fresh.iter().flat_map(outputs).collect();
    assert_eq!(rows, vec![op_text(1), op_text(5)]);
    p.store().close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prohibition_left_half_done_is_applied_when_the_provider_starts() {
    let dir = tempfile::tempdir().unwrap();
    let held = {
        let p = provider_in(dir.path());
        p.commit(vec![admit(1, &[]), admit(2, &[])]).unwrap();
        let held = open(&p, "alice", "public", all(), 1);
        // What a process stopped right after writing the record leaves: the record, not done.
        let record = json!({"number": 1, "service": "svc", "outpoints": [op_text(2)], "filter": null, "reason": "crash", "done": false});
        p.store().aux_write(vec![([b"prohibit/".as_slice(), &1u64.to_be_bytes()].concat(), Some(serde_json::to_vec(&record).unwrap()))]).unwrap();
        p.store().close().unwrap();
        held
    };
    let p = provider_in(dir.path());
    assert_eq!(error_code(&read(&p, "alice", "public", &held, 1, 0).await), "reset-required");
    let fresh = drain(&p, "bob", open(&p, "bob", "public", all(), 100), 100).await;
    assert_eq!(fresh.iter().flat_map(outputs).collect::<Vec<_>>(), vec![op_text(1)]);
    // Numbers continue after the stored ones.
    assert_eq!(p.prohibit(None, "svc", vec![op_text(1)], None, "next").unwrap().number, 2);
    p.store().close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_resets_the_partitions_it_names_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (red, blue, red_access) = {
        let p = provider_in(dir.path());
        p.set_access_policy("urn:test:policy");
        p.commit(vec![admit(1, &[])]).unwrap();
        let red = drain(&p, "alice", open(&p, "alice", "red", all(), 100), 100).await.pop().unwrap();
        let blue = drain(&p, "bob", open(&p, "bob", "blue", all(), 100), 100).await.pop().unwrap();
        let red_access = red["scope"]["access"].as_str().unwrap().to_string();
        assert_ne!(red_access, blue["scope"]["access"]);
        // A poll of red waits, then the policy for red changes.
        let poll = {
            let (p, red) = (p.clone(), red.clone());
            tokio::spawn(async move { read(&p, "alice", "red", &red, 100, 20_000).await })
        };
        while p.waiters.total() < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let ended = tokio::task::spawn_blocking({
            let p = p.clone();
            move || p.change_policy(None, Some(vec!["red".into()]), None).unwrap()
        })
        .await
        .unwrap();
        assert_eq!(ended, 1);
        let answered = tokio::time::timeout(Duration::from_secs(10), poll).await.unwrap().unwrap();
        assert_eq!(error_code(&answered), "reset-required");
        assert_ne!(p.access_of("red"), red_access);
        p.store().close().unwrap();
        (red, blue, red_access)
    };
    let p = provider_in(dir.path());
    p.set_access_policy("urn:test:policy");
    assert_eq!(error_code(&read(&p, "alice", "red", &red, 100, 0).await), "reset-required");
    // Blue was not named: it resumes across the restart.
    assert_eq!(parse(&read(&p, "bob", "blue", &blue, 100, 0).await)["groups"], json!([]));
    // The new generation is durable: a new red session gets the changed access.
    let again = open(&p, "alice", "red", all(), 100);
    assert_ne!(again["scope"]["access"].as_str().unwrap(), red_access);
    assert_eq!(again["scope"]["access"].as_str().unwrap(), p.access_of("red"));
    // A change of the whole policy resets every session, a change by principal only theirs.
    let bob2 = drain(&p, "bob", open(&p, "bob", "blue", all(), 100), 100).await.pop().unwrap();
    assert_eq!(p.change_policy(None, None, Some(vec!["alice".into()])).unwrap(), 1);
    assert_eq!(parse(&read(&p, "bob", "blue", &bob2, 100, 0).await)["groups"], json!([]));
    assert_eq!(p.change_policy(None, None, None).unwrap(), 2, "bob's two blue sessions");
    assert_eq!(error_code(&read(&p, "bob", "blue", &bob2, 100, 0).await), "reset-required");
    p.store().close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_sharing_rows_get_them_in_the_same_order_and_one_partition_one_array() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider_in(dir.path());
    let visible_to = |who: &str| json!({"where": {"and": [{"all": true}, {"in": ["readers", ["*", who]]}]}});
    let list = |xs: &[&str]| AttrValue::List(xs.iter().map(|x| AttrValue::Str(x.to_string())).collect());
    let row = |n: u64, readers: &[&str]| Change::Admit {
        service: "svc".into(),
        outpoint: outpoint(n),
        topic: "tm".into(),
        attributes: BTreeMap::from([("readers".to_string(), list(readers))]),
        beef: format!("beef-{n}").into_bytes(),
        context: None,
        expires_at: None,
    };
    let a1 = drain(&p, "a1", open(&p, "a1", "A", visible_to("A"), 100), 100).await.pop().unwrap();
    let a2 = drain(&p, "a2", open(&p, "a2", "A", visible_to("A"), 100), 100).await.pop().unwrap();
    let b = drain(&p, "b", open(&p, "b", "B", visible_to("B"), 100), 100).await.pop().unwrap();
    p.commit(vec![row(1, &["A"]), row(2, &["*"]), row(3, &["B"]), row(4, &["A", "B"]), row(5, &["*"])]).unwrap();
    let ga1 = parse(&read(&p, "a1", "A", &a1, 100, 0).await);
    let ga2 = parse(&read(&p, "a2", "A", &a2, 100, 0).await);
    let gb = parse(&read(&p, "b", "B", &b, 100, 0).await);
    assert_eq!(outputs(&ga1), [1, 2, 4, 5].map(op_text).to_vec());
    assert_eq!(outputs(&gb), [2, 3, 4, 5].map(op_text).to_vec());
    // One immutable array per (epoch, query, partition): identical bytes for A's sessions.
    assert_eq!(ga1["groups"], ga2["groups"]);
    assert_ne!(ga1["groups"][0]["observations"][0]["scope"]["access"], gb["groups"][0]["observations"][0]["scope"]["access"]);
    // The shared rows come in the same order in both partitions' arrays, in the same group.
    let shared: Vec<String> = outputs(&ga1).into_iter().filter(|o| outputs(&gb).contains(o)).collect();
    let in_b: Vec<String> = outputs(&gb).into_iter().filter(|o| outputs(&ga1).contains(o)).collect();
    assert_eq!(shared, in_b);
    assert_eq!(ga1["groups"][0]["id"], gb["groups"][0]["id"]);
    assert_eq!(ga1["groups"][0]["sequence"], gb["groups"][0]["sequence"]);
    p.store().close().unwrap();
}
