//! # tokensieve-regex-fsm
//!
//! The Outlines-style backend of tokensieve, registered as `regex-fsm` (alias
//! `outlines`): a constraint is lowered to a regular expression, the regex to
//! a byte-level DFA, and the DFA is crossed once with the vocabulary into a
//! **token index**, one mask row per DFA state. At decoding time a mask is a
//! table read (a 16 KiB copy for a 128k vocabulary) and accepting a token is a
//! few DFA steps.
//!
//! ## When to use it
//!
//! Regular constraints: regexes, choice lists, JSON Schemas without
//! recursion (recursive schemas and `JsonObject` need `SpecOptions::max_depth`,
//! which bounds their nesting), and GBNF grammars whose language is regular
//! (recursion only at one end of a rule, as repetition desugars to).
//! Compilation costs one trie walk per DFA state (milliseconds to tens of
//! milliseconds for typical JSON-schema regexes on a 128k vocabulary); masks
//! are then the cheapest there are. Context-free grammars (recursion in the
//! middle, like nested brackets) are an `Unsupported` error naming the rule:
//! they need an Earley backend.
//!
//! ## Pipeline and types
//!
//! 1. [`RegexFsmBackend::lower`]: `Regex` as is; `Choice` as an alternation of
//!    escaped strings; `JsonSchema` / `JsonObject` through tokensieve-json-schema's
//!    `schema_to_regex`,
//!    with JSON whitespace runs bounded by [`RegexFsmConfig::max_whitespace`];
//!    `Ebnf` through the GBNF front end of `tokensieve-grammar` and
//!    `Grammar::to_regex`.
//! 2. [`ByteDfa`](tokensieve_automata::ByteDfa): `regex-syntax` parses (look-around and back-references
//!    are `Unsupported` errors with their byte offset), every state of the
//!    pattern's lazy DFA is made (`regex-automata`'s dense DFA where the
//!    pattern has look-around), anchored at the start, matching the
//!    *whole* output; states that can no longer reach a match are pruned into the
//!    dead state (so "alive" always means "can still be completed"), then
//!    the DFA is minimized. Size limits are `LimitExceeded` errors naming
//!    the knob.
//! 3. [`TokenTrie`](tokensieve_core::TokenTrie): the vocabulary's grammar tokens as a preorder trie,
//!    built once per vocabulary and shared.
//! 4. [`TokenIndex`]: a state walks the trie depth-first, pruning at dead
//!    bytes; states that no string as long as the longest token tells apart
//!    (by reaching the dead state or not) share one walk; identical rows are
//!    stored once, small ones as sorted ids.
//! 5. [`RegexGrammar`] (the [`CompiledGrammar`](tokensieve_core::CompiledGrammar))
//!    hands out [`RegexMatcher`]s: a DFA state, a terminated flag and a
//!    bounded rollback history.
//!
//! ```
//! use std::sync::Arc;
//! use tokensieve_core::{Constraint, GrammarBackend, vocab::fixtures};
//! use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};
//!
//! let vocab = Arc::new(fixtures::json_tiny());
//! let backend = RegexFsmBackend::new(vocab.clone(), RegexFsmConfig::default());
//! let grammar = backend.compile(&Constraint::regex("[0-9]{1,3}"))?;
//! let mut m = grammar.matcher();
//! m.accept_token(vocab.encode_greedy(b"12").unwrap()[0])?;
//! assert!(m.is_accepting());
//! let mut row = vec![0u32; vocab.mask_words()];
//! m.fill_bitmask(&mut row);
//! assert!(tokensieve_core::bitmask::row_is_allowed(&row, b'7' as u32));
//! assert!(!tokensieve_core::bitmask::row_is_allowed(&row, b'a' as u32));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Semantics worth knowing
//!
//! - **Whole output**: the regex must match the entire output; `^`/`$` are
//!   allowed and redundant at the ends.
//! - **Regex dialect**: `regex-syntax` (the `regex` crate), Unicode on by
//!   default: `\d`, `\w`, `\s` and `(?i)` are Unicode-aware (`\d` matches
//!   `٣`); write `[0-9]` or `(?-u:\d)` for ASCII. Patterns that could match
//!   invalid UTF-8 (`(?-u:\xFF)`) are rejected, so every output is text.
//!   Look-around, back-references and Unicode word boundaries are
//!   [`GrammarError::Unsupported`](tokensieve_core::GrammarError::Unsupported)
//!   (use `(?-u:\b)`); a regex that matches nothing is `InvalidSpec`.
//! - **Masks**: stop tokens are allowed exactly when the output may end;
//!   after a stop token has been accepted, only stop tokens are allowed.
//!   Special, padding and empty tokens are never allowed (`accept_token`
//!   answers `InvalidToken`). A token is allowed only if the output can
//!   still be completed after it (dead-end DFA states are pruned).
//! - **Vocabulary coverage**: if no sequence of tokens can complete the
//!   output from the start, compilation fails with a `Vocabulary` error
//!   naming the bytes the regex wanted. A state reachable by tokens from
//!   which no token continues (possible only with vocabularies missing
//!   single-byte tokens) is counted in [`IndexStats::stuck_states`]; its
//!   mask is empty.
//! - **Jump-forward** returns the bytes of the chain of states with a single
//!   live byte (and not accepting), cut back to the last UTF-8 character
//!   boundary.
//!
//! ## Configuration
//!
//! [`RegexFsmConfig`] lists every knob with its default and cost; through the
//! registry they are read from `BackendConfig::options` by the same names.

mod backend;
mod config;
mod index;
mod matcher;

pub use backend::{BuildStats, RegexFsmBackend, RegexGrammar, SUPPORTED_KINDS};
pub use config::RegexFsmConfig;
pub use index::{IndexStats, TokenIndex};
pub use matcher::RegexMatcher;

use std::sync::Arc;
use tokensieve_core::BackendRegistration;

/// The registered name of this backend.
pub const BACKEND_NAME: &str = "regex-fsm";

tokensieve_core::inventory::submit! {
    BackendRegistration {
        name: BACKEND_NAME,
        aliases: &["outlines"],
        description: "regex / choice / JSON Schema / regular GBNF grammar -> byte DFA -> per-state token index (Outlines-style)",
        factory: |config, vocab| {
            let config = RegexFsmConfig::from_backend_config(config)?;
            Ok(Arc::new(RegexFsmBackend::new(vocab, config)))
        },
    }
}
