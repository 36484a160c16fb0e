//! Both backends on one small vocabulary, built once per process, and the
//! checks every front-end target runs on what they compile: errors are
//! errors of their own (never a caught panic), and two backends that both
//! compiled a constraint give the same mask at every step of a walk.

use std::sync::{Arc, OnceLock};

use tokensieve_core::bitmask::row_is_allowed;
use tokensieve_core::testing::SplitMix64;
use tokensieve_core::{
    CompiledGrammar, Constraint, GrammarBackend, GrammarError, GrammarObject, StepError, VocabType,
    Vocabulary,
};
use tokensieve_earley::{EarleyBackend, EarleyConfig};
use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};

/// The vocabulary of every target: each single byte (so every text can be
/// tokenized), pieces that cross grammar boundaries (JSON punctuation,
/// brackets, a multi-byte character split and whole), and `<eos>` (special,
/// stop) last. 330-odd tokens: a mask is checked token by token in
/// microseconds.
pub fn vocabulary() -> &'static Arc<Vocabulary> {
    static VOCAB: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    VOCAB.get_or_init(|| {
        const MULTI: &[&str] = &[
            "{\"",
            "\":",
            "\": ",
            "\", \"",
            "\"}",
            "\",",
            ", ",
            ": ",
            "true",
            "false",
            "null",
            "name",
            "id",
            "type",
            "  ",
            "\n",
            "}",
            "]}",
            "[\"",
            "\"]",
            "00",
            "12",
            "123",
            "-1",
            "1.5",
            "e+",
            "abc",
            "ab",
            "ba",
            "bc",
            "aa",
            "a(",
            "()",
            ")a",
            "((",
            "))",
            "[]",
            "{}",
            "é",
            "(é",
            "é)",
            "😀",
            "\\u",
            "\\\"",
            "\t",
            " the",
            "SELECT",
            " = ",
            "_id",
            "a1",
            "x",
            "xx",
            "\u{1F600}a",
        ];
        let mut tokens: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
        tokens.extend(MULTI.iter().map(|s| (s.as_bytes().to_vec(), false)));
        tokens.push((b"<eos>".to_vec(), true));
        let eos = tokens.len() as u32 - 1;
        Arc::new(
            Vocabulary::new(VocabType::Raw, tokens)
                .with_stop_tokens(&[eos])
                .expect("eos is a token"),
        )
    })
}

/// The stop token of [`vocabulary`].
pub fn eos() -> u32 {
    vocabulary().stop_tokens()[0]
}

/// The two backends, with their default configurations, and earley with
/// every lexeme exit filtered by what may follow it (`follow_exits` 0:
/// the default filters only lexemes with many exits, which the small
/// vocabulary seldom makes), every set summarized item by item
/// (`item_summaries` 1: by default only sets of many lexeme items) and
/// every completion into an older set walked and kept apart (`group_walks`
/// 1: by default only those pending at many trie nodes).
pub struct Backends {
    pub regex_fsm: RegexFsmBackend,
    pub earley: EarleyBackend,
    pub earley_filtered: EarleyBackend,
}

/// [`Backends`] on [`vocabulary`], built once (the token trie and the
/// walk caches are shared by every input of a run).
pub fn backends() -> &'static Backends {
    static BACKENDS: OnceLock<Backends> = OnceLock::new();
    BACKENDS.get_or_init(|| Backends {
        regex_fsm: RegexFsmBackend::new(vocabulary().clone(), RegexFsmConfig::default()),
        earley: EarleyBackend::new(vocabulary().clone(), EarleyConfig::default()),
        earley_filtered: EarleyBackend::new(
            vocabulary().clone(),
            EarleyConfig {
                follow_exits: 0,
                item_summaries: 1,
                group_walks: 1,
                ..EarleyConfig::default()
            },
        ),
    })
}

/// A compile's result, by backend name.
pub type Compiled = Vec<(&'static str, Result<Arc<dyn CompiledGrammar>, GrammarError>)>;

/// Compiles `constraint` with both backends (directly: a panic propagates).
/// Every error must be one of the backend's own: a caught panic is a crash,
/// and an error must say something.
pub fn compile_both(constraint: &Constraint) -> Compiled {
    let b = backends();
    let out: Compiled = vec![
        ("regex-fsm", b.regex_fsm.compile(constraint)),
        ("earley", b.earley.compile(constraint)),
    ];
    for (name, result) in &out {
        if let Err(e) = result {
            check_error(name, e);
        }
    }
    out
}

/// A compile error that is a bug: a caught panic, or no message.
pub fn check_error(backend: &str, e: &GrammarError) {
    assert!(
        !matches!(e, GrammarError::Panic(_)),
        "{backend}: a panic inside the compile: {e}"
    );
    assert!(
        !e.to_string().trim().is_empty(),
        "{backend}: an empty error"
    );
}

/// Whether a step error ends a walk without being a bug: a named limit
/// (a pathological grammar or input). A caught panic is a bug.
pub fn is_limit(e: &StepError) -> bool {
    assert!(
        !matches!(e, StepError::Poisoned(_)),
        "a matcher in an error state: {e}"
    );
    matches!(e, StepError::LimitExceeded { .. })
}

/// The grammars that compiled, as fresh matchers.
pub fn matchers(compiled: &Compiled) -> Vec<(&'static str, Box<dyn GrammarObject>)> {
    compiled
        .iter()
        .filter_map(|(name, r)| r.as_ref().ok().map(|g| (*name, g.matcher())))
        .collect()
}

/// How the languages of the two backends relate on a kind of constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// The same language (regexes, GBNF): equal masks at every step.
    Equal,
    /// regex-fsm's is a subset of earley's (JSON Schema: without
    /// `max_depth` regex-fsm generates no extra members, by design), so
    /// its masks are subsets of earley's.
    Subset,
}

/// Walks every compiled grammar of `compiled` in step, for at most `steps`
/// tokens each picked at random (from `seed`) among those the first mask
/// allows: at each step the masks of the backends relate as `relation`
/// says, the stop token
/// is allowed exactly when the matcher is accepting, each allowed token is
/// taken by `accept_token`, and a sample of the refused ones is refused.
/// `jump_forward`'s bytes are always taken by `accept_bytes`.
pub fn walk(compiled: &Compiled, relation: Relation, seed: u64, steps: usize) {
    let mut ms = matchers(compiled);
    if ms.is_empty() {
        return;
    }
    let vocab = vocabulary();
    let mut r = SplitMix64(seed);
    let mut rows = vec![vec![0u32; vocab.mask_words()]; ms.len()];
    let mut text = Vec::new();
    for _ in 0..steps {
        for ((_, m), row) in ms.iter_mut().zip(&mut rows) {
            m.fill_bitmask(row);
        }
        for ((name, m), row) in ms.iter().zip(&rows) {
            assert_eq!(
                row_is_allowed(row, eos()),
                m.is_accepting(),
                "{name}: the stop token's bit is not is_accepting()"
            );
            check_mask_sample(name, &**m, row, &mut r);
            let jump = m.jump_forward();
            if !jump.is_empty() {
                let mut f = m.fork();
                match f.accept_bytes(&jump) {
                    Ok(()) => {}
                    Err(e) if is_limit(&e) => {}
                    Err(e) => panic!("{name}: jump_forward gave {jump:?}, accept_bytes: {e}"),
                }
            }
        }
        let (first, first_row) = (ms[0].0, &rows[0]);
        for ((name, _), row) in ms.iter().zip(&rows).skip(1) {
            let wrong = |t: u32| {
                let (a, b) = (row_is_allowed(first_row, t), row_is_allowed(row, t));
                match relation {
                    Relation::Equal => a != b,
                    Relation::Subset => a && !b,
                }
            };
            if (0..vocab.vocab_size() as u32).any(wrong) {
                let differ: Vec<String> = (0..vocab.vocab_size() as u32)
                    .filter(|&t| wrong(t))
                    .take(8)
                    .map(|t| {
                        format!(
                            "{:?} ({first}: {}, {name}: {})",
                            String::from_utf8_lossy(vocab.token_bytes(t)),
                            row_is_allowed(first_row, t),
                            row_is_allowed(row, t)
                        )
                    })
                    .collect();
                panic!(
                    "the backends' masks are not {relation:?} after {:?}: {differ:?}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
        let allowed: Vec<u32> = (0..vocab.vocab_size() as u32)
            .filter(|&t| t != eos() && row_is_allowed(first_row, t))
            .collect();
        if allowed.is_empty() {
            return;
        }
        let t = allowed[r.below(allowed.len())];
        text.extend_from_slice(vocab.token_bytes(t));
        for (name, m) in &mut ms {
            match m.accept_token(t) {
                Ok(()) => {}
                Err(e) if is_limit(&e) => return,
                Err(e) => panic!("{name}: token {t} was in the mask, accept_token: {e}"),
            }
        }
    }
}

/// A mask against `accept_token` on a fork, for 16 allowed tokens and 16
/// tokens of the whole vocabulary, picked at random.
pub fn check_mask_sample(name: &str, m: &dyn GrammarObject, row: &[u32], r: &mut SplitMix64) {
    let vocab = vocabulary();
    let n = vocab.vocab_size();
    let allowed: Vec<u32> = (0..n as u32).filter(|&t| row_is_allowed(row, t)).collect();
    let mut picks = Vec::with_capacity(32);
    for _ in 0..16 {
        if !allowed.is_empty() {
            picks.push(allowed[r.below(allowed.len())]);
        }
        picks.push(r.below(n) as u32);
    }
    for t in picks {
        let mut f = m.fork();
        match f.accept_token(t) {
            Ok(()) => assert!(
                row_is_allowed(row, t),
                "{name}: token {t} ({:?}) is taken but not in the mask",
                String::from_utf8_lossy(vocab.token_bytes(t))
            ),
            Err(e) if is_limit(&e) => {}
            Err(e) => assert!(
                !row_is_allowed(row, t),
                "{name}: token {t} ({:?}) is in the mask but refused: {e}",
                String::from_utf8_lossy(vocab.token_bytes(t))
            ),
        }
    }
}

/// Each compiled grammar takes `text` whole (`accept_bytes`) and is then
/// accepting: for a text known to be in the language.
pub fn accepts_sentence(compiled: &Compiled, text: &[u8]) {
    for (name, mut m) in matchers(compiled) {
        match m.accept_bytes(text) {
            Ok(()) => assert!(
                m.is_accepting(),
                "{name}: took the sentence {:?} but is not accepting",
                String::from_utf8_lossy(text)
            ),
            Err(e) if is_limit(&e) => {}
            Err(e) => panic!(
                "{name}: refused the sentence {:?}: {e}",
                String::from_utf8_lossy(text)
            ),
        }
    }
}
