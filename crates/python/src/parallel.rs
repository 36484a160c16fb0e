//! The rows of a batch fill, shared out between the calling thread and
//! helper threads that claim runs of consecutive rows from a common counter.
//!
//! The caller fills rows itself from the first moment, helpers that start in
//! time claim rows off the same counter, and the caller never waits for a
//! helper that has not started: it only waits for rows a helper has already
//! claimed. So a machine whose other jobs hold the cores costs a batch no
//! more than a loop of single fills (a pool that the caller waits on paid
//! 0.5-1 ms a call at a load of 10 on 2 cores, 3x slower than the loop).
//!
//! Helpers are threads of a [`FillPool`], started once. After a batch they
//! spin for the pool's spin time, waiting for the next one, and only then
//! sleep: waking a sleeping thread on this 2-core VM takes 70 µs at the
//! median and 150 µs at p90, measured from the call's start to the helper's
//! first claim, more than a third of a warm 128-row Llama 3 batch (about
//! 240 µs). A serving loop that fills a batch every step within the spin
//! time finds its helpers awake.
//!
//! Claims are guided: each takes a share of what is left (an eighth of it
//! with two threads), never less than one row, so a 128-row batch on two
//! threads costs about 20 atomic operations on the shared counter rather
//! than 128, each thread fills runs of adjacent rows, and the last claims
//! are single rows, so neither thread waits long for the other at the end.

use crate::matcher::Matcher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// Helper threads for batch fills, started once and shared by every batch
/// of the compilers that hold the pool.
pub struct FillPool {
    inner: Arc<PoolInner>,
    helpers: usize,
}

struct PoolInner {
    /// Bumped (under `slot`'s lock) for every batch posted.
    epoch: AtomicU64,
    /// The batch posted last, while its caller is filling it.
    slot: Mutex<Option<Arc<Shared>>>,
    /// Helpers asleep on `wake` (changed under `slot`'s lock).
    sleepers: AtomicUsize,
    wake: Condvar,
    spin: Duration,
    stop: AtomicBool,
}

impl FillPool {
    /// A pool for `threads` threads in all, the caller included (so
    /// `threads - 1` helpers), whose helpers spin `spin` after each batch.
    pub fn new(threads: usize, spin: Duration) -> std::io::Result<FillPool> {
        let inner = Arc::new(PoolInner {
            epoch: AtomicU64::new(0),
            slot: Mutex::new(None),
            sleepers: AtomicUsize::new(0),
            wake: Condvar::new(),
            spin,
            stop: AtomicBool::new(false),
        });
        let helpers = threads.saturating_sub(1);
        for i in 0..helpers {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name(format!("tokensieve-fill-{i}"))
                .spawn(move || helper_loop(&inner))?;
        }
        Ok(FillPool { inner, helpers })
    }

    /// The pool of compilers created without `threads`: one thread per
    /// core, helpers spinning [`DEFAULT_SPIN`]. `None` when its threads
    /// could not be started (batches are then filled by the caller alone).
    pub fn global() -> Option<&'static FillPool> {
        static GLOBAL: OnceLock<Option<FillPool>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                FillPool::new(cores, DEFAULT_SPIN).ok()
            })
            .as_ref()
    }

    /// Threads that fill one batch, the caller included.
    pub fn threads(&self) -> usize {
        self.helpers + 1
    }

    /// Hands `batch` to the helpers (waking those asleep). Never blocks:
    /// where the slot is busy the caller fills the batch alone.
    fn post(&self, batch: &Arc<Shared>) {
        let Ok(mut slot) = self.inner.slot.try_lock() else {
            return;
        };
        *slot = Some(batch.clone());
        self.inner.epoch.fetch_add(1, SeqCst);
        if self.inner.sleepers.load(SeqCst) > 0 {
            self.inner.wake.notify_all();
        }
    }

    /// Takes `batch` back out of the slot, unless another caller's batch
    /// replaced it. Never blocks: a closed batch left in the slot is
    /// harmless (a helper that takes it finds it closed).
    fn withdraw(&self, batch: &Arc<Shared>) {
        if let Ok(mut slot) = self.inner.slot.try_lock()
            && slot.as_ref().is_some_and(|b| Arc::ptr_eq(b, batch))
        {
            *slot = None;
        }
    }
}

impl Drop for FillPool {
    fn drop(&mut self) {
        let _slot = lock(&self.inner.slot);
        self.inner.stop.store(true, SeqCst);
        self.inner.wake.notify_all();
    }
}

/// How long helpers spin after a batch before they sleep, by default.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(1000);

/// Locks, ignoring poisoning: the data behind these locks (a slot holding an
/// `Arc`) stays consistent whatever a panicking holder was doing.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A helper: waits for a batch (spinning for `spin` after the last one, then
/// asleep), helps fill it, and again, until its pool is dropped.
fn helper_loop(inner: &PoolInner) {
    let mut seen = inner.epoch.load(SeqCst);
    loop {
        let since = Instant::now();
        let mut spins = 0u32;
        while inner.epoch.load(SeqCst) == seen {
            if inner.stop.load(Relaxed) {
                return;
            }
            spins += 1;
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            if since.elapsed() < inner.spin {
                // Lets other work run where the machine has no idle core.
                std::thread::yield_now();
                continue;
            }
            let mut slot = lock(&inner.slot);
            inner.sleepers.fetch_add(1, SeqCst);
            while inner.epoch.load(SeqCst) == seen && !inner.stop.load(SeqCst) {
                slot = inner.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
            inner.sleepers.fetch_sub(1, SeqCst);
            break;
        }
        if inner.stop.load(SeqCst) {
            return;
        }
        let batch = {
            let slot = lock(&inner.slot);
            seen = inner.epoch.load(SeqCst);
            slot.clone()
        };
        if let Some(batch) = batch {
            help(&batch);
        }
    }
}

/// A helper's share of one batch.
fn help(s: &Shared) {
    s.active.fetch_add(1, SeqCst);
    // Leaves `active` even if a fill panicked (matchers catch their
    // backends' panics; this guards against anything else), so the caller
    // never waits for ever.
    let _leave = Leave(&s.active);
    if !s.closed.load(SeqCst) {
        // SAFETY: not closed yet, so the caller is still in `fill_rows` and
        // waits for `active` to drop to zero before the jobs go away.
        unsafe { take_jobs(s) };
    }
}

/// Fills every job, with the helpers of `pool` (if any) besides the calling
/// thread.
pub fn fill_rows(jobs: &mut [RowJob<'_>], pool: Option<&FillPool>, threshold: usize) {
    let threads = pool.map_or(1, |p| p.threads().min(jobs.len()));
    if jobs.len() < threshold || threads < 2 {
        jobs.iter_mut().for_each(fill_job);
        return;
    }
    let pool = pool.expect("threads > 1 only with a pool");
    let shared = Arc::new(Shared {
        next: AtomicUsize::new(0),
        len: jobs.len(),
        active: AtomicUsize::new(0),
        closed: AtomicBool::new(false),
        jobs: jobs.as_mut_ptr() as usize,
        threads,
    });
    pool.post(&shared);
    // SAFETY: the jobs live until this function returns, which is after
    // every helper that could reach them has left (below).
    unsafe { take_jobs(&shared) };
    // Every job is claimed. A helper that increments `active` after this
    // store sees `closed` and never touches the jobs (SeqCst: the store is
    // ordered before the loads of `active` below and after those it sees).
    shared.closed.store(true, SeqCst);
    pool.withdraw(&shared);
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
