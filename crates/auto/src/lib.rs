//! # tokensieve-auto
//!
//! The hybrid backend of tokensieve, registered as `auto`: the first mask
//! comes from earley at once, and where the language is regular a
//! regex-fsm table is built in the background; live matchers move onto it
//! when it is ready, at the same position, and later compiles of the same
//! constraint start on it.
//!
//! ## When to use it
//!
//! Always, unless you measure one engine alone: it takes every spec earley
//! takes (JSON Schema, recursive too; any GBNF grammar; `json_object`;
//! regex; choice; structural tags), answers the first mask as fast as
//! earley compiles (a fraction of a millisecond for most schemas), and where
//! the constraint is regular its masks end up table reads, as regex-fsm's
//! are. Masks are the same whichever half answers them.
//!
//! ## How it works
//!
//! 1. [`AutoBackend::compile_auto`] compiles with earley
//!    (`tokensieve_earley::EarleyBackend::compile_earley`) and returns. If the
//!    table cache holds this constraint's table, it returns that instead
//!    (no earley compile, every matcher on the table).
//! 2. A background thread (one a backend, started when a build is queued,
//!    gone when the queue is empty) asks earley for the regex of the very
//!    language it serves (`EarleyBackend::regular_regex`: `None` where it
//!    is not regular: recursion, values of any depth, extra members of a
//!    JSON object with any value) and builds regex-fsm's DFA and token index
//!    from it under a work budget ([`AutoConfig::table_max_dfa_states`],
//!    [`AutoConfig::table_max_index_bytes`]: counted, never a clock). A
//!    regex-fsm error or a budget exceeded leaves the grammar on earley:
//!    never an error for the user. The build is cancelled when the last
//!    grammar and matcher waiting for it are dropped.
//! 3. An [`AutoMatcher`] on earley logs each step it accepts; at its first
//!    call after the table is built it replays them into a regex-fsm
//!    matcher and goes on there (same bytes, same rollback window; the cost
//!    is one DFA step per byte of output so far, once).
//! 4. Finished tables (and constraints known to have none) are kept in a
//!    bounded cache ([`AutoConfig::table_cache_entries`],
//!    [`AutoConfig::table_cache_bytes`]), keyed by the constraint itself.
//!
//! ```
//! use std::sync::Arc;
//! use tokensieve_core::{CancelToken, Constraint, GrammarObject, vocab::fixtures};
//! use tokensieve_auto::{AutoBackend, AutoConfig, TableState};
//!
//! let vocab = Arc::new(fixtures::json_tiny());
//! let backend = AutoBackend::new(vocab.clone(), AutoConfig::default());
//! let grammar = backend.compile_auto(&Constraint::regex("[0-9]{1,3}"), &CancelToken::new())?;
//! let mut m = grammar.auto_matcher();
//! m.accept_bytes(b"12")?;
//! // The table is regular: it gets built; the matcher moves at its next call.
//! assert!(grammar.wait_for_table());
//! assert_eq!(grammar.table_state(), TableState::Ready);
//! m.accept_bytes(b"3")?;
//! assert!(m.on_table() && m.is_accepting());
//! assert_eq!(m.rollback_available(), 2);
//!
//! // Nested brackets are not regular: earley answers every mask.
//! let nested = backend.compile_auto(&Constraint::ebnf(r#"root ::= "[" root* "]""#, "root"), &CancelToken::new())?;
//! assert!(!nested.wait_for_table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Threads
//!
//! Compiling and matching run on the caller's thread; only table builds
//! run on the backend's background thread, one build at a time, in the
//! idle scheduling class on Linux (`SCHED_IDLE`: it takes only CPU time no
//! other thread wants, so it never slows the threads that answer masks; a
//! machine busy on every core builds no table, and its matchers stay on
//! earley). With [`AutoConfig::tables`] off there is no thread at all
//! (earley alone).
//!
//! ## Configuration
//!
//! [`AutoConfig`] lists this backend's knobs; through the registry they,
//! and every knob of earley, are read from `BackendConfig::options`.

mod backend;
mod config;
mod matcher;

pub use backend::{AutoBackend, AutoGrammar, TableState};
pub use config::AutoConfig;
pub use matcher::AutoMatcher;

use std::sync::Arc;
use tokensieve_core::BackendRegistration;

/// The registered name of this backend.
pub const BACKEND_NAME: &str = "auto";

tokensieve_core::inventory::submit! {
    BackendRegistration {
        name: BACKEND_NAME,
        aliases: &[],
        description: "earley's first mask at once; where the language is regular, regex-fsm's table built in the background and moved onto at the same position",
        factory: |config, vocab| {
            let config = AutoConfig::from_backend_config(config)?;
            Ok(Arc::new(AutoBackend::new(vocab, config)))
        },
    }
}
