//! Threads that help the calling thread fill the rows of a batch: started
//! once, they claim runs of rows off a common counter.
//!
//! The caller fills rows itself from the first moment, helpers that start in
//! time claim rows off the same counter, and the caller never waits for a
//! helper that has not started: it only waits for rows a helper has already
//! claimed. So a machine whose other jobs hold the cores costs a batch no
//! more than a loop of single fills (a pool that the caller waits on, as a
//! rayon `par_iter` from outside the pool is, paid 0.5-1 ms a call at a load
//! of 10 on 2 cores, 3x slower than the loop).
//!
//! After a batch, helpers spin for the pool's spin time waiting for the next
//! one, and only then sleep: waking a sleeping thread on a 2-core VM took 70
//! µs at the median and 150 µs at p90, measured from the call's start to the
//! helper's first claim, more than a third of a warm 128-row Llama 3 batch
//! (about 240 µs). A serving loop that fills a batch every step within the
//! spin time finds its helpers awake.
//!
//! Claims are guided: each takes a share of what is left (an eighth of it
//! with two threads), never less than one row, so a 128-row batch on two
//! threads costs about 20 atomic operations on the shared counter rather
//! than 128, each thread fills runs of adjacent rows, and the last claims
//! are single rows, so neither thread waits long for the other at the end.
//!
//! A job that panics is caught where it ran; once every claimed job has
//! ended, the caller resumes the first panic, as `rayon` does, and the
//! helpers keep serving.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long helpers spin after a batch before they sleep, by default.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(1000);

/// Helper threads for batch fills, shared by every batch run on the pool.
pub struct FillPool {
    inner: Arc<PoolInner>,
    helpers: usize,
}

impl std::fmt::Debug for FillPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FillPool")
            .field("threads", &self.threads())
            .field("spin", &self.inner.spin)
            .finish()
    }
}

struct PoolInner {
    /// Bumped (under `slot`'s lock) for every batch posted.
    epoch: AtomicU64,
    /// The batch posted last, while its caller is running it.
    slot: Mutex<Option<Arc<Batch>>>,
    /// Helpers asleep on `wake` (changed under `slot`'s lock).
    sleepers: AtomicUsize,
    wake: Condvar,
    spin: Duration,
    stop: AtomicBool,
    /// Helper threads that have not ended (for tests and `Debug`).
    alive: AtomicUsize,
}

/// One batch: `len` jobs, run through `job`, a `&(dyn Fn(usize) + Sync)`
/// on the caller's stack.
struct Batch {
    /// First job not yet claimed.
    next: AtomicUsize,
    len: usize,
    /// Helpers inside the batch (they may hold a claim).
    active: AtomicUsize,
    /// Set by the caller once every job is claimed: helpers arriving later
    /// leave without touching `job`.
    closed: AtomicBool,
    /// Threads that may claim (the caller and its helpers).
    threads: usize,
    job: JobRef,
    /// The first panic of a job, resumed by the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// The caller's job function, valid while the batch is not closed or a
/// helper is active in it (see [`FillPool::for_each_index`]).
struct JobRef(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync` and only called while the caller keeps it
// alive (see `FillPool::for_each_index`).
unsafe impl Send for JobRef {}
unsafe impl Sync for JobRef {}

/// Decrements a counter when dropped.
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// Locks, ignoring poisoning: the data behind these locks (a slot holding
/// an `Arc`, a panic payload) stays consistent whatever a panicking holder
/// was doing.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Batch {
    /// Claims the next run of jobs: a share of those left, at least one.
    fn claim(&self) -> Option<std::ops::Range<usize>> {
        let mut start = self.next.load(SeqCst);
        loop {
            if start >= self.len {
                return None;
            }
            let size = ((self.len - start) / (4 * self.threads)).max(1);
            match self
                .next
                .compare_exchange_weak(start, start + size, SeqCst, SeqCst)
            {
                Ok(_) => return Some(start..start + size),
                Err(now) => start = now,
            }
        }
    }

    /// Claims and runs jobs until none is left; a panic is kept for the
    /// caller, and claiming goes on.
    ///
    /// # Safety
    /// `self.job` must be alive (see [`FillPool::for_each_index`]).
    unsafe fn take_jobs(&self) {
        // SAFETY: alive, as the caller of this function promises.
        let job = unsafe { &*self.job.0 };
        while let Some(run) = self.claim() {
            for i in run {
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| job(i))) {
                    lock(&self.panic).get_or_insert(p);
                }
            }
        }
    }
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
            alive: AtomicUsize::new(0),
        });
        let helpers = threads.saturating_sub(1);
        let pool = FillPool {
            inner: inner.clone(),
            helpers,
        };
        for i in 0..helpers {
            let inner = inner.clone();
            inner.alive.fetch_add(1, SeqCst);
            let started = std::thread::Builder::new()
                .name(format!("tokensieve-fill-{i}"))
                .spawn(move || {
                    let _leave = Leave(&inner.alive);
                    helper_loop(&inner);
                });
            if let Err(e) = started {
                pool.inner.alive.fetch_sub(1, SeqCst);
                // Dropping `pool` stops the helpers already started.
                return Err(e);
            }
        }
        Ok(pool)
    }

    /// The process's pool: one thread per core, helpers spinning
    /// [`DEFAULT_SPIN`]. `None` when its threads could not be started
    /// (batches are then run by the caller alone).
    pub fn global() -> Option<&'static FillPool> {
        static GLOBAL: OnceLock<Option<FillPool>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                FillPool::new(cores, DEFAULT_SPIN).ok()
            })
            .as_ref()
    }

    /// Threads that run one batch, the caller included.
    pub fn threads(&self) -> usize {
        self.helpers + 1
    }

    /// Runs `job(i)` once for every `i` in `0..n`, on the calling thread and
    /// the pool's helpers; returns when every one has ended. A panic of a
    /// job is resumed here once every job has ended.
    pub fn for_each_index(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        let threads = self.threads().min(n);
        if threads < 2 {
            (0..n).for_each(job);
            return;
        }
        // SAFETY: only the lifetime is erased; helpers call `job` only
        // while the batch is open or they are counted in `active`, and this
        // function returns (ending `job`'s borrow) only after it closed the
        // batch and `active` dropped to zero.
        let job: *const (dyn Fn(usize) + Sync + '_) = job;
        let job = JobRef(unsafe {
            std::mem::transmute::<
                *const (dyn Fn(usize) + Sync + '_),
                *const (dyn Fn(usize) + Sync + 'static),
            >(job)
        });
        let batch = Arc::new(Batch {
            next: AtomicUsize::new(0),
            len: n,
            active: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            threads,
            job,
            panic: Mutex::new(None),
        });
        self.post(&batch);
        // SAFETY: `job` is borrowed for this whole call.
        unsafe { batch.take_jobs() };
        // Every job is claimed. A helper that increments `active` after this
        // store sees `closed` and never touches the jobs (SeqCst: the store
        // is ordered before the loads of `active` below and after those it
        // sees).
        batch.closed.store(true, SeqCst);
        self.withdraw(&batch);
        let mut spins = 0u32;
        while batch.active.load(SeqCst) != 0 {
            // Only helpers that are running a claimed run (microseconds a
            // row) are waited for.
            if spins < 1000 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        if let Some(p) = lock(&batch.panic).take() {
            resume_unwind(p);
        }
    }

    /// Hands `batch` to the helpers (waking those asleep). Never blocks:
    /// where the slot is busy the caller runs the batch alone.
    fn post(&self, batch: &Arc<Batch>) {
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
    fn withdraw(&self, batch: &Arc<Batch>) {
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

/// A helper: waits for a batch (spinning for `spin` after the last one,
/// then asleep), helps run it, and again, until its pool is dropped.
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
            batch.active.fetch_add(1, SeqCst);
            let _leave = Leave(&batch.active);
            if !batch.closed.load(SeqCst) {
                // SAFETY: not closed yet, so the caller is still in
                // `for_each_index` and waits for `active` to drop to zero
                // before `job` goes away.
                unsafe { batch.take_jobs() };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Every index runs exactly once, from several callers at once, on a
    /// spinning pool and on one whose helpers sleep between batches.
    #[test]
    fn every_index_runs_once_from_many_callers() {
        for spin in [Duration::ZERO, Duration::from_millis(20)] {
            let pool = FillPool::new(3, spin).unwrap();
            std::thread::scope(|s| {
                for caller in 0..4 {
                    let pool = &pool;
                    s.spawn(move || {
                        for round in 0..200usize {
                            let n = (caller * 37 + round * 11) % 150;
                            let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
                            pool.for_each_index(n, &|i| {
                                hits[i].fetch_add(1, SeqCst);
                            });
                            assert!(
                                hits.iter().all(|h| h.load(SeqCst) == 1),
                                "spin {spin:?}, n {n}"
                            );
                            if round % 50 == 0 {
                                std::thread::sleep(Duration::from_millis(2));
                            }
                        }
                    });
                }
            });
        }
    }

    /// A panicking job reaches the caller after every other job ran, and
    /// the pool serves the next batch.
    #[test]
    fn a_panicking_job_is_resumed_by_the_caller() {
        let pool = FillPool::new(2, DEFAULT_SPIN).unwrap();
        for bad in [0usize, 63, 127] {
            let hits: Vec<AtomicU32> = (0..128).map(|_| AtomicU32::new(0)).collect();
            let out = catch_unwind(AssertUnwindSafe(|| {
                pool.for_each_index(128, &|i| {
                    if i == bad {
                        panic!("job {i}");
                    }
                    hits[i].fetch_add(1, SeqCst);
                })
            }));
            let p = out.expect_err("the panic reaches the caller");
            assert_eq!(
                p.downcast_ref::<String>().map(String::as_str),
                Some(&*format!("job {bad}"))
            );
            assert!((0..128).all(|i| hits[i].load(SeqCst) == u32::from(i != bad)));
        }
        let hits: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
        pool.for_each_index(64, &|i| {
            hits[i].fetch_add(1, SeqCst);
        });
        assert!(hits.iter().all(|h| h.load(SeqCst) == 1));
    }

    /// Dropping a pool ends its helpers, whether asleep or spinning.
    #[test]
    fn a_dropped_pool_ends_its_threads() {
        for spin in [Duration::ZERO, Duration::from_secs(60)] {
            let pool = FillPool::new(4, spin).unwrap();
            pool.for_each_index(16, &|_| {});
            let inner = pool.inner.clone();
            assert_eq!(inner.alive.load(SeqCst), 3);
            drop(pool);
            let deadline = Instant::now() + Duration::from_secs(30);
            while inner.alive.load(SeqCst) > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(inner.alive.load(SeqCst), 0, "spin {spin:?}");
        }
    }
}
