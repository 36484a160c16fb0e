//! The one place that knows Hugging Face `tokenizer.json` files: it resolves
//! each token to its exact bytes (ByteLevel's byte-to-unicode table,
//! `<0xNN>` byte fallback, `▁` metaspace), marks added special tokens, finds
//! stop tokens, and encodes text for tests and the CLI.

use crate::error::{GrammarError, Location};
use crate::vocab::{VocabType, Vocabulary};
use std::path::Path;

/// Stop tokens recognised by name: each one that is an added token of the
/// tokenizer (special or not) is a stop token. The model's own eos, when a
/// `tokenizer_config.json` / `generation_config.json` lies beside the file,
/// is added by [`HfTokenizer::from_file`].
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
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(text.as_bytes()).map_err(|e| {
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

/// GPT-2's printable-unicode -> byte table, indexed by code point (all of
/// its characters are below U+0144).
type ByteDecoder = [Option<u8>; 0x144];

/// The exact bytes of a base-vocabulary token string.
fn token_bytes(s: &str, ty: VocabType, byte_decoder: &ByteDecoder) -> Vec<u8> {
    match ty {
        VocabType::ByteLevel => {
            // As the `tokenizers` ByteLevel decoder does: a string with a
            // character outside the table stands for its own UTF-8 bytes.
            let decoded: Option<Vec<u8>> = s
                .chars()
                .map(|c| byte_decoder.get(c as usize).copied().flatten())
                .collect();
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

/// `<0x0A>` -> 0x0A (exactly two hex digits, as SentencePiece writes them).
fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's `bytes_to_unicode`, inverted: printable bytes stand for
/// themselves, the other 68 bytes are U+0100.. in byte order.
fn byte_level_decoder() -> ByteDecoder {
    let printable = |b: u32| (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    let mut table = [None; 0x144];
    let mut next = 0x100;
    for b in 0..=255u8 {
        if printable(b as u32) {
            table[b as usize] = Some(b);
        } else {
            table[next] = Some(b);
            next += 1;
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_table_matches_gpt2() {
        let t = byte_level_decoder();
        assert_eq!(t.iter().flatten().count(), 256);
        // 'Ġ' (U+0120) is the space, 'Ċ' (U+010A) the newline, 'č' (U+010D) CR.
        assert_eq!(t['\u{120}' as usize], Some(b' '));
        assert_eq!(t['\u{10A}' as usize], Some(b'\n'));
        assert_eq!(t['\u{10D}' as usize], Some(b'\r'));
        assert_eq!(t['!' as usize], Some(b'!'));
        assert_eq!(t[0xAD], None);
        assert_eq!(t['\u{143}' as usize], Some(0xAD));
        let mut seen = [false; 256];
        for b in t.iter().flatten() {
            assert!(!seen[*b as usize], "byte {b} twice");
            seen[*b as usize] = true;
        }
    }

    #[test]
    fn byte_tokens_parse_strictly() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(b'\n'));
        assert_eq!(parse_byte_token("<0xff>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0x+A>"), None);
        assert_eq!(parse_byte_token("<0x0A0>"), None);
        assert_eq!(parse_byte_token("0x0A"), None);
    }
}
