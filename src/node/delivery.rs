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

use napi::bindgen_prelude::{Function, Uint32Array, Uint8Array};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;

use crate::session::{Ready, Reply, Response};

/// The calls answered since the last delivery, packed so that handing a thousand of them
/// to JS creates a few arrays, not a thousand objects and a thousand Buffers. `bodies`
/// holds the bodies end to end in chunks (a body never spans two); `index` holds, per
/// answer and in the same order, three numbers: ticket, status and body length.
/// js/live.js (`settleCalls`) unpacks it, moving to the next chunk when a body does not
/// fit in what is left of the current one. The index is a typed array, read by plain
/// indexing, so unpacking it does not depend on optimized code for Buffer's read methods
/// (which a full GC can discard).
#[napi(object)]
pub struct DeliveredAnswers {
    pub index: Uint32Array,
    pub bodies: Vec<Uint8Array>,
}

type Wake = ThreadsafeFunction<(), (), DeliveredAnswers, Status, false, true, 0>;

/// Capacity of a chunk (252 KiB): the one block size that `crate::alloc` maps from the
/// kernel. A wake of a thousand polls with 16 KiB bodies fills about sixty.
const CHUNK: usize = crate::alloc::MAPPED_BLOCK;

/// Answers waiting for the JS thread. The bodies are rendered (or copied) here by the
/// thread that answered (a tokio worker), so the JS thread only takes the vectors.
#[derive(Default)]
struct Packed {
    index: Vec<u32>,
    chunks: Vec<Vec<u8>>,
}

impl Packed {
    /// Adds one answer. A body of up to half a chunk is rendered (or copied, if it was
    /// rendered already) into the current chunk, or a fresh one when it does not fit.
    fn push(&mut self, ticket: u32, status: u32, body: Ready) {
        let len = u32::try_from(body.len()).expect("a response body is at most 4 MiB");
        if self.index.capacity() == 0 {
            // Room for a wake pass's run of answers, so the index does not regrow in it.
            self.index.reserve(3 * crate::session::handover::RUN);
        }
        self.index.extend_from_slice(&[ticket, status, len]);
        if body.len() > CHUNK / 2 {
            // A chunk of its own (js/live.js finds it there: it does not fit in the
            // last); a large snapshot page, rendered already, is moved, not copied.
            self.chunks.push(body.into_vec());
            return;
        }
        match self.chunks.last_mut() {
            Some(c) if c.capacity() - c.len() >= body.len() => body.write_to(c),
            _ => {
                let mut c = spare_chunk();
                body.write_to(&mut c);
                self.chunks.push(c);
            }
        }
    }
}

/// Chunks JS has finished with, kept for later deliveries; at most `SPARE_MAX`.
///
/// A chunk is mapped from the kernel and unmapped when freed (`crate::alloc`). Without
/// spares, every chunk of every wake would be fresh pages, and a wake of 1,000 polls
/// would spend part of its time in page faults. Without a bound, the spares left by one
/// wake of 10,000 polls would stay resident for good.
static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// 4 MiB: enough for the chunks of a wake of 1,000 polls with 4 KiB bodies.
const SPARE_MAX: usize = 16;

fn spare_chunk() -> Vec<u8> {
    SPARE.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_else(|| Vec::with_capacity(CHUNK))
}

fn recycle(mut chunk: Vec<u8>) {
    chunk.clear();
    let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
    if spare.len() < SPARE_MAX {
        spare.push(chunk);
    }
}

/// Hands a chunk to JS without copying it. A chunk of the standard capacity comes back
/// to `SPARE` when V8 collects its last view (Node runs the finalizer on the JS thread);
/// a large body's own block is freed.
fn chunk_to_js(chunk: Vec<u8>) -> Uint8Array {
    if chunk.capacity() != CHUNK || chunk.is_empty() {
        return Uint8Array::new(chunk);
    }
    let mut chunk = std::mem::ManuallyDrop::new(chunk);
    let (ptr, len) = (chunk.as_mut_ptr(), chunk.len());
    // SAFETY: the array takes over the vector's block; the finalizer rebuilds the vector
    // from the same pointer and capacity once JS can no longer reach the bytes.
    unsafe { Uint8Array::with_external_data(ptr, len, move |ptr, _| recycle(Vec::from_raw_parts(ptr, 0, CHUNK))) }
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
                let Packed { index, chunks } = std::mem::take(&mut *queue.lock().unwrap_or_else(|p| p.into_inner()));
                let bodies = chunks.into_iter().map(chunk_to_js).collect();
                Ok(DeliveredAnswers { index: index.into(), bodies })
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

    fn send(self: &std::sync::Arc<Self>, ticket: u32, status: u32, body: Ready) {
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
    pub fn answer(self, status: u32, body: Vec<u8>) {
        self.settle(status, body.into());
    }

    fn settle(mut self, status: u32, body: Ready) {
        self.answered = true;
        self.delivery.send(self.ticket, status, body);
    }
}

impl Reply for Owed {
    fn reply(self: Box<Self>, response: Response) {
        self.answer(response.status as u32, response.body);
    }

    /// Rendered straight into the chunk that carries it to JS (see `Ready`).
    fn reply_ready(self: Box<Self>, body: Ready) {
        self.settle(200, body);
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        if !self.answered {
            let e = crate::wire::WireError::new(crate::wire::ErrorCode::Unavailable, "internal failure");
            let r = Response::error(&e);
            self.delivery.send(self.ticket, r.status as u32, r.body.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks a Packed as js/live.js `settleCalls` does: (ticket, status, body) in order.
    fn unpack(p: &Packed) -> Vec<(u32, u32, Vec<u8>)> {
        let (mut c, mut at, mut out) = (0, 0, Vec::new());
        for a in p.index.chunks(3) {
            let len = a[2] as usize;
            if at + len > p.chunks[c].len() {
                c += 1;
                at = 0;
            }
            out.push((a[0], a[1], p.chunks[c][at..at + len].to_vec()));
            at += len;
        }
        out
    }

    #[test]
    fn spare_chunks_come_back_empty_and_stay_bounded() {
        for _ in 0..SPARE_MAX + 5 {
            let mut c = Vec::with_capacity(CHUNK);
            c.extend_from_slice(b"a body JS has finished with");
            recycle(c);
        }
        assert!(SPARE.lock().unwrap().len() <= SPARE_MAX);
        let c = spare_chunk();
        assert!(c.is_empty(), "a reused chunk starts empty");
        assert_eq!(c.capacity(), CHUNK);
    }

    #[test]
    fn bodies_fill_chunks_without_spanning_two_and_large_ones_move_whole() {
        let mut p = Packed::default();
        let mut sent = Vec::new();
        // Sizes that leave odd remainders, a body over half a chunk, and a small one after it.
        for (i, len) in [40_000usize, 100_000, 90_000, 70_000, CHUNK / 2 + 1, 10, 130_000].into_iter().enumerate() {
            let body = vec![b'a' + i as u8; len];
            sent.push((i as u32, 200, body.clone()));
            p.push(i as u32, 200, Ready::from(body));
        }
        assert_eq!(unpack(&p), sent);
        assert!(p.chunks.iter().all(|c| c.len() <= c.capacity()));
        // 40k + 100k + 90k share the first chunk; 70k starts the next; the large body has one of its own.
        assert_eq!(p.chunks[0].len(), 230_000);
        assert_eq!(p.chunks[2].len(), CHUNK / 2 + 1);
    }
}
