//! [`EarleyBackend`] (spec -> flat grammar with lexemes) and the compiled
//! [`EarleyGrammar`] it hands out.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokensieve_core::TokenTrie;
use tokensieve_core::{
    CancelToken, CompiledGrammar, Constraint, ConstraintSpec, GrammarBackend, GrammarError,
    GrammarObject, Location, SpecKind, SpecOptions, StructuralTag, Vocabulary, Whitespace,
};
use tokensieve_grammar::compose::{self, GrammarTag};
use tokensieve_grammar::pieces::{PieceGrammar, PieceLimits};
use tokensieve_grammar::regular::choice_regex;
use tokensieve_grammar::{GbnfLimits, Grammar, RegularLimits};
use tokensieve_json_schema as json_schema;

use crate::config::EarleyConfig;
use crate::lexeme::{Lexeme, VocabSkeleton};
use crate::lower::{Lowering, json_object_gbnf};
use crate::matcher::EarleyMatcher;
use crate::parser::{Budget, Cfg, ESet, SummaryCache, initial_set};

/// The spec kinds this backend compiles.
pub const SUPPORTED_KINDS: [SpecKind; 6] = [
    SpecKind::Ebnf,
    SpecKind::JsonSchema,
    SpecKind::JsonObject,
    SpecKind::Regex,
    SpecKind::Choice,
    SpecKind::StructuralTag,
];

/// How big a block of a long counted repetition is, when a JSON Schema's
/// regular parts are too big for lexemes and its long repetitions are
/// taken apart ([`PieceLimits::block_weight`], about DFA states). A JSON
/// string character weighs 13 (its DFA takes about 15 states a
/// character), so a `maxLength: 4096` string is 52 blocks of 78 characters;
/// a heavier body (an array's object items) gets fewer copies a block, down
/// to one. The parser nests one rule per block and each block is one
/// lexeme: this keeps both small. Where counting it is exact (a string's
/// characters and closing quote), such a repetition is one lexeme that
/// counts its copies instead ([`PieceLimits::counted`]), and blocks are
/// the fallback.
const REPEAT_BLOCK_WEIGHT: u64 = 1024;

/// [`REPEAT_BLOCK_WEIGHT`] of the split that cuts long repetitions from
/// the first try (lazily built lexemes): a JSON string is counted from 38
/// characters (256 / 13 = 19 characters a block, two blocks at least), not
/// from 156. Measured by instructions (masks and steps): the 152 sample
/// files 8,884 → 8,811 M, five files with many bounded strings 2,300 →
/// 2,184 M, compiles the same, with every file passing as before; a
/// sixteenth (from 10 characters) did less on those five.
const COUNTED_BLOCK_WEIGHT: u64 = REPEAT_BLOCK_WEIGHT / 4;

/// The front end's limits for a JSON Schema here. Counted repetitions
/// may go to 65,535 (a `maxLength: 65535` text field), where the default
/// stops at 10,000 for automata that hold every copy: too big for one
/// lexeme, such a repetition is taken apart into blocks
/// ([`REPEAT_BLOCK_WEIGHT`]), one rule each, and what bounds the work is
/// the expanded size, as before.
fn schema_limits(other_keys_unwritten: bool) -> json_schema::LoweringLimits {
    json_schema::LoweringLimits {
        max_repeat: u16::MAX as u32,
        max_expanded_len: 1 << 40,
        other_keys_unwritten,
        ..json_schema::LoweringLimits::default()
    }
}

/// A compile's mask summaries, kept for the next compile of its constraint
/// (the same constraint exactly: comparing is cheaper than the canonical
/// [`Constraint::cache_key`], which parses and prints a schema again).
struct SharedSummaries {
    constraint: Constraint,
    lexemes: Vec<Arc<Lexeme>>,
    cache: Arc<SummaryCache>,
}

/// The earley backend for one vocabulary: holds the vocabulary's token trie
/// (shared with every backend on the same vocabulary).
pub struct EarleyBackend {
    vocab: Arc<Vocabulary>,
    config: EarleyConfig,
    trie: Arc<TokenTrie>,
    /// The trie walk of a JSON string's body, made with the backend (it
    /// depends on the vocabulary alone).
    skeleton: VocabSkeleton,
    /// Summaries of recently compiled constraints, by cache key, so a
    /// recompile starts warm ([`EarleyConfig::shared_summaries`]).
    /// Each with the lexemes its summaries were made with (kept alive, so
    /// no other lexeme can take their place).
    summaries: Mutex<Vec<SharedSummaries>>,
    /// Hashes of constraints compiled once and not kept (the most recent
    /// [`SEEN_CONSTRAINTS`]): a constraint's summaries are kept from its
    /// second compile on.
    seen: Mutex<std::collections::VecDeque<u64>>,
}

/// How many constraints compiled once a backend remembers (by hash), so
/// that a second compile of one keeps its summaries.
const SEEN_CONSTRAINTS: usize = 1024;

impl std::fmt::Debug for EarleyBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarleyBackend")
            .field("vocab_size", &self.vocab.vocab_size())
            .field("config", &self.config)
            .finish()
    }
}

impl EarleyBackend {
    /// A backend for `vocab`; builds (or reuses) the vocabulary's token trie.
    pub fn new(vocab: Arc<Vocabulary>, config: EarleyConfig) -> Self {
        let trie = TokenTrie::shared(&vocab);
        EarleyBackend {
            vocab,
            skeleton: VocabSkeleton::json(&trie, config.max_whitespace),
            config,
            trie,
            summaries: Mutex::new(Vec::new()),
            seen: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// The summary cache for `constraint`: the one a recent compile of the same
    /// constraint left, or a new one (kept for the next compile). Only a
    /// compile with the very same lexemes takes a kept one: summaries name
    /// lexeme states by id, and a lazily built lexeme numbers its states in
    /// the order walks reach them, so the same regex built afresh (a cold
    /// compile, a lexeme the process cache dropped) numbers them otherwise.
    ///
    /// A constraint's first compile keeps nothing, its hash only: kept
    /// summaries hold their grammar's lexemes alive, and keeping every
    /// one-off schema's (most of a server's, every file of a MaskBench run)
    /// grew a process to a gigabyte in 120 files, each new page a fault
    /// that made compiles and masks slower than cold ones.
    fn summary_cache(&self, constraint: &Constraint, lexemes: &[Arc<Lexeme>]) -> Arc<SummaryCache> {
        let limit = self.config.shared_summaries;
        // Lexemes built afresh for each compile never match kept ones:
        // keeping them would only hold old grammars' lexemes alive and make
        // a later compile pay for dropping them.
        if limit == 0 || !self.config.shared_lexemes {
            return Arc::new(SummaryCache::new(self.config.mask_cache_bytes));
        }
        let same = |kept: &[Arc<Lexeme>]| {
            kept.len() == lexemes.len() && kept.iter().zip(lexemes).all(|(a, b)| Arc::ptr_eq(a, b))
        };
        let mut kept = self.summaries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = kept.iter().position(|e| e.constraint == *constraint) {
            let entry = kept.remove(i);
            if same(&entry.lexemes) {
                let cache = entry.cache.clone();
                kept.push(entry);
                return cache;
            }
        } else {
            let hash = {
                use std::hash::{Hash, Hasher};
                // Fixed keys: the same constraint hashes alike every time.
                let mut h = std::hash::DefaultHasher::new();
                constraint.hash(&mut h);
                h.finish()
            };
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            match seen.iter().position(|&s| s == hash) {
                Some(i) => {
                    seen.remove(i);
                }
                None => {
                    if seen.len() >= SEEN_CONSTRAINTS {
                        seen.pop_front();
                    }
                    seen.push_back(hash);
                    return Arc::new(SummaryCache::new(self.config.mask_cache_bytes));
                }
            }
        }
        if kept.len() >= limit {
            kept.remove(0);
        }
        let cache = Arc::new(SummaryCache::new(self.config.mask_cache_bytes));
        kept.push(SharedSummaries {
            constraint: constraint.clone(),
            lexemes: lexemes.to_vec(),
            cache: cache.clone(),
        });
        cache
    }

    pub fn config(&self) -> &EarleyConfig {
        &self.config
    }

    /// A lowering onto this backend's vocabulary.
    fn lowering<'a>(&'a self, cancel: &'a CancelToken) -> Lowering<'a> {
        Lowering::new(
            &self.config,
            &self.trie,
            &self.skeleton,
            self.vocab.mask_words(),
            cancel,
        )
    }

    /// Compiles with the concrete grammar type.
    pub fn compile_earley(
        &self,
        constraint: &Constraint,
        cancel: &CancelToken,
    ) -> Result<EarleyGrammar, GrammarError> {
        let started = Instant::now();
        self.config.validate()?;
        let lowering = self.lowering(cancel);
        let cfg = match &constraint.spec {
            ConstraintSpec::Ebnf { grammar, root } => {
                lowering.grammar(&Grammar::from_gbnf(grammar, root)?)?
            }
            ConstraintSpec::JsonObject => lowering.grammar(&builtin_json(
                &constraint.options,
                self.config.max_whitespace,
            )?)?,
            ConstraintSpec::Regex(pattern) => lowering.regex(pattern)?,
            ConstraintSpec::Choice(choices) => lowering.regex(&choice_regex(choices)?)?,
            ConstraintSpec::StructuralTag(tag) => {
                lowering.grammar(&self.structural_tag(tag, &constraint.options)?)?
            }
            ConstraintSpec::JsonSchema(schema) => {
                // Lazy lexemes build an object's other keys from their
                // names: their text need not be written.
                let lowered = json_schema::schema_to_grammar(
                    schema,
                    &constraint.options,
                    self.config.max_whitespace,
                    &schema_limits(self.config.lazy_lexemes),
                )?;
                let attempt = |pieces: &PieceGrammar, split: bool| {
                    self.lowering(cancel).pieces(pieces, split)
                };
                // The regular parts whole, as lexemes; where one is too big
                // for a lexeme, its long counted repetitions (`maxLength`)
                // in blocks; failing that, the too big regexes taken apart
                // only as far as needed (`PieceGrammar::fit`: a big
                // object's members become rules, each string in it stays
                // one lexeme); failing that, the whole grammar taken apart
                // (no intersections: no grammar rule says "both"), whose
                // masks cost the most.
                let taken_apart =
                    |pieces: &PieceGrammar, limit: GrammarError| match attempt(pieces, true) {
                        Err(GrammarError::LimitExceeded { .. })
                            if lowered.intersections.is_empty() =>
                        {
                            self.lowering(cancel)
                                .grammar(&lowered.to_grammar(&GbnfLimits::default())?)
                        }
                        Err(GrammarError::LimitExceeded { .. }) => Err(limit),
                        other => other,
                    };
                // Long repetitions cut where the whole grammar is split
                // (lazy lexemes), or only once it failed as lexemes.
                let counted = PieceLimits {
                    block_weight: Some(COUNTED_BLOCK_WEIGHT),
                    counted: Some(self.config.lazy_limits()),
                    ..PieceLimits::default()
                };
                let whole = if self.config.lazy_lexemes {
                    // Too many rules once cut: whole.
                    lowered
                        .to_pieces_with(&counted)
                        .or_else(|_| lowered.to_pieces())?
                } else {
                    lowered.to_pieces()?
                };
                match attempt(&whole, false) {
                    Err(limit @ GrammarError::LimitExceeded { .. }) if self.config.lazy_lexemes => {
                        taken_apart(&whole, limit)?
                    }
                    Err(limit @ GrammarError::LimitExceeded { .. }) => {
                        let blocks = lowered.to_pieces_with(&PieceLimits {
                            block_weight: Some(REPEAT_BLOCK_WEIGHT),
                            ..PieceLimits::default()
                        });
                        match blocks {
                            Ok(blocks) if blocks != whole => match attempt(&blocks, false) {
                                Err(limit @ GrammarError::LimitExceeded { .. }) => {
                                    taken_apart(&blocks, limit)?
                                }
                                other => other?,
                            },
                            // Nothing long to cut in blocks, or too many
                            // rules once cut.
                            _ => taken_apart(&whole, limit)?,
                        }
                    }
                    other => other?,
                }
            }
        };
        let mut budget = Budget::new(self.config.max_step_work, self.config.max_items);
        let initial = initial_set(&cfg, &mut budget).map_err(|e| GrammarError::LimitExceeded {
            what: format!("the first Earley set ({e})"),
            limit: self.config.max_items,
            knob: "max_items".into(),
        })?;
        Ok(EarleyGrammar {
            inner: Arc::new(GrammarInner {
                initial: Arc::new(initial),
                summaries: self.summary_cache(constraint, &cfg.lexemes),
                cfg,
                trie: self.trie.clone(),
                vocab: self.vocab.clone(),
                config: self.config.clone(),
                compile_time: started.elapsed(),
            }),
        })
    }
}

impl EarleyBackend {
    /// The language this backend serves for `constraint`, as one regex
    /// (whole-output match), when that language is regular; `Ok(None)` when
    /// it is not (recursion, values of any depth, extra members of a JSON
    /// object with any value). The same lowering as
    /// [`compile`](GrammarBackend::compile), so a regex engine built from
    /// it (the `auto` backend's regex-fsm table) accepts exactly the
    /// outputs this backend's matchers accept. Costs one lowering (a
    /// fraction of a compile); its errors are the lowering's (a regex
    /// comes back as given: compiling it is what checks it).
    pub fn regular_regex(&self, constraint: &Constraint) -> Result<Option<String>, GrammarError> {
        let grammar = match &constraint.spec {
            ConstraintSpec::Regex(pattern) => return Ok(Some(pattern.clone())),
            ConstraintSpec::Choice(choices) => return choice_regex(choices).map(Some),
            ConstraintSpec::JsonSchema(schema) => {
                let lowered = json_schema::schema_to_grammar(
                    schema,
                    &constraint.options,
                    self.config.max_whitespace,
                    &schema_limits(false),
                )?;
                // No rule: the root regex is the whole language.
                return Ok(lowered.rules.is_empty().then_some(lowered.root));
            }
            ConstraintSpec::Ebnf { grammar, root } => Grammar::from_gbnf(grammar, root)?,
            ConstraintSpec::JsonObject => {
                builtin_json(&constraint.options, self.config.max_whitespace)?
            }
            ConstraintSpec::StructuralTag(tag) => self.structural_tag(tag, &constraint.options)?,
        };
        // A grammar the solver cannot write as one regex (recursion in the
        // middle of a rule, a regex past its length limit) is not regular
        // as far as a regex engine is concerned.
        Ok(grammar.to_regex(&RegularLimits::default()).ok())
    }

    /// A JSON Schema through the front end's context-free lowering:
    /// recursion and values of any depth become rules.
    fn schema_grammar(&self, schema: &str, options: &SpecOptions) -> Result<Grammar, GrammarError> {
        json_schema::schema_to_grammar(
            schema,
            options,
            self.config.max_whitespace,
            &schema_limits(false),
        )?
        .to_grammar(&GbnfLimits::default())
    }

    /// A tag's content as a grammar: any kind this backend serves but a
    /// nested structural tag.
    fn content_grammar(
        &self,
        spec: &ConstraintSpec,
        options: &SpecOptions,
    ) -> Result<Grammar, GrammarError> {
        let limits = GbnfLimits::default();
        match spec {
            ConstraintSpec::Ebnf { grammar, root } => Grammar::from_gbnf(grammar, root),
            ConstraintSpec::JsonObject => builtin_json(options, self.config.max_whitespace),
            ConstraintSpec::JsonSchema(schema) => self.schema_grammar(schema, options),
            ConstraintSpec::Regex(pattern) => compose::from_regex(pattern, &limits),
            ConstraintSpec::Choice(choices) => {
                compose::from_regex(&choice_regex(choices)?, &limits)
            }
            ConstraintSpec::StructuralTag(_) => Err(GrammarError::InvalidSpec(
                "a structural tag's content cannot be another structural tag".into(),
            )),
        }
    }

    /// Free text whose tagged regions hold any grammar this backend serves
    /// (`tokensieve_grammar::compose::tagged_grammar`): the same reading of
    /// triggers as regex-fsm's structural tags.
    fn structural_tag(
        &self,
        tag: &StructuralTag,
        options: &SpecOptions,
    ) -> Result<Grammar, GrammarError> {
        let mut triggers: Vec<&str> = tag.triggers.iter().map(String::as_str).collect();
        triggers.sort_unstable();
        triggers.dedup();
        let mut contents = Vec::with_capacity(tag.tags.len());
        let mut trigger_of = Vec::with_capacity(tag.tags.len());
        for item in &tag.tags {
            let Some(trigger) = triggers.iter().position(|t| item.begin.starts_with(t)) else {
                return Err(GrammarError::InvalidSpec(format!(
                    "structural tag: begin {:?} starts with none of the triggers {:?}",
                    item.begin, tag.triggers
                )));
            };
            trigger_of.push(trigger);
            contents.push(self.content_grammar(&item.content, options)?);
        }
        let tags: Vec<GrammarTag<'_>> = tag
            .tags
            .iter()
            .zip(&contents)
            .zip(&trigger_of)
            .map(|((item, content), &trigger)| GrammarTag {
                trigger,
                begin: &item.begin,
                content,
                end: &item.end,
            })
            .collect();
        compose::tagged_grammar(
            &triggers,
            &tags,
            &GbnfLimits::default(),
            &RegularLimits::default(),
        )
    }
}

/// The builtin JSON grammar for these options, parsed.
fn builtin_json(options: &SpecOptions, max_whitespace: u32) -> Result<Grammar, GrammarError> {
    let gbnf = json_gbnf(options, max_whitespace)?;
    Grammar::from_gbnf(&gbnf, "root")
        .map_err(|e| GrammarError::InvalidSpec(format!("the builtin JSON grammar: {e}")))
}

/// The builtin JSON grammar in the layout the options ask for.
fn json_gbnf(options: &SpecOptions, max_whitespace: u32) -> Result<String, GrammarError> {
    Ok(match &options.whitespace {
        Whitespace::Any => json_object_gbnf(
            &format!("[ \\t\\n\\r]{{0,{max_whitespace}}}"),
            "\",\"",
            "\":\"",
        ),
        Whitespace::Compact => json_object_gbnf("\"\"", "\",\"", "\":\""),
        Whitespace::Fixed {
            item_separator,
            key_separator,
            indent: None,
        } => json_object_gbnf(
            "\"\"",
            &gbnf_literal(item_separator)?,
            &gbnf_literal(key_separator)?,
        ),
        Whitespace::Fixed {
            indent: Some(_), ..
        } => {
            return Err(GrammarError::Unsupported {
                location: Location::None,
                what: "indented layout for json_object on the earley backend (indentation \
                       depends on an unbounded depth; use compact or fixed separators)"
                    .into(),
            });
        }
    })
}

/// `text` as a GBNF string literal; an empty separator is a config error.
fn gbnf_literal(text: &str) -> Result<String, GrammarError> {
    if text.is_empty() {
        return Err(GrammarError::InvalidConfig(
            "JSON separators must not be empty".into(),
        ));
    }
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

impl GrammarBackend for EarleyBackend {
    fn name(&self) -> &str {
        crate::BACKEND_NAME
    }

    fn supported_kinds(&self) -> &[SpecKind] {
        &SUPPORTED_KINDS
    }

    fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    fn compile(&self, constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        self.compile_cancellable(constraint, &CancelToken::new())
    }

    fn compile_cancellable(
        &self,
        constraint: &Constraint,
        cancel: &CancelToken,
    ) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        Ok(Arc::new(self.compile_earley(constraint, cancel)?))
    }
}

pub(crate) struct GrammarInner {
    pub cfg: Cfg,
    pub initial: Arc<ESet>,
    /// Mask summaries by set shape, filled as masks are asked for.
    pub summaries: Arc<SummaryCache>,
    pub trie: Arc<TokenTrie>,
    pub vocab: Arc<Vocabulary>,
    pub config: EarleyConfig,
    pub compile_time: Duration,
}

/// A compiled grammar: the flat grammar, its lexemes and the first Earley
/// set, shared by all its matchers.
#[derive(Clone)]
pub struct EarleyGrammar {
    inner: Arc<GrammarInner>,
}

impl std::fmt::Debug for EarleyGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarleyGrammar")
            .field("lexemes", &self.inner.cfg.lexemes.len())
            .field(
                "lexeme_states",
                &self
                    .inner
                    .cfg
                    .lexemes
                    .iter()
                    .map(|l| l.made().map_or(0, |d| d.num_states()))
                    .sum::<usize>(),
            )
            .field("rules", &self.inner.cfg.alts.len())
            .field("compile_time", &self.inner.compile_time)
            .finish()
    }
}

impl EarleyGrammar {
    /// A fresh matcher with its concrete type.
    pub fn earley_matcher(&self) -> EarleyMatcher {
        EarleyMatcher::new(self.inner.clone())
    }

    /// Lexemes (regular parts, each a DFA) and rules (the context-free
    /// rest, the start rule included) of the flat grammar.
    pub fn sizes(&self) -> (usize, usize) {
        (self.inner.cfg.lexemes.len(), self.inner.cfg.alts.len())
    }
}

impl CompiledGrammar for EarleyGrammar {
    fn matcher(&self) -> Box<dyn GrammarObject> {
        Box::new(self.earley_matcher())
    }

    fn compile_time(&self) -> Duration {
        self.inner.compile_time
    }

    fn memory_bytes(&self) -> usize {
        self.inner.cfg.memory_bytes() + self.inner.summaries.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recompile of the same constraint (with the same lexemes) starts
    /// with the summaries the last compile kept; another constraint, or the
    /// same one with lexemes built afresh, starts with its own.
    #[test]
    fn summaries_are_kept_for_the_same_constraint_only() {
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        let summaries = |backend: &EarleyBackend, c: &Constraint| {
            let g = backend.compile_earley(c, &CancelToken::new()).unwrap();
            g.inner.summaries.clone()
        };
        let a = Constraint::ebnf(r#"root ::= "a"+ "b""#, "root");
        let b = Constraint::ebnf(r#"root ::= "a"+ "c""#, "root");
        let warm = EarleyBackend::new(vocab.clone(), EarleyConfig::default());
        // A first compile keeps nothing but the constraint's hash (a
        // one-off schema's lexemes are not held alive); the second keeps its
        // summaries for the third.
        let once = summaries(&warm, &a);
        assert!(warm.summaries.lock().unwrap().is_empty());
        let first = summaries(&warm, &a);
        assert!(!Arc::ptr_eq(&once, &first));
        assert!(Arc::ptr_eq(&first, &summaries(&warm, &a)));
        assert!(!Arc::ptr_eq(&first, &summaries(&warm, &b)));
        assert!(!Arc::ptr_eq(&first, &summaries(&warm, &b)));
        let cold = EarleyBackend::new(
            vocab,
            EarleyConfig {
                shared_lexemes: false,
                ..EarleyConfig::default()
            },
        );
        let first = summaries(&cold, &a);
        assert!(!Arc::ptr_eq(&first, &summaries(&cold, &a)));
        // Nor does a cold backend keep anything (old lexemes alive).
        assert!(cold.summaries.lock().unwrap().is_empty());
        assert_eq!(warm.summaries.lock().unwrap().len(), 2);
    }

    /// Fused lexemes that go on alike past their keywords (a space, a
    /// name, a semicolon) share the index of the state after the keyword,
    /// made once ([`crate::lexeme::Lexeme::language_walk`]); one that goes
    /// on otherwise (a comma) has its own, and a JSON Schema's pieces are
    /// not looked up.
    #[test]
    fn states_that_read_the_same_texts_share_an_index() {
        use crate::lexeme::StateIndex;
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        let gbnf = r#"
            root ::= "{" item* "}"
            item ::= "struct" sp name ";" | "enum" sp name ";" | "union" sp name "," | root
            sp   ::= [ \t]+
            name ::= [a-z_] [a-z0-9_]*
        "#;
        let g = EarleyBackend::new(vocab, EarleyConfig::default())
            .compile_earley(&Constraint::ebnf(gbnf, "root"), &CancelToken::new())
            .unwrap();
        let cfg = &g.inner.cfg;
        // The index of each lexeme's state after `prefix`, where the lexeme
        // takes `text` whole.
        let after = |prefix: &str, text: &str| {
            let found: Vec<*const StateIndex> = cfg
                .lexemes
                .iter()
                .filter_map(|l| {
                    let dfa = l.dfa();
                    let walk = |bytes: &[u8]| {
                        bytes.iter().try_fold(l.start(), |s, &b| {
                            Some(dfa.next(s, b)).filter(|&t| t != tokensieve_automata::DEAD)
                        })
                    };
                    let whole = walk(text.as_bytes()).is_some_and(|s| dfa.is_accepting(s));
                    let state = walk(prefix.as_bytes()).filter(|_| whole)?;
                    Some(l.state(state) as *const StateIndex)
                })
                .collect();
            assert_eq!(found.len(), 1, "one lexeme takes {text:?}");
            found[0]
        };
        let (s, e, u) = (
            after("struct ", "struct a;"),
            after("enum ", "enum a;"),
            after("union ", "union a,"),
        );
        assert_eq!(s, e, "`struct ` and `enum ` go on alike");
        assert_ne!(s, u, "`union ` goes on to a comma");
        assert!(!after("struct", "struct a;").is_null());
        let schema = r#"{"type": "array", "items": {"type": "string"}}"#;
        let g = EarleyBackend::new(
            Arc::new(tokensieve_core::vocab::fixtures::json_tiny()),
            EarleyConfig::default(),
        )
        .compile_earley(&Constraint::json_schema(schema), &CancelToken::new())
        .unwrap();
        assert!(
            g.inner.cfg.lexemes.iter().all(|l| !l.language_keys()),
            "a schema's pieces are not looked up by their texts"
        );
    }

    /// The bytes that may follow a name are those of whatever may come
    /// next in the grammar: through an optional rule, and through the end
    /// of a rule to every place that refers to it.
    #[test]
    fn follow_sets_go_through_empty_rules_and_rule_ends() {
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        let gbnf = r#"
            root ::= call (";" call)*
            call ::= name args?
            args ::= "(" (call ("," call)*)? ")"
            name ::= [a-z]+
        "#;
        let g = EarleyBackend::new(vocab, EarleyConfig::default())
            .compile_earley(&Constraint::ebnf(gbnf, "root"), &CancelToken::new())
            .unwrap();
        let cfg = &g.inner.cfg;
        let set = |bytes: &[u8]| {
            let mut set = [0u64; 4];
            for &b in bytes {
                set[b as usize >> 6] |= 1 << (b & 63);
            }
            set
        };
        let mut names = 0;
        for (pos, sym) in cfg.syms.iter().enumerate() {
            let crate::parser::Sym::Lex(l) = *sym else {
                continue;
            };
            let lexeme = &cfg.lexemes[l as usize];
            let first = lexeme.first_bytes(lexeme.start());
            if first == &set(b"abcdefghijklmnopqrstuvwxyz") {
                names += 1;
                assert_eq!(cfg.follow(pos as u32), set(b"(;,)"), "at {pos}");
            } else if first == &set(b"(") {
                // After "(": a name or ")".
                let want = set(b"abcdefghijklmnopqrstuvwxyz)");
                assert_eq!(cfg.follow(pos as u32), want, "at {pos}");
            }
        }
        assert!(names >= 1, "no name position");
    }

    /// A long bounded string (from [`COUNTED_BLOCK_WEIGHT`]'s 38
    /// characters) is a counted lexeme even where the object around it
    /// fits one lexeme (a count inside it would make a DFA state of the big
    /// lexeme per count), and it still counts exactly.
    #[test]
    fn a_long_bounded_string_is_counted_where_its_object_fits() {
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        let schema = r#"{"type": "object", "properties": {"a": {"type": "string", "maxLength": 300}, "b": {"type": "integer"}, "c": {"type": "string", "maxLength": 40}, "d": {"type": "string", "maxLength": 30}}, "required": ["a", "b"], "additionalProperties": false}"#;
        let c = Constraint::json_schema(schema);
        let g = EarleyBackend::new(vocab, EarleyConfig::default())
            .compile_earley(&c, &CancelToken::new())
            .unwrap();
        let counted = |g: &EarleyGrammar| {
            g.inner
                .cfg
                .lexemes
                .iter()
                .filter(|l| matches!(l.made(), Some(crate::lexeme::LexDfa::Counted(_))))
                .count()
        };
        // `a` and `c`; `d` (under 38 characters) counts inside its lexeme.
        assert_eq!(counted(&g), 2);
        for (len, ok) in [(300, true), (301, false)] {
            let mut m = g.earley_matcher();
            let text = format!(r#"{{"a": "{}", "b": 1}}"#, "x".repeat(len));
            let accepted = m.accept_bytes(text.as_bytes()).is_ok() && m.is_accepting();
            assert_eq!(accepted, ok, "{len} characters");
        }
    }

    /// The regex of the language served, where it is regular: a regex as
    /// is, a closed schema as regex-fsm's own lowering writes it (no rule
    /// in the context-free lowering), and `None` for recursion, any-depth
    /// values and a schema's open objects.
    #[test]
    fn the_regular_regex_is_the_language_served_when_regular() {
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        let backend = EarleyBackend::new(vocab, EarleyConfig::default());
        let regex = |c: &Constraint| backend.regular_regex(c).unwrap();
        assert_eq!(regex(&Constraint::regex("a+b")), Some("a+b".to_string()));
        let closed = r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}"#;
        assert_eq!(
            regex(&Constraint::json_schema(closed)),
            Some(json_schema::schema_to_regex(closed, &SpecOptions::default(), 20).unwrap())
        );
        let open = r#"{"type": "object", "properties": {"a": {"type": "integer"}}}"#;
        assert_eq!(regex(&Constraint::json_schema(open)), None);
        assert_eq!(
            regex(&Constraint::ebnf(r#"root ::= "[" root* "]""#, "root")),
            None
        );
        assert!(regex(&Constraint::ebnf(r#"root ::= "a" root | "b""#, "root")).is_some());
        assert_eq!(regex(&Constraint::new(ConstraintSpec::JsonObject)), None);
        // A regex is checked by its compile, not here; a schema by its lowering.
        assert!(backend.regular_regex(&Constraint::regex("(")).is_ok());
        assert!(
            backend
                .regular_regex(&Constraint::json_schema("{"))
                .is_err()
        );
    }

    /// How many of a grammar's lexemes have their automaton made.
    fn made(g: &EarleyGrammar) -> usize {
        g.inner
            .cfg
            .lexemes
            .iter()
            .filter(|l| l.made().is_some())
            .count()
    }

    /// `c` compiled cold with lexemes made when first entered, and with
    /// lexemes made at compile.
    fn deferred_and_eager(
        vocab: &Arc<Vocabulary>,
        c: &Constraint,
    ) -> (EarleyGrammar, EarleyGrammar) {
        let compile = |defer_lexemes| {
            let config = EarleyConfig {
                shared_lexemes: false,
                defer_lexemes,
                ..EarleyConfig::default()
            };
            EarleyBackend::new(vocab.clone(), config)
                .compile_earley(c, &CancelToken::new())
                .unwrap()
        };
        (compile(true), compile(false))
    }

    /// Steps matchers of both grammars through `steps`, the masks equal
    /// before each; both matchers, past them.
    fn same_masks(
        vocab: &Vocabulary,
        (deferred, eager): (&EarleyGrammar, &EarleyGrammar),
        steps: &[&[u8]],
    ) -> (EarleyMatcher, EarleyMatcher) {
        let words = vocab.mask_words();
        let (mut m, mut reference) = (deferred.earley_matcher(), eager.earley_matcher());
        for text in steps {
            let (mut a, mut b) = (vec![0u32; words], vec![0u32; words]);
            m.fill_bitmask(&mut a);
            reference.fill_bitmask(&mut b);
            assert_eq!(a, b, "the masks before {:?}", String::from_utf8_lossy(text));
            m.accept_bytes(text).unwrap();
            reference.accept_bytes(text).unwrap();
        }
        (m, reference)
    }

    /// A lexeme's NFA is made when a mask or a step first enters the
    /// lexeme: none at compile, and never those of alternatives the output
    /// does not reach; the masks are those of lexemes made at compile.
    #[test]
    fn lexemes_are_made_when_first_entered() {
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        let grammar = r#"root ::= "[" root "]" | "{" root "}" | "x" [0-9]* | "y" [a-z]*"#;
        let c = Constraint::ebnf(grammar, "root");
        let (deferred, eager) = deferred_and_eager(&vocab, &c);
        let lexemes = deferred.sizes().0;
        assert!(lexemes >= 6, "{lexemes} lexemes");
        assert_eq!(made(&deferred), 0);
        assert_eq!(made(&eager), lexemes);
        same_masks(&vocab, (&deferred, &eager), &[b"[", b"[", b"x1", b"2"]);
        // Entered: "[", "{", "x…", "y…" (predicted at every open bracket)
        // and "]" (after the value). Never: "}".
        let entered = made(&deferred);
        assert!(entered < lexemes, "{entered} of {lexemes} made");
        assert!(entered >= 4, "{entered} made");
    }

    /// A deferred NFA past `nfa_size_limit` is an error at the step that
    /// enters its lexeme, naming the limit: the compile succeeds, the
    /// matcher refuses from there on, and no mask holds a token of it
    /// (the first mask enters it: it starts the output).
    #[test]
    fn a_deferred_nfa_past_its_limit_fails_the_step_naming_it() {
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        // A literal of 600 bytes: 600 NFA states, past 4 KiB.
        let long = "y".repeat(600);
        let c = Constraint::ebnf(format!(r#"root ::= "[" root "]" | "x{long}""#), "root");
        let config = EarleyConfig {
            shared_lexemes: false,
            nfa_size_limit: 4 << 10,
            ..EarleyConfig::default()
        };
        let g = EarleyBackend::new(vocab.clone(), config)
            .compile_earley(&c, &CancelToken::new())
            .unwrap();
        let mut m = g.earley_matcher();
        let mut row = vec![0u32; vocab.mask_words()];
        m.fill_bitmask(&mut row);
        let error = m.accept_bytes(b"[").unwrap_err().to_string();
        assert!(error.contains("nfa_size_limit"), "{error}");
        for id in 0..vocab.vocab_size() as u32 {
            if row[id as usize / 32] >> (id % 32) & 1 == 1 {
                let token = vocab.grammar_bytes(id).unwrap_or_default();
                assert!(
                    token.first() == Some(&b'['),
                    "token {token:?} of the failed lexeme allowed"
                );
            }
        }
    }

    /// An object's extra-member key (any string but 40 names) comes as a
    /// verbatim piece: its lexeme is parsed and made only when an output
    /// enters it, and masks and steps are those of lexemes made at once.
    #[test]
    fn an_unparsed_key_lexeme_is_made_when_entered() {
        let vocab = Arc::new(tokensieve_core::vocab::fixtures::json_tiny());
        let properties: Vec<String> = (0..40)
            .map(|i| format!(r#""property_{i}": {{"type": "string"}}"#))
            .collect();
        let schema = format!(
            r#"{{"type": "object", "properties": {{"inner": {{"type": "object", "properties": {{{}}}, "additionalProperties": {{"type": "integer"}}}}}}, "additionalProperties": false}}"#,
            properties.join(", ")
        );
        let c = Constraint::json_schema(schema);
        let (deferred, eager) = deferred_and_eager(&vocab, &c);
        assert_eq!(made(&deferred), 0);
        let text = br#"{"inner": {"property_1": "x", "property_12x": 3, "z": 4}}"#;
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        let (m, reference) = same_masks(&vocab, (&deferred, &eager), &bytes);
        assert!(m.is_accepting() && reference.is_accepting());
        // A named property is no extra member: its value is a string.
        let mut m = deferred.earley_matcher();
        m.accept_bytes(br#"{"inner": {"property_1": "#).unwrap();
        assert!(m.accept_bytes(b"3").is_err());
    }
}
