//! # tokensieve-core
//!
//! The contracts every tokensieve backend and device builds on:
//!
//! - [`spec`]: what the output must match ([`ConstraintSpec`]) and how
//!   ([`SpecOptions`]), with a canonical [`CacheKey`].
//! - [`grammar`]: [`GrammarBackend`] compiles a [`Constraint`] into an
//!   immutable [`CompiledGrammar`]; each request gets a cheap
//!   [`GrammarObject`] that fills bitmask rows and accepts tokens.
//! - [`registry`]: backends by name (link-time `inventory` registrations and
//!   run-time [`register_backend`]).
//! - [`vocab`]: the token id -> bytes table ([`Vocabulary`]); [`hf`] loads it
//!   from a Hugging Face `tokenizer.json` (feature `hf`, on by default);
//!   [`gguf`] reads it from the metadata of a GGUF model file.
//! - [`trie`]: [`TokenTrie`], a vocabulary's grammar tokens as a preorder
//!   trie, built once per vocabulary and shared by every backend on it.
//! - [`bitmask`]: [`TokenBitmask`] in the XGrammar/vLLM layout.
//! - [`pool`]: [`pool::FillPool`], the threads that fill a batch's rows
//!   beside the calling thread.
//! - [`device`]: [`MaskDevice`] and the reference [`CpuDevice`].
//! - [`cache`]: [`GrammarCache`], compiling on a worker pool.
//! - [`error`]: [`GrammarError`] (build time) and [`StepError`] (step time).
//! - [`guard`]: [`GuardedBackend`], the serving boundary: a panic inside a
//!   backend is an error of that compile, or a sticky error state of that
//!   matcher, never the engine's.
//! - [`maskbench`]: MaskBench files (schema, valid and invalid instances)
//!   and the exact instance text MaskBench tokenizes.
//! - [`none_backend`]: the `none` backend (every token allowed), the floor
//!   of benchmarks.
//! - [`testing`]: seeded test data ([`testing::SplitMix64`]) and [`skip!`],
//!   how a test says what it did not run.
//!
//!
//! ## Features
//! - `hf` (default): the [`hf`] loader, which pulls in the `tokenizers` crate.

pub mod bitmask;
pub mod cache;
pub mod device;
pub mod error;
pub mod gguf;
pub mod grammar;
pub mod guard;
#[cfg(feature = "hf")]
pub mod hf;
pub mod maskbench;
pub mod none_backend;
pub mod pool;
pub mod registry;
pub mod spec;
pub mod testing;
pub mod trie;
pub mod vocab;

pub use bitmask::{TokenBitmask, words_for};
pub use cache::{CacheConfig, CacheResponse, CacheStats, GrammarCache, PendingCompile};
pub use device::{CpuDevice, DType, DeviceError, LogitsMut, MaskDevice};
pub use error::{GrammarError, Location, StepError};
pub use grammar::{CancelToken, CompiledGrammar, GrammarBackend, GrammarObject, GrammarStats};
pub use guard::{Guarded, GuardedBackend};
pub use registry::{
    BackendConfig, BackendFactory, BackendInfo, BackendRegistration, available_backends,
    instantiate_backend, register_backend, unregister_backend,
};
pub use spec::{
    CacheKey, Constraint, ConstraintSpec, SpecKind, SpecOptions, StructuralTag, TagItem, Whitespace,
};
pub use trie::TokenTrie;
pub use vocab::{VocabType, Vocabulary};

// Re-exported so backend crates register without naming `inventory` themselves.
pub use inventory;
