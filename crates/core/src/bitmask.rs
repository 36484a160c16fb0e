//! The token bitmask in the XGrammar/vLLM layout: `[batch, ceil(vocab/32)]`
//! 32-bit words, bit `j % 32` of word `j / 32` set = token `j` allowed.
//! Masks are therefore interchangeable with those engines'.

use crate::grammar::GrammarObject;
use crate::pool::FillPool;

/// Words needed for one row of a `vocab_size`-token mask.
pub const fn words_for(vocab_size: usize) -> usize {
    vocab_size.div_ceil(32)
}

/// Rows at or above which [`TokenBitmask::fill_batch`] fills in parallel.
/// Below it, handing rows to another thread outweighs a few masks.
pub const PARALLEL_FILL_THRESHOLD: usize = 4;

/// A `[batch, words]` bitmask, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBitmask {
    data: Vec<u32>,
    batch: usize,
    vocab_size: usize,
    words: usize,
}

impl TokenBitmask {
    /// A mask of `batch` rows with every token allowed.
    pub fn new(batch: usize, vocab_size: usize) -> Self {
        let words = words_for(vocab_size);
        TokenBitmask {
            data: vec![u32::MAX; batch * words],
            batch,
            vocab_size,
            words,
        }
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Words per row.
    pub fn words(&self) -> usize {
        self.words
    }

    pub fn as_slice(&self) -> &[u32] {
        &self.data
    }

    pub fn as_mut_slice(&mut self) -> &mut [u32] {
        &mut self.data
    }

    pub fn row(&self, i: usize) -> &[u32] {
        &self.data[i * self.words..(i + 1) * self.words]
    }

    pub fn row_mut(&mut self, i: usize) -> &mut [u32] {
        &mut self.data[i * self.words..(i + 1) * self.words]
    }

    /// Allows every token in every row.
    pub fn reset_full(&mut self) {
        self.data.fill(u32::MAX);
    }

    pub fn is_allowed(&self, row: usize, token: u32) -> bool {
        row_is_allowed(self.row(row), token)
    }

    /// Fills each row from its request's matcher; `None` (unconstrained) and
    /// terminated requests get a full row. Rows are filled in parallel, by
    /// the calling thread and the helpers of [`FillPool::global`], when
    /// there are at least [`PARALLEL_FILL_THRESHOLD`] of them.
    ///
    /// # Panics
    /// If `matchers.len()` differs from the batch size, or a matcher's fill
    /// panics (once every other row is filled).
    pub fn fill_batch<'a>(&mut self, matchers: &mut [Option<&mut (dyn GrammarObject + 'a)>]) {
        let pool = FillPool::global().filter(|_| self.batch >= PARALLEL_FILL_THRESHOLD);
        self.fill_batch_in(pool, matchers);
    }

    /// [`TokenBitmask::fill_batch`] on `pool`'s threads (`None`: the
    /// calling thread alone, row by row).
    ///
    /// # Panics
    /// As [`TokenBitmask::fill_batch`].
    pub fn fill_batch_in<'a>(
        &mut self,
        pool: Option<&FillPool>,
        matchers: &mut [Option<&mut (dyn GrammarObject + 'a)>],
    ) {
        assert_eq!(
            matchers.len(),
            self.batch,
            "one matcher slot per bitmask row"
        );
        let words = self.words;
        let fill = |row: &mut [u32], m: &mut Option<&mut (dyn GrammarObject + 'a)>| match m {
            Some(m) if !m.is_terminated() => m.fill_bitmask(row),
            _ => row.fill(u32::MAX),
        };
        let Some(pool) = pool else {
            for (row, m) in self.data.chunks_mut(words).zip(matchers.iter_mut()) {
                fill(row, m);
            }
            return;
        };
        let (rows, slots) = (
            self.data.as_mut_ptr() as usize,
            matchers.as_mut_ptr() as usize,
        );
        pool.for_each_index(self.batch, &|i| {
            // SAFETY: `for_each_index` runs each index once, while both
            // slices are borrowed by this call; row `i` and slot `i` are
            // this job's alone. A matcher is `Send` (`GrammarObject: Send`).
            let (row, m) = unsafe {
                (
                    std::slice::from_raw_parts_mut((rows as *mut u32).add(i * words), words),
                    &mut *(slots as *mut Option<&mut (dyn GrammarObject + 'a)>).add(i),
                )
            };
            fill(row, m);
        });
    }
}

/// Is `token` allowed in this row?
pub fn row_is_allowed(row: &[u32], token: u32) -> bool {
    row.get(token as usize / 32)
        .is_some_and(|w| w >> (token % 32) & 1 == 1)
}

/// Sets (allows) `token` in this row.
pub fn row_allow(row: &mut [u32], token: u32) {
    row[token as usize / 32] |= 1 << (token % 32);
}

/// Clears (forbids) `token` in this row.
pub fn row_forbid(row: &mut [u32], token: u32) {
    row[token as usize / 32] &= !(1 << (token % 32));
}

/// Number of allowed tokens among the first `vocab_size` of a row.
pub fn row_count_allowed(row: &[u32], vocab_size: usize) -> usize {
    let full = vocab_size / 32;
    let mut n: usize = row[..full].iter().map(|w| w.count_ones() as usize).sum();
    if !vocab_size.is_multiple_of(32) {
        n += (row[full] & ((1u32 << (vocab_size % 32)) - 1)).count_ones() as usize;
    }
    n
}

/// Allowed token ids of a row, ascending (for tests and diagnostics).
pub fn row_allowed_tokens(row: &[u32], vocab_size: usize) -> Vec<u32> {
    (0..vocab_size as u32)
        .filter(|&t| row_is_allowed(row, t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_xgrammar() {
        let mut m = TokenBitmask::new(2, 33);
        assert_eq!(m.words(), 2);
        m.row_mut(1).fill(0);
        row_allow(m.row_mut(1), 32);
        assert_eq!(m.row(1), &[0, 1]);
        assert!(m.is_allowed(1, 32));
        assert!(!m.is_allowed(1, 31));
        assert_eq!(row_count_allowed(m.row(0), 33), 33);
        row_forbid(m.row_mut(0), 0);
        assert_eq!(row_allowed_tokens(m.row(0), 33).len(), 32);
    }
}
