//! Rust errors as Python exceptions: a `GrammarError` becomes
//! `tokensieve.GrammarError` (a `ValueError`) carrying the location the Rust
//! error names (JSON pointer, line/column, regex offset).

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use tokensieve::{GrammarError, Location, StepError};

static GRAMMAR_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The Python class, defined in pure Python (`tokensieve/_errors.py`) so it
/// can subclass `ValueError` with keyword attributes.
fn grammar_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    GRAMMAR_ERROR.import(py, "tokensieve._errors", "GrammarError")
}

/// The kind of the refusal itself: a [`GrammarError::TakenElsewhere`] (the
/// facade naming the backends that take the constraint) is of its cause's
/// kind, and its message names them.
fn kind_of(e: &GrammarError) -> &'static str {
    match e.refusal() {
        GrammarError::Unsupported { .. } => "unsupported",
        GrammarError::UnsupportedSpec { .. } => "unsupported_spec",
        GrammarError::InvalidSchema { .. } => "invalid_schema",
        GrammarError::InvalidRegex { .. } => "invalid_regex",
        GrammarError::InvalidGrammar { .. } => "invalid_grammar",
        GrammarError::InvalidSpec(_) => "invalid_spec",
        GrammarError::LimitExceeded { .. } => "limit_exceeded",
        GrammarError::Vocabulary { .. } => "vocabulary",
        GrammarError::UnknownBackend { .. } => "unknown_backend",
        GrammarError::InvalidConfig(_) => "invalid_config",
        GrammarError::Cancelled => "cancelled",
        GrammarError::Timeout { .. } => "timeout",
        GrammarError::Panic(_) => "panic",
        _ => "other",
    }
}

fn location_of(e: &GrammarError) -> Option<&Location> {
    match e.refusal() {
        GrammarError::Unsupported { location, .. }
        | GrammarError::InvalidSchema { location, .. }
        | GrammarError::InvalidRegex { location, .. }
        | GrammarError::InvalidGrammar { location, .. }
        | GrammarError::Vocabulary { location, .. } => Some(location),
        _ => None,
    }
}

/// `tokensieve.GrammarError` for a Rust [`GrammarError`].
pub fn grammar_error(py: Python<'_>, e: &GrammarError) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("kind", kind_of(e))?;
        match location_of(e) {
            Some(Location::Pointer(p)) => kwargs.set_item("pointer", p)?,
            Some(Location::LineColumn { line, column }) => {
                kwargs.set_item("line", line)?;
                kwargs.set_item("column", column)?;
            }
            Some(Location::Offset(o)) => kwargs.set_item("offset", o)?,
            _ => {}
        }
        let err = grammar_error_type(py)?.call((e.to_string(),), Some(&kwargs))?;
        Ok(PyErr::from_value(err))
    };
    // The class lives in the package; if it cannot be imported (the module
    // loaded on its own), a plain ValueError still carries the message.
    build().unwrap_or_else(|_| PyValueError::new_err(e.to_string()))
}

/// A step error that is not a refusal: the matcher is unusable.
pub fn step_error(e: &StepError) -> PyErr {
    PyRuntimeError::new_err(format!("tokensieve matcher: {e}"))
}
