//! [`RegexFsmBackend`] (spec -> regex -> DFA -> index) and the compiled
//! [`RegexGrammar`] it hands out.

use crate::config::RegexFsmConfig;
use crate::index::{IndexOptions, IndexStats, TokenIndex};
use crate::matcher::RegexMatcher;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokensieve_automata::{ByteDfa, DfaLimits};
use tokensieve_core::TokenTrie;
use tokensieve_core::{
    CancelToken, CompiledGrammar, Constraint, ConstraintSpec, GrammarBackend, GrammarError,
    GrammarObject, Location, SpecKind, SpecOptions, StructuralTag, Vocabulary,
};
use tokensieve_grammar::regular::{choice_regex, tagged_text};
use tokensieve_grammar::{RegularLimits, Tag};
use tokensieve_json_schema as json_schema;

/// The spec kinds this backend compiles.
pub const SUPPORTED_KINDS: [SpecKind; 6] = [
    SpecKind::Regex,
    SpecKind::Choice,
    SpecKind::JsonSchema,
    SpecKind::JsonObject,
    SpecKind::Ebnf,
    SpecKind::StructuralTag,
];

/// The regex backend for one vocabulary. Holds the vocabulary's token trie
/// (built in [`new`](Self::new), shared with other backends on the same
/// vocabulary); every [`compile`](GrammarBackend::compile) builds a DFA and
/// a token index.
pub struct RegexFsmBackend {
    vocab: Arc<Vocabulary>,
    config: RegexFsmConfig,
    trie: Arc<TokenTrie>,
}

impl std::fmt::Debug for RegexFsmBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegexFsmBackend")
            .field("vocab_size", &self.vocab.vocab_size())
            .field("config", &self.config)
            .field("trie_nodes", &self.trie.num_nodes())
            .finish()
    }
}

impl RegexFsmBackend {
    /// A backend for `vocab`. Builds (or reuses) the vocabulary's token trie:
    /// tens of milliseconds for a 128k-token vocabulary, once.
    pub fn new(vocab: Arc<Vocabulary>, config: RegexFsmConfig) -> Self {
        let trie = TokenTrie::shared(&vocab);
        RegexFsmBackend {
            vocab,
            config,
            trie,
        }
    }

    pub fn config(&self) -> &RegexFsmConfig {
        &self.config
    }

    /// The vocabulary's token trie.
    pub fn trie(&self) -> &Arc<TokenTrie> {
        &self.trie
    }

    /// The regex a constraint lowers to (whole-output match), or why it
    /// cannot be lowered.
    pub fn lower(&self, constraint: &Constraint) -> Result<String, GrammarError> {
        match &constraint.spec {
            ConstraintSpec::Regex(pattern) => Ok(pattern.clone()),
            ConstraintSpec::Choice(choices) => choice_regex(choices),
            ConstraintSpec::JsonSchema(schema) => json_schema::schema_to_regex(
                schema,
                &constraint.options,
                self.config.max_whitespace,
            ),
            ConstraintSpec::JsonObject => {
                json_schema::json_object_regex(&constraint.options, self.config.max_whitespace)
            }
            // Regular grammars only: recursion in the middle of a rule is an
            // error naming the rule.
            ConstraintSpec::Ebnf { grammar, root } => {
                tokensieve_grammar::Grammar::from_gbnf(grammar, root)?
                    .to_regex(&RegularLimits::default())
            }
            ConstraintSpec::StructuralTag(tag) => self.structural_tag(tag, &constraint.options),
        }
    }

    /// Free text with tagged regions: each tag is `begin`, its content
    /// lowered like any constraint (same options), then `end`; see
    /// `tokensieve_grammar::regular::tagged_text` for how triggers open them.
    fn structural_tag(
        &self,
        tag: &StructuralTag,
        options: &SpecOptions,
    ) -> Result<String, GrammarError> {
        let mut triggers: Vec<&str> = tag.triggers.iter().map(String::as_str).collect();
        triggers.sort_unstable();
        triggers.dedup();
        let mut tags = Vec::with_capacity(tag.tags.len());
        for item in &tag.tags {
            let Some(trigger) = triggers.iter().position(|t| item.begin.starts_with(t)) else {
                return Err(GrammarError::InvalidSpec(format!(
                    "structural tag: begin {:?} starts with none of the triggers {:?}",
                    item.begin, tag.triggers
                )));
            };
            let content = self.lower(&Constraint::with_options(
                (*item.content).clone(),
                options.clone(),
            ))?;
            tags.push(Tag {
                trigger,
                regex: format!(
                    "{}(?:{content}){}",
                    regex_syntax::escape(&item.begin),
                    regex_syntax::escape(&item.end)
                ),
            });
        }
        tagged_text(&triggers, &tags, &RegularLimits::default())
    }

    /// Compiles a regex (whole-output match) into a grammar, keeping its
    /// concrete type (for [`RegexGrammar::build_stats`]).
    pub fn compile_regex(&self, pattern: &str) -> Result<RegexGrammar, GrammarError> {
        self.compile_regex_from(pattern, Instant::now(), &CancelToken::new())
    }

    /// [`Self::compile_regex`], stopping with [`GrammarError::Cancelled`]
    /// once `cancel` is cancelled: checked after the DFA is built and before
    /// every state's trie walk (determinization itself cannot be
    /// interrupted; the DFA limits bound it).
    pub fn compile_regex_cancellable(
        &self,
        pattern: &str,
        cancel: &CancelToken,
    ) -> Result<RegexGrammar, GrammarError> {
        self.compile_regex_from(pattern, Instant::now(), cancel)
    }

    fn compile_regex_from(
        &self,
        pattern: &str,
        started: Instant,
        cancel: &CancelToken,
    ) -> Result<RegexGrammar, GrammarError> {
        self.config.validate()?;
        cancel.check()?;
        let c = &self.config;
        let dfa_start = Instant::now();
        let dfa = ByteDfa::build(
            pattern,
            &DfaLimits {
                nfa_size_limit: c.nfa_size_limit,
                dfa_size_limit: c.dfa_size_limit,
                determinize_size_limit: c.determinize_size_limit,
                max_dfa_states: c.max_dfa_states,
                minimize: c.minimize,
            },
        )?;
        let dfa_time = dfa_start.elapsed();
        cancel.check()?;
        let index_start = Instant::now();
        let index = TokenIndex::build(
            &dfa,
            &self.trie,
            self.vocab.mask_words(),
            &IndexOptions {
                max_bytes: c.max_index_bytes,
                parallel: c.parallel_build,
                walk_cache_bytes: c.walk_cache_bytes,
                cancel: cancel.clone(),
                max_work: c.max_compile_work,
            },
        )?;
        let index_time = index_start.elapsed();
        let build = BuildStats {
            raw_dfa_states: dfa.raw_states,
            dfa_states: dfa.num_states(),
            byte_classes: dfa.num_classes(),
            dfa_time,
            index_time,
            index: index.stats().clone(),
            memory_bytes: dfa.memory_bytes() + index.stats().bytes,
        };
        Ok(RegexGrammar {
            inner: Arc::new(GrammarInner {
                dfa,
                index,
                vocab: self.vocab.clone(),
                max_rollback: c.max_rollback,
                compile_time: started.elapsed(),
                build,
            }),
        })
    }
}

impl GrammarBackend for RegexFsmBackend {
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
        let started = Instant::now();
        let pattern = self.lower(constraint)?;
        let mut compiled = self.compile_regex_from(&pattern, started, cancel);
        // Members generated for `patternProperties` make a schema's regex
        // larger; where that is past the automaton limits, the schema
        // without them (a subset, as before they were generated).
        if let (Err(GrammarError::LimitExceeded { .. }), ConstraintSpec::JsonSchema(schema)) =
            (&compiled, &constraint.spec)
        {
            let limits = json_schema::LoweringLimits {
                pattern_members: false,
                ..json_schema::LoweringLimits::default()
            };
            if let Ok(smaller) = json_schema::schema_to_regex_with_limits(
                schema,
                &constraint.options,
                self.config.max_whitespace,
                &limits,
            ) && smaller != pattern
            {
                compiled = self.compile_regex_from(&smaller, started, cancel);
            }
        }
        // The regex of a grammar or structural tag is ours, not the user's:
        // an offset into it would point nowhere they can see.
        let ours = matches!(
            constraint.spec,
            ConstraintSpec::Ebnf { .. } | ConstraintSpec::StructuralTag(_)
        );
        match compiled {
            Err(GrammarError::InvalidRegex { message, .. }) if ours => {
                Err(GrammarError::Unsupported {
                    location: Location::None,
                    what: format!(
                        "this {} as a regular expression ({message})",
                        constraint.kind()
                    ),
                })
            }
            other => Ok(Arc::new(other?)),
        }
    }
}

/// What a compilation built, and how long each part took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildStats {
    /// States of the DFA as determinized, before pruning and minimization.
    pub raw_dfa_states: usize,
    /// States of the final DFA (the dead one included).
    pub dfa_states: usize,
    /// Byte classes of the final DFA.
    pub byte_classes: usize,
    /// Parse + NFA + DFA + pruning + minimization.
    pub dfa_time: Duration,
    /// Token index build.
    pub index_time: Duration,
    pub index: IndexStats,
    /// Heap bytes of the DFA table and the index.
    pub memory_bytes: usize,
}

pub(crate) struct GrammarInner {
    pub dfa: ByteDfa,
    pub index: TokenIndex,
    pub vocab: Arc<Vocabulary>,
    pub max_rollback: usize,
    pub compile_time: Duration,
    pub build: BuildStats,
}

/// A compiled regex over one vocabulary: DFA + token index, shared by all its
/// matchers (cloning it or calling [`matcher`](CompiledGrammar::matcher) is
/// cheap).
#[derive(Clone)]
pub struct RegexGrammar {
    inner: Arc<GrammarInner>,
}

impl std::fmt::Debug for RegexGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegexGrammar")
            .field("build", &self.inner.build)
            .field("compile_time", &self.inner.compile_time)
            .finish()
    }
}

impl RegexGrammar {
    /// A fresh matcher with its concrete type.
    pub fn regex_matcher(&self) -> RegexMatcher {
        RegexMatcher::new(self.inner.clone())
    }

    /// Sizes and timings of this compilation.
    pub fn build_stats(&self) -> &BuildStats {
        &self.inner.build
    }

    /// The DFA.
    pub fn dfa(&self) -> &ByteDfa {
        &self.inner.dfa
    }

    /// The token index.
    pub fn index(&self) -> &TokenIndex {
        &self.inner.index
    }
}

impl CompiledGrammar for RegexGrammar {
    fn matcher(&self) -> Box<dyn GrammarObject> {
        Box::new(self.regex_matcher())
    }

    fn compile_time(&self) -> Duration {
        self.inner.compile_time
    }

    fn memory_bytes(&self) -> usize {
        self.inner.build.memory_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_are_escaped() {
        assert_eq!(
            choice_regex(&["a.b".into(), "(c)".into()]).unwrap(),
            r"(?:a\.b|\(c\))"
        );
        assert!(matches!(
            choice_regex(&[]),
            Err(GrammarError::InvalidSpec(_))
        ));
    }
}
