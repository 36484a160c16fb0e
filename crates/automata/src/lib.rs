//! # tokensieve-automata
//!
//! Regex text to byte automata: what every tokensieve backend walks a
//! vocabulary's token trie with. This crate knows regexes, bytes and UTF-8;
//! it knows nothing of grammars or JSON Schema (the one exception says so
//! in its name: [`json_keys`]). It sits where `regex-automata` sits under
//! `regex`: the grammar crate, the JSON Schema compiler and both backends
//! build on it, and it builds on tokensieve-core alone.
//!
//! ## Which automaton when
//!
//! * [`ByteDfa`]: a whole, pruned and minimized dense byte DFA, built once
//!   from a regex ([`ByteDfa::build`]: every state of its [`LazyDfa`]
//!   made, or regex-automata's dense DFA where the regex keeps
//!   look-around) under [`DfaLimits`]. Reach for it when the language is
//!   small enough to build in full and every state will be visited: the
//!   regex-fsm backend indexes every state of one.
//! * [`LazyDfa`]: the same language, its states made the first time a walk
//!   reaches them, from a Thompson NFA built straight from the syntax tree.
//!   Compiling it costs the NFA only; use it where a language is large and
//!   a walk meets a small part of it (the earley backend's lexemes). State
//!   ids are stable and the tables are shared by threads.
//! * [`LazyProduct`]: the strings several regexes all match (a JSON string
//!   under a `pattern` and a length), made lazily from their [`LazyDfa`]s.
//! * [`LazyCounted`]: `X{min,max}` and what follows, as a count and a state
//!   of `X`, so a `maxLength: 32767` string is one small automaton.
//! * [`OtherKeys`]: a quoted JSON object key that is none of some names,
//!   built as an NFA straight from the names' trie.
//!
//! All of them implement [`Automaton`] (`next(state, byte)`, acceptance,
//! [`DEAD`]), which is what a trie walk needs; [`TextStep`] and
//! [`TextRuns`] let a walk take a whole subtree of the token trie at once
//! where a state loops on every byte below it.
//!
//! ## Modules
//!
//! * [`dfa`]: regex -> [`ByteDfa`]; the [`Automaton`] trait; text steps and
//!   runs; [`parse`] (regex text to a syntax tree, with errors that name the
//!   construct and offset).
//! * [`syntax`]: a fast parser for the regex text the lowerings write,
//!   giving regex-syntax's own tree (regex-syntax itself for anything else).
//! * [`lazy`]: [`LazyDfa`] and its parts ([`Part`], [`Chain`]: runs of a
//!   lexeme between tokens counted, not stepped).
//! * [`product`]: [`LazyProduct`], the intersection of several regexes.
//! * [`counted`]: [`LazyCounted`], a long counted repetition as a count.
//! * [`json_keys`]: [`OtherKeys`], the key of an object's extra members.
//! * [`grow`]: [`Grow`], grow-only slots filled once each by any thread: the
//!   lazy automata's state tables.
//!
//! ```
//! use tokensieve_automata::{ByteDfa, DfaLimits};
//!
//! let limits = DfaLimits {
//!     nfa_size_limit: 1 << 20,
//!     dfa_size_limit: 1 << 20,
//!     determinize_size_limit: 1 << 20,
//!     max_dfa_states: 1_000,
//!     minimize: true,
//! };
//! let dfa = ByteDfa::build("[a-z]+@[a-z]+", &limits)?;
//! let state = dfa.walk(dfa.start(), b"me@x").expect("no byte kills the walk");
//! assert!(dfa.is_accepting(state));
//! assert!(dfa.walk(dfa.start(), b"me@@").is_err());
//! # Ok::<(), tokensieve_core::GrammarError>(())
//! ```

pub mod counted;
pub mod dfa;
pub mod grow;
pub mod json_keys;
pub mod lazy;
mod minimize;
mod nfa;
pub mod product;
pub mod syntax;

pub use counted::LazyCounted;
pub use dfa::{
    ALL_LEADS, Automaton, ByteDfa, DEAD, DfaLimits, FIRST_LEAD, TextRuns, TextStep, parse,
    utf8_live_leads,
};
pub use grow::Grow;
pub use json_keys::{OtherKeys, STAND_IN_MARK};
pub use lazy::{Chain, LazyDfa, Part, Stop};
pub use product::LazyProduct;
