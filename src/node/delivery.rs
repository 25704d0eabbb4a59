//! Answers of reads and opens handed to JS in batches, through one threadsafe function per provider.
//!
//! An async napi function settles its promise through a threadsafe function of its own,
//! created for the call and torn down on the JS thread after it. When one commit wakes a
//! thousand long polls, a thousand of those teardowns queue up on the single JS thread, and
//! the last poll is answered only after all of them. Here a read or an open carries a
//! ticket chosen by JS instead (js/provider/live.js keeps the promise); answers wait in a queue,
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
/// to JS creates a few arrays, not a thousand objects and a thousand Buffers. `index`
/// holds, per answer and in order, three numbers: ticket, status and body length.
/// `bodies` holds the bodies end to end in regions, each ending exactly at its last body
/// (a body never spans two). js/provider/live.js (`settleCalls`) unpacks it, moving to the next
/// region when a body does not fit in what is left of the current one. The index is a
/// typed array, read by plain indexing, so unpacking it does not depend on optimized code
/// for Buffer's read methods (which a full GC can discard).
#[napi(object)]
pub struct DeliveredAnswers {
    pub index: Uint32Array,
    pub bodies: Vec<Uint8Array>,
}

type Wake = ThreadsafeFunction<(), (), DeliveredAnswers, Status, false, true, 0>;

/// Capacity of a chunk (252 KiB): the one block size that `crate::alloc` maps from the
/// kernel. A wake of a thousand polls with 4.5 KiB bodies fills about eighteen.
const CHUNK: usize = crate::alloc::MAPPED_BLOCK;

/// A chunk's memory (`CHUNK` bytes), shared by the views JS holds of parts of it and by
/// the queue while it still writes into it; the last of them to let go recycles it.
struct Block(std::ptr::NonNull<u8>);

// SAFETY: a `Block` is only a pointer to memory it owns; the bytes are written by the
// queue under its mutex and read by JS only once handed over (see `Open`).
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: the block came from a vector of capacity `CHUNK` (`Open::new`), and no
        // view or writer is left.
        recycle(unsafe { Vec::from_raw_parts(self.0.as_ptr(), 0, CHUNK) });
    }
}

/// Bytes handed to JS in one delivery: a run of whole bodies.
enum Region {
    /// `start..end` of a shared chunk.
    Shared { block: std::sync::Arc<Block>, start: usize, end: usize },
    /// A body over half a chunk, in a block of its own.
    Own(Vec<u8>),
}

/// The chunk being filled. Bytes before `cut` have been handed to JS (a delivery took
/// them) and are never written again; bodies are appended after `len()`. So a chunk
/// carries the answers of several deliveries: a wake pass hands answers over in runs of
/// 32 (`session::handover`), and a chunk per delivery would leave most of each unused
/// (bench section 4: about 140 chunks per wake of 1,000 polls, against 18 filled).
struct Open {
    block: std::sync::Arc<Block>,
    /// Writes into the block's memory, which it never frees or moves: a body is only
    /// written when it fits in the capacity left (`Packed::push`).
    buf: std::mem::ManuallyDrop<Vec<u8>>,
    cut: usize,
}

impl Open {
    fn new(mut chunk: Vec<u8>) -> Open {
        debug_assert!(chunk.is_empty() && chunk.capacity() == CHUNK);
        let ptr = std::ptr::NonNull::new(chunk.as_mut_ptr()).expect("a vector's pointer is not null");
        let buf = std::mem::ManuallyDrop::new(chunk);
        Open { block: std::sync::Arc::new(Block(ptr)), buf, cut: 0 }
    }

    fn room(&self) -> usize {
        CHUNK - self.buf.len()
    }

    /// The bytes written since the last cut, as a region for JS.
    fn cut(&mut self) -> Option<Region> {
        let (start, end) = (self.cut, self.buf.len());
        self.cut = end;
        (end > start).then(|| Region::Shared { block: self.block.clone(), start, end })
    }
}

/// The calls answered since the last delivery, waiting for the JS thread: per answer,
/// three numbers in `index`, and the body at the end of `regions` (or of `open`, until
/// the next cut). The bodies are rendered (or copied) here by the thread that answered (a
/// tokio worker), so the JS thread only takes them.
#[derive(Default)]
struct Packed {
    index: Vec<u32>,
    regions: Vec<Region>,
    open: Option<Open>,
}

impl Packed {
    /// Adds one answer. A body of up to half a chunk is rendered (or copied, if it was
    /// rendered already) into the open chunk, or into a fresh one when it does not fit.
    fn push(&mut self, ticket: u32, status: u32, body: Ready) {
        let len = u32::try_from(body.len()).expect("a response body is at most 4 MiB");
        if self.index.capacity() == 0 {
            // Room for a wake pass's run of answers, so the index does not regrow in it.
            self.index.reserve(3 * crate::session::handover::RUN);
        }
        self.index.extend_from_slice(&[ticket, status, len]);
        if body.len() > CHUNK / 2 {
            // A region of its own (js/provider/live.js finds it there: it does not fit in the
            // region before, which ends exactly at its last body); a large snapshot
            // page, rendered already, is moved, not copied.
            self.cut();
            self.regions.push(Region::Own(body.into_vec()));
            return;
        }
        let open = match &mut self.open {
            Some(o) if o.room() >= body.len() => o,
            _ => {
                self.cut();
                self.open.insert(Open::new(spare_chunk()))
            }
        };
        body.write_to(&mut open.buf);
        // Invariant: `write_to` appends exactly `len()` bytes, which fit, so the vector
        // did not grow and is still the block's.
        assert!(open.buf.capacity() == CHUNK && open.buf.as_ptr() == open.block.0.as_ptr().cast_const());
    }

    /// Ends the current region at the open chunk's last body.
    fn cut(&mut self) {
        if let Some(r) = self.open.as_mut().and_then(Open::cut) {
            self.regions.push(r);
        }
    }

    /// The answers so far, for JS; the open chunk stays open for the next ones.
    fn take(&mut self) -> (Vec<u32>, Vec<Region>) {
        self.cut();
        (std::mem::take(&mut self.index), std::mem::take(&mut self.regions))
    }
}

/// Chunks JS has finished with, kept for later deliveries; at most `SPARE_MAX`.
///
/// A chunk is mapped from the kernel and unmapped when freed (`crate::alloc`). Without
/// spares, every chunk of every wake would be fresh pages, and a wake of 1,000 polls
/// would spend part of its time in page faults. Without a bound, the spares left by one
/// wake of 10,000 polls would stay resident for good.
static SPARE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// 8 MiB: the chunks of a wake of 1,000 polls with bodies of up to 8 KiB (bench section
/// 4's are 4.5 KiB: 18 chunks; with 16 spares, a few were fresh in every wake).
const SPARE_MAX: usize = 32;

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

/// Hands a region to JS without copying it. A view of a shared chunk holds the chunk
/// until V8 collects the view (Node runs the finalizer on the JS thread); a large body's
/// own block is freed with its view.
fn region_to_js(region: Region) -> Uint8Array {
    match region {
        Region::Own(body) => Uint8Array::new(body),
        Region::Shared { block, start, end } => {
            // SAFETY: `start..end` lies in the block, was fully written before the cut,
            // and is never written again; the finalizer holds the block until JS can no
            // longer reach the bytes.
            unsafe { Uint8Array::with_external_data(block.0.as_ptr().add(start), end - start, move |_, _| drop(block)) }
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
                let (index, regions) = queue.lock().unwrap_or_else(|p| p.into_inner()).take();
                let bodies = regions.into_iter().map(region_to_js).collect();
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

    /// Takes a delivery and walks it as js/provider/live.js `settleCalls` does: (ticket, status,
    /// body) in order.
    fn deliver(p: &mut Packed) -> Vec<(u32, u32, Vec<u8>)> {
        let (index, regions) = p.take();
        let bytes: Vec<&[u8]> = regions
            .iter()
            .map(|r| match r {
                // SAFETY: as in `region_to_js`; the region holds its block.
                Region::Shared { block, start, end } => unsafe {
                    std::slice::from_raw_parts(block.0.as_ptr().add(*start), end - start)
                },
                Region::Own(v) => &v[..],
            })
            .collect();
        let (mut c, mut at, mut out) = (0, 0, Vec::new());
        for a in index.chunks(3) {
            let len = a[2] as usize;
            if at + len > bytes[c].len() {
                c += 1;
                at = 0;
            }
            out.push((a[0], a[1], bytes[c][at..at + len].to_vec()));
            at += len;
        }
        assert_eq!(at, bytes.last().map_or(0, |b| b.len()), "the last region ends at the last body");
        out
    }

    fn answer(p: &mut Packed, sent: &mut Vec<(u32, u32, Vec<u8>)>, len: usize) {
        let i = sent.len() as u32;
        let body = vec![b'a' + (i % 26) as u8; len];
        sent.push((i, 200, body.clone()));
        p.push(i, 200, Ready::from(body));
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
        let (mut p, mut sent) = (Packed::default(), Vec::new());
        // Sizes that leave odd remainders, a body over half a chunk, and a small one after it.
        for len in [40_000usize, 100_000, 90_000, 70_000, CHUNK / 2 + 1, 10, 130_000] {
            answer(&mut p, &mut sent, len);
        }
        let kinds: Vec<(bool, usize)> = p
            .regions
            .iter()
            .map(|r| match r {
                Region::Shared { start, end, .. } => (true, end - start),
                Region::Own(v) => (false, v.len()),
            })
            .collect();
        // 40k + 100k + 90k share the first chunk; 70k starts the next, which the 10 bytes
        // after the large body continue; each large body has a region of its own.
        assert_eq!(kinds, [(true, 230_000), (true, 70_000), (false, CHUNK / 2 + 1), (true, 10), (false, 130_000)]);
        assert_eq!(deliver(&mut p), sent);
        assert!(deliver(&mut p).is_empty(), "a delivery takes everything");
    }

    #[test]
    fn a_chunk_carries_on_into_the_next_delivery_without_touching_what_js_holds() {
        let (mut p, mut sent) = (Packed::default(), Vec::new());
        for len in [1_000usize, 2_000, 3_000] {
            answer(&mut p, &mut sent, len);
        }
        let (_, first) = p.take();
        let Region::Shared { block, start: 0, end: 6_000 } = &first[0] else { panic!("one region of the first chunk") };
        let held = block.clone();
        // SAFETY: the region holds its block, and nothing writes before the cut.
        let view = || unsafe { std::slice::from_raw_parts(held.0.as_ptr(), 6_000).to_vec() };
        let before = view();
        let mut later = Vec::new();
        for len in [4_000usize, 5_000] {
            answer(&mut p, &mut later, len);
        }
        // The second delivery starts where the first ended, in the same chunk.
        assert!(p.regions.is_empty(), "no region is cut before a delivery takes it");
        let (index, second) = p.take();
        assert_eq!(index.len(), 6);
        let Region::Shared { block: b2, start: 6_000, end: 15_000 } = &second[0] else { panic!("the same chunk, after the first region") };
        assert!(std::sync::Arc::ptr_eq(b2, block));
        assert_eq!(view(), before, "bytes handed to JS are never written again");
        // A body that does not fit in the chunk's room starts a new one.
        let mut last = Vec::new();
        answer(&mut p, &mut last, CHUNK / 2);
        answer(&mut p, &mut last, CHUNK / 2 - 15_000 + 1);
        let out = deliver(&mut p);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].2.len(), CHUNK / 2);
        assert_eq!(out[1].2.len(), CHUNK / 2 - 15_000 + 1);
    }
}
