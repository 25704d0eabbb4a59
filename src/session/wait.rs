//! Long-poll bookkeeping: cancellation tokens and waiter caps (BRC-193 §4, §6).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::wire::{ErrorCode, WireError};

/// Capacity caps; beyond them a request gets `unavailable` with `retryAfterMs`.
#[derive(Clone, Debug)]
pub struct Caps {
    pub max_sessions_per_principal: usize,
    pub max_waiters: usize,
    pub max_waiters_per_principal: usize,
    pub max_concurrent_work: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps { max_sessions_per_principal: 64, max_waiters: 20_000, max_waiters_per_principal: 256, max_concurrent_work: 64 }
    }
}

/// What a parked poll runs when it is cancelled (src/session/park.rs).
pub type CancelHook = Box<dyn FnOnce() + Send + 'static>;

/// A cancellation flag the transport trips when the client goes away.
#[derive(Default)]
pub struct CancelToken {
    flag: AtomicBool,
    /// At most one hook; `cancel` takes and runs it. Under the lock with the flag's
    /// check, so a hook is run exactly once if the token is, or becomes, cancelled.
    hook: Mutex<Option<CancelHook>>,
}

impl CancelToken {
    pub fn new() -> Arc<CancelToken> {
        Arc::new(CancelToken::default())
    }

    pub fn cancel(&self) {
        let hook = {
            let mut h = self.hook.lock().unwrap_or_else(|p| p.into_inner());
            self.flag.store(true, Ordering::SeqCst);
            h.take()
        };
        if let Some(run) = hook {
            run();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Runs `hook` on cancellation: now, if the token is cancelled already, otherwise
    /// from `cancel`. Replaces a hook set earlier.
    pub fn on_cancel(&self, hook: CancelHook) {
        let now = {
            let mut h = self.hook.lock().unwrap_or_else(|p| p.into_inner());
            if self.is_cancelled() {
                Some(hook)
            } else {
                *h = Some(hook);
                None
            }
        };
        if let Some(run) = now {
            run();
        }
    }
}

pub struct Waiters {
    caps: Caps,
    total: Arc<AtomicUsize>,
    per_principal: Mutex<PerPrincipal>,
}

/// Waiting polls per principal. Entries whose count fell to zero are swept out in bulk.
struct PerPrincipal {
    counts: HashMap<String, Arc<AtomicUsize>>,
    /// The map size that triggers the next sweep. After a sweep it is twice what
    /// remained, so a map full of principals that are all still waiting is not swept
    /// again on every poll (each sweep walks the whole map): sweeping stays amortized
    /// O(1) per poll, and the map holds at most twice the waiting principals, or
    /// PRINCIPALS_BEFORE_SWEEP.
    sweep_at: usize,
    /// Sweeps done so far (tests count work with it).
    sweeps: u64,
}

/// Holds one waiter slot; released on drop (completion, error or cancellation).
#[derive(Debug)]
pub struct WaitGuard {
    total: Arc<AtomicUsize>,
    mine: Arc<AtomicUsize>,
}

impl WaitGuard {
    /// Where this guard's principal count lives (a wake pass prefetches it).
    pub(super) fn principal_count(&self) -> *const AtomicUsize {
        Arc::as_ptr(&self.mine)
    }
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        self.mine.fetch_sub(1, Ordering::AcqRel);
        self.total.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Principals with no waiting poll are forgotten once the map holds this many.
const PRINCIPALS_BEFORE_SWEEP: usize = 4096;

impl Waiters {
    pub fn new(caps: Caps) -> Waiters {
        let per_principal = PerPrincipal { counts: HashMap::new(), sweep_at: PRINCIPALS_BEFORE_SWEEP, sweeps: 0 };
        Waiters { caps, total: Arc::new(AtomicUsize::new(0)), per_principal: Mutex::new(per_principal) }
    }

    /// Principals the waiter map remembers, and sweeps done so far.
    #[cfg(test)]
    fn remembered(&self) -> (usize, u64) {
        let m = self.per_principal.lock().unwrap();
        (m.counts.len(), m.sweeps)
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    pub fn enter(&self, principal: &str) -> Result<WaitGuard, WireError> {
        // Counts only grow under this lock, so the checks below cannot be raced past.
        let mut map = self.per_principal.lock().unwrap();
        if map.counts.len() >= map.sweep_at {
            // A zero count has no guard left to decrement it: dropping the entry is safe.
            map.counts.retain(|_, n| n.load(Ordering::Acquire) > 0);
            map.sweep_at = PRINCIPALS_BEFORE_SWEEP.max(2 * map.counts.len());
            map.sweeps += 1;
        }
        let mine = match map.counts.get(principal) {
            Some(n) => n.clone(),
            None => map.counts.entry(principal.to_string()).or_default().clone(),
        };
        if self.total.load(Ordering::Acquire) >= self.caps.max_waiters
            || mine.load(Ordering::Acquire) >= self.caps.max_waiters_per_principal
        {
            let mut e = WireError::new(ErrorCode::Unavailable, "too many waiting reads; retry later");
            e.retryable = true;
            e.retry_after_ms = Some(1_000);
            return Err(e);
        }
        self.total.fetch_add(1, Ordering::AcqRel);
        mine.fetch_add(1, Ordering::AcqRel);
        Ok(WaitGuard { total: self.total.clone(), mine })
    }
}

/// Bounds the requests doing store work at once (opens and batch builds; a poll
/// that is only waiting holds no slot). A new request that finds every slot busy is
/// refused with `unavailable`; a woken poll waits for a slot instead, because it was
/// already admitted and its answer is due.
pub struct WorkSlots {
    slots: Arc<tokio::sync::Semaphore>,
}

/// One slot of concurrent work, released on drop.
pub type WorkSlot = tokio::sync::OwnedSemaphorePermit;

impl WorkSlots {
    pub fn new(max: usize) -> WorkSlots {
        WorkSlots { slots: Arc::new(tokio::sync::Semaphore::new(max.max(1))) }
    }

    /// A slot for a new request, or `unavailable` with `retryAfterMs`.
    pub fn enter(&self) -> Result<WorkSlot, WireError> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            let mut e = WireError::new(ErrorCode::Unavailable, "the provider is busy; retry later");
            e.retryable = true;
            e.retry_after_ms = Some(250);
            e
        })
    }

    /// A slot for work that was already admitted: waits for one.
    pub async fn wait(&self) -> WorkSlot {
        self.slots.clone().acquire_owned().await.expect("the semaphore is never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiter_caps_are_enforced_and_released() {
        let w = Waiters::new(Caps { max_waiters: 2, max_waiters_per_principal: 1, ..Caps::default() });
        let a = w.enter("a").unwrap();
        assert_eq!(w.enter("a").unwrap_err().code, ErrorCode::Unavailable);
        let _b = w.enter("b").unwrap();
        assert!(w.enter("c").is_err());
        drop(a);
        assert!(w.enter("c").is_ok());
    }

    #[test]
    fn many_waiting_principals_are_not_swept_on_every_poll() {
        let w = Waiters::new(Caps { max_waiters: 100_000, ..Caps::default() });
        let n = 3 * PRINCIPALS_BEFORE_SWEEP;
        let held: Vec<WaitGuard> = (0..n).map(|i| w.enter(&format!("p{i}")).unwrap()).collect();
        // Every principal is still waiting, so no sweep can free anything: doubling the
        // threshold keeps the sweeps logarithmic in the map's size, not one per poll.
        let (remembered, sweeps) = w.remembered();
        assert_eq!(remembered, n);
        assert!(sweeps <= 2, "{sweeps} sweeps for {n} principals");
        // Once they stop waiting, a later sweep forgets them.
        drop(held);
        let extra = 2 * n;
        for i in 0..extra {
            drop(w.enter(&format!("q{i}")).unwrap());
        }
        let (remembered, sweeps_after) = w.remembered();
        assert!(sweeps_after > sweeps);
        assert!(remembered < 2 * PRINCIPALS_BEFORE_SWEEP + n, "{remembered} principals remembered");
    }

    #[tokio::test]
    async fn work_slots_are_bounded_and_released() {
        let w = WorkSlots::new(2);
        let a = w.enter().unwrap();
        let _b = w.enter().unwrap();
        assert_eq!(w.enter().unwrap_err().code, ErrorCode::Unavailable);
        drop(a);
        assert!(w.enter().is_ok());
    }

    #[tokio::test]
    async fn admitted_work_waits_for_a_slot() {
        let w = Arc::new(WorkSlots::new(1));
        let held = w.enter().unwrap();
        let w2 = w.clone();
        let waiter = tokio::spawn(async move { w2.wait().await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(held);
        drop(waiter.await.unwrap());
    }

    #[test]
    fn a_cancel_hook_runs_once_whether_set_before_or_after_cancel() {
        use std::sync::atomic::AtomicUsize;
        let runs = Arc::new(AtomicUsize::new(0));
        let hook = |runs: &Arc<AtomicUsize>| -> CancelHook {
            let runs = runs.clone();
            Box::new(move || {
                runs.fetch_add(1, Ordering::SeqCst);
            })
        };
        let before = CancelToken::new();
        before.on_cancel(hook(&runs));
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        before.cancel();
        before.cancel();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let after = CancelToken::new();
        after.cancel();
        after.on_cancel(hook(&runs));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}
