//! Lexemes: the regular parts of a grammar as byte DFAs, and what each DFA
//! state does to the vocabulary.
//!
//! For a lexeme state `s`, one walk of the token trie (pruned at the first
//! byte the DFA refuses) splits the tokens it can start into:
//!
//! - **inside**: tokens whose every byte stays in the lexeme. They are
//!   allowed whatever the parser stack is (an Earley item sits in the
//!   lexeme at `s`, and every grammar rule can finish), so they are a
//!   precomputed row;
//! - **exits**: trie nodes where the lexeme may end (an accepting state) and
//!   the token goes on. Only those tokens depend on the stack; the matcher
//!   walks their subtrees through the parser.
//!
//! Both are computed the first time a mask needs the state and kept for
//! every later grammar with the same lexeme on the same vocabulary (a
//! process-wide cache keyed by regex and vocabulary fingerprint): the JSON
//! string body is walked once per process, not once per schema
//! ([`crate::EarleyConfig::shared_lexemes`] turns this off for a cold
//! benchmark).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tokensieve_core::GrammarError;
use tokensieve_grammar::dfa::DEAD;
use tokensieve_grammar::{ByteDfa, DfaLimits, TokenTrie};

/// Tokens as a set: sorted ids when few, a bitmask row when many.
#[derive(Debug)]
pub(crate) enum TokenSet {
    Sparse(Vec<u32>),
    Dense(Vec<u32>),
}

impl TokenSet {
    pub(crate) fn from_ids(mut ids: Vec<u32>, words: usize) -> TokenSet {
        ids.sort_unstable();
        ids.dedup();
        if ids.len() * 32 < words * 4 {
            return TokenSet::Sparse(ids);
        }
        let mut row = vec![0u32; words];
        for id in ids {
            row[id as usize / 32] |= 1 << (id % 32);
        }
        TokenSet::Dense(row)
    }

    /// The set of a row holding `count` tokens: kept as the row when many,
    /// as sorted ids when few.
    pub(crate) fn from_row(row: Vec<u32>, count: usize) -> TokenSet {
        if count * 32 >= row.len() * 4 {
            return TokenSet::Dense(row);
        }
        let ids = row
            .iter()
            .enumerate()
            .flat_map(|(w, &bits)| {
                (0..32)
                    .filter(move |b| bits & (1 << b) != 0)
                    .map(move |b| (w * 32 + b) as u32)
            })
            .collect();
        TokenSet::Sparse(ids)
    }

    /// Adds these tokens to `row`.
    pub(crate) fn or_into(&self, row: &mut [u32]) {
        match self {
            TokenSet::Sparse(ids) => {
                for &id in ids {
                    row[id as usize / 32] |= 1 << (id % 32);
                }
            }
            TokenSet::Dense(bits) => {
                for (w, b) in row.iter_mut().zip(bits) {
                    *w |= b;
                }
            }
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        match self {
            TokenSet::Sparse(v) | TokenSet::Dense(v) => v.len() * 4,
        }
    }
}

/// What a lexeme state does to the vocabulary.
#[derive(Debug)]
pub(crate) struct StateIndex {
    /// Tokens that stay inside the lexeme.
    pub inside: TokenSet,
    /// `(trie node, its depth)`: the lexeme may end after the node's bytes
    /// and the tokens below the node go on past it.
    pub exits: Vec<(u32, u32)>,
    /// Trie nodes below the exits, summed: what walking them all costs at
    /// most.
    pub exit_span: usize,
}

/// A lexeme's DFA over one vocabulary, with its states' indexes built on
/// first use.
pub(crate) struct Lexeme {
    pub dfa: ByteDfa,
    pub trie: Arc<TokenTrie>,
    words: usize,
    states: Vec<OnceLock<StateIndex>>,
    first: Vec<OnceLock<[u64; 4]>>,
}

impl std::fmt::Debug for Lexeme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lexeme")
            .field("states", &self.dfa.num_states())
            .finish()
    }
}

impl Lexeme {
    fn new(dfa: ByteDfa, trie: Arc<TokenTrie>, words: usize) -> Lexeme {
        let states = (0..dfa.num_states()).map(|_| OnceLock::new()).collect();
        let first = (0..dfa.num_states()).map(|_| OnceLock::new()).collect();
        Lexeme {
            dfa,
            trie,
            words,
            states,
            first,
        }
    }

    /// The index of `state` (built now if no mask has needed it yet).
    pub(crate) fn state(&self, state: u32) -> &StateIndex {
        self.states[state as usize].get_or_init(|| self.build_state(state))
    }

    /// The bytes `state` can take, as a 256-bit set.
    pub(crate) fn first_bytes(&self, state: u32) -> &[u64; 4] {
        self.first[state as usize].get_or_init(|| {
            let mut set = [0u64; 4];
            for b in 0..=255u8 {
                if self.dfa.next(state, b) != DEAD {
                    set[b as usize >> 6] |= 1 << (b & 63);
                }
            }
            set
        })
    }

    /// Whether the index of `state` is built.
    pub(crate) fn is_built(&self, state: u32) -> bool {
        self.states[state as usize].get().is_some()
    }

    /// One depth-first walk of the trie from `state`, skipping a subtree at
    /// the first byte the DFA refuses.
    fn build_state(&self, state: u32) -> StateIndex {
        let trie = &*self.trie;
        // Straight into a row: a wide state (a string body) holds most of
        // the vocabulary, and sorting its ids would cost more than the walk.
        let mut inside = vec![0u32; self.words];
        let mut count = 0;
        let mut exits = Vec::new();
        let mut stack = vec![DEAD; trie.max_depth + 1];
        stack[0] = state;
        let mut i = 1;
        while i < trie.nodes.len() {
            let node = trie.nodes[i];
            let depth = node.depth as usize;
            let next = self.dfa.next(stack[depth - 1], node.byte);
            if next == DEAD {
                i = node.next as usize;
                continue;
            }
            stack[depth] = next;
            let (lo, hi) = (
                trie.token_start[i] as usize,
                trie.token_start[i + 1] as usize,
            );
            for &t in &trie.tokens[lo..hi] {
                inside[t as usize / 32] |= 1 << (t % 32);
            }
            count += hi - lo;
            if self.dfa.is_accepting(next) && node.next as usize > i + 1 {
                exits.push((i as u32, node.depth));
            }
            i += 1;
        }
        let exit_span = exits
            .iter()
            .map(|&(n, _)| (trie.nodes[n as usize].next - n) as usize)
            .sum();
        StateIndex {
            inside: TokenSet::from_row(inside, count),
            exits,
            exit_span,
        }
    }

    /// Heap bytes of the indexes built so far.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.dfa.memory_bytes()
            + self
                .states
                .iter()
                .filter_map(OnceLock::get)
                .map(|s| s.inside.bytes() + s.exits.len() * 8)
                .sum::<usize>()
    }
}

/// Lexemes by `(vocabulary fingerprint, regex, DFA state limit)`, shared by
/// every grammar of the process, so the indexes of common lexemes (the JSON
/// string body, whitespace, numbers) outlive the grammar that built them.
/// Past [`CACHE_ENTRIES`] lexemes, those no grammar holds are dropped.
type LexemeCache = HashMap<(u64, String, usize), Result<Arc<Lexeme>, GrammarError>>;

const CACHE_ENTRIES: usize = 512;

static CACHE: Mutex<Option<LexemeCache>> = Mutex::new(None);

/// The lexeme of `regex` on the vocabulary of `trie` (whole-match regex in
/// the regex-syntax dialect), shared with every other grammar using it.
pub(crate) fn lexeme(
    regex: &str,
    trie: &Arc<TokenTrie>,
    words: usize,
    limits: &DfaLimits,
    share: bool,
) -> Result<Arc<Lexeme>, GrammarError> {
    shared(regex.to_string(), trie, words, limits, share, || {
        ByteDfa::build(regex, limits)
    })
}

/// The lexeme of the texts every one of `regexes` matches (their
/// intersection, built as a product automaton), shared like [`lexeme`].
pub(crate) fn intersection_lexeme(
    regexes: &[String],
    trie: &Arc<TokenTrie>,
    words: usize,
    limits: &DfaLimits,
    share: bool,
) -> Result<Arc<Lexeme>, GrammarError> {
    // NUL never appears in a regex we build, so this key is no regex's.
    let key = format!("\0&{}", regexes.join("\0"));
    shared(key, trie, words, limits, share, || {
        let patterns: Vec<&str> = regexes.iter().map(String::as_str).collect();
        ByteDfa::intersection(&patterns, limits)
    })
}

/// The cached lexeme of `key`, or the one `build` makes (kept, failure
/// included); without `share`, a new one, neither read from the cache nor
/// kept in it (a cold compile: [`crate::EarleyConfig::shared_lexemes`]).
fn shared(
    key: String,
    trie: &Arc<TokenTrie>,
    words: usize,
    limits: &DfaLimits,
    share: bool,
    build: impl FnOnce() -> Result<ByteDfa, GrammarError>,
) -> Result<Arc<Lexeme>, GrammarError> {
    if !share {
        return build().map(|dfa| Arc::new(Lexeme::new(dfa, trie.clone(), words)));
    }
    let key = (trie.fingerprint(), key, limits.max_dfa_states);
    {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let map = cache.get_or_insert_with(HashMap::new);
        if let Some(l) = map.get(&key) {
            return l.clone();
        }
    }
    // Failures are kept too: a grammar tries each of its regular rules as
    // a lexeme, and one that is too big should cost one attempt a process.
    let lexeme = build().map(|dfa| Arc::new(Lexeme::new(dfa, trie.clone(), words)));
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    if map.len() >= CACHE_ENTRIES {
        map.retain(|_, l| l.as_ref().is_ok_and(|l| Arc::strong_count(l) > 1));
    }
    map.insert(key, lexeme.clone());
    lexeme
}
