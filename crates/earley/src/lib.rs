//! # tokensieve-earley (not implemented yet)
//!
//! The context-free backend of DESIGN.md §3: EBNF/GBNF grammars, the builtin
//! JSON grammar and JSON Schema (with recursion) lowered to a CFG, matched by
//! an Earley parser walking a token trie of the vocabulary.
//!
//! Nothing is implemented and **nothing is registered**: asking the registry
//! for `earley` is an "unknown backend" error listing what is available. The
//! crate exists so the workspace layout and the facade's `earley` feature are
//! in place for the work that fills it.
