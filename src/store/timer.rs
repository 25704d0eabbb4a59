//! The expiry timer: one thread per store that commits due expiries when they fall due, so a
//! row's withdraw reaches waiting polls promptly rather than with the next request
//! (BRC-193 §3, §8). It sleeps until the earliest timer (`Shared::next_timer`) is due by the
//! installed clock, and is woken early when the committer applies an earlier timer, when the
//! clock is changed, and on close. Without a clock it only waits. It holds the store weakly:
//! it never keeps a dropped store open, and no JS handle is involved, so it never keeps Node
//! running.
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Shared, Store, StoreError};

/// Wait after a failed attempt, so a store that cannot write is not retried in a loop.
const RETRY_AFTER: Duration = Duration::from_secs(1);

pub(crate) fn spawn(store: Weak<Store>, shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("oll-expiry".into()).spawn(move || run(store, shared))
}

/// Wakes the timer thread.
pub(crate) fn kick(shared: &Shared) {
    let (lock, cv) = &shared.timer_kick;
    *lock.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    cv.notify_all();
}

/// What the thread does next.
enum Next {
    /// Look again at once (something was just committed).
    Again,
    /// Sleep until kicked, or at most this long.
    Sleep(Option<Duration>),
    Stop,
}

fn step(store: &Weak<Store>, shared: &Shared) -> Next {
    if shared.timer_stop.load(Ordering::SeqCst) {
        return Next::Stop;
    }
    let clock = shared.clock.read().unwrap_or_else(|p| p.into_inner()).clone();
    let Some(now_ms) = clock.and_then(|c| c()) else { return Next::Sleep(None) };
    let next = shared.next_timer.load(Ordering::Acquire);
    if next == u64::MAX {
        return Next::Sleep(None);
    }
    // A timer at second S is due once the clock reads S (expiry is exclusive: now >= expiresAt).
    let due_ms = next.saturating_mul(1000);
    if due_ms > now_ms {
        return Next::Sleep(Some(Duration::from_millis(due_ms - now_ms)));
    }
    let Some(store) = store.upgrade() else { return Next::Stop };
    match store.apply_expiries(now_ms / 1000) {
        // The committer has moved `next_timer` past what it applied.
        Ok(Some(_)) => Next::Again,
        // Nothing was due after all (another caller applied it first, or the earliest timer
        // is unreadable): look again after a pause rather than in a loop.
        Ok(None) if shared.next_timer.load(Ordering::Acquire) != next => Next::Again,
        Ok(None) => Next::Sleep(Some(RETRY_AFTER)),
        Err(StoreError::Closed) => Next::Stop,
        Err(_) => Next::Sleep(Some(RETRY_AFTER)),
    }
}

fn run(store: Weak<Store>, shared: Arc<Shared>) {
    let (lock, cv) = &shared.timer_kick;
    let mut seen = *lock.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let wait = match step(&store, &shared) {
            Next::Stop => return,
            Next::Again => continue,
            Next::Sleep(wait) => wait,
        };
        // A kick since the last look (the generation moved) means look again without sleeping.
        let mut g = lock.lock().unwrap_or_else(|p| p.into_inner());
        if *g == seen {
            g = match wait {
                None => cv.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(d) => cv.wait_timeout(g, d).unwrap_or_else(|p| p.into_inner()).0,
            };
        }
        seen = *g;
    }
}
