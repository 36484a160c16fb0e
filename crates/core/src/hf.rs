//! The one place that knows Hugging Face `tokenizer.json` files: it resolves
//! each token to its exact bytes (ByteLevel's byte-to-unicode table,
//! `<0xNN>` byte fallback, `▁` metaspace), marks added special tokens, finds
//! stop tokens, and encodes text for tests and the CLI.

use crate::error::{GrammarError, Location};
use crate::vocab::{VocabType, Vocabulary};
use std::collections::HashMap;
use std::path::Path;

/// Stop tokens recognised by name, when present in the vocabulary.
pub const KNOWN_STOP_TOKENS: &[&str] = &[
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|end|>",
    "<eos>",
    "<end_of_turn>",
];

/// A loaded `tokenizer.json`: the encoder plus the [`Vocabulary`] derived from it.
pub struct HfTokenizer {
    tokenizer: tokenizers::Tokenizer,
    vocab: Vocabulary,
    /// The normalizer prepends `▁` to the input (SentencePiece style).
    prepends_space: bool,
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

impl HfTokenizer {
    /// Loads a `tokenizer.json` file. Stop tokens are detected by name
    /// ([`KNOWN_STOP_TOKENS`]); override with [`Vocabulary::with_stop_tokens`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, GrammarError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| GrammarError::Vocabulary {
            location: Location::File(shown.clone()),
            message: format!("cannot read: {e}"),
        })?;
        Self::from_json_str(&text, &shown)
    }

    /// Parses `tokenizer.json` text; `origin` names it in errors.
    pub fn from_json_str(text: &str, origin: &str) -> Result<Self, GrammarError> {
        let err = |message: String| GrammarError::Vocabulary {
            location: Location::File(origin.to_string()),
            message,
        };
        let json: serde_json::Value =
            serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
        let tokenizer = tokenizers::Tokenizer::from_bytes(text.as_bytes()).map_err(|e| {
            err(format!(
                "not a tokenizer.json the `tokenizers` crate can load: {e}"
            ))
        })?;
        let vocab_type = detect_type(&json);
        let prepends_space = normalizer_prepends_space(&json);

        let mut added: HashMap<u32, (String, bool)> = HashMap::new();
        for (id, tok) in tokenizer.get_added_tokens_decoder() {
            added.insert(id, (tok.content.clone(), tok.special));
        }
        let map = tokenizer.get_vocab(true);
        let size = map.values().map(|&i| i as usize + 1).max().unwrap_or(0);
        let mut strings: Vec<Option<&str>> = vec![None; size];
        for (s, &id) in &map {
            strings[id as usize] = Some(s.as_str());
        }
        let byte_decoder = byte_level_decoder();
        let mut tokens = Vec::with_capacity(size);
        for (id, s) in strings.iter().enumerate() {
            if let Some((content, special)) = added.get(&(id as u32)) {
                tokens.push((content.as_bytes().to_vec(), *special));
                continue;
            }
            // Ids with no string (gaps) are kept as empty, unmatchable tokens.
            let Some(s) = s else {
                tokens.push((Vec::new(), true));
                continue;
            };
            tokens.push((token_bytes(s, vocab_type, &byte_decoder), false));
        }
        let vocab = Vocabulary::new(vocab_type, tokens);
        let stops: Vec<u32> = KNOWN_STOP_TOKENS
            .iter()
            .filter_map(|name| map.get(*name).copied())
            .filter(|&id| added.contains_key(&id) || vocab.vocab_type() != VocabType::ByteLevel)
            .collect();
        let vocab = vocab.with_stop_tokens(&stops)?;
        Ok(HfTokenizer {
            tokenizer,
            vocab,
            prepends_space,
            path: origin.to_string(),
        })
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

    /// Encodes `text` with no special tokens, the way a model would generate
    /// it as a continuation: the bytes of the returned tokens are exactly
    /// `text`. (SentencePiece-style tokenizers prepend `▁` to their input;
    /// that space is not part of a continuation and is taken off again.)
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, GrammarError> {
        let raw = |t: &str| -> Result<Vec<u32>, GrammarError> {
            self.tokenizer
                .encode(t, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| GrammarError::Vocabulary {
                    location: Location::File(self.path.clone()),
                    message: format!("encoding failed: {e}"),
                })
        };
        if !self.prepends_space || text.is_empty() {
            return raw(text);
        }
        // Encode behind a newline, then drop the tokens that spell " \n":
        // a newline is never merged with what follows in these vocabularies,
        // so the remaining tokens are how `text` continues a line.
        let ids = raw(&format!("\n{text}"))?;
        let mut spelled = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            spelled.extend_from_slice(self.vocab.token_bytes(id));
            if spelled == b" \n" || spelled == b"\n" {
                let rest = ids[i + 1..].to_vec();
                if self.vocab.decode(&rest) == text.as_bytes() {
                    return Ok(rest);
                }
                break;
            }
            if spelled.len() >= 2 {
                break;
            }
        }
        raw(text)
    }

    /// Whether the normalizer prepends `▁` (SentencePiece style).
    pub fn prepends_space(&self) -> bool {
        self.prepends_space
    }
}

fn detect_type(json: &serde_json::Value) -> VocabType {
    let has = |v: &serde_json::Value, ty: &str| -> bool {
        v.get("type").and_then(|t| t.as_str()) == Some(ty)
            || v.get("decoders")
                .and_then(|d| d.as_array())
                .is_some_and(|d| {
                    d.iter()
                        .any(|x| x.get("type").and_then(|t| t.as_str()) == Some(ty))
                })
    };
    let decoder = json.get("decoder").cloned().unwrap_or_default();
    let pre = json.get("pre_tokenizer").cloned().unwrap_or_default();
    let pre_has = |ty: &str| {
        has(&pre, ty)
            || pre
                .get("pretokenizers")
                .and_then(|d| d.as_array())
                .is_some_and(|d| {
                    d.iter()
                        .any(|x| x.get("type").and_then(|t| t.as_str()) == Some(ty))
                })
    };
    if has(&decoder, "ByteLevel") || pre_has("ByteLevel") {
        VocabType::ByteLevel
    } else if json
        .pointer("/model/byte_fallback")
        .and_then(|b| b.as_bool())
        == Some(true)
        || has(&decoder, "ByteFallback")
    {
        VocabType::ByteFallback
    } else if has(&decoder, "Metaspace") || pre_has("Metaspace") || has(&decoder, "Replace") {
        VocabType::Metaspace
    } else {
        VocabType::Raw
    }
}

fn normalizer_prepends_space(json: &serde_json::Value) -> bool {
    fn walk(v: &serde_json::Value) -> bool {
        match v.get("type").and_then(|t| t.as_str()) {
            Some("Prepend") => v.get("prepend").and_then(|p| p.as_str()) == Some("\u{2581}"),
            Some("Sequence") => v
                .get("normalizers")
                .or_else(|| v.get("pretokenizers"))
                .and_then(|n| n.as_array())
                .is_some_and(|n| n.iter().any(walk)),
            Some("Metaspace") => {
                v.get("prepend_scheme")
                    .and_then(|p| p.as_str())
                    .is_some_and(|p| p != "never")
                    || v.get("add_prefix_space").and_then(|p| p.as_bool()) == Some(true)
            }
            _ => false,
        }
    }
    json.get("normalizer").is_some_and(walk) || json.get("pre_tokenizer").is_some_and(walk)
}

/// The exact bytes of a base-vocabulary token string.
fn token_bytes(s: &str, ty: VocabType, byte_decoder: &HashMap<char, u8>) -> Vec<u8> {
    match ty {
        VocabType::ByteLevel => {
            let decoded: Option<Vec<u8>> =
                s.chars().map(|c| byte_decoder.get(&c).copied()).collect();
            decoded.unwrap_or_else(|| s.as_bytes().to_vec())
        }
        VocabType::ByteFallback | VocabType::Metaspace => {
            if ty == VocabType::ByteFallback {
                if let Some(b) = parse_byte_token(s) {
                    return vec![b];
                }
            }
            s.replace('\u{2581}', " ").into_bytes()
        }
        VocabType::Raw => s.as_bytes().to_vec(),
    }
}

/// `<0x0A>` -> 0x0A.
fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's printable-unicode -> byte table.
fn byte_level_decoder() -> HashMap<char, u8> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.into_iter()
        .zip(cs)
        .map(|(b, c)| (char::from_u32(c).expect("valid scalar"), b as u8))
        .collect()
}
