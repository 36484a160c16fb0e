//! Deterministic test data for the test suites and benches of every crate,
//! and [`skip!`](crate::skip): how a test says it did not run.

use std::fmt;
use std::io::Write as _;

/// The variable naming the file that [`report_skip`] appends each skip to,
/// one line each (`scripts/test.sh` sets it and sums the file up at the end
/// of the run).
pub const SKIP_LOG_VAR: &str = "TOKENSIEVE_SKIP_LOG";

/// Says that the running test skipped (part of) its work, and why: on the
/// process's stderr itself, which the test harness does not capture, so
/// the line shows in a plain `cargo test`, and in the file named by
/// [`SKIP_LOG_VAR`] when it is set. Use it through [`skip!`](crate::skip).
pub fn report_skip(reason: fmt::Arguments<'_>) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("main");
    let line = format!("skipped: {test}: {reason}");
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_VAR)
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

/// `skip!("{} not found", path.display())`: reports a skip with
/// [`report_skip`](crate::testing::report_skip).
#[macro_export]
macro_rules! skip {
    ($($arg:tt)*) => {
        $crate::testing::report_skip(format_args!($($arg)*))
    };
}

/// SplitMix64: a tiny, seeded, reproducible generator of test data (not for
/// anything that needs statistical quality or secrecy).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform enough in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True `per_mille` times in a thousand.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.next_u32() % 1000 < per_mille
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reproducible() {
        let (mut a, mut b) = (super::SplitMix64(7), super::SplitMix64(7));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..4).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert!(xs.windows(2).all(|w| w[0] != w[1]));
        assert!((0..100).all(|_| a.below(3) < 3));
    }
}
