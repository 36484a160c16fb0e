//! `tokensieve._tokensieve`: the native module behind the `tokensieve` Python
//! package. Thin bindings over the facade crate's public API: vocabularies
//! (`tokenizer`), compilation with a shared cache (`compiler`), matchers
//! and mask fills without the GIL (`matcher`), mask application
//! (`apply`), zero-copy views of numpy arrays and torch tensors
//! (`buffers`), and the mapping of Rust errors to Python ones (`errors`).
//!
//! The public Python API, with its documentation, is
//! `python/tokensieve/__init__.pyi`.

/// mimalloc for every Rust allocation made inside the extension module (the
/// CLI's allocator, its source: with the system allocator the bindings
/// measured slower than the binary on the same MaskBench files, figures in
/// docs/python.md). Python's own objects keep Python's allocator, and the
/// module leaves the process's memory settings (the CLI's `keep_memory`:
/// purge delay, transparent huge pages) to the application that imports it.
#[path = "../../cli/src/alloc.rs"]
#[allow(dead_code)]
mod alloc;
mod apply;
mod buffers;
mod compiler;
mod errors;
mod matcher;
mod parallel;
mod tokenizer;

use pyo3::prelude::*;

#[global_allocator]
static ALLOC: alloc::MiMalloc = alloc::MiMalloc;

/// Names of every registered backend.
#[pyfunction]
fn available_backends() -> Vec<String> {
    tokensieve::available_backends()
        .into_iter()
        .map(|b| b.name)
        .collect()
}

#[pymodule]
fn _tokensieve(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("CUDA_FEATURE", cfg!(feature = "cuda"))?;
    m.add("DEFAULT_BACKEND", compiler::DEFAULT_BACKEND)?;
    m.add_class::<tokenizer::TokenizerInfo>()?;
    m.add_class::<compiler::Compiler>()?;
    m.add_class::<compiler::CompiledGrammar>()?;
    m.add_class::<matcher::Matcher>()?;
    m.add_function(wrap_pyfunction!(available_backends, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::fill_next_token_bitmask_batch, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::fill_draft_bitmasks, m)?)?;
    m.add_function(wrap_pyfunction!(apply::apply_token_bitmask_inplace_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(
        apply::apply_token_bitmask_inplace_cuda,
        m
    )?)?;
    Ok(())
}
