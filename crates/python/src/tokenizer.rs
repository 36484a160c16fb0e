//! `TokenizerInfo`: a [`Vocabulary`] (token id -> bytes, special, stop and
//! padding ids) from a tokenizer.json, a Hugging Face tokenizer object, a
//! GGUF file or a list of token byte strings, plus the Hugging Face encoder
//! when there is one (for `encode`).

use crate::errors::grammar_error;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::sync::Arc;
use tokensieve::GrammarError;
use tokensieve::Vocabulary;
use tokensieve::gguf::GgufTokenizer;
use tokensieve::hf::{HfTokenizer, KNOWN_STOP_TOKENS};

#[pyclass(frozen, module = "tokensieve")]
pub struct TokenizerInfo {
    pub vocab: Arc<Vocabulary>,
    hf: Option<Arc<HfTokenizer>>,
}

/// Applies the caller's vocab size and stop ids to a loaded tokenizer.
fn adjust_hf(
    mut tok: HfTokenizer,
    vocab_size: Option<usize>,
    stop_token_ids: Option<Vec<u32>>,
) -> Result<HfTokenizer, GrammarError> {
    if let Some(stops) = stop_token_ids {
        tok = tok.with_stop_tokens(&stops)?;
    }
    if let Some(v) = vocab_size {
        tok = tok.with_vocab_size(v)?;
    }
    Ok(tok)
}

fn adjust_vocab(
    mut vocab: Vocabulary,
    vocab_size: Option<usize>,
    stop_token_ids: Option<Vec<u32>>,
) -> Result<Vocabulary, GrammarError> {
    if let Some(stops) = stop_token_ids {
        vocab = vocab.with_stop_tokens(&stops)?;
    }
    if let Some(v) = vocab_size {
        vocab = vocab.with_vocab_size(v)?;
    }
    Ok(vocab)
}

impl TokenizerInfo {
    fn from_hf(tok: HfTokenizer) -> Self {
        TokenizerInfo {
            vocab: Arc::new(tok.vocabulary().clone()),
            hf: Some(Arc::new(tok)),
        }
    }
}

/// Is this text a tokenizer.json document rather than a path?
fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

fn path_string(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let os = obj.py().import("os")?;
    let p = os.call_method1("fspath", (obj,)).map_err(|_| {
        PyTypeError::new_err(format!(
            "expected a path or tokenizer.json text, got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    if let Ok(b) = p.cast::<PyBytes>() {
        return Ok(String::from_utf8_lossy(b.as_bytes()).into_owned());
    }
    p.extract()
}

fn load_json_text(
    py: Python<'_>,
    text: String,
    origin: &str,
    vocab_size: Option<usize>,
    stop_token_ids: Option<Vec<u32>>,
) -> PyResult<TokenizerInfo> {
    py.detach(|| {
        HfTokenizer::from_json_str(&text, origin)
            .and_then(|t| adjust_hf(t, vocab_size, stop_token_ids))
    })
    .map(TokenizerInfo::from_hf)
    .map_err(|e| grammar_error(py, &e))
}

#[pymethods]
impl TokenizerInfo {
    #[staticmethod]
    #[pyo3(signature = (path_or_json_text, *, vocab_size=None, stop_token_ids=None))]
    fn from_tokenizer_json(
        py: Python<'_>,
        path_or_json_text: &Bound<'_, PyAny>,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let text = if let Ok(s) = path_or_json_text.cast::<PyString>() {
            Some(s.to_str()?.to_string())
        } else if let Ok(b) = path_or_json_text.cast::<PyBytes>() {
            Some(
                std::str::from_utf8(b.as_bytes())
                    .map_err(|e| PyValueError::new_err(format!("tokenizer.json text: {e}")))?
                    .to_string(),
            )
        } else {
            None
        };
        match text {
            Some(t) if looks_like_json(&t) => {
                load_json_text(py, t, "<tokenizer.json text>", vocab_size, stop_token_ids)
            }
            _ => {
                let path = path_string(path_or_json_text)?;
                py.detach(|| {
                    HfTokenizer::from_file(&path)
                        .and_then(|t| adjust_hf(t, vocab_size, stop_token_ids))
                })
                .map(TokenizerInfo::from_hf)
                .map_err(|e| grammar_error(py, &e))
            }
        }
    }

    #[staticmethod]
    #[pyo3(signature = (hf_tokenizer, *, vocab_size=None, stop_token_ids=None))]
    fn from_huggingface(
        py: Python<'_>,
        hf_tokenizer: &Bound<'_, PyAny>,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        // transformers' fast tokenizers wrap a `tokenizers.Tokenizer` as
        // `backend_tokenizer`; a `tokenizers.Tokenizer` is used directly.
        let backend = match hf_tokenizer.getattr("backend_tokenizer") {
            Ok(b) => b,
            Err(_) => hf_tokenizer.clone(),
        };
        let text: String = backend
            .call_method0("to_str")
            .and_then(|t| t.extract())
            .map_err(|_| {
                PyTypeError::new_err(
                    "from_huggingface needs a transformers fast tokenizer (with \
                     `backend_tokenizer`) or a tokenizers.Tokenizer (with `to_str()`); slow \
                     (Python) tokenizers have no tokenizer.json: load it with \
                     from_tokenizer_json",
                )
            })?;
        let tok = py
            .detach(|| HfTokenizer::from_json_str(&text, "<huggingface tokenizer>"))
            .map_err(|e| grammar_error(py, &e))?;
        let stops = match stop_token_ids {
            Some(s) => s,
            None => {
                let mut s = tok.vocabulary().stop_tokens().to_vec();
                if let Ok(eos) = hf_tokenizer.getattr("eos_token_id") {
                    if let Ok(id) = eos.extract::<u32>() {
                        s.push(id);
                    } else if let Ok(ids) = eos.extract::<Vec<u32>>() {
                        s.extend(ids);
                    }
                }
                s
            }
        };
        adjust_hf(tok, vocab_size, Some(stops))
            .map(TokenizerInfo::from_hf)
            .map_err(|e| grammar_error(py, &e))
    }

    #[staticmethod]
    #[pyo3(signature = (path, *, vocab_size=None, stop_token_ids=None))]
    fn from_gguf(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let path = path_string(path)?;
        py.detach(|| -> Result<TokenizerInfo, GrammarError> {
            let gguf = GgufTokenizer::from_file(&path)?;
            // The encoder exists for byte-level BPE files only; the
            // vocabulary (all masks need) for every kind.
            match HfTokenizer::from_gguf(&gguf, &path) {
                Ok(tok) => Ok(TokenizerInfo::from_hf(adjust_hf(
                    tok,
                    vocab_size,
                    stop_token_ids,
                )?)),
                Err(_) => Ok(TokenizerInfo {
                    vocab: Arc::new(adjust_vocab(
                        gguf.to_vocabulary()?,
                        vocab_size,
                        stop_token_ids,
                    )?),
                    hf: None,
                }),
            }
        })
        .map_err(|e| grammar_error(py, &e))
    }

    #[staticmethod]
    #[pyo3(signature = (tokens, *, vocab_size=None, stop_token_ids=None, special_token_ids=None))]
    fn from_token_bytes(
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<u32>>,
        special_token_ids: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let mut list: Vec<(Vec<u8>, bool)> = Vec::new();
        for (i, t) in tokens.try_iter()?.enumerate() {
            let t = t?;
            let bytes = if let Ok(b) = t.cast::<PyBytes>() {
                b.as_bytes().to_vec()
            } else if let Ok(s) = t.cast::<PyString>() {
                s.to_str()?.as_bytes().to_vec()
            } else {
                return Err(PyTypeError::new_err(format!(
                    "tokens[{i}]: expected bytes (or str), got {}",
                    t.get_type().name()?
                )));
            };
            list.push((bytes, false));
        }
        if list.is_empty() {
            return Err(PyValueError::new_err("tokens: the vocabulary is empty"));
        }
        for id in special_token_ids.unwrap_or_default() {
            let n = list.len();
            let entry = list.get_mut(id as usize).ok_or_else(|| {
                PyValueError::new_err(format!("special_token_ids: {id} is outside the {n} tokens"))
            })?;
            entry.1 = true;
        }
        let stops = stop_token_ids.unwrap_or_else(|| {
            list.iter()
                .enumerate()
                .filter(|(_, (b, _))| KNOWN_STOP_TOKENS.iter().any(|s| s.as_bytes() == b))
                .map(|(i, _)| i as u32)
                .collect()
        });
        let vocab = Vocabulary::new(tokensieve::VocabType::Raw, list);
        adjust_vocab(vocab, vocab_size, Some(stops))
            .map(|v| TokenizerInfo {
                vocab: Arc::new(v),
                hf: None,
            })
            .map_err(|e| grammar_error(py, &e))
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.vocab_size()
    }

    #[getter]
    fn tokenizer_size(&self) -> usize {
        self.vocab.tokenizer_size()
    }

    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.vocab.stop_tokens().to_vec()
    }

    #[getter]
    fn special_token_ids(&self) -> Vec<u32> {
        (0..self.vocab.tokenizer_size() as u32)
            .filter(|&i| self.vocab.is_special(i))
            .collect()
    }

    #[getter]
    fn vocab_type(&self) -> &'static str {
        self.vocab.vocab_type().as_str()
    }

    fn token_bytes<'py>(&self, py: Python<'py>, token_id: i64) -> PyResult<Bound<'py, PyBytes>> {
        if token_id < 0 || token_id as u64 >= self.vocab.vocab_size() as u64 {
            return Err(PyIndexError::new_err(format!(
                "token id {token_id} is outside the vocabulary (vocab_size {})",
                self.vocab.vocab_size()
            )));
        }
        Ok(PyBytes::new(py, self.vocab.token_bytes(token_id as u32)))
    }

    fn decode<'py>(&self, py: Python<'py>, token_ids: Vec<u32>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.vocab.decode(&token_ids))
    }

    fn encode(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        let hf = self.hf.as_ref().ok_or_else(|| {
            PyValueError::new_err(
                "encode needs the tokenizer itself: build the TokenizerInfo from a \
                 tokenizer.json (or a Hugging Face tokenizer)",
            )
        })?;
        py.detach(|| hf.encode(text))
            .map_err(|e| grammar_error(py, &e))
    }

    fn __repr__(&self) -> String {
        format!(
            "TokenizerInfo(vocab_type={:?}, vocab_size={}, tokenizer_size={}, stop_token_ids={:?})",
            self.vocab.vocab_type().as_str(),
            self.vocab.vocab_size(),
            self.vocab.tokenizer_size(),
            self.vocab.stop_tokens()
        )
    }
}
