//! The crate's global allocator: glibc's malloc for ordinary blocks, pages mapped from the
//! kernel for large ones.
//!
//! Why: glibc maps a large block (128 KiB at first) on its own, but once such a block is
//! freed it raises that threshold, up to 32 MiB, and serves later large blocks from its
//! heaps. Memory freed there mostly stays resident. A wake of 10,000 long polls renders
//! tens of megabytes of bodies into 256 KiB delivery chunks (`node::delivery`), which JS
//! frees once it has answered them; served from the heap, they left the process that much
//! larger for good (bench/RESULTS.md, section 3, memory per waiting session). Mapped here,
//! a freed chunk goes back to the kernel at once. The same holds for snapshot pages and
//! sled's segment buffers.
//!
//! Only this crate's Rust allocations come here; Node's and V8's own allocations keep
//! glibc's behaviour.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks of at least this many bytes are mapped (glibc's initial threshold).
const LARGE: usize = 128 * 1024;
const PAGE: usize = 4096;

pub struct Allocator;

fn is_large(layout: &Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= PAGE
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
    // SAFETY: `ptr` was returned by `map` (or `mremap`) for a block of `size` bytes.
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
            (true, true) => {
                if pages(layout.size()) == pages(new_size) {
                    return ptr;
                }
                // SAFETY: remaps the whole block; the kernel may move it.
                let p = unsafe { libc::mremap(ptr.cast(), pages(layout.size()), pages(new_size), libc::MREMAP_MAYMOVE) };
                if p == libc::MAP_FAILED {
                    std::ptr::null_mut()
                } else {
                    p.cast()
                }
            }
            _ => {
                // Crossing the threshold: a new block of the other kind, then a copy.
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
    #[test]
    fn large_blocks_grow_shrink_and_cross_the_threshold_keeping_their_bytes() {
        let mut v: Vec<u8> = Vec::with_capacity(1000);
        // Small to large (copy), large to larger (remap), large to small (copy).
        for round in 0..3u8 {
            let len = [300_000usize, 2_000_000, 90_000][round as usize];
            v.clear();
            v.extend((0..len).map(|i| (i % 251) as u8 ^ round));
            v.shrink_to_fit();
            assert!(v.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8 ^ round));
        }
        let zeroed = vec![0u8; 1 << 20];
        assert!(zeroed.iter().all(|b| *b == 0));
        let grown: Vec<u64> = (0..100_000u64).collect();
        assert_eq!(grown.iter().sum::<u64>(), 100_000 * 99_999 / 2);
    }
}
