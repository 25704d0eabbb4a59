//! Answers of reads and opens handed to JS in batches, through one threadsafe function per provider.
//!
//! An async napi function settles its promise through a threadsafe function of its own,
//! created for the call and torn down on the JS thread after it. When one commit wakes a
//! thousand long polls, a thousand of those teardowns queue up on the single JS thread, and
//! the last poll is answered only after all of them. Here a read or an open carries a
//! ticket chosen by JS instead (js/live.js keeps the promise); answers wait in a queue,
//! and the JS thread is woken once for however many are waiting and settles them in one
//! call.
//!
//! The threadsafe function is weak, so an idle provider never keeps Node running; JS holds
//! it (`hold`) while any call is outstanding, so a pending poll does.

use std::sync::Mutex;

use napi::bindgen_prelude::{Buffer, Function, Uint32Array};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;

/// The calls answered since the last delivery, packed so that handing a thousand of them
/// to JS creates two arrays, not a thousand objects and a thousand Buffers. `bodies`
/// holds the bodies end to end; `index` holds, per answer and in the same order, three
/// numbers: ticket, status and body length. js/live.js (`settleCalls`) unpacks it. The
/// index is a typed array, read by plain indexing, so unpacking it does not depend on
/// optimized code for Buffer's read methods (which a full GC can discard).
#[napi(object)]
pub struct DeliveredAnswers {
    pub index: Uint32Array,
    pub bodies: Buffer,
}

type Wake = ThreadsafeFunction<(), (), DeliveredAnswers, Status, false, true, 0>;

/// Answers waiting for the JS thread. The body bytes are appended here by the thread that
/// answered (a tokio worker), so the JS thread only takes the two vectors.
#[derive(Default)]
struct Packed {
    index: Vec<u32>,
    bodies: Vec<u8>,
}

impl Packed {
    fn push(&mut self, ticket: u32, status: u32, body: Vec<u8>) {
        let len = u32::try_from(body.len()).expect("a response body is at most 4 MiB");
        self.index.extend_from_slice(&[ticket, status, len]);
        if self.bodies.is_empty() {
            // Moved, not copied: a lone answer (the usual case for a large snapshot page)
            // reaches JS without a copy.
            self.bodies = body;
        } else {
            self.bodies.extend_from_slice(&body);
        }
    }
}

#[derive(Default)]
pub struct Delivery {
    /// Answers not yet handed to JS. Invariant: while it holds any, a call of `wake` is
    /// queued that has not yet taken them, or will be queued when the wake pass that
    /// pushed the first of them releases its run (the push that makes it non-empty
    /// queues one, through `session::handover`).
    queue: std::sync::Arc<Mutex<Packed>>,
    wake: Mutex<Option<Wake>>,
}

impl Delivery {
    /// Installs the JS function that receives the answers (packed, see `DeliveredAnswers`).
    pub fn install(&self, deliver: Function<'_, DeliveredAnswers, ()>) -> napi::Result<()> {
        let queue = self.queue.clone();
        let wake = deliver.build_threadsafe_function::<()>().callee_handled::<false>().weak::<true>().build_callback(
            move |_ctx| {
                let Packed { index, bodies } = std::mem::take(&mut *queue.lock().unwrap_or_else(|p| p.into_inner()));
                Ok(DeliveredAnswers { index: index.into(), bodies: bodies.into() })
            },
        )?;
        *self.wake.lock().unwrap_or_else(|p| p.into_inner()) = Some(wake);
        Ok(())
    }

    /// Keeps Node running while `hold` (calls are outstanding), or lets it exit.
    #[allow(deprecated)] // napi keeps `refer`/`unref` for exactly this toggling
    pub fn hold(&self, env: &Env, hold: bool) -> napi::Result<()> {
        match self.wake.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(w) if hold => w.refer(env),
            Some(w) => w.unref(env),
            None => Ok(()),
        }
    }

    fn send(self: &std::sync::Arc<Self>, ticket: u32, status: u32, body: Vec<u8>) {
        let first = {
            let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            let first = q.index.is_empty();
            q.push(ticket, status, body);
            first
        };
        if first {
            // During a wake pass the JS thread is woken once per run of answers.
            let this = self.clone();
            crate::session::handover::wake(Box::new(move || this.wake_js()));
        }
    }

    fn wake_js(&self) {
        if let Some(w) = self.wake.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            w.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// The answer owed to one ticket. Dropped unanswered (the call's task panicked or was
/// dropped), it answers `unavailable`, so the JS promise never hangs.
pub struct Owed {
    pub ticket: u32,
    pub delivery: std::sync::Arc<Delivery>,
    pub answered: bool,
}

impl Owed {
    pub fn answer(mut self, status: u32, body: Vec<u8>) {
        self.answered = true;
        self.delivery.send(self.ticket, status, body);
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        if !self.answered {
            let e = crate::wire::WireError::new(crate::wire::ErrorCode::Unavailable, "internal failure");
            let r = crate::session::Response::error(&e);
            self.delivery.send(self.ticket, r.status as u32, r.body);
        }
    }
}
