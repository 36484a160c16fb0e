//! # tokensieve
//!
//! Constrained decoding for LLMs: at every decoding step, the set of tokens
//! that keep the output inside a JSON Schema, a regular expression, a choice
//! list or a grammar, as a bitmask ([`TokenBitmask`], the XGrammar/vLLM
//! layout), applied to logits on the CPU ([`CpuDevice`]), CUDA or WebGPU.
//!
//! This is the facade users depend on. It re-exports [`tokensieve_core`] and,
//! behind cargo features, the backends and devices:
//!
//! | feature | default | what |
//! |---|---|---|
//! | `regex-fsm` | yes | Outlines-style backend (`regex-fsm`, alias `outlines`): regex, choice, JSON Schema without recursion, regular grammars |
//! | `earley` | yes | context-free backend (`earley`): JSON Schema (recursive too), any GBNF grammar, `json_object`, regex, choice |
//! | `auto` | yes | the hybrid (`auto`): earley's first mask at once, regex-fsm's table built in the background where the language is regular (turns on `regex-fsm` and `earley`) |
//! | `reasoner` | yes | unconstrained thinking before a think-end token |
//! | `cuda` | no | `tokensieve::cuda` mask device (cudarc, loads the driver at run time) |
//! | `wgpu` | no | `tokensieve::wgpu` mask device (any WebGPU adapter) |
//!
//! Beside the re-exports, [`create_backend`] makes a backend by name (in
//! the reasoner when the config names a think-end token), and
//! [`bench_protocol`] is the MaskBench timing protocol every benchmark
//! runner shares (compile on a worker thread with a timeout, walk a test's
//! tokens, time each mask).
//! [`instances`] (from `tokensieve-json-schema`) builds valid and near-miss
//! instances of a JSON Schema from its keywords, and [`instance_check`]
//! feeds them through a compiled grammar and compares its verdicts with a
//! validator's: a test any backend (yours too) can run.
//!
//! ## The loop
//!
//! ```
//! use std::sync::Arc;
//! use tokensieve::{BackendConfig, Constraint, CpuDevice, LogitsMut, MaskDevice, TokenBitmask};
//!
//! let vocab = Arc::new(tokensieve::vocab::fixtures::json_tiny());
//! let backend = tokensieve::create_backend("none", &BackendConfig::default(), vocab.clone())?;
//! let grammar = backend.compile(&Constraint::regex("[0-9]+"))?;
//! let mut matcher = grammar.matcher();
//!
//! let mut mask = TokenBitmask::new(1, vocab.vocab_size());
//! matcher.fill_bitmask(mask.row_mut(0));
//! let mut logits = vec![0.0f32; vocab.vocab_size()];
//! CpuDevice.apply_token_bitmask_inplace(LogitsMut::F32(&mut logits), vocab.vocab_size(), mask.as_slice(), None)?;
//! let token = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap() as u32;
//! matcher.accept_token(token)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use tokensieve_core::*;

pub mod bench_protocol;
pub mod instance_check;
pub use tokensieve_json_schema::instances;
mod takers;

#[cfg(feature = "auto")]
pub use tokensieve_auto as auto;
#[cfg(feature = "cuda")]
pub use tokensieve_cuda as cuda;
#[cfg(feature = "earley")]
pub use tokensieve_earley as earley;
#[cfg(feature = "reasoner")]
pub use tokensieve_reasoner as reasoner;
#[cfg(feature = "regex-fsm")]
pub use tokensieve_regex_fsm as regex_fsm;
#[cfg(feature = "wgpu")]
pub use tokensieve_wgpu as wgpu;

use std::sync::Arc;

/// Makes sure every enabled backend crate is linked, so its `inventory`
/// registration is seen even when nothing else refers to the crate.
fn link_backends() {
    #[cfg(feature = "regex-fsm")]
    std::hint::black_box(tokensieve_regex_fsm::BACKEND_NAME);
    #[cfg(feature = "auto")]
    std::hint::black_box(tokensieve_auto::BACKEND_NAME);
}

/// Every registered backend (run-time registrations first).
pub fn available_backends() -> Vec<BackendInfo> {
    link_backends();
    tokensieve_core::available_backends()
}

/// Creates the backend registered as `name` for `vocab`. When
/// `config.think_end_token` is set, the backend is wrapped in the reasoner:
/// unconstrained while thinking, constrained after the think-end token.
/// Either way it is guarded ([`GuardedBackend`]): a panic inside it is an
/// error of that compile or a sticky error of that matcher. A constraint it
/// refuses as unsupported (or past one of its limits) is a
/// [`GrammarError::TakenElsewhere`] naming the registered backends that
/// compile it, when some do (found by compiling it with each, only then).
pub fn create_backend(
    name: &str,
    config: &BackendConfig,
    vocab: Arc<Vocabulary>,
) -> Result<Arc<dyn GrammarBackend>, GrammarError> {
    link_backends();
    let inner: Arc<dyn GrammarBackend> = Arc::new(takers::NamesTakers {
        inner: tokensieve_core::instantiate_backend(name, config, vocab)?,
        config: BackendConfig {
            max_rollback: config.max_rollback,
            ..BackendConfig::default()
        },
    });
    wrap(inner, config)
}

/// [`create_backend`] whose refusals name no other backend: for benchmarks,
/// where the time of a compile that fails must be that backend's alone
/// (naming the others compiles the constraint with each of them).
pub fn create_backend_alone(
    name: &str,
    config: &BackendConfig,
    vocab: Arc<Vocabulary>,
) -> Result<Arc<dyn GrammarBackend>, GrammarError> {
    link_backends();
    wrap(
        tokensieve_core::instantiate_backend(name, config, vocab)?,
        config,
    )
}

/// The reasoner (when the config names a think-end token) and the guard.
fn wrap(
    inner: Arc<dyn GrammarBackend>,
    config: &BackendConfig,
) -> Result<Arc<dyn GrammarBackend>, GrammarError> {
    let backend: Arc<dyn GrammarBackend> = match &config.think_end_token {
        None => inner,
        #[cfg(feature = "reasoner")]
        Some(token) => Arc::new(tokensieve_reasoner::ReasonerBackend::new(
            inner,
            token,
            config.max_rollback,
        )?),
        #[cfg(not(feature = "reasoner"))]
        Some(_) => {
            return Err(GrammarError::InvalidConfig(
                "think_end_token needs the `reasoner` feature of tokensieve".into(),
            ));
        }
    };
    Ok(Arc::new(GuardedBackend(backend)))
}

// The README's Rust examples are compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
