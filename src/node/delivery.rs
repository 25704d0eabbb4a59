//! Read answers handed to JS in batches, through one threadsafe function per provider.
//!
//! An async napi function settles its promise through a threadsafe function of its own,
//! created for the call and torn down on the JS thread after it. When one commit wakes a
//! thousand long polls, a thousand of those teardowns queue up on the single JS thread, and
//! the last poll is answered only after all of them. Here a read carries a ticket chosen by
//! JS instead (js/live.js keeps the promise); answers wait in a queue, and the JS thread is
//! woken once for however many are waiting and settles them in one call.
//!
//! The threadsafe function is weak, so an idle provider never keeps Node running; JS holds
//! it (`hold`) while any read is outstanding, so a pending poll does.

use std::sync::Mutex;

use napi::bindgen_prelude::{Buffer, Function};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;

/// One answered read, as the delivery function receives it.
#[napi(object)]
pub struct DeliveredResponse {
    pub ticket: u32,
    pub status: u32,
    pub body: Buffer,
}

type Wake = ThreadsafeFunction<(), (), Vec<DeliveredResponse>, Status, false, true, 0>;

#[derive(Default)]
pub struct Delivery {
    /// Answers not yet handed to JS. Invariant: while it is not empty, a call of `wake` is
    /// queued that has not yet taken it (the push that makes it non-empty queues one).
    queue: std::sync::Arc<Mutex<Vec<(u32, u32, Vec<u8>)>>>,
    wake: Mutex<Option<Wake>>,
}

impl Delivery {
    /// Installs the JS function that receives the answers (an array per call).
    pub fn install(&self, deliver: Function<'_, Vec<DeliveredResponse>, ()>) -> napi::Result<()> {
        let queue = self.queue.clone();
        let wake = deliver.build_threadsafe_function::<()>().callee_handled::<false>().weak::<true>().build_callback(
            move |_ctx| {
                let batch = std::mem::take(&mut *queue.lock().unwrap_or_else(|p| p.into_inner()));
                Ok(batch
                    .into_iter()
                    .map(|(ticket, status, body)| DeliveredResponse { ticket, status, body: body.into() })
                    .collect())
            },
        )?;
        *self.wake.lock().unwrap_or_else(|p| p.into_inner()) = Some(wake);
        Ok(())
    }

    /// Keeps Node running while `hold` (reads are outstanding), or lets it exit.
    #[allow(deprecated)] // napi keeps `refer`/`unref` for exactly this toggling
    pub fn hold(&self, env: &Env, hold: bool) -> napi::Result<()> {
        match self.wake.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(w) if hold => w.refer(env),
            Some(w) => w.unref(env),
            None => Ok(()),
        }
    }

    fn send(&self, ticket: u32, status: u32, body: Vec<u8>) {
        let first = {
            let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.push((ticket, status, body));
            q.len() == 1
        };
        if first {
            if let Some(w) = self.wake.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                w.call((), ThreadsafeFunctionCallMode::NonBlocking);
            }
        }
    }
}

/// The answer owed to one ticket. Dropped unanswered (the read's task panicked or was
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
