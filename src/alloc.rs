//! The crate's global allocator: glibc's malloc, except for delivery chunks, which are
//! pages mapped from the kernel.
//!
//! Why: a wake of 10,000 long polls renders tens of megabytes of bodies into delivery
//! chunks (`node::delivery`), which JS frees once V8 has collected their views. From
//! glibc's heaps, that memory mostly stayed resident after it was freed (glibc serves
//! blocks this large from its heaps once a freed mapping has raised its threshold), and
//! the process stayed that much larger (bench/RESULTS.md, section 5). Mapped here, a
//! freed chunk goes back to the kernel at once; the delivery keeps a few for reuse.
//!
//! Only blocks of exactly [`MAPPED_BLOCK`] bytes are mapped: a delivery chunk is made
//! with that capacity and never grows. It is not a power of two, so a vector that grows
//! by doubling never lands on it. Every other block stays with glibc, which reuses freed
//! memory without page faults: mapping every large block (snapshot pages, say) made
//! first batches of 100 and 1,024 observations about twice as slow.

use std::alloc::{GlobalAlloc, Layout, System};

/// The size of a delivery chunk, and the only block size that is mapped (63 pages).
pub(crate) const MAPPED_BLOCK: usize = 252 * 1024;
const PAGE: usize = 4096;

pub struct Allocator;

fn is_large(layout: &Layout) -> bool {
    layout.size() == MAPPED_BLOCK && layout.align() <= PAGE
}

fn pages(size: usize) -> usize {
    (size + PAGE - 1) & !(PAGE - 1)
}

unsafe fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address the kernel chooses.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            pages(size),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

unsafe fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: `ptr` was returned by `map` for a block of `size` bytes.
    unsafe { libc::munmap(ptr.cast(), pages(size)) };
}

// SAFETY: every block is classified by its layout alone, and Rust hands `dealloc` and
// `realloc` the layout the block was allocated (or last reallocated) with, so a block is
// always returned to the allocator that made it. Mapped blocks are page aligned, which
// satisfies any alignment up to a page; larger alignments go to `System`.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(&layout) {
            unsafe { map(layout.size()) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(&layout) {
            // Fresh anonymous pages are zero.
            unsafe { map(layout.size()) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(&layout) {
            unsafe { unmap(ptr, layout.size()) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_large(&layout), is_large(&new_layout)) {
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            // Only one size is mapped: a mapped block resized to a mapped block keeps its
            // size, and its place.
            (true, true) => ptr,
            _ => {
                // To or from the mapped size: a new block of the other kind, then a copy.
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MAPPED_BLOCK;

    fn pattern(len: usize, salt: u8) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 ^ salt).collect()
    }

    #[test]
    fn a_mapped_block_keeps_its_bytes_when_it_grows_shrinks_or_becomes_one() {
        // Mapped, then grown onto the heap.
        let mut v: Vec<u8> = Vec::with_capacity(MAPPED_BLOCK);
        v.extend_from_slice(&pattern(MAPPED_BLOCK, 1));
        v.extend_from_slice(&pattern(1000, 2));
        assert_eq!(&v[..MAPPED_BLOCK], &pattern(MAPPED_BLOCK, 1)[..]);
        assert_eq!(&v[MAPPED_BLOCK..], &pattern(1000, 2)[..]);
        // From the heap to a mapped block, and back to a smaller heap block.
        let mut w: Vec<u8> = pattern(90_000, 3);
        w.reserve_exact(MAPPED_BLOCK - w.len());
        assert_eq!(w.capacity(), MAPPED_BLOCK);
        assert_eq!(w, pattern(90_000, 3));
        w.truncate(1000);
        w.shrink_to_fit();
        assert_eq!(w, pattern(1000, 3));
        // A zeroed mapped block is zero.
        let z = vec![0u8; MAPPED_BLOCK];
        assert!(z.iter().all(|b| *b == 0));
    }
}
