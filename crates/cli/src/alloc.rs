//! The process's allocator: mimalloc, asked for a plain block wherever the
//! block it gives is aligned enough.
//!
//! The `mimalloc` crate's allocator asks `mi_malloc_aligned` for every
//! allocation. In mimalloc 3 that call takes its fast path only where the
//! size's page has a free block at hand; otherwise a size that is not a
//! power of two (most of a compile's syntax-tree nodes and vectors) is
//! over-allocated and aligned by hand, and the page marked as holding
//! interior pointers: 14% of a Kubernetes schema's compile instructions.
//! A plain `mi_malloc` block is aligned to 8 bytes at least (every size
//! class is a number of 8-byte words, every page's first block aligned to
//! 16), and to 16 where its size is a multiple of 16 (those classes are
//! even numbers of words): a request within that goes to `mi_malloc`, any
//! other to the aligned call.
//!
//! [`keep_memory`] sets how the process deals with the kernel for memory:
//! what it frees stays its own, in pages of 4 KB.
//!
//! Used by the `tokensieve` binary, by the Python extension module
//! (`crates/python`, which leaves [`keep_memory`] to the application) and by
//! the earley crate's `examples/compile_profile.rs`, which includes this
//! file so that it measures the allocator the command runs with.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_int, c_long, c_void};

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

// Not in `libmimalloc-sys`'s bindings without its `extended` feature (and
// its constants there lack the purge delay): declared here.
unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
    fn mi_collect(force: bool);
    #[cfg(test)]
    fn mi_option_get(option: c_int) -> c_long;
}

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (the 16th
/// option): how long freed memory waits before it goes back to the OS, in
/// milliseconds; -1: never.
const MI_OPTION_PURGE_DELAY: c_int = 15;

#[cfg(target_os = "linux")]
unsafe extern "C" {
    fn prctl(option: c_int, ...) -> c_int;
}
#[cfg(target_os = "linux")]
const PR_SET_THP_DISABLE: c_int = 41;
#[cfg(all(target_os = "linux", test))]
const PR_GET_THP_DISABLE: c_int = 42;

/// Keeps the kernel's page work off the masks: freed memory is never given
/// back to the OS (so using it again costs no page fault), and the process
/// takes no transparent huge pages (a fault on one zeroes 2 MB at once).
///
/// Measured with `bench maskbench --backend earley` on all MaskBench files
/// (2-core VM, THP "madvise", the host taking back memory the guest
/// frees): by default 2 to 7 masks a run took 4 to 21 ms, each a mask of
/// 0.2 to 1 ms plus one fault on a huge page (or a purge), at a token that
/// differs from run to run; with both settings one mask over 4 ms in
/// twenty-one runs (4.1 ms, a 30 µs mask once), the largest otherwise 2.3
/// to 3.9 ms, the same peak memory, and the kernel's
/// time 2.0 → 0.6–0.8 s. With one setting alone such masks remained. Call
/// once, early, before the work that is timed.
pub fn keep_memory() {
    // SAFETY: an option index of mimalloc 3 and a value it documents.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with an option that takes one integer argument; on a
    // kernel without it the call fails and nothing changes.
    unsafe {
        prctl(PR_SET_THP_DISABLE, 1 as std::ffi::c_ulong, 0, 0, 0);
    }
}

/// Undoes [`keep_memory`]'s first half for a run that measures memory in
/// use (`bench soak`): freed memory goes back to the OS at once from now
/// on, and what is free now goes back now, so resident memory follows what
/// the process holds rather than the most it ever held.
#[allow(dead_code)] // the CLI's soak is its only caller
pub fn return_memory() {
    // SAFETY: an option index of mimalloc 3 and a value it documents, and
    // mimalloc's own collection, safe to call from any thread at any time.
    unsafe {
        mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        mi_collect(true);
    }
}

/// mimalloc, as the global allocator.
pub struct MiMalloc;

/// Whether every `mi_malloc` block of `size` bytes is aligned to `align`.
fn plain_block_fits(size: usize, align: usize) -> bool {
    align <= 8 || align == 16 && size.is_multiple_of(16)
}

// SAFETY: each call hands mimalloc's own functions the layout's size, and
// its alignment wherever a plain block might not have it; `dealloc` and
// `realloc` take blocks from either (mimalloc frees both with `mi_free`).
unsafe impl GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: a valid layout; mimalloc returns null on failure.
        unsafe {
            if plain_block_fits(layout.size(), layout.align()) {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if plain_block_fits(layout.size(), layout.align()) {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; the new
        // block is plain only where a plain block is aligned enough.
        unsafe {
            if plain_block_fits(new_size, layout.align()) {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After `keep_memory` mimalloc never purges and (on Linux) the
    /// process takes no transparent huge pages. The option's index is
    /// checked by its default first (1000 ms in mimalloc 3; the options
    /// beside it default to 0 and 1), as no test here sets it before.
    #[test]
    fn memory_is_kept_in_small_pages() {
        // SAFETY: reading an option.
        assert_eq!(unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }, 1000);
        keep_memory();
        // SAFETY: reading an option.
        assert_eq!(unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }, -1);
        #[cfg(target_os = "linux")]
        // SAFETY: prctl with an option that takes no argument.
        assert_eq!(unsafe { prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) }, 1);
    }

    /// Blocks of every size to a few pages, at each alignment up to a
    /// page, are aligned as asked, keep their bytes through `realloc`
    /// both ways (a plain block that must become an aligned one too), and
    /// zeroed ones are zero.
    #[test]
    fn blocks_are_aligned_as_asked() {
        let a = MiMalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..600).chain([4095, 4096, 70_000]) {
                let Ok(layout) = Layout::from_size_align(size, align) else {
                    continue;
                };
                // SAFETY: non-zero sizes, blocks freed once.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(
                        !p.is_null() && (p as usize).is_multiple_of(align),
                        "{size} {align}"
                    );
                    p.write_bytes(0xA5, size);
                    let grown = size * 3 + 5;
                    let q = a.realloc(p, layout, grown);
                    assert!(
                        !q.is_null() && (q as usize).is_multiple_of(align),
                        "{grown} {align}"
                    );
                    assert!((0..size).all(|i| *q.add(i) == 0xA5));
                    a.dealloc(q, Layout::from_size_align(grown, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert!(
                        (z as usize).is_multiple_of(align) && (0..size).all(|i| *z.add(i) == 0)
                    );
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
