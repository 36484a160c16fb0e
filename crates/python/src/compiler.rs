//! `Compiler` and `CompiledGrammar`: one backend for one vocabulary, a cache
//! of compiled grammars keyed by the canonical [`CacheKey`] and shared by
//! every thread, and compiles that run without the GIL.

use crate::errors::grammar_error;
use crate::matcher::Matcher;
use crate::tokenizer::TokenizerInfo;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokensieve::cache::panic_message;
use tokensieve::pool::{DEFAULT_SPIN, FillPool};
use tokensieve::{
    BackendConfig, CacheKey, Constraint, ConstraintSpec, GrammarBackend, GrammarError, SpecOptions,
    StructuralTag, TagItem, Vocabulary, Whitespace,
};

type Compiled = Result<Arc<dyn tokensieve::CompiledGrammar>, GrammarError>;

/// The backend a `Compiler` gets when none is named: the CLI's and the
/// README's (earley's first mask at once, regex-fsm's table where one is
/// built in the background).
pub const DEFAULT_BACKEND: &str = "auto";

/// One cache entry: filled once by whichever thread compiles it; threads
/// asking for the same key meanwhile wait on the `OnceLock` (without the GIL).
type Entry = Arc<OnceLock<Compiled>>;

#[derive(Default)]
struct Cache {
    map: HashMap<CacheKey, Entry>,
    /// Keys in insertion order, oldest first, for eviction.
    order: VecDeque<CacheKey>,
}

/// What every matcher of a compiler shares.
pub struct Shared {
    pub vocab: Arc<Vocabulary>,
    pub backend_name: String,
    pub max_rollback: usize,
    /// Threads for batch fills (`None`: [`FillPool::global`]).
    pub pool: Option<Arc<FillPool>>,
}

#[pyclass(frozen, module = "tokensieve")]
pub struct Compiler {
    backend: Arc<dyn GrammarBackend>,
    info: Py<TokenizerInfo>,
    shared: Arc<Shared>,
    cache: Mutex<Cache>,
    cache_size: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[pyclass(frozen, module = "tokensieve")]
pub struct CompiledGrammar {
    pub grammar: Arc<dyn tokensieve::CompiledGrammar>,
    pub info: Py<TokenizerInfo>,
    pub shared: Arc<Shared>,
    kind: &'static str,
}

fn options_map(options: Option<&Bound<'_, PyDict>>) -> PyResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    if let Some(d) = options {
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            // Rust parses the knobs with FromStr: `true`/`false`, not `True`.
            let value = if v.is_instance_of::<PyBool>() {
                v.extract::<bool>()?.to_string()
            } else {
                v.str()?.to_string()
            };
            out.insert(key, value);
        }
    }
    Ok(out)
}

fn get_field<'py>(tag: &Bound<'py, PyAny>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    let v = if let Ok(d) = tag.cast::<PyDict>() {
        d.get_item(name)?
    } else {
        tag.getattr(name).ok()
    };
    Ok(v.filter(|v| !v.is_none()))
}

/// JSON text of a schema given as text or as a Python value.
fn schema_text(schema: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = schema.cast::<PyString>() {
        return Ok(s.to_str()?.to_string());
    }
    let json = schema.py().import("json")?;
    json.call_method1("dumps", (schema,))
        .and_then(|t| t.extract())
        .map_err(|e| {
            PyTypeError::new_err(format!(
                "schema: expected JSON text or a JSON-serialisable value: {e}"
            ))
        })
}

/// The content of one structural tag (see `compile_structural_tag`'s docs).
fn tag_content(i: usize, tag: &Bound<'_, PyAny>) -> PyResult<ConstraintSpec> {
    let mut found: Vec<ConstraintSpec> = Vec::new();
    if let Some(s) = get_field(tag, "schema")? {
        found.push(ConstraintSpec::JsonSchema(schema_text(&s)?));
    }
    if let Some(r) = get_field(tag, "regex")? {
        found.push(ConstraintSpec::Regex(r.extract()?));
    }
    if let Some(g) = get_field(tag, "grammar")? {
        let root = match get_field(tag, "root")? {
            Some(r) => r.extract()?,
            None => "root".to_string(),
        };
        found.push(ConstraintSpec::Ebnf {
            grammar: g.extract()?,
            root,
        });
    }
    if let Some(c) = get_field(tag, "choice")? {
        found.push(ConstraintSpec::Choice(c.extract()?));
    }
    if let Some(c) = get_field(tag, "content")? {
        // The Rust spec as JSON (`{"json_schema": "..."}`, `{"regex": ".."}`).
        let text = schema_text(&c)?;
        found.push(serde_json::from_str(&text).map_err(|e| {
            PyValueError::new_err(format!("tags[{i}].content: not a constraint spec: {e}"))
        })?);
    }
    match found.len() {
        1 => Ok(found.pop().expect("one")),
        0 => Err(PyValueError::new_err(format!(
            "tags[{i}]: needs one of `schema`, `regex`, `grammar`, `choice` or `content`"
        ))),
        _ => Err(PyValueError::new_err(format!(
            "tags[{i}]: has more than one of `schema`, `regex`, `grammar`, `choice`, `content`"
        ))),
    }
}

impl Compiler {
    /// Compiles (or finds in the cache) without the GIL.
    fn compile(&self, py: Python<'_>, constraint: Constraint) -> PyResult<CompiledGrammar> {
        let kind = constraint.kind().as_str();
        let result = py.detach(|| self.compile_cached(&constraint));
        match result {
            Ok(grammar) => Ok(CompiledGrammar {
                grammar,
                info: self.info.clone_ref(py),
                shared: self.shared.clone(),
                kind,
            }),
            Err(e) => Err(grammar_error(py, &e)),
        }
    }

    fn compile_now(&self, constraint: &Constraint) -> Compiled {
        catch_unwind(AssertUnwindSafe(|| self.backend.compile(constraint)))
            .unwrap_or_else(|p| Err(GrammarError::Panic(panic_message(&p))))
    }

    fn compile_cached(&self, constraint: &Constraint) -> Compiled {
        if self.cache_size == 0 {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return self.compile_now(constraint);
        }
        let key = constraint.cache_key();
        let entry = {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            match cache.map.get(&key) {
                Some(e) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    e.clone()
                }
                None => {
                    self.misses.fetch_add(1, Ordering::Relaxed);
                    let e = Entry::default();
                    cache.map.insert(key.clone(), e.clone());
                    cache.order.push_back(key);
                    while cache.map.len() > self.cache_size {
                        match cache.order.pop_front() {
                            Some(old) => {
                                cache.map.remove(&old);
                            }
                            None => break,
                        }
                    }
                    e
                }
            }
        };
        entry.get_or_init(|| self.compile_now(constraint)).clone()
    }
}

#[pymethods]
impl Compiler {
    #[new]
    #[pyo3(signature = (info, backend=DEFAULT_BACKEND, *, cache_size=1024, max_rollback=32, threads=None, spin_us=None, think_end_token=None, options=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        info: Py<TokenizerInfo>,
        backend: &str,
        cache_size: usize,
        max_rollback: usize,
        threads: Option<usize>,
        spin_us: Option<u64>,
        think_end_token: Option<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let vocab = info.get().vocab.clone();
        let config = BackendConfig {
            max_rollback,
            think_end_token,
            options: options_map(options)?,
        };
        if threads == Some(0) {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        // The process-wide pool unless this compiler asks for its own.
        let pool = match (threads, spin_us) {
            (None, None) => None,
            _ => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                let spin = spin_us.map_or(DEFAULT_SPIN, Duration::from_micros);
                Some(Arc::new(
                    FillPool::new(threads.unwrap_or(cores), spin)
                        .map_err(|e| PyValueError::new_err(format!("threads: {e}")))?,
                ))
            }
        };
        let created = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                tokensieve::create_backend(backend, &config, vocab.clone())
            }))
            .unwrap_or_else(|p| Err(GrammarError::Panic(panic_message(&p))))
        });
        let be = created.map_err(|e| grammar_error(py, &e))?;
        Ok(Compiler {
            shared: Arc::new(Shared {
                vocab,
                backend_name: be.name().to_string(),
                max_rollback,
                pool,
            }),
            backend: be,
            info,
            cache: Mutex::new(Cache::default()),
            cache_size,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    #[getter]
    fn tokenizer_info(&self, py: Python<'_>) -> Py<TokenizerInfo> {
        self.info.clone_ref(py)
    }

    #[getter]
    fn backend(&self) -> String {
        self.shared.backend_name.clone()
    }

    #[getter]
    fn max_rollback(&self) -> usize {
        self.shared.max_rollback
    }

    // The keywords are the Python API's (XGrammar's names).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (schema, *, any_whitespace=true, indent=None, separators=None, strict=true, max_depth=None))]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        any_whitespace: bool,
        indent: Option<u32>,
        separators: Option<(String, String)>,
        strict: bool,
        max_depth: Option<u32>,
    ) -> PyResult<CompiledGrammar> {
        let text = schema_text(schema)?;
        let whitespace = if any_whitespace {
            Whitespace::Any
        } else {
            // XGrammar's defaults: json.dumps' own separators.
            let (item, key) = separators.unwrap_or_else(|| match indent {
                None => (", ".into(), ": ".into()),
                Some(_) => (",".into(), ": ".into()),
            });
            if indent.is_none() && item == "," && key == ":" {
                Whitespace::Compact
            } else {
                Whitespace::Fixed {
                    item_separator: item,
                    key_separator: key,
                    indent,
                }
            }
        };
        let options = SpecOptions {
            whitespace,
            strict,
            max_depth,
        };
        self.compile(
            py,
            Constraint::with_options(ConstraintSpec::JsonSchema(text), options),
        )
    }

    fn compile_builtin_json(&self, py: Python<'_>) -> PyResult<CompiledGrammar> {
        self.compile(py, Constraint::new(ConstraintSpec::JsonObject))
    }

    fn compile_regex(&self, py: Python<'_>, pattern: String) -> PyResult<CompiledGrammar> {
        self.compile(py, Constraint::regex(pattern))
    }

    #[pyo3(signature = (gbnf, root="root"))]
    fn compile_grammar(
        &self,
        py: Python<'_>,
        gbnf: String,
        root: &str,
    ) -> PyResult<CompiledGrammar> {
        self.compile(py, Constraint::ebnf(gbnf, root))
    }

    fn compile_choice(
        &self,
        py: Python<'_>,
        choices: &Bound<'_, PyAny>,
    ) -> PyResult<CompiledGrammar> {
        if choices.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "choices: expected a list of strings, got one string",
            ));
        }
        let list: Vec<String> = choices.extract()?;
        self.compile(py, Constraint::choice(list))
    }

    #[pyo3(signature = (tags, triggers, *, strict=true))]
    fn compile_structural_tag(
        &self,
        py: Python<'_>,
        tags: &Bound<'_, PyAny>,
        triggers: Vec<String>,
        strict: bool,
    ) -> PyResult<CompiledGrammar> {
        let mut items = Vec::new();
        for (i, tag) in tags.try_iter()?.enumerate() {
            let tag = tag?;
            let field = |name: &str| -> PyResult<String> {
                get_field(&tag, name)?
                    .ok_or_else(|| PyValueError::new_err(format!("tags[{i}]: no `{name}`")))?
                    .extract()
            };
            items.push(TagItem {
                begin: field("begin")?,
                content: Box::new(tag_content(i, &tag)?),
                end: field("end")?,
            });
        }
        let options = SpecOptions {
            strict,
            ..SpecOptions::default()
        };
        self.compile(
            py,
            Constraint::with_options(
                ConstraintSpec::StructuralTag(StructuralTag {
                    tags: items,
                    triggers,
                }),
                options,
            ),
        )
    }

    fn cache_info(&self) -> BTreeMap<&'static str, u64> {
        let entries = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len() as u64;
        BTreeMap::from([
            ("entries", entries),
            ("hits", self.hits.load(Ordering::Relaxed)),
            ("misses", self.misses.load(Ordering::Relaxed)),
        ])
    }

    fn clear_cache(&self) {
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        c.map.clear();
        c.order.clear();
    }

    fn __repr__(&self) -> String {
        format!(
            "Compiler(backend={:?}, vocab_size={}, max_rollback={})",
            self.shared.backend_name,
            self.shared.vocab.vocab_size(),
            self.shared.max_rollback
        )
    }
}

#[pymethods]
impl CompiledGrammar {
    #[getter]
    fn tokenizer_info(&self, py: Python<'_>) -> Py<TokenizerInfo> {
        self.info.clone_ref(py)
    }

    #[getter]
    fn backend(&self) -> String {
        self.shared.backend_name.clone()
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    #[getter]
    fn compile_time_s(&self) -> f64 {
        self.grammar.compile_time().as_secs_f64()
    }

    #[getter]
    fn memory_bytes(&self) -> usize {
        self.grammar.memory_bytes()
    }

    #[pyo3(signature = (*, max_rollback=None))]
    fn matcher(slf: &Bound<'_, Self>, max_rollback: Option<usize>) -> PyResult<Matcher> {
        Matcher::create(slf, max_rollback)
    }

    fn __repr__(&self) -> String {
        format!(
            "CompiledGrammar(kind={:?}, backend={:?}, compile_time_s={:.6})",
            self.kind,
            self.shared.backend_name,
            self.grammar.compile_time().as_secs_f64()
        )
    }
}
