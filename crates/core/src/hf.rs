//! The one place that knows Hugging Face `tokenizer.json` files: it resolves
//! each token to its exact bytes (ByteLevel's byte-to-unicode table,
//! `<0xNN>` byte fallback, `▁` metaspace), marks added special tokens, finds
//! stop tokens, and encodes text for tests and the CLI.

use crate::error::{GrammarError, Location};
use crate::vocab::{VocabType, Vocabulary, byte_level_decoder, token_bytes};
use std::path::Path;

pub use crate::vocab::KNOWN_STOP_TOKENS;

/// A loaded `tokenizer.json`: the encoder plus the [`Vocabulary`] derived from it.
pub struct HfTokenizer {
    /// The tokenizer, adjusted for encoding continuations (see [`HfTokenizer::encode`]):
    /// no prepended space, no Unicode normalization, special tokens spelled as text.
    tokenizer: tokenizers::Tokenizer,
    vocab: Vocabulary,
    /// The tokenizer prepends a space (`▁`) to its input (SentencePiece style).
    prepends_space: bool,
    /// The lowest grammar token id of each single byte.
    byte_ids: [Option<u32>; 256],
    path: String,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer")
            .field("path", &self.path)
            .field("vocab_size", &self.vocab.vocab_size())
            .field("vocab_type", &self.vocab.vocab_type())
            .finish()
    }
}

/// The parts of `tokenizer.json` the loader reads itself (everything else,
/// the large vocabulary and merges included, is skipped without building values).
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default)]
    normalizer: Option<serde_json::Value>,
    #[serde(default)]
    pre_tokenizer: Option<serde_json::Value>,
    #[serde(default)]
    decoder: Option<serde_json::Value>,
    model: ModelHead,
}

#[derive(serde::Deserialize)]
struct ModelHead {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    byte_fallback: Option<bool>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
}

impl HfTokenizer {
    /// Loads a `tokenizer.json` file. Stop tokens are detected by name
    /// ([`KNOWN_STOP_TOKENS`]) and, when a `tokenizer_config.json`
    /// (`eos_token`) or `generation_config.json` (`eos_token_id`) lies in the
    /// same folder, the model's eos is added; override with
    /// [`HfTokenizer::with_stop_tokens`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, GrammarError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| GrammarError::Vocabulary {
            location: Location::File(shown.clone()),
            message: format!("cannot read: {e}"),
        })?;
        let tok = Self::from_json_str(&text, &shown)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let eos = tok.model_eos_ids(dir)?;
        if eos.iter().all(|id| tok.vocab.is_stop(*id)) {
            return Ok(tok);
        }
        let mut stops = tok.vocab.stop_tokens().to_vec();
        stops.extend(eos);
        tok.with_stop_tokens(&stops)
    }

    /// Parses `tokenizer.json` text; `origin` names it in errors. Stop tokens
    /// are the added tokens named in [`KNOWN_STOP_TOKENS`].
    pub fn from_json_str(text: &str, origin: &str) -> Result<Self, GrammarError> {
        let err = |message: String| GrammarError::Vocabulary {
            location: Location::File(origin.to_string()),
            message,
        };
        let head: Head = serde_json::from_str(text).map_err(|e| match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                err(format!("not JSON: {e}"))
            }
            _ => err(format!("not a tokenizer.json: {e}")),
        })?;
        if head.model.kind.as_deref() == Some("WordPiece")
            || head
                .model
                .continuing_subword_prefix
                .as_deref()
                .is_some_and(|p| !p.is_empty())
        {
            return Err(err(
                "WordPiece / continuing-subword-prefix vocabularies (BERT style) are not \
                 supported: their tokens do not map to fixed output bytes"
                    .to_string(),
            ));
        }
        // `tokenizers` 0.23 panics on some malformed files (a BPE merge
        // longer than every token of the vocabulary slices past its
        // buffer): caught, that is an error of this file like any other.
        let loaded =
            std::panic::catch_unwind(|| tokenizers::Tokenizer::from_bytes(text.as_bytes()))
                .unwrap_or_else(|p| Err(crate::cache::panic_message(&p).into()));
        let mut tokenizer = loaded.map_err(|e| {
            err(format!(
                "not a tokenizer.json the `tokenizers` crate can load: {e}"
            ))
        })?;
        let vocab_type = detect_type(&head);
        let prepends_space = head.normalizer.as_ref().is_some_and(prepends_space_json)
            || head.pre_tokenizer.as_ref().is_some_and(prepends_space_json);

        // Token id -> string: the model's vocabulary, overlaid with added tokens.
        let added = tokenizer.get_added_tokens_decoder();
        let model_vocab = tokenizer.get_vocab(false);
        let size = model_vocab
            .values()
            .chain(added.keys())
            .map(|&i| i as usize + 1)
            .max()
            .unwrap_or(0);
        if size > (1 << 24) {
            return Err(err(format!("token id {} is implausibly large", size - 1)));
        }
        let mut strings: Vec<Option<&str>> = vec![None; size];
        for (s, &id) in &model_vocab {
            strings[id as usize] = Some(s.as_str());
        }
        let byte_decoder = byte_level_decoder();
        let mut tokens = Vec::with_capacity(size);
        for (id, s) in strings.iter().enumerate() {
            if let Some(tok) = added.get(&(id as u32)) {
                // Added tokens are matched on their content, which is plain text.
                tokens.push((tok.content.as_bytes().to_vec(), tok.special));
                continue;
            }
            // Ids with no string (gaps) are kept as empty, unmatchable tokens.
            let Some(s) = s else {
                tokens.push((Vec::new(), true));
                continue;
            };
            tokens.push((token_bytes(s, vocab_type, &byte_decoder), false));
        }
        let mut stops: Vec<u32> = added
            .iter()
            .filter(|(_, tok)| KNOWN_STOP_TOKENS.contains(&tok.content.as_str()))
            .map(|(&id, _)| id)
            .collect();
        stops.sort_unstable();
        let vocab = Vocabulary::new(vocab_type, tokens).with_stop_tokens(&stops)?;

        // Adjust the tokenizer for encoding continuations (see `encode`).
        if let Some(n) = head.normalizer.as_ref() {
            if let Some(changed) = continuation_normalizer(n) {
                let n: Option<tokenizers::NormalizerWrapper> = changed
                    .map(serde_json::from_value)
                    .transpose()
                    .map_err(|e| err(format!("normalizer: {e}")))?;
                tokenizer
                    .with_normalizer(n)
                    .map_err(|e| err(format!("normalizer: {e}")))?;
            }
        }
        if let Some(p) = head.pre_tokenizer.as_ref() {
            let mut p = p.clone();
            if continuation_pre_tokenizer(&mut p) {
                let p: tokenizers::PreTokenizerWrapper =
                    serde_json::from_value(p).map_err(|e| err(format!("pre_tokenizer: {e}")))?;
                tokenizer.with_pre_tokenizer(Some(p));
            }
        }
        // Added tokens: stop names become special (so that they, like the
        // special tokens, are spelled as text), and plain added tokens lose
        // lstrip/rstrip (which would swallow whitespace the text has).
        let fixes: Vec<tokenizers::AddedToken> = added
            .values()
            .filter_map(|t| {
                let stop = KNOWN_STOP_TOKENS.contains(&t.content.as_str());
                let becomes_special = stop && !t.special;
                let strips = !t.special && (t.lstrip || t.rstrip);
                if !becomes_special && !strips {
                    return None;
                }
                let mut t = t.clone();
                t.special |= stop;
                t.lstrip = false;
                t.rstrip = false;
                Some(t)
            })
            .collect();
        if !fixes.is_empty() {
            tokenizer
                .add_tokens(fixes)
                .map_err(|e| err(format!("added tokens: {e}")))?;
        }
        tokenizer.set_encode_special_tokens(true);
        let mut byte_ids = [None; 256];
        for (id, b) in vocab.grammar_tokens() {
            if let [b] = b {
                byte_ids[*b as usize].get_or_insert(id);
            }
        }
        Ok(HfTokenizer {
            tokenizer,
            vocab,
            prepends_space,
            byte_ids,
            path: origin.to_string(),
        })
    }

    /// The model's eos ids named by `tokenizer_config.json` (`eos_token`) and
    /// `generation_config.json` (`eos_token_id`) in `dir`, where present.
    fn model_eos_ids(&self, dir: &Path) -> Result<Vec<u32>, GrammarError> {
        let mut ids = Vec::new();
        let read = |name: &str| -> Result<Option<serde_json::Value>, GrammarError> {
            let p = dir.join(name);
            let Ok(text) = std::fs::read_to_string(&p) else {
                return Ok(None);
            };
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| GrammarError::Vocabulary {
                    location: Location::File(p.display().to_string()),
                    message: format!("not JSON: {e}"),
                })
        };
        if let Some(cfg) = read("tokenizer_config.json")? {
            let eos = cfg.get("eos_token");
            let name = eos
                .and_then(|e| e.as_str())
                .or_else(|| eos.and_then(|e| e.get("content")).and_then(|c| c.as_str()));
            if let Some(id) = name.and_then(|n| self.token_to_id(n)) {
                ids.push(id);
            }
        }
        if let Some(cfg) = read("generation_config.json")? {
            match cfg.get("eos_token_id") {
                Some(serde_json::Value::Array(a)) => {
                    ids.extend(a.iter().filter_map(|v| v.as_u64()).map(|v| v as u32))
                }
                Some(v) => ids.extend(v.as_u64().map(|v| v as u32)),
                None => {}
            }
        }
        let n = self.vocab.tokenizer_size();
        ids.retain(|&id| (id as usize) < n);
        Ok(ids)
    }

    pub fn vocabulary(&self) -> &Vocabulary {
        &self.vocab
    }

    pub fn into_vocabulary(self) -> Vocabulary {
        self.vocab
    }

    /// Token id of an exact token string (special tokens included).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// Sets the model's vocab size (padding rows), see [`Vocabulary::with_vocab_size`].
    pub fn with_vocab_size(mut self, vocab_size: usize) -> Result<Self, GrammarError> {
        self.vocab = self.vocab.with_vocab_size(vocab_size)?;
        Ok(self)
    }

    /// Replaces the stop tokens, see [`Vocabulary::with_stop_tokens`].
    pub fn with_stop_tokens(mut self, ids: &[u32]) -> Result<Self, GrammarError> {
        self.vocab = self.vocab.with_stop_tokens(ids)?;
        Ok(self)
    }

    /// Encodes `text` the way a model would generate it as a continuation:
    /// no special tokens, and the bytes of the returned tokens are exactly
    /// `text`. To that end the tokenizer runs without the space that
    /// SentencePiece-style tokenizers prepend to their input (so `" x"` and
    /// `"x"` differ, as they do mid-text), without Unicode normalization (NFC…)
    /// and with special-token names spelled as ordinary text. An error if
    /// the tokens cannot spell `text` exactly (an `<unk>`, a lossy normalizer).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, GrammarError> {
        let metaspace = matches!(
            self.vocab.vocab_type(),
            VocabType::ByteFallback | VocabType::Metaspace
        );
        if !metaspace || !text.contains('\u{2581}') {
            return self.encode_piece(text);
        }
        // In a `▁` vocabulary the tokenizer reads a literal `▁` in the text
        // as a space; the only exact spelling is its three byte tokens.
        let mut ids = Vec::new();
        for (i, piece) in text.split('\u{2581}').enumerate() {
            if i > 0 {
                for b in "\u{2581}".bytes() {
                    ids.push(self.byte_ids[b as usize].ok_or_else(|| {
                        self.error(format!(
                            "the tokenizer cannot spell {text:?} exactly: no token for byte 0x{b:02X}"
                        ))
                    })?);
                }
            }
            ids.extend(self.encode_piece(piece)?);
        }
        Ok(ids)
    }

    fn encode_piece(&self, text: &str) -> Result<Vec<u32>, GrammarError> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let ids = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| self.error(format!("encoding failed: {e}")))?
            .get_ids()
            .to_vec();
        let spelled = self.vocab.decode(&ids);
        if spelled != text.as_bytes() {
            return Err(self.error(format!(
                "the tokenizer cannot spell {text:?} exactly: its tokens spell {:?}",
                String::from_utf8_lossy(&spelled)
            )));
        }
        Ok(ids)
    }

    fn error(&self, message: String) -> GrammarError {
        GrammarError::Vocabulary {
            location: Location::File(self.path.clone()),
            message,
        }
    }

    /// Whether the tokenizer prepends a space to its input (SentencePiece
    /// `▁`, or ByteLevel `add_prefix_space`); [`HfTokenizer::encode`] does not.
    pub fn prepends_space(&self) -> bool {
        self.prepends_space
    }
}

/// The normalizer for encoding continuations: without `Prepend("▁")` and
/// without Unicode normalization forms. `None` if nothing changes,
/// `Some(None)` if nothing is left.
fn continuation_normalizer(v: &serde_json::Value) -> Option<Option<serde_json::Value>> {
    let ty = v.get("type").and_then(|t| t.as_str());
    match ty {
        Some("Prepend") if v.get("prepend").and_then(|p| p.as_str()) == Some("\u{2581}") => {
            Some(None)
        }
        Some("NFC" | "NFD" | "NFKC" | "NFKD") => Some(None),
        Some("Sequence") => {
            let list = v.get("normalizers").and_then(|n| n.as_array())?;
            let mut changed = false;
            let mut kept = Vec::new();
            for n in list {
                match continuation_normalizer(n) {
                    None => kept.push(n.clone()),
                    Some(Some(m)) => {
                        changed = true;
                        kept.push(m);
                    }
                    Some(None) => changed = true,
                }
            }
            if !changed {
                return None;
            }
            if kept.is_empty() {
                return Some(None);
            }
            let mut seq = v.clone();
            seq["normalizers"] = serde_json::Value::Array(kept);
            Some(Some(seq))
        }
        _ => None,
    }
}

/// Turns off the space a pre-tokenizer prepends (Metaspace `prepend_scheme`,
/// ByteLevel `add_prefix_space`); whether anything changed.
fn continuation_pre_tokenizer(v: &mut serde_json::Value) -> bool {
    match v.get("type").and_then(|t| t.as_str()) {
        Some("Metaspace") if prepends_space_json(v) => {
            v["prepend_scheme"] = "never".into();
            if v.get("add_prefix_space").is_some() {
                v["add_prefix_space"] = false.into();
            }
            true
        }
        Some("ByteLevel") if prepends_space_json(v) => {
            v["add_prefix_space"] = false.into();
            true
        }
        Some("Sequence") => match v.get_mut("pretokenizers").and_then(|n| n.as_array_mut()) {
            Some(list) => list
                .iter_mut()
                .fold(false, |acc, p| continuation_pre_tokenizer(p) | acc),
            None => false,
        },
        _ => false,
    }
}

/// Whether a normalizer / pre-tokenizer prepends a space to its input.
fn prepends_space_json(v: &serde_json::Value) -> bool {
    match v.get("type").and_then(|t| t.as_str()) {
        Some("Prepend") => v.get("prepend").and_then(|p| p.as_str()) == Some("\u{2581}"),
        Some("Sequence") => v
            .get("normalizers")
            .or_else(|| v.get("pretokenizers"))
            .and_then(|n| n.as_array())
            .is_some_and(|n| n.iter().any(prepends_space_json)),
        Some("Metaspace") => match v.get("prepend_scheme").and_then(|p| p.as_str()) {
            Some(scheme) => scheme != "never",
            // Older files: `add_prefix_space`, default true.
            None => v.get("add_prefix_space").and_then(|p| p.as_bool()) != Some(false),
        },
        Some("ByteLevel") => v.get("add_prefix_space").and_then(|p| p.as_bool()) == Some(true),
        _ => false,
    }
}

fn detect_type(head: &Head) -> VocabType {
    fn has(v: Option<&serde_json::Value>, ty: &str) -> bool {
        let Some(v) = v else { return false };
        v.get("type").and_then(|t| t.as_str()) == Some(ty)
            || ["decoders", "pretokenizers"].iter().any(|key| {
                v.get(*key)
                    .and_then(|d| d.as_array())
                    .is_some_and(|d| d.iter().any(|x| has(Some(x), ty)))
            })
    }
    let decoder = head.decoder.as_ref();
    let pre = head.pre_tokenizer.as_ref();
    if has(decoder, "ByteLevel") || has(pre, "ByteLevel") {
        VocabType::ByteLevel
    } else if head.model.byte_fallback == Some(true) || has(decoder, "ByteFallback") {
        VocabType::ByteFallback
    } else if has(decoder, "Metaspace")
        || has(pre, "Metaspace")
        || head.normalizer.as_ref().is_some_and(prepends_space_json)
        || has(decoder, "Replace")
    {
        VocabType::Metaspace
    } else {
        VocabType::Raw
    }
}

/// Pre-tokenizer split patterns of the byte-level BPE families, by the name
/// llama.cpp stores in `tokenizer.ggml.pre` (the same regexes their
/// `tokenizer.json` files carry).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The `tokenizer.json` pre-tokenizer for a GGUF `tokenizer.ggml.pre` name:
/// `None` for names this loader does not know.
fn gguf_pre_tokenizer(pre: Option<&str>) -> Option<serde_json::Value> {
    use serde_json::json;
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    let split = |pattern: &str| {
        json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false},
            byte_level(false),
        ]})
    };
    Some(match pre {
        None | Some("default" | "gpt2") => byte_level(true),
        // SmolLM / StarCoder: every digit alone, then GPT-2's split.
        Some("smollm" | "starcoder") => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            byte_level(true),
        ]}),
        Some("llama-bpe" | "llama3") => split(LLAMA3_SPLIT),
        Some("qwen2") => split(QWEN2_SPLIT),
        Some(_) => return None,
    })
}

impl HfTokenizer {
    /// The tokenizer a GGUF file describes, for byte-level BPE vocabularies
    /// (`tokenizer.ggml.model = gpt2` with merges): its vocabulary is the one
    /// [`crate::gguf::GgufTokenizer::to_vocabulary`] gives, and it encodes
    /// text as the model's own tokenizer does when `tokenizer.ggml.pre` names
    /// a known pre-tokenizer (`gpt2`, `smollm`, `llama-bpe`, `qwen2`). Other
    /// names are an error, as are SentencePiece (`llama`) vocabularies: pass
    /// their `tokenizer.json` instead.
    pub fn from_gguf(
        gguf: &crate::gguf::GgufTokenizer,
        origin: &str,
    ) -> Result<Self, GrammarError> {
        use serde_json::{Map, Value, json};
        let err = |message: String| GrammarError::Vocabulary {
            location: Location::File(origin.to_string()),
            message,
        };
        if gguf.model != "gpt2" {
            return Err(err(format!(
                "encoding with the GGUF's own `{}` tokenizer is not supported (only byte-level \
                 BPE, `gpt2`): pass the model's tokenizer.json",
                gguf.model
            )));
        }
        if gguf.merges.is_empty() {
            return Err(err(
                "the GGUF's BPE tokenizer has no `tokenizer.ggml.merges`".into(),
            ));
        }
        let pre = gguf_pre_tokenizer(gguf.pre.as_deref()).ok_or_else(|| {
            err(format!(
                "pre-tokenizer `{}` (tokenizer.ggml.pre) is not known here (known: gpt2, \
                 smollm, llama-bpe, qwen2): pass the model's tokenizer.json",
                gguf.pre.as_deref().unwrap_or("")
            ))
        })?;
        let mut vocab = Map::with_capacity(gguf.tokens.len());
        let mut added = Vec::new();
        for (id, t) in gguf.tokens.iter().enumerate() {
            let kind = gguf.token_types.get(id).copied().unwrap_or(1);
            let special = gguf.is_special(id as u32);
            if special || kind == crate::gguf::token_type::USER_DEFINED {
                added.push(json!({
                    "id": id, "content": t, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": special,
                }));
            }
            vocab.insert(t.clone(), Value::from(id));
        }
        let file = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre,
            "post_processor": null,
            "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
            "model": {
                "type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null,
                "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                "vocab": vocab, "merges": gguf.merges,
            },
        });
        let tok = Self::from_json_str(&file.to_string(), origin)?;
        // The GGUF's own ids decide the stop tokens and the model's width.
        let tok = tok.with_stop_tokens(&gguf.stop_token_ids())?;
        match gguf.vocab_size {
            Some(v) if v as usize > tok.vocab.tokenizer_size() => tok.with_vocab_size(v as usize),
            _ => Ok(tok),
        }
    }
}

#[cfg(test)]
mod gguf_tests {
    use super::*;
    use crate::gguf::GgufTokenizer;
    use crate::gguf::write::{Value, gguf};

    const TEXTS: &[&str] = &[
        "{\"name\": \"Ada Lovelace\", \"age\": 36, \"tags\": [\"math\", \"poetry\"]}",
        "Hello world! It's 2026-11-23, they'll see 12345 items\n\n  indented\tand é😀 ünïcödé",
        "  {\n    \"x\": -1.5e10,\n    \"y\": null\n  }\n",
    ];

    /// A GGUF built from a real `tokenizer.json` (as llama.cpp's converter
    /// writes it) must encode exactly as that tokenizer does.
    fn same_as_tokenizer_json(name: &str, pre: &str) {
        let path = format!(
            "{}/../../../shared/data/tokenizers/{name}/tokenizer.json",
            env!("CARGO_MANIFEST_DIR")
        );
        if !Path::new(&path).exists() {
            crate::skip!("{path} not present");
            return;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let reference = HfTokenizer::from_json_str(&text, &path).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let size = reference.vocabulary().tokenizer_size();
        let mut tokens = vec![String::new(); size];
        let mut types = vec![1i32; size];
        for (s, id) in json["model"]["vocab"].as_object().unwrap() {
            tokens[id.as_u64().unwrap() as usize] = s.clone();
        }
        for t in json["added_tokens"].as_array().unwrap() {
            let id = t["id"].as_u64().unwrap() as usize;
            tokens[id] = t["content"].as_str().unwrap().to_string();
            types[id] = if t["special"].as_bool().unwrap() {
                3
            } else {
                4
            };
        }
        let merges: Vec<String> = json["model"]["merges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| match m {
                serde_json::Value::String(s) => s.clone(),
                pair => format!(
                    "{} {}",
                    pair[0].as_str().unwrap(),
                    pair[1].as_str().unwrap()
                ),
            })
            .collect();
        let bytes = gguf(&[
            ("tokenizer.ggml.model", Value::Str("gpt2")),
            ("tokenizer.ggml.pre", Value::Str(pre)),
            (
                "tokenizer.ggml.tokens",
                Value::Strs(tokens.iter().map(|s| s.as_str()).collect()),
            ),
            ("tokenizer.ggml.token_type", Value::I32s(types)),
            (
                "tokenizer.ggml.merges",
                Value::Strs(merges.iter().map(|s| s.as_str()).collect()),
            ),
        ]);
        let g = GgufTokenizer::from_reader(&bytes[..], bytes.len() as u64, "built.gguf").unwrap();
        let from_gguf = HfTokenizer::from_gguf(&g, "built.gguf").unwrap();
        let v = g.to_vocabulary().unwrap();
        for id in 0..size as u32 {
            assert_eq!(
                v.token_bytes(id),
                reference.vocabulary().token_bytes(id),
                "{name} token {id}"
            );
            assert_eq!(
                v.is_special(id),
                reference.vocabulary().is_special(id),
                "{name} token {id}"
            );
        }
        for t in TEXTS {
            assert_eq!(
                from_gguf.encode(t).unwrap(),
                reference.encode(t).unwrap(),
                "{name}: {t:?}"
            );
        }
    }

    #[test]
    fn gguf_tokenizers_encode_like_their_tokenizer_json() {
        same_as_tokenizer_json("gpt2", "gpt2");
        same_as_tokenizer_json("llama3", "llama-bpe");
        same_as_tokenizer_json("qwen2.5", "qwen2");
    }

    #[test]
    fn unknown_pre_tokenizers_and_sentencepiece_are_refused() {
        let file = |model: &str, pre: &str| {
            let b = gguf(&[
                ("tokenizer.ggml.model", Value::Str(model)),
                ("tokenizer.ggml.pre", Value::Str(pre)),
                ("tokenizer.ggml.tokens", Value::Strs(vec!["a", "b", "ab"])),
                ("tokenizer.ggml.merges", Value::Strs(vec!["a b"])),
            ]);
            GgufTokenizer::from_reader(&b[..], b.len() as u64, "t.gguf").unwrap()
        };
        let ok = HfTokenizer::from_gguf(&file("gpt2", "gpt2"), "t.gguf").unwrap();
        assert_eq!(ok.encode("abab").unwrap(), [2, 2]);
        let e = HfTokenizer::from_gguf(&file("gpt2", "deepseek-coder"), "t.gguf").unwrap_err();
        assert!(e.to_string().contains("`deepseek-coder`"), "{e}");
        let e = HfTokenizer::from_gguf(&file("llama", "default"), "t.gguf").unwrap_err();
        assert!(e.to_string().contains("tokenizer.json"), "{e}");
    }

    #[test]
    fn smollm2_gguf_encodes_digits_one_by_one() {
        let Some(path) = crate::gguf::tests::smollm2_path() else {
            crate::skip!("no SmolLM2 GGUF (run scripts/fetch-model.sh)");
            return;
        };
        let g = GgufTokenizer::from_file(&path).unwrap();
        let tok = HfTokenizer::from_gguf(&g, "smollm2").unwrap();
        assert_eq!(tok.vocabulary().stop_tokens(), [0, 2]);
        let ids = tok.encode("{\"age\": 1234}").unwrap();
        let pieces: Vec<&str> = ids.iter().map(|&i| g.tokens[i as usize].as_str()).collect();
        assert_eq!(pieces, ["{\"", "age", "\":", "Ġ", "1", "2", "3", "4", "}"]);
        for t in TEXTS {
            let ids = tok.encode(t).unwrap();
            assert_eq!(tok.vocabulary().decode(&ids), t.as_bytes());
        }
    }
}
