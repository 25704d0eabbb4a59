//! Crash durability of the checkpoint store (BRC-193 §4): a child process commits
//! batches and reports each commit after `commit_batch` returns; the parent SIGKILLs
//! it mid-stream. After reopening, every reported commit is there (a returned commit
//! is durable), and the cursor and the received groups agree (a commit is never torn).

mod client_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use client_common::fixture::{self, hex32};
use overlay_lookup_live::client::{ClientDb, CommitOptions};

const CHILD_ENV: &str = "OLL_CLIENT_CRASH_CHILD_STORE";
const GROUPS_PER_BATCH: u64 = 3;

fn scope() -> serde_json::Value {
    fixture::scope("02aa", "svc", "q", "public", "e1")
}

/// Batch n (1-based): GROUPS_PER_BATCH live groups, sequences 10n+1.., cursor "c{n}".
fn live_batch(n: u64) -> Vec<u8> {
    let s = scope();
    let groups = (0..GROUPS_PER_BATCH)
        .map(|i| {
            let seq = 10 * n + i + 1;
            fixture::group(&format!("g{seq}"), seq, vec![fixture::output(&format!("o{seq}"), &s, &hex32("tx"), seq as u32, None)])
        })
        .collect();
    fixture::batch("sess", &s, "live", groups, &format!("c{n}"), true, 10 * n + 9, 10 * n + 9)
}

/// The child: runs only when spawned by the parent test below.
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let store = ClientDb::open(&path).unwrap();
    let s = scope();
    let key = fixture::source_key(&s);
    let g = store.begin_generation(&key, None).unwrap();
    let open = fixture::batch("sess", &s, "snapshot", vec![], "c0", true, 0, 0);
    store.commit_batch(&key, g, None, &open, &CommitOptions::default()).unwrap();
    println!("committed 0");
    for n in 1.. {
        store.commit_batch(&key, g, Some(&format!("c{}", n - 1)), &live_batch(n), &CommitOptions::default()).unwrap();
        println!("committed {n}");
    }
}

#[test]
fn sigkill_mid_stream_loses_no_returned_commit_and_tears_none() {
    for kill_after in [1u64, 5, 12] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut last_reported = None;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(n) = line.strip_prefix("committed ") {
                let n: u64 = n.trim().parse().unwrap();
                last_reported = Some(n);
                if n >= kill_after {
                    child.kill().unwrap(); // SIGKILL on Unix
                    break;
                }
            }
        }
        let status = child.wait().unwrap();
        assert!(!status.success(), "the child was killed");
        let reported = last_reported.expect("child reported commits");

        let store = ClientDb::open(&path).unwrap();
        let key = fixture::source_key(&scope());
        let cp = store.checkpoint(&key).unwrap().unwrap();
        let at: u64 = cp.cursor.unwrap()[1..].parse().unwrap();
        assert!(at >= reported, "commit {reported} was reported but the store is at {at}");
        let st = store.state(&key).unwrap();
        assert_eq!(st.received, at * GROUPS_PER_BATCH, "cursor and receipts agree");
        assert_eq!(st.accepted, st.received);
        assert_eq!(store.members(&key).unwrap().len() as u64, at * GROUPS_PER_BATCH);
        assert_eq!(cp.through, if at == 0 { 0 } else { 10 * at + 9 });
        // The next batch continues from exactly that cursor.
        let g = cp.generation;
        store.commit_batch(&key, g, Some(&format!("c{at}")), &live_batch(at + 1), &CommitOptions::default()).unwrap();
        store.close().unwrap();
    }
}
