//! # tokensieve-earley
//!
//! The context-free backend of tokensieve, registered as `earley`: any GBNF
//! grammar (nested and left recursion included), the builtin JSON grammar
//! (`json_object`), regexes, choice lists and structural tags with any of
//! those inside, matched by an Earley parser
//! whose terminals are **lexemes**, the regular parts of the grammar as byte
//! DFAs.
//!
//! ## When to use it
//!
//! For what a regular language cannot say: bracketed and recursive
//! languages (JSON of any depth, arithmetic, code), where regex-fsm refuses
//! the grammar. On regular constraints both backends give the same masks;
//! regex-fsm's are table reads and cost more to compile, earley's compile in
//! a fraction of a millisecond and compute masks lazily.
//!
//! ## How it works
//!
//! 1. **Lowering** (front ends in `tokensieve-grammar`): the GBNF text is
//!    parsed into the grammar IR; every rule whose language is regular
//!    (`Grammar::rule_regexes`) and whose DFA is small becomes one lexeme,
//!    and runs of regular symbols in an alternative are merged (`"{" ws`,
//!    `string ws ":" ws`). The rules left are those that really recurse.
//!    A lexeme keeps its syntax tree until a mask or a step first enters
//!    it; then its NFA is made ([`EarleyConfig::defer_lexemes`]).
//! 2. **Parsing**: an Earley item before a lexeme carries that lexeme's DFA
//!    state, so a byte inside a lexeme is a DFA step; prediction and
//!    completion run only where a lexeme may end, and a lexeme may always
//!    end or go on (no greedy lexing: the language is exactly the
//!    grammar's). Sets are shared and immutable: rollback and fork copy
//!    pointers, and memory follows the nesting depth, not the output length.
//! 3. **Masks**: for each lexeme state, one walk of the vocabulary's token
//!    trie (pruned at the first refused byte) finds the tokens that stay
//!    inside the lexeme (a row, allowed whatever the stack) and the trie
//!    nodes where the lexeme may end mid-token. A mask ORs the rows of the
//!    current items and walks only those exit subtrees through the parser.
//!    Lexeme indexes are built on first use and shared process-wide by
//!    every grammar with the same lexeme on the same vocabulary
//!    ([`EarleyConfig::shared_lexemes`]).
//!
//! ```
//! use std::sync::Arc;
//! use tokensieve_core::{Constraint, GrammarBackend, vocab::fixtures};
//! use tokensieve_earley::{EarleyBackend, EarleyConfig};
//!
//! let vocab = Arc::new(fixtures::json_tiny());
//! let backend = EarleyBackend::new(vocab.clone(), EarleyConfig::default());
//! let nested = Constraint::ebnf(r#"root ::= "[" root* "]""#, "root");
//! let mut m = backend.compile(&nested)?.matcher();
//! m.accept_bytes(b"[[]")?;
//! assert!(!m.is_accepting());
//! m.accept_bytes(b"[]]")?;
//! assert!(m.is_accepting());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Semantics worth knowing
//!
//! - Stop tokens are allowed exactly when the output may end; after one,
//!   only stop tokens. Special, padding and empty tokens are never allowed.
//! - `json_object` is an object at the top with any JSON inside, at any
//!   depth; whitespace runs between tokens are bounded by
//!   [`EarleyConfig::max_whitespace`] (20), compact and fixed separators as
//!   the options say (indented layout is an `Unsupported` error).
//! - Structural tags (tool calls in free text) take any content this backend
//!   serves (a GBNF grammar, `json_object`, a regex, a choice), read as
//!   regex-fsm reads them: free text without triggers, each trigger opening
//!   one of its tags in full; the text is one grammar
//!   (`tokensieve_grammar::compose::tagged_grammar`).
//! - `json_schema` (also as a tag's content) goes through the front end's
//!   context-free lowering (`tokensieve_grammar::json_schema::
//!   schema_to_grammar`): the keywords regex-fsm enforces, the same
//!   errors for the rest, plus what a regular language cannot say: a `$ref`
//!   back into a sub-schema being expanded is a rule (recursion to any
//!   depth), unconstrained values are any JSON value at any depth, and
//!   extra object members are allowed, with any value, unless the schema or
//!   `strict` forbids them (JSON Schema's semantics).
//! - Every step is bounded ([`EarleyConfig::max_items`],
//!   [`EarleyConfig::max_step_work`]): past a limit the step fails with
//!   `StepError::LimitExceeded` naming it, and the matcher refuses
//!   everything after (a mask computed when the limit hit holds only the
//!   tokens proven so far). What a step costs below those limits is the
//!   next section.
//!
//! ## The work of one step
//!
//! An Earley item is a dotted alternative, the state of the lexeme after
//! the dot and an origin. Let `K` be the item kinds of the lowered
//! grammar: one per position in its alternatives, and at a position
//! before a lexeme one per state of that lexeme's DFA (its states, as
//! [`EarleyConfig::max_lexeme_states`] bounds them). Let `A` be the most
//! alternatives of a rule, `O` the older sets the current set's items
//! start in (at most the nesting depth of the output so far, plus one),
//! `T` the nodes of the vocabulary's token trie (at most its bytes) and
//! `D` its longest token, in bytes.
//!
//! - **A byte** (of [`accept_token`](tokensieve_core::GrammarObject::accept_token)
//!   or `accept_bytes`): the next set holds at most `I = K·(O + 1)` items;
//!   closing it costs each item once, a prediction its `A` alternatives,
//!   a completion the items of its origin set that wait for its rule
//!   (an index of a big set's items by rule is made once per set, `I`
//!   more): `O(I·(A + I))` item operations, `O(I·A)` when completions
//!   meet few parents (an unambiguous grammar).
//! - **A mask** (`fill_bitmask`): one walk of the trie, each node read at
//!   most once. The lexemes ending inside a token are noted at the nodes
//!   where they end and walked in trie order, each node once with the
//!   union of the closures that reach it: a run of bytes that splits into
//!   lexemes in many ways (lexemes that may be empty, or that may follow
//!   themselves, `(ws item)*` with `ws ::= [ \t]*`) costs what one Earley
//!   set per byte costs, not one walk per split. At a node of depth
//!   `d ≤ D` the items are at most `K·(d + O)`, each closed once per
//!   origin, so a walk costs `O(T·K·(D + O)·(A + K·(D + O)))` item
//!   operations and one lexeme DFA step per item and trie node below it.
//!   Completions into sets older than the current one leave a walk below
//!   the nodes where they happen, made from the sets they reach, level by
//!   level, each level's nodes deeper than the last's. A level walks on
//!   in place where its own rule completes again in its own set (a
//!   left-recursive loop, `T ::= x | T y`, inside a token), so a new level
//!   reaches an older set or the same set through another rule: `O + 1`
//!   walks a mask where each set is reached through one rule, and never
//!   more than `D + 1`. Lexemes that may end at many nodes walk on only
//!   from nodes with a child byte that may follow them
//!   ([`EarleyConfig::follow_exits`]). A subtree whose tokens are all
//!   found already is not read, nor one below a level that every byte of
//!   it gives again (a run of letters split into names every way): to
//!   find those bytes a level is made from each level at most once per
//!   ASCII byte, 128 more node reads a level at most. Masks of a set
//!   shape already met cost a row read ([`EarleyConfig::mask_cache_bytes`]).
//!   A set of many lexeme items met for the first time is walked item by
//!   item, each walk as above and kept for every later set that holds
//!   the item, then the completions into the set itself, level by level
//!   as into older sets ([`EarleyConfig::item_summaries`]): a walk per
//!   lexeme item at most, and at most `D` levels each. A level's
//!   completions pending at many nodes are walked one group (a rule
//!   completed into one older set) at a time, each walk below its own
//!   nodes and kept for later masks whose rows hold the rows it passed
//!   over ([`EarleyConfig::group_walks`]): at most one walk per group of
//!   the level.
//!
//! Where a run of bytes splits into lexemes in many ways, items alike but
//! for where they start are one when those levels hold the same waiting
//! items (up to the levels those start in): the items at a node of a
//! word's splits are then a few, not one per split point.
//!
//! The bounds are polynomial in the grammar and the token length, never
//! exponential in how many ways a text parses; [`EarleyConfig::max_items`]
//! and [`EarleyConfig::max_step_work`] cap them (the latter at well under
//! a second).

mod backend;
mod config;
mod lexeme;
mod lift;
mod lower;
mod matcher;
mod parser;

pub use backend::{EarleyBackend, EarleyGrammar, SUPPORTED_KINDS};
pub use config::EarleyConfig;
pub use matcher::EarleyMatcher;

use std::sync::Arc;
use tokensieve_core::BackendRegistration;

/// The registered name of this backend.
pub const BACKEND_NAME: &str = "earley";

tokensieve_core::inventory::submit! {
    BackendRegistration {
        name: BACKEND_NAME,
        aliases: &[],
        description: "JSON Schema (recursive too), any context-free GBNF grammar, json_object, regex, choice, structural tags of those: an Earley parser over lexeme automata, masks from a token trie",
        factory: |config, vocab| {
            let config = EarleyConfig::from_backend_config(config)?;
            Ok(Arc::new(EarleyBackend::new(vocab, config)))
        },
    }
}
