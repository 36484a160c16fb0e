//! The token index: for every DFA state, the grammar tokens whose bytes can be
//! walked from it without dying, as a mask row. Filling a mask is then a
//! table read.
//!
//! Built by walking the vocabulary's [`TokenTrie`] depth-first from each
//! state (shared prefixes are walked once; a dead byte skips its subtree).
//! Identical rows are stored once; rows with few allowed tokens are stored
//! as sorted token ids (sparse) rather than `vocab_size / 32` words.

use crate::dfa::{ByteDfa, DEAD};
use crate::trie::TokenTrie;
use rayon::prelude::*;
use std::collections::HashMap;
use tokensieve_core::{GrammarError, Location};

/// A row is stored sparse when at most `words / SPARSE_DIVISOR` tokens are
/// allowed: then filling it (clear + set bits) costs about as much as copying
/// a dense row, and it takes at most 1/8 of the memory.
const SPARSE_DIVISOR: usize = 8;

/// States walked per parallel batch (rows are deduplicated between batches,
/// which bounds the memory of undeduplicated rows in flight).
const PARALLEL_BATCH: usize = 256;

/// One mask row, without stop tokens (they depend only on acceptance).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Row {
    /// `words` words, XGrammar layout.
    Dense(Box<[u32]>),
    /// Allowed token ids, ascending.
    Sparse(Box<[u32]>),
}

impl Row {
    fn bytes(&self) -> usize {
        match self {
            Row::Dense(w) | Row::Sparse(w) => w.len() * 4,
        }
    }
}

/// Counters of an index build.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// DFA states (the dead one included).
    pub states: usize,
    /// Distinct rows stored (the empty row included).
    pub unique_rows: usize,
    pub dense_rows: usize,
    pub sparse_rows: usize,
    /// Heap bytes of rows and the state -> row table.
    pub bytes: usize,
    /// Trie nodes visited, over all states.
    pub nodes_visited: u64,
    /// States reachable from the start through whole tokens.
    pub token_reachable_states: usize,
    /// Of those, states that cannot end the output and that no token can
    /// continue (the vocabulary cannot spell what the regex needs next).
    /// Always 0 for vocabularies with a token for every byte.
    pub stuck_states: usize,
}

/// Per-state mask rows for one (regex, vocabulary).
#[derive(Debug)]
pub struct TokenIndex {
    rows: Vec<Row>,
    state_row: Vec<u32>,
    words: usize,
    stats: IndexStats,
}

/// What one state's walk produced.
struct Walked {
    row: Row,
    hash: u64,
    /// Distinct states whole tokens lead to.
    successors: Vec<u32>,
    visited: u64,
}

/// Scratch space for walks, reused across states.
struct Walker<'a> {
    dfa: &'a ByteDfa,
    trie: &'a TokenTrie,
    words: usize,
    stack: Vec<u32>,
    allowed: Vec<u32>,
    seen: Vec<u32>,
    epoch: u32,
}

impl<'a> Walker<'a> {
    fn new(dfa: &'a ByteDfa, trie: &'a TokenTrie, words: usize) -> Self {
        Walker {
            dfa,
            trie,
            words,
            stack: vec![DEAD; trie.max_depth + 1],
            allowed: Vec::new(),
            seen: vec![0; dfa.num_states()],
            epoch: 0,
        }
    }

    fn walk(&mut self, state: u32) -> Walked {
        self.allowed.clear();
        self.epoch += 1;
        let mut successors = Vec::new();
        let nodes = &self.trie.nodes[..];
        let token_start = &self.trie.token_start[..];
        let tokens = &self.trie.tokens[..];
        let dfa = self.dfa;
        let stack = &mut self.stack[..];
        stack[0] = state;
        let mut visited = 0u64;
        let mut i = 1;
        while i < nodes.len() {
            let node = nodes[i];
            visited += 1;
            let depth = node.depth as usize;
            let s = dfa.next(stack[depth - 1], node.byte);
            if s == DEAD {
                i = node.next as usize;
                continue;
            }
            stack[depth] = s;
            let (lo, hi) = (token_start[i] as usize, token_start[i + 1] as usize);
            if lo != hi {
                self.allowed.extend_from_slice(&tokens[lo..hi]);
                if self.seen[s as usize] != self.epoch {
                    self.seen[s as usize] = self.epoch;
                    successors.push(s);
                }
            }
            i += 1;
        }
        let row = if self.allowed.len() * SPARSE_DIVISOR <= self.words {
            self.allowed.sort_unstable();
            Row::Sparse(self.allowed.as_slice().into())
        } else {
            let mut words = vec![0u32; self.words].into_boxed_slice();
            for &t in &self.allowed {
                words[t as usize / 32] |= 1 << (t % 32);
            }
            Row::Dense(words)
        };
        let hash = match &row {
            Row::Dense(w) => hash_words(w, 1),
            Row::Sparse(w) => hash_words(w, 2),
        };
        Walked {
            row,
            hash,
            successors,
            visited,
        }
    }
}

/// A fast non-cryptographic hash (FxHash-style) of a row.
fn hash_words(words: &[u32], seed: u64) -> u64 {
    let mut h = seed;
    for pair in words.chunks(2) {
        let v = pair[0] as u64 | (pair.get(1).copied().unwrap_or(0) as u64) << 32;
        h = (h.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    h
}

/// Deduplicating row store.
struct RowStore {
    rows: Vec<Row>,
    by_hash: HashMap<u64, Vec<u32>>,
    bytes: usize,
    max_bytes: usize,
}

impl RowStore {
    fn insert(&mut self, row: Row, hash: u64) -> Result<u32, GrammarError> {
        let candidates = self.by_hash.entry(hash).or_default();
        if let Some(&id) = candidates.iter().find(|&&id| self.rows[id as usize] == row) {
            return Ok(id);
        }
        self.bytes += row.bytes();
        if self.bytes > self.max_bytes {
            return Err(GrammarError::LimitExceeded {
                what: format!("the token index ({} bytes and counting)", self.bytes),
                limit: self.max_bytes,
                knob: "max_index_bytes".into(),
            });
        }
        let id = self.rows.len() as u32;
        candidates.push(id);
        self.rows.push(row);
        Ok(id)
    }
}

impl TokenIndex {
    /// Builds the index of `dfa` over `trie`, with rows of `words` words.
    pub(crate) fn build(
        dfa: &ByteDfa,
        trie: &TokenTrie,
        words: usize,
        max_bytes: usize,
        parallel: bool,
    ) -> Result<TokenIndex, GrammarError> {
        let n = dfa.num_states();
        let mut store = RowStore {
            rows: vec![Row::Sparse(Box::new([]))],
            by_hash: HashMap::new(),
            bytes: n * 4,
            max_bytes,
        };
        let empty_hash = hash_words(&[], 2);
        store.by_hash.insert(empty_hash, vec![0]);
        let mut state_row = vec![0u32; n];
        let mut successors: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut visited = 0u64;
        let mut record = |s: u32,
                          w: Walked,
                          store: &mut RowStore,
                          successors: &mut Vec<Vec<u32>>|
         -> Result<(), GrammarError> {
            state_row[s as usize] = store.insert(w.row, w.hash)?;
            successors[s as usize] = w.successors;
            visited += w.visited;
            Ok(())
        };
        if parallel && n > 2 {
            let states: Vec<u32> = (1..n as u32).collect();
            for batch in states.chunks(PARALLEL_BATCH) {
                let walked: Vec<Walked> = batch
                    .par_iter()
                    .map_init(|| Walker::new(dfa, trie, words), |w, &s| w.walk(s))
                    .collect();
                for (&s, w) in batch.iter().zip(walked) {
                    record(s, w, &mut store, &mut successors)?;
                }
            }
        } else {
            let mut walker = Walker::new(dfa, trie, words);
            for s in 1..n as u32 {
                let w = walker.walk(s);
                record(s, w, &mut store, &mut successors)?;
            }
        }

        // Which states can whole tokens reach, and can any of them not go on?
        let mut reachable = vec![false; n];
        reachable[dfa.start() as usize] = true;
        let mut queue = vec![dfa.start()];
        let mut any_accepting = false;
        let mut stuck = Vec::new();
        while let Some(s) = queue.pop() {
            let accepting = dfa.is_accepting(s);
            any_accepting |= accepting;
            if !accepting && state_row[s as usize] == 0 {
                stuck.push(s);
            }
            for &t in &successors[s as usize] {
                if !reachable[t as usize] {
                    reachable[t as usize] = true;
                    queue.push(t);
                }
            }
        }
        let start_stuck = stuck.contains(&dfa.start());
        if start_stuck || !any_accepting {
            let at = if start_stuck {
                dfa.start()
            } else {
                stuck.first().copied().unwrap_or(dfa.start())
            };
            return Err(GrammarError::Vocabulary {
                location: Location::None,
                message: format!(
                    "no sequence of tokens of this vocabulary can complete the output: {} no token \
                     continues it, while the regex expects one of the bytes {}",
                    if start_stuck {
                        "at the start".to_string()
                    } else {
                        format!("in DFA state {at}")
                    },
                    show_bytes(&dfa.live_bytes(at))
                ),
            });
        }
        let (dense_rows, sparse_rows) = store.rows.iter().fold((0, 0), |(d, s), r| match r {
            Row::Dense(_) => (d + 1, s),
            Row::Sparse(_) => (d, s + 1),
        });
        let stats = IndexStats {
            states: n,
            unique_rows: store.rows.len(),
            dense_rows,
            sparse_rows,
            bytes: store.bytes,
            nodes_visited: visited,
            token_reachable_states: reachable.iter().filter(|r| **r).count(),
            stuck_states: stuck.len(),
        };
        Ok(TokenIndex {
            rows: store.rows,
            state_row,
            words,
            stats,
        })
    }

    /// Writes the row of `state` (no stop tokens) into `out`, overwriting
    /// every word. A row shorter or longer than the vocabulary's is filled
    /// as far as both go and the rest cleared.
    #[inline]
    pub fn fill(&self, state: u32, out: &mut [u32]) {
        match &self.rows[self.state_row[state as usize] as usize] {
            Row::Dense(words) => {
                let n = out.len().min(words.len());
                out[..n].copy_from_slice(&words[..n]);
                out[n..].fill(0);
            }
            Row::Sparse(ids) => {
                out.fill(0);
                for &id in ids.iter() {
                    if let Some(w) = out.get_mut(id as usize / 32) {
                        *w |= 1 << (id % 32);
                    }
                }
            }
        }
    }

    /// Is `token` in the row of `state`?
    pub fn allows(&self, state: u32, token: u32) -> bool {
        match &self.rows[self.state_row[state as usize] as usize] {
            Row::Dense(words) => words
                .get(token as usize / 32)
                .is_some_and(|w| w >> (token % 32) & 1 == 1),
            Row::Sparse(ids) => ids.binary_search(&token).is_ok(),
        }
    }

    /// Words per row.
    pub fn words(&self) -> usize {
        self.words
    }

    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }
}

fn show_bytes(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes
        .iter()
        .take(16)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                format!("'{}'", b as char)
            } else {
                format!("0x{b:02X}")
            }
        })
        .collect();
    let more = if bytes.len() > 16 {
        format!(" and {} more", bytes.len() - 16)
    } else {
        String::new()
    };
    format!("[{}{more}]", shown.join(", "))
}
