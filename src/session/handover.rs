//! Answers given during a wake pass are handed over in runs, not one by one.
//!
//! A receiver that must wake another thread to take an answer (the Node binding wakes
//! the JS thread, src/node/delivery.rs) passes that wake-up to [`wake`]. Outside a pass
//! it runs at once. Inside a pass ([`Hold`]) it waits until the pass releases its current
//! run of answers, so the receiver is woken once per run. Without this, a JS thread that
//! takes each answer as soon as it is given, on a machine whose cores are all busy,
//! preempted the pass after every answer: a thousand woken polls cost a thousand wake-ups
//! of about 25 µs each, several times the cost of building the answers.

use std::cell::RefCell;

/// Answers a pass gives before it wakes their receivers (about 0.1 ms of its work): few
/// enough that the first answers are not held long, enough that the receiving thread's
/// cost per wake-up is spread over many.
pub const RUN: usize = 32;

type WakeUp = Box<dyn FnOnce() + Send>;

thread_local! {
    /// `Some` while this thread holds wake-ups (inside a pass).
    static HELD: RefCell<Option<Vec<WakeUp>>> = const { RefCell::new(None) };
}

/// Runs `wake_up` now, or, on a thread inside a [`Hold`], when the hold releases its run.
pub fn wake(wake_up: WakeUp) {
    let now = HELD.with(|held| match held.borrow_mut().as_mut() {
        Some(waiting) => {
            waiting.push(wake_up);
            None
        }
        None => Some(wake_up),
    });
    if let Some(w) = now {
        w();
    }
}

/// Holds this thread's wake-ups until [`Hold::release`], and releases them when dropped,
/// however the pass ends, so no answer is left waiting for a wake-up that never comes.
pub(super) struct Hold(());

impl Hold {
    pub fn new() -> Hold {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            debug_assert!(held.is_none(), "holds do not nest");
            *held = Some(Vec::new());
        });
        Hold(())
    }

    /// Runs the wake-ups held so far; later ones are held again.
    pub fn release(&self) {
        // Taken out first: a wake-up may itself call `wake`.
        let waiting = HELD.with(|held| held.borrow_mut().as_mut().map(std::mem::take)).unwrap_or_default();
        for w in waiting {
            w();
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
        HELD.with(|held| *held.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn counter() -> (Arc<AtomicUsize>, impl Fn() -> WakeUp) {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        (n, move || {
            let m = m.clone();
            Box::new(move || {
                m.fetch_add(1, Ordering::SeqCst);
            })
        })
    }

    #[test]
    fn outside_a_hold_a_wake_up_runs_at_once() {
        let (n, make) = counter();
        wake(make());
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_hold_runs_its_wake_ups_on_release_and_on_drop() {
        let (n, make) = counter();
        {
            let hold = Hold::new();
            wake(make());
            wake(make());
            assert_eq!(n.load(Ordering::SeqCst), 0);
            hold.release();
            assert_eq!(n.load(Ordering::SeqCst), 2);
            wake(make());
            assert_eq!(n.load(Ordering::SeqCst), 2);
        }
        assert_eq!(n.load(Ordering::SeqCst), 3);
        // The hold is gone: the next wake-up runs at once.
        wake(make());
        assert_eq!(n.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn a_hold_on_one_thread_does_not_hold_another() {
        let (n, make) = counter();
        let _hold = Hold::new();
        let w = make();
        std::thread::spawn(move || wake(w)).join().unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}
