//! The extension's allocator: mimalloc for every Rust allocation made inside
//! the extension module (Python's own objects keep Python's allocator).
//!
//! Why: compiles and mask fills allocate many small blocks; with the system
//! allocator the bindings measured slower than the `tokensieve` binary,
//! which runs on mimalloc, on the same MaskBench files (figures in
//! docs/python.md). Unlike the binary, the module leaves the process's
//! memory settings (purge delay, transparent huge pages) alone: they belong
//! to the application that imports it.

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

pub struct MiMalloc;

/// A plain `mi_malloc` block is 8-byte aligned, and 16-byte aligned when its
/// size is a multiple of 16; the aligned calls (slower in mimalloc 3 for
/// sizes that are not powers of two) are kept for stricter alignments.
fn plain_block_fits(size: usize, align: usize) -> bool {
    align <= 8 || align == 16 && size.is_multiple_of(16)
}

// SAFETY: every call forwards to mimalloc with the layout's size and an
// alignment mimalloc honours (checked by `plain_block_fits`).
unsafe impl GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe {
            if plain_block_fits(layout.size(), layout.align()) {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe {
            if plain_block_fits(layout.size(), layout.align()) {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe {
            if plain_block_fits(new_size, layout.align()) {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}
