//! The rows of a batch fill, shared out between the calling thread and pool
//! threads that pull rows from a common counter.
//!
//! Why not a plain `par_iter`: the caller would only wait while pool threads
//! do the work, so on a busy machine every call pays the time the scheduler
//! takes to wake them (measured: 0.5-1 ms per call at a load of 10 on 2
//! cores, which made 128-row batches 3x slower than a loop of single fills).
//! Here the caller fills rows itself from the first moment, helpers that
//! start in time take rows off the same counter, and the caller never waits
//! for a helper that has not started: it only waits for rows a helper has
//! already taken.

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
    /// Next job to take.
    next: AtomicUsize,
    /// Helpers inside their loop (they may hold a job).
    active: AtomicUsize,
    /// Set by the caller once every job is taken: helpers arriving later
    /// leave without touching the jobs.
    closed: AtomicBool,
    /// `*mut RowJob` of the caller's slice, and its length.
    jobs: usize,
    len: usize,
}

/// Decrements a helper count when dropped.
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// Takes jobs until none is left.
///
/// # Safety
/// `shared.jobs` must point to `shared.len` live jobs that nobody else
/// touches except through this counter.
unsafe fn take_jobs(shared: &Shared) {
    loop {
        let i = shared.next.fetch_add(1, SeqCst);
        if i >= shared.len {
            return;
        }
        // SAFETY: each index is handed out once; the slice outlives every
        // taker (see `fill_rows`).
        let job = unsafe { &mut *(shared.jobs as *mut RowJob<'static>).add(i) };
        fill_job(job);
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
    // Every job is taken. A helper that increments `active` after this
    // store sees `closed` and never touches the jobs (SeqCst: the store is
    // ordered before the loads of `active` below and after those it sees).
    shared.closed.store(true, SeqCst);
    let mut spins = 0u32;
    while shared.active.load(SeqCst) != 0 {
        // Only helpers that are filling a row (microseconds) are waited for.
        if spins < 1000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}
