//! Snapshots in attribute order (BRC-193 §3): a snapshot cursor names the row to resume
//! after by its fixed-size version key, not by its order value, so rows whose ordered
//! string is as long as an attribute may be (1024 bytes, as long as a whole cursor) page
//! like any other.

mod session_common;

use std::collections::BTreeMap;

use overlay_lookup_live::select::AttrValue;
use overlay_lookup_live::session::CancelToken;
use serde_json::{json, Value};

use session_common::{parse, world};

/// The admission number of an observed output (its txid starts with it, big-endian).
fn admitted(o: &Value) -> u64 {
    let txid = o["payload"]["evidence"]["txid"].as_str().unwrap();
    u64::from_str_radix(&txid[..16], 16).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_with_order_values_as_long_as_a_cursor_page_in_order() {
    let mut w = world();
    // Admission n (1-based) gets a 1,024-byte title (the most an attribute may hold)
    // starting with letters[n-1]; two titles are equal, so admission breaks that tie.
    let letters = ['d', 'a', 'f', 'c', 'a', 'b'];
    for l in letters {
        let title: String = std::iter::once(l).chain(std::iter::repeat('x').take(1_023)).collect();
        w.admit_with(BTreeMap::from([("title".to_string(), AttrValue::Str(title))]));
    }
    let mut expected: Vec<u64> = (1..=letters.len() as u64).collect();
    expected.sort_by_key(|n| (letters[*n as usize - 1], *n));
    for (who, direction) in [("ascending", "asc"), ("descending", "desc")] {
        let selection = json!({"where": {"all": true}, "order": {"attribute": "title", "direction": direction}});
        let (caller, mut batch) = w.open_with(who, selection, 1);
        let mut seen = Vec::new();
        loop {
            for g in batch["groups"].as_array().unwrap() {
                for o in g["observations"].as_array().unwrap() {
                    seen.push(admitted(o));
                }
            }
            let cursor = batch["cursor"].as_str().unwrap().to_string();
            assert!(cursor.len() <= 1024, "a cursor is at most 1024 bytes");
            if batch["snapshotComplete"] == true {
                break;
            }
            let body = serde_json::to_vec(&json!({
                "version": 1, "session": batch["session"], "cursor": cursor,
                "limits": {"maxBytes": 65536, "maxObservations": 1, "waitMs": 0}
            }))
            .unwrap();
            batch = parse(&w.provider.read(body, caller.clone(), "public".into(), CancelToken::new()).await);
        }
        let want: Vec<u64> = if direction == "asc" {
            expected.clone()
        } else {
            // Descending reverses the whole order, ties included.
            expected.iter().rev().copied().collect()
        };
        assert_eq!(seen, want, "{who}: the snapshot in title order, one row per page");
    }
}
