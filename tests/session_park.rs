//! Parked long polls (src/session/park.rs, BRC-193 §4): a waiting poll is an entry, not a
//! task; one commit answers every poll it concerns; a poll that a pass puts back (the
//! commit did not concern it) still ends on cancellation, close, revocation and its
//! deadline, exactly once each, also when all of them race.

mod session_common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use overlay_lookup_live::session::{CancelToken, Caller, Response};
use serde_json::json;

use session_common::{error_code, parse, world, World};

fn poll_body(session: &str, cursor: &str, wait_ms: u32) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 1, "session": session, "cursor": cursor,
        "limits": {"maxBytes": 65536, "maxObservations": 100, "waitMs": wait_ms}
    }))
    .unwrap()
}

/// Answers by poll name, in arrival order (a name answered twice shows up twice).
type Answers = Arc<Mutex<Vec<(String, Response)>>>;

/// Starts a poll whose answer lands in `answers` under `name`.
fn poll(w: &World, answers: &Answers, name: &str, who: &(Caller, String, String), wait_ms: u32, cancel: Arc<CancelToken>) {
    let (p, answers, name) = (w.provider.clone(), answers.clone(), name.to_string());
    let (caller, body) = (who.0.clone(), poll_body(&who.1, &who.2, wait_ms));
    tokio::spawn(async move {
        p.read_into(body, caller, "public".into(), cancel, Box::new(move |r| answers.lock().unwrap().push((name, r)))).await;
    });
}

async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn answer_of(answers: &Answers, name: &str) -> Option<Response> {
    answers.lock().unwrap().iter().find(|(n, _)| n == name).map(|(_, r)| Response { status: r.status, body: r.body.clone() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_polls_hold_no_task_and_one_commit_answers_them_all() {
    let mut w = world();
    let n = 200;
    let answers: Answers = Arc::default();
    for i in 0..n {
        let who = w.open(&format!("p{i}"), 0);
        poll(&w, &answers, &format!("p{i}"), &who, 25_000, CancelToken::new());
    }
    until("every poll is parked", || w.provider.waiters.total() == n).await;
    // The tasks that started the reads have ended; what remains is the driver.
    let metrics = tokio::runtime::Handle::current().metrics();
    until("only the driver task is alive", || metrics.num_alive_tasks() <= 1).await;
    assert_eq!(metrics.num_alive_tasks(), 1, "one driver task serves every parked poll");
    assert!(answers.lock().unwrap().is_empty(), "nothing was committed yet");

    w.admit(0);
    until("every poll is answered", || answers.lock().unwrap().len() == n).await;
    for (name, r) in answers.lock().unwrap().iter() {
        let b = parse(r);
        assert_eq!(b["groups"].as_array().unwrap().len(), 1, "{name} gets the committed group");
    }
    assert_eq!(w.provider.waiters.total(), 0, "answered polls release their waiter slots");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_put_back_by_a_pass_still_ends_on_cancel_close_revocation_and_deadline() {
    let mut w = world();
    let answers: Answers = Arc::default();
    let woken = w.open("woken", 0);
    let cancelled = w.open("cancelled", 1);
    let closed = w.open("closed", 1);
    let revoked = w.open("revoked", 1);
    let timed = w.open("timed", 1);
    let cancel = CancelToken::new();
    poll(&w, &answers, "woken", &woken, 25_000, CancelToken::new());
    poll(&w, &answers, "cancelled", &cancelled, 25_000, cancel.clone());
    poll(&w, &answers, "closed", &closed, 25_000, CancelToken::new());
    poll(&w, &answers, "revoked", &revoked, 25_000, CancelToken::new());
    until("every poll is parked", || w.provider.waiters.total() == 4).await;

    // A commit that concerns only the first poll: the pass answers it and puts the
    // others back.
    w.admit(0);
    until("the concerned poll is answered", || answer_of(&answers, "woken").is_some()).await;
    assert_eq!(parse(&answer_of(&answers, "woken").unwrap())["groups"].as_array().unwrap().len(), 1);
    until("the others are parked again", || w.provider.waiters.total() == 3).await;
    assert_eq!(answers.lock().unwrap().len(), 1, "a commit of another view answers no other poll");
    // Parked after the pass, with the earliest deadline: the driver, asleep until a later
    // one, must be woken for it.
    poll(&w, &answers, "timed", &timed, 300, CancelToken::new());
    until("the deadline poll is parked", || w.provider.waiters.total() == 4).await;

    cancel.cancel();
    until("the cancelled poll is answered", || answer_of(&answers, "cancelled").is_some()).await;
    assert_eq!(error_code(&answer_of(&answers, "cancelled").unwrap()), "cancelled");

    let close = serde_json::to_vec(&json!({"version": 1, "session": closed.1})).unwrap();
    assert_eq!(w.provider.close(&close, &closed.0).status, 200);
    until("the closed session's poll is answered", || answer_of(&answers, "closed").is_some()).await;
    assert_eq!(error_code(&answer_of(&answers, "closed").unwrap()), "expired");

    assert!(w.provider.revoke_session(&revoked.1).unwrap());
    until("the revoked session's poll is answered", || answer_of(&answers, "revoked").is_some()).await;
    assert_eq!(error_code(&answer_of(&answers, "revoked").unwrap()), "unauthorized");

    until("the deadline poll is answered", || answer_of(&answers, "timed").is_some()).await;
    let b = parse(&answer_of(&answers, "timed").unwrap());
    assert!(b["groups"].as_array().unwrap().is_empty(), "at the deadline: an empty live batch");
    assert_eq!(b["through"], b["highWater"], "its watermarks are current (the other view's group was examined)");

    // Each poll answered exactly once, and every waiter slot released.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let names: Vec<String> = answers.lock().unwrap().iter().map(|(n, _)| n.clone()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names.len(), 5, "answers: {names:?}");
    assert_eq!(sorted.len(), 5, "answers: {names:?}");
    assert_eq!(w.provider.waiters.total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_cancelled_before_it_parks_is_answered_cancelled() {
    let w = world();
    let answers: Answers = Arc::default();
    let who = w.open("early", 0);
    let cancel = CancelToken::new();
    cancel.cancel();
    poll(&w, &answers, "early", &who, 25_000, cancel);
    until("the poll is answered", || answer_of(&answers, "early").is_some()).await;
    assert_eq!(error_code(&answer_of(&answers, "early").unwrap()), "cancelled");
    assert_eq!(w.provider.waiters.total(), 0);
}

/// A small deterministic generator (xorshift), so a failing schedule reproduces.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_commits_cancellations_and_closes_answer_every_poll_exactly_once() {
    let mut w = world();
    let mut rng = Rng(0x5EED_CAFE_F00D_D00D);
    // Two views: a commit concerns half of the sessions, and the pass puts the rest back.
    let mut sessions: Vec<(Caller, String, String)> = (0..40).map(|i| w.open(&format!("s{i}"), (i % 2) as i64)).collect();
    let mut open: Vec<bool> = vec![true; sessions.len()];
    for round in 0..15 {
        let answers: Answers = Arc::default();
        let mut cancels = Vec::new();
        let mut names = Vec::new();
        for (i, who) in sessions.iter().enumerate() {
            let name = format!("r{round}-s{i}");
            let cancel = CancelToken::new();
            poll(&w, &answers, &name, who, 20 + rng.below(200) as u32, cancel.clone());
            cancels.push((i, cancel));
            names.push((i, name));
        }
        // Commits, cancellations and closes in a random interleaving with the parking.
        for _ in 0..12 {
            match rng.below(4) {
                0 | 1 => w.admit(rng.below(2) as i64),
                2 => cancels[rng.below(cancels.len() as u64) as usize].1.cancel(),
                _ => {
                    let i = rng.below(sessions.len() as u64) as usize;
                    let close = serde_json::to_vec(&json!({"version": 1, "session": sessions[i].1})).unwrap();
                    assert_eq!(w.provider.close(&close, &sessions[i].0).status, 200);
                    open[i] = false;
                }
            }
            tokio::time::sleep(Duration::from_micros(rng.below(3_000))).await;
        }
        until("every poll of the round is answered", || answers.lock().unwrap().len() >= names.len()).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let got = answers.lock().unwrap();
        assert_eq!(got.len(), names.len(), "round {round}: a poll was answered twice");
        for (i, name) in &names {
            let (_, r) = got.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("round {round}: {name} unanswered"));
            match r.status {
                200 => {
                    sessions[*i].2 = parse(r)["cursor"].as_str().unwrap().to_string();
                }
                _ => {
                    let code = error_code(r);
                    assert!(code == "cancelled" || code == "expired", "round {round}: {name} got {code}");
                    assert!(code != "expired" || !open[*i], "round {round}: {name} expired while its session is open");
                }
            }
        }
        assert_eq!(w.provider.waiters.total(), 0, "round {round}: every waiter slot is released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shut_down_answers_every_waiting_poll_with_an_empty_batch_and_refuses_later_calls() {
    let w = world();
    let answers: Answers = Arc::default();
    let n = 50;
    let mut cursors = Vec::new();
    for i in 0..n {
        let who = w.open(&format!("p{i}"), 0);
        poll(&w, &answers, &format!("p{i}"), &who, 25_000, CancelToken::new());
        cursors.push(who);
    }
    until("every poll is parked", || w.provider.waiters.total() == n).await;
    assert_eq!(w.provider.shut_down(), n);
    // Answered by shut_down itself, before it returned: nothing waits out its 25 s bound.
    assert_eq!(answers.lock().unwrap().len(), n);
    for (name, r) in answers.lock().unwrap().iter() {
        assert_eq!(r.status, 200, "{name}");
        let b = parse(r);
        assert_eq!(b["phase"], "live");
        assert!(b["groups"].as_array().unwrap().is_empty(), "{name} gets an empty live batch");
    }
    assert_eq!(w.provider.waiters.total(), 0);
    // A poll that arrives afterwards is refused at once, not parked.
    let late: Answers = Arc::default();
    poll(&w, &late, "late", &cursors[0], 25_000, CancelToken::new());
    until("the late poll is answered", || !late.lock().unwrap().is_empty()).await;
    let r = answer_of(&late, "late").unwrap();
    assert_eq!(r.status, 503);
    assert_eq!(error_code(&r), "unavailable");
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["error"]["retryAfterMs"], 1000);
}
