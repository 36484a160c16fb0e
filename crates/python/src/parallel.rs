//! The rows of a batch fill, run on a [`FillPool`]: the calling thread and
//! helpers that claim runs of rows off a common counter (see
//! `tokensieve::pool` for how rows are shared and why helpers spin).

use crate::matcher::Matcher;
use tokensieve::pool::FillPool;

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

/// Fills every job, on the threads of `pool` (the calling thread alone
/// when `None` or when there are fewer than `threshold` jobs).
pub fn fill_rows(jobs: &mut [RowJob<'_>], pool: Option<&FillPool>, threshold: usize) {
    let Some(pool) = pool.filter(|_| jobs.len() >= threshold) else {
        jobs.iter_mut().for_each(fill_job);
        return;
    };
    let base = jobs.as_mut_ptr() as usize;
    pool.for_each_index(jobs.len(), &|i| {
        // SAFETY: `for_each_index` runs each index once, while `jobs` is
        // borrowed by this call; job `i` is this closure call's alone.
        let job = unsafe { &mut *(base as *mut RowJob<'static>).add(i) };
        fill_job(job);
    });
}
