//! Parked long polls (BRC-193 §4): a read with nothing to return waits here, as an
//! entry, not as a task of its own.
//!
//! One driver task per provider subscribes to the store's publication channel. After a
//! commit it rebuilds every parked poll in one pass on one worker; sessions of one view
//! render each live group once (`GroupCache`), so a woken poll costs its cursor and
//! envelope, not a task wake-up, a timer and a channel of its own. The driver also ends
//! polls at their deadlines. Cancellation and the end of a session (close, revocation)
//! answer their polls directly, from the thread that cancels or ends.
//!
//! Exactly-once answers: every path that answers a poll first removes its entry from the
//! table, under one lock; only the remover answers. Lost-wakeup freedom: whoever puts an
//! entry in the table (the read that parks it, or the driver re-parking it after a pass
//! found nothing) afterwards checks what could have happened while it was out of the
//! table (a publication, a cancellation, the session's end) and takes it back if so.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::cursor::Cursor;
use super::{err, handover, CancelToken, LiveSession, Provider, Ready, Response, SessionView, WaitGuard};
use super::record::SessionRecord;
use crate::wire::{ErrorCode, Limits, WireError};

/// Receives a read's response, exactly once. Dropped unanswered (the provider went
/// away), the receiver's side must treat it as `unavailable`.
pub type Answer = Box<dyn Reply>;

/// The receiving end of a read. Any `FnOnce(Response)` is one; the Node binding's
/// receiver also takes a successful batch unrendered (`reply_ready`) and renders it
/// straight into the buffer it hands to JS.
pub trait Reply: Send + 'static {
    fn reply(self: Box<Self>, response: Response);

    /// A successful batch, rendered where the receiver wants it. By default, into a
    /// body of its own.
    fn reply_ready(self: Box<Self>, body: Ready) {
        self.reply(Response::ok(body.into_vec()));
    }
}

impl<F: FnOnce(Response) + Send + 'static> Reply for F {
    fn reply(self: Box<Self>, response: Response) {
        (*self)(response)
    }
}

/// A waiting long poll: everything needed to rebuild its batch and answer it.
pub(super) struct Entry {
    /// Stable for the poll's whole wait (a pass takes it out and puts it back).
    pub id: u64,
    pub session: Arc<LiveSession>,
    pub rec: Arc<SessionRecord>,
    pub view: Arc<SessionView>,
    pub cursor: Cursor,
    pub limits: Limits,
    /// Provider clock, ms: min(arrival + waitMs, expiresAt) (BRC-193 §4).
    pub deadline_ms: u64,
    pub cancel: Arc<CancelToken>,
    pub answer: Answer,
    /// Holds the poll's place under the waiter caps until it is answered.
    pub _guard: WaitGuard,
}

#[derive(Default)]
struct Table {
    entries: HashMap<u64, Entry>,
    deadlines: BTreeSet<(u64, u64)>,
    /// (session, poll id): ending a session finds its polls without walking the table.
    by_session: BTreeSet<([u8; 16], u64)>,
    /// The deadline the driver sleeps until (u64::MAX: none). Read and written under the
    /// table lock, so a poll parked with an earlier deadline always wakes the driver.
    driver_sleeps_until: u64,
}

impl Entry {
    /// Starts loading what rebuilding this poll reads first and no other poll shares:
    /// its session record, its session (the gate's lock), its receiver and its
    /// principal's waiter count (released when it is answered). A pass
    /// touches a thousand of each, cold; loading the next poll's while this one is
    /// built cut the pass's CPU time by about a tenth (bench section 4). A hint only:
    /// a prefetch never faults and changes no memory.
    fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let record = Arc::as_ptr(&self.rec).cast::<i8>();
            let answer: *const dyn Reply = &*self.answer;
            // SAFETY: `_mm_prefetch` is a hint: it reads nothing the program can observe
            // and never faults, whatever the address. The addresses are of live objects.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(record);
                _mm_prefetch::<_MM_HINT_T0>(record.wrapping_add(64));
                _mm_prefetch::<_MM_HINT_T0>(Arc::as_ptr(&self.session).cast::<i8>());
                _mm_prefetch::<_MM_HINT_T0>(answer.cast::<i8>());
                _mm_prefetch::<_MM_HINT_T0>(self._guard.principal_count().cast::<i8>());
            }
        }
    }
}

impl Table {
    fn add(&mut self, entry: Entry) {
        self.deadlines.insert((entry.deadline_ms, entry.id));
        self.by_session.insert((entry.session.id, entry.id));
        self.entries.insert(entry.id, entry);
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        self.deadlines.remove(&(e.deadline_ms, id));
        self.by_session.remove(&(e.session.id, id));
        Some(e)
    }
}

/// The parked polls of one provider.
pub(super) struct Parked {
    table: Mutex<Table>,
    /// Wakes the driver when a poll with an earlier deadline than it sleeps for is parked.
    kick: Arc<Notify>,
    driver_alive: AtomicBool,
    next_id: AtomicU64,
    /// Set once by [`Provider::shut_down`]: no poll parks any more.
    closing: AtomicBool,
}

impl Default for Parked {
    fn default() -> Parked {
        Parked {
            table: Mutex::new(Table { driver_sleeps_until: u64::MAX, ..Table::default() }),
            kick: Arc::new(Notify::new()),
            driver_alive: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            closing: AtomicBool::new(false),
        }
    }
}

impl Parked {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An id for a new poll.
    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn take(&self, id: u64) -> Option<Entry> {
        self.lock().remove(id)
    }

    /// Takes every entry at once: the whole table is swapped for an empty one under
    /// the lock. Its indexes come along, so the caller drops them once its answers are
    /// out, not before the first.
    fn take_all(&self) -> Table {
        let mut t = self.lock();
        let empty = Table { driver_sleeps_until: t.driver_sleeps_until, ..Table::default() };
        std::mem::replace(&mut *t, empty)
    }

    fn take_due(&self, now_ms: u64) -> Vec<Entry> {
        let mut t = self.lock();
        let due: Vec<u64> = t.deadlines.iter().take_while(|(d, _)| *d <= now_ms).map(|(_, id)| *id).collect();
        due.into_iter().filter_map(|id| t.remove(id)).collect()
    }

    fn take_session(&self, session: &[u8; 16]) -> Vec<Entry> {
        let mut t = self.lock();
        let ids: Vec<u64> = t.by_session.range((*session, 0)..=(*session, u64::MAX)).map(|(_, id)| *id).collect();
        ids.into_iter().filter_map(|id| t.remove(id)).collect()
    }
}

/// Clears `driver_alive` when the driver ends, however it ends (its runtime may shut down).
struct DriverAlive(Weak<Provider>);

impl Drop for DriverAlive {
    fn drop(&mut self) {
        if let Some(p) = self.0.upgrade() {
            p.parked.driver_alive.store(false, Ordering::SeqCst);
        }
    }
}

impl Provider {
    /// Parks an empty poll. `rx` was subscribed before the poll's batch was built: a
    /// publication since then sends the poll back to be rebuilt instead (returned).
    pub(super) fn park(self: &Arc<Self>, entry: Entry, rx: &watch::Receiver<u64>) -> Option<Entry> {
        self.ensure_driver();
        let id = self.insert(entry)?;
        // A closed channel (the store is gone) is the driver's to answer: it ends every
        // parked poll with unavailable.
        if rx.has_changed().unwrap_or(false) {
            return self.parked.take(id);
        }
        None
    }

    /// Puts an entry in the table, then answers it at once if it was cancelled or its
    /// session ended while it was out of the table. Returns its id if it stays.
    fn insert(self: &Arc<Self>, entry: Entry) -> Option<u64> {
        let cancel = entry.cancel.clone();
        let session = entry.session.clone();
        let id = entry.id;
        let kick = {
            let mut t = self.parked.lock();
            let kick = entry.deadline_ms < t.driver_sleeps_until;
            t.add(entry);
            kick
        };
        if kick {
            self.parked.kick.notify_one();
        }
        // From here a cancellation or the session's end finds the entry in the table;
        // one that came earlier is seen by these checks (the hook runs at once if the
        // token is cancelled already). The hook names the poll's stable id, so the one a
        // pass sets when it puts the poll back is the same hook again.
        let weak = Arc::downgrade(self);
        cancel.on_cancel(Box::new(move || {
            if let Some(p) = weak.upgrade() {
                p.cancel_parked(id);
            }
        }));
        if session.has_ended() {
            if let Some(e) = self.parked.take(id) {
                self.answer_early(e, false);
            }
            return None;
        }
        // Same pattern for a shutdown: `shut_down` sets the flag before it empties the
        // table, so this entry is either in what it takes or sees the flag here.
        if self.parked.closing.load(Ordering::SeqCst) {
            if let Some(e) = self.parked.take(id) {
                self.answer_now(e);
            }
            return None;
        }
        Some(id)
    }

    /// Answers a poll at once with what its cursor can see now: an empty live batch with
    /// current watermarks (or whatever was published meanwhile), as at its deadline.
    fn answer_now(&self, e: Entry) {
        match self.build(&e.rec, &e.view, &e.cursor, e.limits) {
            Ok((b, _)) => self.deliver(&e.session, b, e.answer),
            Err(er) => e.answer.reply(Response::error(&er)),
        }
    }

    /// Graceful shutdown (BRC-193 §4: a waiting poll returns a coherent batch): from now on
    /// no poll waits, every waiting poll is answered now, and new opens and reads get
    /// `unavailable` with a retry hint. Returns how many waiting polls were answered.
    pub fn shut_down(&self) -> usize {
        self.parked.closing.store(true, Ordering::SeqCst);
        let entries = self.parked.take_all().entries;
        let n = entries.len();
        for e in entries.into_values() {
            self.answer_now(e);
        }
        n
    }

    /// `unavailable` (retry after a second) once [`Provider::shut_down`] ran.
    pub(super) fn refuse_if_closing(&self) -> Result<(), WireError> {
        if self.parked.closing.load(Ordering::SeqCst) {
            let mut e = err(ErrorCode::Unavailable, "the provider is shutting down").with_retry_after_ms(1000);
            e.retryable = true;
            return Err(e);
        }
        Ok(())
    }

    fn cancel_parked(&self, id: u64) {
        if let Some(e) = self.parked.take(id) {
            self.answer_early(e, true);
        }
    }

    /// Answers a poll that was cancelled (nothing consumed) or whose session ended.
    /// An ended session (closed or revoked) never passes the gate, so a parked poll
    /// keeps no batch of its own to hand out: the gate's refusal is the answer.
    fn answer_early(&self, e: Entry, cancelled: bool) {
        let refusal = if cancelled {
            err(ErrorCode::Cancelled, "the request was cancelled")
        } else {
            self.gate(&e.session).err().unwrap_or_else(|| err(ErrorCode::Expired, "the session ended"))
        };
        e.answer.reply(Response::error(&refusal));
    }

    /// Called after a session was closed or revoked: its waiting polls end now.
    pub(super) fn end_parked(&self, session: &[u8; 16]) {
        for e in self.parked.take_session(session) {
            self.answer_early(e, false);
        }
    }

    fn ensure_driver(self: &Arc<Self>) {
        if self.parked.driver_alive.swap(true, Ordering::SeqCst) {
            return;
        }
        let rx = self.store.subscribe();
        let alive = DriverAlive(Arc::downgrade(self));
        tokio::spawn(drive(Arc::downgrade(self), rx, alive));
    }

    /// One pass after a publication: every parked poll is rebuilt (on this worker: the
    /// groups just published are in sled's cache and, after the first session of a
    /// view, in the group cache). Polls still empty are parked again. Receivers are
    /// woken once per run of `handover::RUN` answers (see `handover`).
    fn wake_pass(self: &Arc<Self>) {
        let hold = handover::Hold::new();
        let Table { entries, deadlines, by_session, .. } = self.parked.take_all();
        let mut polls = entries.into_values().enumerate().peekable();
        while let Some((i, e)) = polls.next() {
            if let Some((_, next)) = polls.peek() {
                next.prefetch();
            }
            let built = self.build(&e.rec, &e.view, &e.cursor, e.limits);
            if let Some(e) = self.answer_or_keep(e, built) {
                self.insert(e);
            }
            if (i + 1) % handover::RUN == 0 {
                hold.release();
            }
        }
        drop(hold);
        drop((deadlines, by_session));
    }

    /// Answers a poll with its rebuilt batch, or with the error; a batch still empty
    /// hands the poll back to wait on.
    pub(super) fn answer_or_keep(&self, e: Entry, built: Result<(Ready, bool), WireError>) -> Option<Entry> {
        match built {
            Ok((_, true)) => Some(e),
            Ok((b, false)) => {
                self.deliver(&e.session, b, e.answer);
                None
            }
            Err(er) => {
                e.answer.reply(Response::error(&er));
                None
            }
        }
    }

    /// Polls whose deadline passed: an empty live batch with current watermarks, or
    /// reset-required when the session expired meanwhile (BRC-193 §4, §8). Each is
    /// rebuilt as ordinary store work (it may apply due expiry timers).
    fn expire_pass(self: &Arc<Self>) {
        for e in self.parked.take_due(self.now_ms()) {
            let p = self.clone();
            tokio::spawn(async move {
                match p.rebuild(&e.rec, &e.view, &e.cursor, e.limits).await {
                    Ok((b, _)) => p.deliver(&e.session, b, e.answer),
                    Err(er) => e.answer.reply(Response::error(&er)),
                }
            });
        }
    }

    fn close_all_parked(&self) {
        for e in self.parked.take_all().entries.into_values() {
            e.answer.reply(Response::error(&err(ErrorCode::Unavailable, "the store closed")));
        }
    }
}

/// The driver: passes after publications, deadlines, and nothing else. It holds the
/// provider weakly, so a dropped provider ends it.
async fn drive(provider: Weak<Provider>, mut rx: watch::Receiver<u64>, _alive: DriverAlive) {
    loop {
        let (sleep_ms, kick) = {
            let Some(p) = provider.upgrade() else { return };
            let mut t = p.parked.lock();
            let next = t.deadlines.first().map(|(d, _)| *d).unwrap_or(u64::MAX);
            t.driver_sleeps_until = next;
            drop(t);
            let now = p.now_ms();
            (if next == u64::MAX { None } else { Some(next.saturating_sub(now)) }, p.parked.kick.clone())
        };
        let sleep = async {
            match sleep_ms {
                Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = rx.changed() => {
                let Some(p) = provider.upgrade() else { return };
                if changed.is_err() {
                    p.close_all_parked();
                    return;
                }
                rx.borrow_and_update();
                p.wake_pass();
            }
            _ = sleep => {
                let Some(p) = provider.upgrade() else { return };
                p.expire_pass();
            }
            _ = kick.notified() => {}
        }
    }
}
