//! # tokensieve-grammar
//!
//! Context-free grammars: the IR every front end lowers to, the GBNF
//! parser, the reference recognizer that is the backends' test oracle, and
//! the ways a grammar becomes regexes (its regular rules, structural tags)
//! or is built from them (compose, pieces). It builds on
//! tokensieve-automata (regex text to automata) and tokensieve-core; the
//! JSON Schema compiler and both backends build on it.
//!
//! ## Which type when
//!
//! * Parsing user grammars: [`Grammar::from_gbnf`] (limits in
//!   [`GbnfLimits`]); checking a string against one: [`Grammar::accepts`].
//! * A grammar that is regular, for a regex backend: [`Grammar::to_regex`];
//!   the regular rules of any grammar, as lexemes: [`Grammar::rule_regexes`]
//!   and [`regular::RuleHirs`] (their syntax trees, no text parsed).
//! * Regexes with rule references, split around the references only, each
//!   piece keeping its syntax tree: [`pieces::PieceGrammar`].
//!
//! ## Modules
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
//! * [`pieces`]: regexes with rule references split only around them, each
//!   piece keeping its syntax tree; a verbatim rule (the key of an
//!   object's extra members) kept as its text, unparsed, with the names it
//!   excludes.
//! * `testing`: random grammars and strings for the differential tests of
//!   every backend (seeded; not a stable API).
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
pub mod gbnf;
pub mod grammar;
pub mod pieces;
mod recognizer;
pub mod regular;
#[doc(hidden)]
pub mod testing;

pub use compose::GrammarTag;
pub use gbnf::GbnfLimits;
pub use grammar::{Alternative, ByteRange, CharClass, Grammar, Rule, RuleId, RuleOrigin, Symbol};
pub use pieces::{Piece, PieceGrammar, PieceLimits, Verbatim};
pub use regular::{Measure, RegularLimits, Tag};
