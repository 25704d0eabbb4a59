//! Sessions of one scope and selection share one view (its compiled selection, scope
//! and the rendered live groups), whoever opened them; a view ends with its last session.

mod session_common;

use overlay_lookup_live::session::{CancelToken, Caller};
use serde_json::{json, Value};

use session_common::{parse, world, World};

/// Opens a session of `who` for `query` with `selection`; returns the parsed first batch.
fn open(w: &World, who: &str, query: Value, selection: Value) -> Value {
    let caller = Caller { principal: who.to_string(), authenticated: true };
    let body = serde_json::to_vec(&json!({
        "version": 1, "requestId": format!("views-request-{who}"), "service": "svc", "query": query,
        "limits": {"maxBytes": 65536, "maxObservations": 10, "waitMs": 0}
    }))
    .unwrap();
    parse(&w.provider.open(&body, &caller, "public", &selection))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_one_scope_and_selection_share_a_view_until_the_last_one_is_forgotten() {
    let mut w = world();
    w.admit(1);
    w.admit(2);
    let one = json!({"where": {"eq": ["k", 1]}});
    let a = open(&w, "alice", json!({"k": 1}), one.clone());
    let b = open(&w, "bob", json!({"k": 1}), one.clone());
    assert_eq!(w.provider.view_count(), 1, "same service, query, access and selection: one view");
    let first = |v: &Value| v["groups"][0]["observations"][0].clone();
    assert_eq!(first(&a)["payload"], first(&b)["payload"], "and the same snapshot rows");
    assert_eq!(first(&a)["scope"], first(&b)["scope"]);

    // Another query (so another scope) or another selection is another view.
    let c = open(&w, "carol", json!({"k": 2}), json!({"where": {"eq": ["k", 2]}}));
    assert_eq!(w.provider.view_count(), 2);
    assert_ne!(first(&a)["payload"], first(&c)["payload"]);

    // A live group reaches both sessions of the shared view, each with its own cursor.
    w.admit(1);
    for (who, s) in [("alice", &a), ("bob", &b)] {
        let caller = Caller { principal: who.to_string(), authenticated: true };
        let body = serde_json::to_vec(&json!({
            "version": 1, "session": s["session"], "cursor": s["cursor"],
            "limits": {"maxBytes": 65536, "maxObservations": 10, "waitMs": 0}
        }))
        .unwrap();
        let r = parse(&w.provider.read(body, caller, "public".into(), CancelToken::new()).await);
        assert_eq!(r["phase"], "live");
        assert_eq!(r["groups"].as_array().unwrap().len(), 1, "{who} gets the new group");
        assert_eq!(r["session"], s["session"]);
    }

    // Past every replay deadline, compaction forgets the sessions, and their views go.
    w.provider.advance_clock_ms(1_300_000);
    while w.provider.compact(1000).unwrap() {}
    assert_eq!(w.provider.view_count(), 0);
}
