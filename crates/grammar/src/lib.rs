//! # tokensieve-grammar
//!
//! The front ends and automata every tokensieve backend shares, the way
//! `regex-syntax` sits under `regex-automata`: the `regex-fsm` and `earley`
//! backends both depend on this crate (and on core), never on each other.
//!
//! * [`grammar`]: the grammar IR every front end lowers to. A [`Grammar`] is
//!   a list of [`Rule`]s, each a list of alternatives, each a sequence of
//!   [`Symbol`]s: a literal (UTF-8 bytes), a character class over Unicode
//!   scalar values ([`CharClass`], with [`CharClass::utf8_sequences`] for a
//!   matcher that walks bytes), or a rule reference. Grouping and
//!   repetition are already desugared into helper rules.
//! * [`gbnf`]: the parser for llama.cpp's GBNF syntax into that IR, with
//!   validation (undefined, duplicate and never-finishing rules, bad escapes
//!   and ranges…) reported as [`GrammarError::InvalidGrammar`] at a line and
//!   column, and named resource limits ([`GbnfLimits`]) so no input can
//!   overflow the stack or allocate without bound.
//! * [`Grammar::accepts`]: a plain Earley recognizer over bytes, the **test
//!   oracle** of the backends. It is simple and slow on purpose.
//! * [`regular`]: [`Grammar::to_regex`] for grammars whose language is
//!   regular (recursion only at one end of a rule),
//!   [`Grammar::rule_regexes`] for the regular rules of any grammar (the
//!   lexemes of the earley backend), and [`regular::tagged_text`] for
//!   structural tags (free text in which triggers open tagged regions).
//! * [`compose`]: grammars from pieces: [`compose::from_regex`] (a regex
//!   as a grammar), [`compose::splice`] (grammars in place of placeholder
//!   characters of a skeleton) and [`compose::tagged_grammar`] (structural
//!   tags whose contents are context-free, for the earley backend).
//! * [`dfa`]: regex -> [`ByteDfa`], a pruned, minimized byte DFA whose
//!   live states can all still reach a match (built with `regex-automata`,
//!   the workspace's one regex engine).
//! * [`counted`]: [`counted::LazyCounted`], a long counted repetition and
//!   what follows it as an automaton that counts the copies.
//! * [`trie`]: [`TokenTrie`], a vocabulary's grammar tokens as a preorder
//!   trie, built once per vocabulary and shared by every backend on it.
//!
//! ```
//! use tokensieve_grammar::Grammar;
//!
//! let grammar = Grammar::from_gbnf(
//!     r#"
//!     root ::= item ("," item)*
//!     item ::= [a-z]+ | "(" root ")"
//!     "#,
//!     "root",
//! )?;
//! assert!(grammar.accepts(b"ab,(c,d),e"));
//! assert!(!grammar.accepts(b"ab,(c"));
//! # Ok::<(), tokensieve_core::GrammarError>(())
//! ```
//!
//! [`GrammarError::InvalidGrammar`]: tokensieve_core::GrammarError::InvalidGrammar

pub mod compose;
pub mod counted;
pub mod dfa;
pub mod gbnf;
pub mod grammar;
pub mod grow;
pub mod json_schema;
pub mod keys;
pub mod lazy;
mod minimize;
mod nfa;
pub mod pieces;
pub mod product;
mod recognizer;
pub mod regular;
pub mod syntax;
#[doc(hidden)]
pub mod testing;
pub mod trie;

pub use dfa::{Automaton, ByteDfa, DfaLimits, TextRuns, TextStep};
pub use gbnf::GbnfLimits;
pub use grammar::{Alternative, ByteRange, CharClass, Grammar, Rule, RuleId, RuleOrigin, Symbol};
pub use regular::RegularLimits;
pub use trie::TokenTrie;
