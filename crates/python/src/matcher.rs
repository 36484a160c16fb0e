//! `Matcher` (one request's state) and the calls that fill several mask rows
//! at once without the GIL: a batch of requests in parallel, and the rows of
//! a speculative draft chain.

use crate::buffers::{BitmaskView, bitmask_view};
use crate::compiler::{CompiledGrammar, Shared};
use crate::errors::step_error;
use crate::parallel::{RowJob, fill_rows};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use tokensieve::bitmask::PARALLEL_FILL_THRESHOLD;
use tokensieve::cache::panic_message;
use tokensieve::pool::FillPool;
use tokensieve::{GrammarObject, StepError};

struct State {
    m: Box<dyn GrammarObject>,
    /// Set when a call into the backend panicked: the matcher refuses all
    /// further work (the sticky error state of the serving boundary).
    poisoned: Option<String>,
}

#[pyclass(frozen, module = "tokensieve")]
pub struct Matcher {
    /// Serialises calls on one matcher from several Python threads (batch
    /// fills run without the GIL).
    state: Mutex<State>,
    grammar: Py<CompiledGrammar>,
    shared: Arc<Shared>,
    max_rollback: usize,
}

/// A refusal leaves the matcher usable (`False` in Python); anything else
/// means it is not.
fn is_refusal(e: &StepError) -> bool {
    matches!(
        e,
        StepError::TokenRejected { .. }
            | StepError::InvalidToken { .. }
            | StepError::Terminated
            | StepError::BytesRejected { .. }
    )
}

/// Accepts one id given as a Python int (out-of-range ids are refusals).
fn accept_id(m: &mut dyn GrammarObject, id: i64) -> Result<bool, StepError> {
    let Ok(t) = u32::try_from(id) else {
        return Ok(false);
    };
    match m.accept_token(t) {
        Ok(()) => Ok(true),
        Err(e) if is_refusal(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes one row: the matcher's mask over its vocabulary's words, zeros
/// past them; a terminated matcher allows everything (as
/// `TokenBitmask::fill_batch` does).
fn fill_row(m: &mut dyn GrammarObject, row: &mut [u32], words: usize) {
    if m.is_terminated() {
        row[..words].fill(u32::MAX);
    } else {
        m.fill_bitmask(&mut row[..words]);
    }
    row[words..].fill(0);
}

fn full_row(row: &mut [u32], words: usize) {
    row[..words].fill(u32::MAX);
    row[words..].fill(0);
}

/// Walks `ids` on `m` while the grammar accepts them, stopping at the first
/// refusal; returns how many were accepted. With `fill`, row `i + 1` of
/// `rows` gets the mask after `i + 1` tokens (row 0 before any).
fn walk(
    m: &mut dyn GrammarObject,
    ids: &[i64],
    mut fill: Option<(&mut [u32], usize, usize)>,
) -> Result<usize, StepError> {
    if let Some((rows, stride, words)) = fill.as_mut() {
        fill_row(m, &mut rows[..*stride], *words);
    }
    let mut n = 0;
    for &id in ids {
        if m.is_terminated() || !accept_id(m, id)? {
            break;
        }
        n += 1;
        if let Some((rows, stride, words)) = fill.as_mut() {
            fill_row(m, &mut rows[n * *stride..(n + 1) * *stride], *words);
        }
    }
    if let Some((rows, stride, words)) = fill.as_mut() {
        for r in n + 1..=ids.len() {
            full_row(&mut rows[r * *stride..(r + 1) * *stride], *words);
        }
    }
    Ok(n)
}

/// Runs `walk` and leaves `m` where it was: by rolling back when the steps
/// fit the rollback window, else on a fork. Returns how many were accepted.
fn walk_and_restore(
    m: &mut Box<dyn GrammarObject>,
    ids: &[i64],
    window: usize,
    fill: Option<(&mut [u32], usize, usize)>,
) -> Result<usize, StepError> {
    if ids.len() <= window {
        let n = walk(m.as_mut(), ids, fill);
        let undo = match &n {
            Ok(n) => *n,
            // A fatal step error leaves the matcher refusing work anyway.
            Err(_) => return n,
        };
        if undo > 0 {
            m.rollback(undo)?;
        }
        n
    } else {
        let mut copy = m.fork();
        walk(copy.as_mut(), ids, fill)
    }
}

impl Matcher {
    pub fn create(
        grammar: &Bound<'_, CompiledGrammar>,
        max_rollback: Option<usize>,
    ) -> PyResult<Self> {
        let g = grammar.get();
        let limit = g.shared.max_rollback;
        let max_rollback = match max_rollback {
            None => limit,
            Some(k) if k <= limit => k,
            Some(k) => {
                return Err(PyValueError::new_err(format!(
                    "max_rollback {k} exceeds the compiler's {limit}: create the Compiler with \
                     max_rollback={k}"
                )));
            }
        };
        Ok(Matcher {
            state: Mutex::new(State {
                m: g.grammar.matcher(),
                poisoned: None,
            }),
            grammar: grammar.clone().unbind(),
            shared: g.shared.clone(),
            max_rollback,
        })
    }

    /// Runs `f` on the matcher under its lock, catching a panic (which
    /// poisons this matcher for good) and turning step errors into
    /// `RuntimeError`.
    fn with<R>(
        &self,
        f: impl FnOnce(&mut Box<dyn GrammarObject>) -> Result<R, StepError>,
    ) -> PyResult<R> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(msg) = &st.poisoned {
            return Err(PyRuntimeError::new_err(format!(
                "tokensieve matcher: unusable after an internal error: {msg}"
            )));
        }
        match catch_unwind(AssertUnwindSafe(|| f(&mut st.m))) {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(step_error(&e)),
            Err(p) => {
                let msg = panic_message(&p);
                st.poisoned = Some(msg.clone());
                Err(PyRuntimeError::new_err(format!(
                    "tokensieve matcher: the backend panicked: {msg}"
                )))
            }
        }
    }

    /// Fills one batch row under the matcher's lock (words past its
    /// vocabulary are written 0).
    pub fn fill_row_locked(&self, row: &mut [u32]) -> PyResult<()> {
        let words = self.words();
        self.with(|g| {
            fill_row(g.as_mut(), row, words);
            Ok(())
        })
    }

    fn words(&self) -> usize {
        self.shared.vocab.mask_words()
    }

    /// The window `accept_tokens`/`validate_tokens`/drafts may roll back.
    fn window(&self) -> usize {
        self.shared.max_rollback
    }

    fn sibling(&self, py: Python<'_>, m: Box<dyn GrammarObject>) -> Matcher {
        Matcher {
            state: Mutex::new(State { m, poisoned: None }),
            grammar: self.grammar.clone_ref(py),
            shared: self.shared.clone(),
            max_rollback: self.max_rollback,
        }
    }
}

#[pymethods]
impl Matcher {
    #[new]
    #[pyo3(signature = (compiled_grammar, *, max_rollback=None))]
    fn new(
        compiled_grammar: &Bound<'_, CompiledGrammar>,
        max_rollback: Option<usize>,
    ) -> PyResult<Self> {
        Matcher::create(compiled_grammar, max_rollback)
    }

    #[getter]
    fn compiled_grammar(&self, py: Python<'_>) -> Py<CompiledGrammar> {
        self.grammar.clone_ref(py)
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.shared.vocab.vocab_size()
    }

    #[getter]
    fn max_rollback(&self) -> usize {
        self.max_rollback
    }

    #[getter]
    fn rollback_available(&self) -> PyResult<usize> {
        let cap = self.max_rollback;
        self.with(|m| Ok(m.rollback_available().min(cap)))
    }

    fn accept_token(&self, token_id: i64) -> PyResult<bool> {
        self.with(|m| accept_id(m.as_mut(), token_id))
    }

    fn accept_tokens(&self, token_ids: Vec<i64>) -> PyResult<bool> {
        let window = self.window();
        self.with(|m| {
            if token_ids.len() <= window {
                for (i, &id) in token_ids.iter().enumerate() {
                    if !accept_id(m.as_mut(), id)? {
                        if i > 0 {
                            m.rollback(i)?;
                        }
                        return Ok(false);
                    }
                }
                Ok(true)
            } else {
                let mut copy = m.fork();
                for &id in &token_ids {
                    if !accept_id(copy.as_mut(), id)? {
                        return Ok(false);
                    }
                }
                *m = copy;
                Ok(true)
            }
        })
    }

    fn accept_string(&self, text: &Bound<'_, PyAny>) -> PyResult<bool> {
        let bytes: Vec<u8> = if let Ok(s) = text.cast::<PyString>() {
            s.to_str()?.as_bytes().to_vec()
        } else if let Ok(b) = text.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else {
            return Err(PyTypeError::new_err("text: expected str or bytes"));
        };
        self.with(|m| match m.accept_bytes(&bytes) {
            Ok(()) => Ok(true),
            Err(e) if is_refusal(&e) => Ok(false),
            Err(e) => Err(e),
        })
    }

    fn validate_tokens(&self, py: Python<'_>, token_ids: Vec<i64>) -> PyResult<usize> {
        let window = self.window();
        py.detach(|| self.with(|m| walk_and_restore(m, &token_ids, window, None)))
    }

    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&self, num_tokens: usize) -> PyResult<()> {
        let cap = self.max_rollback;
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let available = st.m.rollback_available().min(cap);
        if num_tokens > available {
            return Err(PyValueError::new_err(format!(
                "cannot roll back {num_tokens} steps: only {available} are kept (max_rollback \
                 {cap})"
            )));
        }
        drop(st);
        self.with(|m| m.rollback(num_tokens))
    }

    #[pyo3(signature = (bitmask, row=0))]
    fn fill_next_token_bitmask(
        &self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        row: usize,
    ) -> PyResult<()> {
        let words = self.words();
        let bv = bitmask_view(bitmask, words)?;
        if row >= bv.rows {
            return Err(PyValueError::new_err(format!(
                "row {row} is outside the bitmask's {} rows",
                bv.rows
            )));
        }
        let (addr, rows, stride) = (bv.view.addr(), bv.rows, bv.words);
        py.detach(|| {
            // SAFETY: the view (kept by `bv` until after this closure) spans
            // rows * stride aligned u32; only this slice is made of it here.
            let buf = unsafe { BitmaskView::slice_at(addr, rows, stride) };
            self.with(|m| {
                fill_row(
                    m.as_mut(),
                    &mut buf[row * stride..(row + 1) * stride],
                    words,
                );
                Ok(())
            })
        })
    }

    fn jump_forward_string(&self) -> PyResult<String> {
        let bytes = self.with(|m| Ok(m.jump_forward()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn is_accepting(&self) -> PyResult<bool> {
        self.with(|m| Ok(m.is_accepting()))
    }

    fn is_terminated(&self) -> PyResult<bool> {
        self.with(|m| Ok(m.is_terminated()))
    }

    fn reset(&self) -> PyResult<()> {
        self.with(|m| {
            m.reset();
            Ok(())
        })
    }

    fn maybe_init_reasoning(&self, thinking: bool) -> PyResult<()> {
        self.with(|m| {
            m.maybe_init_reasoning(thinking);
            Ok(())
        })
    }

    fn fork(&self, py: Python<'_>) -> PyResult<Matcher> {
        let m = self.with(|m| Ok(m.fork()))?;
        Ok(self.sibling(py, m))
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<Matcher> {
        self.fork(py)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(|m| Ok(m.stats()))?;
        let d = PyDict::new(py);
        d.set_item("masks", s.masks)?;
        d.set_item("mask_time_total_s", s.mask_time_total.as_secs_f64())?;
        d.set_item("mask_time_max_s", s.mask_time_max.as_secs_f64())?;
        d.set_item("tokens_accepted", s.tokens_accepted)?;
        d.set_item("rollbacks", s.rollbacks)?;
        d.set_item("compile_time_s", s.compile_time.as_secs_f64())?;
        d.set_item("cache_hit", s.cache_hit)?;
        Ok(d)
    }

    fn __repr__(&self) -> PyResult<String> {
        let (acc, term) = self.with(|m| Ok((m.is_accepting(), m.is_terminated())))?;
        Ok(format!(
            "Matcher(backend={:?}, is_accepting={acc}, is_terminated={term})",
            self.shared.backend_name
        ))
    }
}

#[pyfunction]
#[pyo3(signature = (matchers, bitmask, rows=None))]
pub fn fill_next_token_bitmask_batch(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    rows: Option<Vec<i64>>,
) -> PyResult<()> {
    let mut ms: Vec<Option<Bound<'_, Matcher>>> = Vec::new();
    for (i, m) in matchers.try_iter()?.enumerate() {
        let m = m?;
        if m.is_none() {
            ms.push(None);
        } else {
            ms.push(Some(m.cast_into::<Matcher>().map_err(|e| {
                PyTypeError::new_err(format!("matchers[{i}]: expected a Matcher or None: {e}"))
            })?));
        }
    }
    let min_words = ms
        .iter()
        .flatten()
        .map(|m| m.get().words())
        .max()
        .unwrap_or(0);
    let bv = bitmask_view(bitmask, min_words)?;
    let targets: Option<Vec<usize>> = match rows {
        None => {
            if ms.len() > bv.rows {
                return Err(PyValueError::new_err(format!(
                    "{} matchers but the bitmask has {} rows",
                    ms.len(),
                    bv.rows
                )));
            }
            None
        }
        Some(rows) => {
            if rows.len() != ms.len() {
                return Err(PyValueError::new_err(format!(
                    "rows has {} entries for {} matchers",
                    rows.len(),
                    ms.len()
                )));
            }
            let mut seen = vec![false; bv.rows];
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let ok = usize::try_from(r).ok().filter(|&r| r < bv.rows);
                let Some(r) = ok else {
                    return Err(PyValueError::new_err(format!(
                        "row {r} is outside the bitmask's {} rows",
                        bv.rows
                    )));
                };
                if std::mem::replace(&mut seen[r], true) {
                    return Err(PyValueError::new_err(format!("row {r} is listed twice")));
                }
                out.push(r);
            }
            Some(out)
        }
    };
    let refs: Vec<Option<&Matcher>> = ms.iter().map(|m| m.as_ref().map(|m| m.get())).collect();
    let own = refs.iter().flatten().find_map(|m| m.shared.pool.clone());
    let (addr, stride) = (bv.view.addr(), bv.words);
    // Everything Python-side is done: one detach for the whole batch.
    let errors: Vec<String> = py.detach(|| {
        let mut jobs: Vec<RowJob<'_>> = refs
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let r = targets.as_ref().map_or(i, |t| t[i]);
                // SAFETY: the view (kept by `bv` until after this closure)
                // spans rows * stride aligned u32 and `r < rows`; the rows
                // are distinct (0..n, or checked above), so no two jobs
                // share memory.
                let row = unsafe {
                    std::slice::from_raw_parts_mut((addr as *mut u32).add(r * stride), stride)
                };
                RowJob {
                    index: r,
                    row,
                    matcher: *m,
                    error: None,
                }
            })
            .collect();
        let pool: Option<&FillPool> = match own.as_deref() {
            Some(p) => Some(p),
            None => FillPool::global(),
        };
        fill_rows(&mut jobs, pool, PARALLEL_FILL_THRESHOLD);
        jobs.into_iter().filter_map(|j| j.error).collect()
    });
    match errors.first() {
        None => Ok(()),
        Some(e) => Err(PyRuntimeError::new_err(e.clone())),
    }
}

#[pyfunction]
#[pyo3(signature = (matcher, draft_tokens, bitmask, first_row=0))]
pub fn fill_draft_bitmasks(
    py: Python<'_>,
    matcher: &Bound<'_, Matcher>,
    draft_tokens: Vec<i64>,
    bitmask: &Bound<'_, PyAny>,
    first_row: usize,
) -> PyResult<usize> {
    let m = matcher.get();
    let words = m.words();
    let bv = bitmask_view(bitmask, words)?;
    let needed = first_row + draft_tokens.len() + 1;
    if needed > bv.rows {
        return Err(PyValueError::new_err(format!(
            "a draft of {} tokens from row {first_row} needs rows {first_row}..{}, the bitmask \
             has {} rows",
            draft_tokens.len(),
            needed - 1,
            bv.rows
        )));
    }
    let (addr, nrows, stride) = (bv.view.addr(), bv.rows, bv.words);
    let window = m.window();
    py.detach(|| {
        // SAFETY: the view (kept by `bv` until after this closure) spans
        // nrows * stride aligned u32; only this slice is made of it here.
        let buf = unsafe { BitmaskView::slice_at(addr, nrows, stride) };
        let rows = &mut buf[first_row * stride..needed * stride];
        m.with(|g| walk_and_restore(g, &draft_tokens, window, Some((rows, stride, words))))
    })
}
