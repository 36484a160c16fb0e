//! # tokensieve-earley (front end only; no backend yet)
//!
//! The context-free backend of DESIGN.md §3 will live here: EBNF/GBNF
//! grammars, the builtin JSON grammar and JSON Schema (with recursion)
//! lowered to a CFG, matched by an Earley parser walking a token trie of the
//! vocabulary.
//!
//! ## What exists today
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
//!   oracle** for the matcher to come. It is simple and slow on purpose.
//! * [`regular`]: [`Grammar::to_regex`] for grammars whose language is
//!   regular (recursion only at one end of a rule), and
//!   [`regular::tagged_text`] for structural tags (free text in which
//!   triggers open tagged regions). The `regex-fsm` backend serves both
//!   kinds through them.
//!
//! ```
//! use tokensieve_earley::Grammar;
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
//! ## What does not exist yet
//!
//! The matcher (Earley items over the token trie, masks, rollback) and hence
//! the backend. **Nothing is registered**: asking the registry for `earley`
//! is an "unknown backend" error listing what is available.
//!
//! [`GrammarError::InvalidGrammar`]: tokensieve_core::GrammarError::InvalidGrammar

pub mod gbnf;
pub mod grammar;
mod recognizer;
pub mod regular;

pub use gbnf::GbnfLimits;
pub use grammar::{Alternative, ByteRange, CharClass, Grammar, Rule, RuleId, RuleOrigin, Symbol};
pub use regular::RegularLimits;
