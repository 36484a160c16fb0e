//! The rows of a batch fill, shared out between the calling thread and pool
//! threads that claim runs of consecutive rows from a common counter.
//!
//! Why not a plain `par_iter`: the caller would only wait while pool threads
//! do the work, so on a busy machine every call pays the time the scheduler
//! takes to wake them (measured: 0.5-1 ms per call at a load of 10 on 2
//! cores, which made 128-row batches 3x slower than a loop of single fills).
//! Here the caller fills rows itself from the first moment, helpers that
//! start in time claim rows off the same counter, and the caller never waits
//! for a helper that has not started: it only waits for rows a helper has
//! already claimed.
//!
//! Claims are guided: each takes a share of what is left (an eighth of it
//! with two threads), never less than one row, so a 128-row batch on two
//! threads costs about 20 atomic operations on the shared counter rather
//! than 128, each thread fills runs of adjacent rows, and the last claims
//! are single rows, so neither thread waits long for the other at the end.

use crate::matcher::Matcher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

/// One row to fill.
pub struct RowJob<'a> {
    /// Where the row goes in the caller's buffer (for error messages).
    pub index: usize,
    pub row: &'a mut [u32],
    /// `None`: unconstrained, a full row.
    pub matcher: Option<&'a Matcher>,
    pub error: Option<String>,
}

fn fill_job(job: &mut RowJob<'_>) {
    job.error = match job.matcher {
        None => {
            job.row.fill(u32::MAX);
            None
        }
        Some(m) => m
            .fill_row_locked(job.row)
            .err()
            .map(|e| format!("row {}: {e}", job.index)),
    };
}

struct Shared {
    /// First job not yet claimed.
    next: AtomicUsize,
    /// Helpers inside their loop (they may hold a claim).
    active: AtomicUsize,
    /// Set by the caller once every job is claimed: helpers arriving later
    /// leave without touching the jobs.
    closed: AtomicBool,
    /// `*mut RowJob` of the caller's slice, and its length.
    jobs: usize,
    len: usize,
    /// Threads that may claim (the caller and its helpers).
    threads: usize,
}

/// Decrements a helper count when dropped.
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// Claims the next run of jobs: a share of those left, at least one.
fn claim(shared: &Shared) -> Option<std::ops::Range<usize>> {
    let mut start = shared.next.load(SeqCst);
    loop {
        if start >= shared.len {
            return None;
        }
        let size = ((shared.len - start) / (4 * shared.threads)).max(1);
        match shared
            .next
            .compare_exchange_weak(start, start + size, SeqCst, SeqCst)
        {
            Ok(_) => return Some(start..start + size),
            Err(now) => start = now,
        }
    }
}

/// Claims and fills jobs until none is left.
///
/// # Safety
/// `shared.jobs` must point to `shared.len` live jobs that nobody else
/// touches except through this counter.
unsafe fn take_jobs(shared: &Shared) {
    while let Some(run) = claim(shared) {
        for i in run {
            // SAFETY: each index is claimed once; the slice outlives every
            // taker (see `fill_rows`).
            let job = unsafe { &mut *(shared.jobs as *mut RowJob<'static>).add(i) };
            fill_job(job);
        }
    }
}

/// Fills every job, with up to `threads - 1` helpers from `pool` (rayon's
/// global pool when `None`) besides the calling thread.
pub fn fill_rows(jobs: &mut [RowJob<'_>], pool: Option<&rayon::ThreadPool>, threshold: usize) {
    let threads = pool.map_or_else(rayon::current_num_threads, |p| p.current_num_threads());
    let helpers = threads.saturating_sub(1).min(jobs.len().saturating_sub(1));
    if jobs.len() < threshold || helpers == 0 {
        jobs.iter_mut().for_each(fill_job);
        return;
    }
    let shared = Arc::new(Shared {
        next: AtomicUsize::new(0),
        active: AtomicUsize::new(0),
        closed: AtomicBool::new(false),
        jobs: jobs.as_mut_ptr() as usize,
        len: jobs.len(),
        threads: helpers + 1,
    });
    for _ in 0..helpers {
        let s = shared.clone();
        let helper = move || {
            s.active.fetch_add(1, SeqCst);
            // Leaves `active` even if a fill panicked (matchers catch their
            // backends' panics; this guards against anything else), so the
            // caller never waits for ever.
            let _leave = Leave(&s.active);
            if !s.closed.load(SeqCst) {
                // SAFETY: not closed yet, so the caller is still in
                // `fill_rows` and waits for `active` to drop to zero before
                // the jobs go away.
                unsafe { take_jobs(&s) };
            }
        };
        match pool {
            Some(p) => p.spawn(helper),
            None => rayon::spawn(helper),
        }
    }
    // SAFETY: the jobs live until this function returns, which is after
    // every helper that could reach them has left (below).
    unsafe { take_jobs(&shared) };
    // Every job is claimed. A helper that increments `active` after this
    // store sees `closed` and never touches the jobs (SeqCst: the store is
    // ordered before the loads of `active` below and after those it sees).
    shared.closed.store(true, SeqCst);
    let mut spins = 0u32;
    while shared.active.load(SeqCst) != 0 {
        // Only helpers that are filling a claimed run (microseconds a row)
        // are waited for.
        if spins < 1000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}
