//! Crash recovery of the reconciler (BRC-193 §8 client crash points; BRC-192 §10): a
//! child process runs a fixed plan of receives, verification completions and view
//! changes against the durable store and prints `ack <i>` after each step returns.
//! It is SIGKILLed at a fail point: `client-receipt` (a receive's commit built, not
//! written), `client-accept` (verification acceptance built, not written),
//! `client-context` (a context change), and `client-applied` (any step's batch,
//! journal and recomputed projection applied, not yet flushed). After each kill the
//! parent reopens the store and checks that its state is exactly the in-order state
//! after the acknowledged steps (or, for `client-applied`, possibly one more: applied
//! but unacknowledged writes may survive, whole or not at all); then it finishes the
//! plan from there and must reach the same final state as an uninterrupted run.

mod client_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use client_common::conformance::{self, Corpus, Runner};
use serde_json::Value;

const CHILD_ENV: &str = "OLL_RECONCILE_CRASH_CHILD";

#[derive(Clone, Copy)]
enum Step {
    Receive(&'static [&'static str], &'static str),
    Verify(&'static [&'static str]),
    View(&'static str),
}

const PLAN: &[Step] = &[
    Step::Receive(&["A"], "host-a"),
    Step::Verify(&["A"]),
    Step::Receive(&["AC"], "host-a"),
    Step::Receive(&["B"], "host-b"),
    Step::Verify(&["AC"]),
    Step::Receive(&["BC"], "host-b"),
    Step::Verify(&["BC", "B"]),
    Step::View("included"),
    Step::Receive(&["N"], "host-a"),
    Step::Verify(&["N"]),
    Step::Receive(&["partial", "R"], "host-c"),
    Step::Verify(&["R", "partial"]),
    Step::View("mature"),
    Step::Receive(&["QC"], "host-b"),
    Step::Verify(&["QC"]),
    Step::View("fork"),
    Step::Receive(&["Q"], "host-a"),
    Step::Verify(&["Q"]),
];

fn run(r: &mut Runner, s: Step) {
    let names = |n: &[&str]| n.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match s {
        Step::Receive(n, h) => r.receive(&names(n), h).unwrap(),
        Step::Verify(n) => r.verify(&names(n), None).unwrap(),
        Step::View(v) => r.set_view(v).unwrap(),
    }
}

/// The child: runs only when spawned by the parent test below.
#[test]
fn reconcile_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let mut r = Runner::new(&corpus, std::path::Path::new(&dir), true, "crash").unwrap();
    let start: usize = std::env::var("OLL_RECONCILE_FROM").unwrap().parse().unwrap();
    for (i, s) in PLAN.iter().enumerate().skip(start) {
        run(&mut r, *s);
        println!("ack {i}");
    }
    println!("done");
}

/// In-order states: index k is the state after the first k steps.
fn reference(corpus: &Corpus) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Runner::new(corpus, dir.path(), true, "crash").unwrap();
    let mut out = vec![r.state().unwrap()];
    for s in PLAN {
        run(&mut r, *s);
        out.push(r.state().unwrap());
    }
    r.close().unwrap();
    out
}

fn child(dir: &std::path::Path, point: &str, nth: usize, from: usize) -> (Option<usize>, bool) {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "reconcile_crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env("OLL_RECONCILE_FROM", from.to_string())
        .env(overlay_lookup_live::store::crash::ENV, format!("{point}:{nth}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut last = None;
    for line in BufReader::new(c.stdout.take().unwrap()).lines() {
        let Ok(line) = line else { break };
        // The first line also carries libtest's "test ... " prefix.
        if let Some(at) = line.find("ack ") {
            last = Some(line[at + 4..].trim().parse().unwrap());
        }
    }
    let status = c.wait().unwrap();
    (last, !status.success())
}

#[test]
fn killed_at_receipt_acceptance_context_and_projection_recovers_the_same_state() {
    let corpus = conformance::load(&conformance::vendored()).unwrap();
    let want = reference(&corpus);
    let mut kills = 0;
    for (point, hits) in [("client-receipt", 9), ("client-accept", 7), ("client-context", 3), ("client-applied", 34)] {
        for nth in 1..=hits {
            let dir = tempfile::tempdir().unwrap();
            // Setup runs in the child too; set the store up here first so the child's
            // fail point counts only plan steps for `client-applied`.
            Runner::new(&corpus, dir.path(), true, "crash").unwrap().close().unwrap();
            let (acked, killed) = child(dir.path(), point, nth, 0);
            if !killed {
                continue; // the plan reached this point fewer than nth times
            }
            kills += 1;
            let acked = acked.map(|i| i + 1).unwrap_or(0); // steps acknowledged
            let mut r = Runner::new(&corpus, dir.path(), true, "crash").unwrap();
            let got = r.state().unwrap();
            let at = if got == want[acked] {
                acked
            } else if point == "client-applied" && acked + 1 < want.len() && got == want[acked + 1] {
                acked + 1
            } else {
                panic!("{point}:{nth}: state after {acked} acknowledged steps is neither that nor one more");
            };
            for s in &PLAN[at..] {
                run(&mut r, *s);
            }
            assert_eq!(r.state().unwrap(), *want.last().unwrap(), "{point}:{nth}: finishing after recovery");
            r.close().unwrap();
        }
    }
    assert!(kills >= 40, "only {kills} kills landed");
}
