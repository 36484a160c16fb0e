//! The process cache: lexemes by vocabulary and regex, shared by every
//! grammar of the process, so the rows of common lexemes outlive the
//! grammar that built them.

use super::*;

/// Lexemes by `(vocabulary fingerprint, regex, DFA state limit)`, shared by
/// every grammar of the process, so the indexes of common lexemes (the JSON
/// string body, whitespace, numbers) outlive the grammar that built them.
/// Past [`CACHE_ENTRIES`] lexemes, those no grammar holds are dropped.
pub(super) struct LexemeCache {
    pub(super) map: HashMap<(u64, String, usize), Result<Arc<Lexeme>, GrammarError>>,
    /// The size at which an insertion sweeps out the lexemes no grammar
    /// holds: twice what the last sweep left, at least [`CACHE_ENTRIES`].
    /// (A sweep reads every entry; where live grammars hold more than
    /// `CACHE_ENTRIES` lexemes, the backend's kept summaries among them, one
    /// sweep per insertion made every compile pay for all the others'.)
    pub(super) sweep_at: usize,
}

pub(super) const CACHE_ENTRIES: usize = 512;

pub(super) static CACHE: Mutex<Option<LexemeCache>> = Mutex::new(None);

/// The process's lexeme cache, made on first use.
pub(super) fn lexeme_cache(cache: &mut Option<LexemeCache>) -> &mut LexemeCache {
    cache.get_or_insert_with(|| LexemeCache {
        map: HashMap::new(),
        sweep_at: CACHE_ENTRIES,
    })
}

/// What a grammar's lexemes share of the vocabulary: its token trie, the
/// words of a mask row, and the grammar's string-body skeletons.
pub(crate) struct LexVocab {
    pub trie: Arc<TokenTrie>,
    pub words: usize,
    pub skeletons: Arc<Skeletons>,
}

/// The lexeme of `regex` on the vocabulary of `trie` (whole-match regex in
/// the regex-syntax dialect), shared with every other grammar using it.
pub(crate) fn lexeme(
    regex: &str,
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
) -> Result<Arc<Lexeme>, GrammarError> {
    shared(
        || regex.to_string(),
        vocab,
        limits,
        share,
        || ByteDfa::build(regex, limits).map(|d| Making::Now(LexDfa::Eager(d))),
    )
}

/// The cached lexeme of `key` (written only if it is looked up), or the
/// one `build` makes (kept, failure included); without `share`, a new one,
/// neither read from the cache nor kept in it (a cold compile:
/// [`crate::EarleyConfig::shared_lexemes`]).
pub(super) fn shared(
    key: impl FnOnce() -> String,
    vocab: &LexVocab,
    limits: &DfaLimits,
    share: bool,
    build: impl FnOnce() -> Result<Making, GrammarError>,
) -> Result<Arc<Lexeme>, GrammarError> {
    let make = |making| {
        Arc::new(Lexeme::new(
            making,
            vocab.trie.clone(),
            vocab.words,
            vocab.skeletons.clone(),
        ))
    };
    if !share {
        return build().map(make);
    }
    let key = (vocab.trie.fingerprint(), key(), limits.max_dfa_states);
    {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let map = &lexeme_cache(&mut cache).map;
        // A lazy lexeme that ran into its limit narrowed its language:
        // every grammar holding it fails its steps; a new one starts afresh.
        match map.get(&key) {
            Some(Ok(l)) if l.made().is_some_and(|d| d.exhausted().is_some()) => {}
            Some(l) => return l.clone(),
            None => {}
        }
    }
    // Failures are kept too: a grammar tries each of its regular rules as
    // a lexeme, and one that is too big should cost one attempt a process.
    let lexeme = build().map(make);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = lexeme_cache(&mut cache);
    if cache.map.len() >= cache.sweep_at {
        cache
            .map
            .retain(|_, l| l.as_ref().is_ok_and(|l| Arc::strong_count(l) > 1));
        cache.sweep_at = (2 * cache.map.len()).max(CACHE_ENTRIES);
    }
    cache.map.insert(key, lexeme.clone());
    lexeme
}
