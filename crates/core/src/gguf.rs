//! The tokenizer inside a GGUF model file (llama.cpp's format): the header
//! and metadata are read, the tensor data never is, and the
//! `tokenizer.ggml.*` keys become a [`Vocabulary`] (next to the
//! `tokenizer.json` loader in [`crate::hf`] and the tiktoken reader in
//! [`crate::vocab`]).
//!
//! Layout (little-endian): `GGUF`, version `u32` (2 or 3), tensor count
//! `u64`, metadata count `u64`, then each metadata entry as a key string
//! (`u64` length + UTF-8), a value type `u32` and the value. Every length read
//! from the file is checked against the bytes the file still has before
//! anything is allocated, so a corrupt or hostile file is a
//! [`GrammarError::Vocabulary`] naming the key and byte offset, never a panic
//! or a huge allocation.
//!
//! Token spelling follows `tokenizer.ggml.model`: `gpt2` vocabularies are
//! byte-level BPE (GPT-2's byte-to-unicode table, as `hf` decodes ByteLevel),
//! `llama` vocabularies are SentencePiece (`▁` is a space, byte tokens
//! `<0xNN>`). Control, unknown and unused tokens are special; the eos / eot /
//! eom ids and control tokens named in [`KNOWN_STOP_TOKENS`] are stop tokens.

use crate::error::{GrammarError, Location};
use crate::vocab::{
    KNOWN_STOP_TOKENS, VocabType, Vocabulary, byte_level_decoder, parse_byte_token, token_bytes,
};
use std::io::Read;
use std::path::Path;

/// Most tokens a vocabulary may have (as the other loaders): 16 M.
pub const MAX_TOKENS: u64 = 1 << 24;
/// Longest string value (a token, a merge, a chat template): 16 MiB.
pub const MAX_STRING_BYTES: u64 = 1 << 24;
/// Most metadata entries: real files have a few dozen.
pub const MAX_METADATA_ENTRIES: u64 = 1 << 16;

/// GGUF token types (`tokenizer.ggml.token_type`), as llama.cpp numbers them.
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// What a GGUF file says about its tokenizer (and the few other keys a
/// generator needs to pick the model and the chat template).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GgufTokenizer {
    /// `general.architecture` (`llama`, `qwen2` …).
    pub architecture: Option<String>,
    /// `tokenizer.ggml.model`: `gpt2` (byte-level BPE) or `llama` (SentencePiece).
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer's name (`smollm`, `llama-bpe`, `qwen2` …).
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`, the token strings as the file spells them.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type`, one per token ([`token_type`]); empty if absent.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges` (`"Ġ t"` …), BPE vocabularies only.
    pub merges: Vec<String>,
    pub bos_token_id: Option<u32>,
    pub eos_token_id: Option<u32>,
    /// `tokenizer.ggml.eot_token_id` / `eom_token_id` (Llama 3 style end of turn / message).
    pub eot_token_id: Option<u32>,
    pub eom_token_id: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos_token: Option<bool>,
    /// `tokenizer.chat_template` (Jinja text).
    pub chat_template: Option<String>,
    /// `{architecture}.vocab_size`, when the file states it.
    pub vocab_size: Option<u64>,
}

impl GgufTokenizer {
    /// Reads the metadata of a `.gguf` file (not its tensors).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, GrammarError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| GrammarError::Vocabulary {
            location: Location::File(shown.clone()),
            message: format!("cannot open: {e}"),
        })?;
        let len = file
            .metadata()
            .map_err(|e| GrammarError::Vocabulary {
                location: Location::File(shown.clone()),
                message: format!("cannot stat: {e}"),
            })?
            .len();
        Self::from_reader(
            std::io::BufReader::with_capacity(1 << 16, file),
            len,
            &shown,
        )
    }

    /// Reads GGUF metadata from `reader`, which holds `len` bytes in all
    /// (lengths in the file are checked against it); `origin` names it in errors.
    pub fn from_reader(reader: impl Read, len: u64, origin: &str) -> Result<Self, GrammarError> {
        let mut r = Reader {
            inner: reader,
            pos: 0,
            len,
            origin,
        };
        let magic = r.bytes_fixed::<4>("magic")?;
        if &magic != b"GGUF" {
            return Err(r.error(
                0,
                format!("not a GGUF file (magic {magic:?}, expected \"GGUF\")"),
            ));
        }
        let version = r.u32("version")?;
        if !(2..=3).contains(&version) {
            let hint = if version.swap_bytes() <= 3 {
                " (a big-endian file?)"
            } else {
                ""
            };
            return Err(r.error(
                4,
                format!("GGUF version {version} is not supported (2 or 3){hint}"),
            ));
        }
        let _tensor_count = r.u64("tensor_count")?;
        let entries = r.u64("metadata_kv_count")?;
        if entries > MAX_METADATA_ENTRIES {
            return Err(r.error(
                16,
                format!("{entries} metadata entries exceed the limit of {MAX_METADATA_ENTRIES}"),
            ));
        }
        let mut out = GgufTokenizer::default();
        let mut model = None;
        let mut vocab_sizes: Vec<(String, u64)> = Vec::new();
        for _ in 0..entries {
            let key = r.string("metadata key")?;
            let ty = r.u32(&key)?;
            let at = r.pos;
            let wrong = |r: &Reader<_>, expected: &str| {
                r.error(
                    at,
                    format!(
                        "`{key}` has value type {}, expected {expected}",
                        type_name(ty)
                    ),
                )
            };
            match key.as_str() {
                "general.architecture" => out.architecture = Some(r.expect_string(ty, &key)?),
                "tokenizer.ggml.model" => model = Some(r.expect_string(ty, &key)?),
                "tokenizer.ggml.pre" => out.pre = Some(r.expect_string(ty, &key)?),
                "tokenizer.chat_template" => out.chat_template = Some(r.expect_string(ty, &key)?),
                "tokenizer.ggml.tokens" => out.tokens = r.string_array(ty, &key)?,
                "tokenizer.ggml.merges" => out.merges = r.string_array(ty, &key)?,
                "tokenizer.ggml.token_type" => {
                    if ty != ARRAY {
                        return Err(wrong(&r, "array of int32"));
                    }
                    let (elem, count) = r.array_head(&key, MAX_TOKENS)?;
                    if elem != INT32 && elem != UINT32 {
                        return Err(wrong(&r, "array of int32"));
                    }
                    r.check_remaining(count.saturating_mul(4), &key)?;
                    out.token_types = (0..count)
                        .map(|_| r.u32(&key).map(|v| v as i32))
                        .collect::<Result<_, _>>()?;
                }
                "tokenizer.ggml.bos_token_id" => out.bos_token_id = Some(r.expect_id(ty, &key)?),
                "tokenizer.ggml.eos_token_id" => out.eos_token_id = Some(r.expect_id(ty, &key)?),
                "tokenizer.ggml.eot_token_id" => out.eot_token_id = Some(r.expect_id(ty, &key)?),
                "tokenizer.ggml.eom_token_id" => out.eom_token_id = Some(r.expect_id(ty, &key)?),
                "tokenizer.ggml.add_bos_token" => {
                    if ty != BOOL {
                        return Err(wrong(&r, "bool"));
                    }
                    out.add_bos_token = Some(r.u8(&key)? != 0);
                }
                k if k.ends_with(".vocab_size") => {
                    let v = r.integer(ty, &key)?;
                    vocab_sizes.push((k.trim_end_matches(".vocab_size").to_string(), v));
                }
                _ => r.skip_value(ty, &key, 0)?,
            }
        }
        out.model = model.ok_or_else(|| {
            r.error(
                r.pos,
                "no `tokenizer.ggml.model` key: the file carries no tokenizer".into(),
            )
        })?;
        if out.tokens.is_empty() {
            return Err(r.error(
                r.pos,
                "no `tokenizer.ggml.tokens`: the file carries no vocabulary".into(),
            ));
        }
        if !out.token_types.is_empty() && out.token_types.len() != out.tokens.len() {
            return Err(r.error(
                r.pos,
                format!(
                    "`tokenizer.ggml.token_type` has {} entries for {} tokens",
                    out.token_types.len(),
                    out.tokens.len()
                ),
            ));
        }
        out.vocab_size = vocab_sizes
            .iter()
            .find(|(arch, _)| Some(arch) == out.architecture.as_ref())
            .map(|(_, v)| *v);
        Ok(out)
    }

    /// The id of a token whose file spelling is exactly `text` (for special
    /// tokens such as `<|im_start|>`, which are spelled as their text).
    pub fn token_to_id(&self, text: &str) -> Option<u32> {
        self.tokens.iter().position(|t| t == text).map(|i| i as u32)
    }

    fn token_type(&self, id: usize) -> i32 {
        self.token_types
            .get(id)
            .copied()
            .unwrap_or(token_type::NORMAL)
    }

    /// Whether token `id` is special (control, unknown or unused): never
    /// matched by a grammar.
    pub fn is_special(&self, id: u32) -> bool {
        matches!(
            self.token_type(id as usize),
            token_type::CONTROL | token_type::UNKNOWN | token_type::UNUSED
        )
    }

    /// The spelling convention of `tokenizer.ggml.model`; an error for models
    /// whose tokens are not fixed output bytes (WordPiece `bert`, `t5`'s
    /// Unigram with its own normalizer, `rwkv` …).
    pub fn vocab_type(&self) -> Result<VocabType, GrammarError> {
        match self.model.as_str() {
            "gpt2" => Ok(VocabType::ByteLevel),
            "llama" => Ok(VocabType::ByteFallback),
            other => Err(GrammarError::Vocabulary {
                location: Location::Pointer("/tokenizer.ggml.model".into()),
                message: format!(
                    "tokenizer model `{other}` is not supported (supported: gpt2, llama)"
                ),
            }),
        }
    }

    /// The stop tokens: eos, eot, eom, and control tokens named in
    /// [`KNOWN_STOP_TOKENS`] (`<|im_end|>`, `<|eot_id|>` …), ascending.
    pub fn stop_token_ids(&self) -> Vec<u32> {
        let n = self.tokens.len();
        let mut ids: Vec<u32> = [self.eos_token_id, self.eot_token_id, self.eom_token_id]
            .into_iter()
            .flatten()
            .filter(|&id| (id as usize) < n)
            .collect();
        for (id, t) in self.tokens.iter().enumerate() {
            if self.token_type(id) == token_type::CONTROL && KNOWN_STOP_TOKENS.contains(&t.as_str())
            {
                ids.push(id as u32);
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The vocabulary: each token's exact bytes, special and stop tokens marked.
    pub fn to_vocabulary(&self) -> Result<Vocabulary, GrammarError> {
        let ty = self.vocab_type()?;
        let decoder = byte_level_decoder();
        let tokens = self.tokens.iter().enumerate().map(|(id, s)| {
            let kind = self.token_type(id);
            let special = self.is_special(id as u32);
            let bytes = if special || kind == token_type::USER_DEFINED {
                // Control and added tokens are stored as their plain text.
                s.as_bytes().to_vec()
            } else if ty == VocabType::ByteFallback && kind == token_type::BYTE {
                match parse_byte_token(s) {
                    Some(b) => vec![b],
                    None => s.as_bytes().to_vec(),
                }
            } else {
                token_bytes(s, ty, &decoder)
            };
            (bytes, special)
        });
        let vocab = Vocabulary::new(ty, tokens).with_stop_tokens(&self.stop_token_ids())?;
        match self.vocab_size {
            Some(v) if v as usize > vocab.tokenizer_size() => vocab.with_vocab_size(v as usize),
            _ => Ok(vocab),
        }
    }
}

const UINT8: u32 = 0;
const INT8: u32 = 1;
const UINT16: u32 = 2;
const INT16: u32 = 3;
const UINT32: u32 = 4;
const INT32: u32 = 5;
const FLOAT32: u32 = 6;
const BOOL: u32 = 7;
const STRING: u32 = 8;
const ARRAY: u32 = 9;
const UINT64: u32 = 10;
const INT64: u32 = 11;
const FLOAT64: u32 = 12;

fn type_name(ty: u32) -> String {
    let name = match ty {
        UINT8 => "uint8",
        INT8 => "int8",
        UINT16 => "uint16",
        INT16 => "int16",
        UINT32 => "uint32",
        INT32 => "int32",
        FLOAT32 => "float32",
        BOOL => "bool",
        STRING => "string",
        ARRAY => "array",
        UINT64 => "uint64",
        INT64 => "int64",
        FLOAT64 => "float64",
        other => return format!("{other} (unknown)"),
    };
    name.to_string()
}

/// Size of a fixed-size value type, `None` for strings, arrays and unknown types.
fn fixed_size(ty: u32) -> Option<u64> {
    Some(match ty {
        UINT8 | INT8 | BOOL => 1,
        UINT16 | INT16 => 2,
        UINT32 | INT32 | FLOAT32 => 4,
        UINT64 | INT64 | FLOAT64 => 8,
        _ => return None,
    })
}

/// A counting reader that knows how many bytes remain.
struct Reader<'a, R> {
    inner: R,
    pos: u64,
    len: u64,
    origin: &'a str,
}

impl<R: Read> Reader<'_, R> {
    fn error(&self, offset: u64, message: String) -> GrammarError {
        GrammarError::Vocabulary {
            location: Location::File(self.origin.to_string()),
            message: format!("GGUF byte {offset}: {message}"),
        }
    }

    fn check_remaining(&self, need: u64, what: &str) -> Result<(), GrammarError> {
        let left = self.len.saturating_sub(self.pos);
        if need > left {
            return Err(self.error(
                self.pos,
                format!("`{what}` needs {need} bytes but the file has {left} left (truncated or corrupt)"),
            ));
        }
        Ok(())
    }

    fn read_into(&mut self, buf: &mut [u8], what: &str) -> Result<(), GrammarError> {
        self.check_remaining(buf.len() as u64, what)?;
        self.inner.read_exact(buf).map_err(|e| {
            self.error(self.pos, format!("reading `{what}`: {e} (truncated file?)"))
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn bytes_fixed<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GrammarError> {
        let mut b = [0u8; N];
        self.read_into(&mut b, what)?;
        Ok(b)
    }

    fn u8(&mut self, what: &str) -> Result<u8, GrammarError> {
        Ok(self.bytes_fixed::<1>(what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32, GrammarError> {
        Ok(u32::from_le_bytes(self.bytes_fixed(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GrammarError> {
        Ok(u64::from_le_bytes(self.bytes_fixed(what)?))
    }

    fn string(&mut self, what: &str) -> Result<String, GrammarError> {
        let at = self.pos;
        let n = self.u64(what)?;
        if n > MAX_STRING_BYTES {
            return Err(self.error(
                at,
                format!(
                    "`{what}`: string length {n} exceeds the limit of {MAX_STRING_BYTES} bytes"
                ),
            ));
        }
        self.check_remaining(n, what)?;
        let mut buf = vec![0u8; n as usize];
        self.read_into(&mut buf, what)?;
        String::from_utf8(buf)
            .map_err(|e| self.error(at, format!("`{what}`: string is not UTF-8: {e}")))
    }

    fn expect_string(&mut self, ty: u32, key: &str) -> Result<String, GrammarError> {
        if ty != STRING {
            return Err(self.error(
                self.pos,
                format!("`{key}` has value type {}, expected string", type_name(ty)),
            ));
        }
        self.string(key)
    }

    /// An unsigned integer of any width (token ids, sizes).
    fn integer(&mut self, ty: u32, key: &str) -> Result<u64, GrammarError> {
        let at = self.pos;
        let v: i128 = match ty {
            UINT8 => self.u8(key)? as i128,
            INT8 => self.u8(key)? as i8 as i128,
            UINT16 => u16::from_le_bytes(self.bytes_fixed(key)?) as i128,
            INT16 => i16::from_le_bytes(self.bytes_fixed(key)?) as i128,
            UINT32 => self.u32(key)? as i128,
            INT32 => self.u32(key)? as i32 as i128,
            UINT64 => self.u64(key)? as i128,
            INT64 => self.u64(key)? as i64 as i128,
            _ => {
                return Err(self.error(
                    at,
                    format!(
                        "`{key}` has value type {}, expected an integer",
                        type_name(ty)
                    ),
                ));
            }
        };
        u64::try_from(v).map_err(|_| self.error(at, format!("`{key}` is negative ({v})")))
    }

    fn expect_id(&mut self, ty: u32, key: &str) -> Result<u32, GrammarError> {
        let at = self.pos;
        let v = self.integer(ty, key)?;
        if v >= MAX_TOKENS {
            return Err(self.error(at, format!("`{key}` = {v} is not a plausible token id")));
        }
        Ok(v as u32)
    }

    /// Element type and count of an array, the count bounded by `max`.
    fn array_head(&mut self, key: &str, max: u64) -> Result<(u32, u64), GrammarError> {
        let elem = self.u32(key)?;
        let at = self.pos;
        let count = self.u64(key)?;
        if count > max {
            return Err(self.error(
                at,
                format!("`{key}`: {count} elements exceed the limit of {max}"),
            ));
        }
        Ok((elem, count))
    }

    fn string_array(&mut self, ty: u32, key: &str) -> Result<Vec<String>, GrammarError> {
        if ty != ARRAY {
            return Err(self.error(
                self.pos,
                format!(
                    "`{key}` has value type {}, expected array of string",
                    type_name(ty)
                ),
            ));
        }
        let (elem, count) = self.array_head(key, MAX_TOKENS)?;
        if elem != STRING {
            return Err(self.error(
                self.pos,
                format!(
                    "`{key}` is an array of {}, expected array of string",
                    type_name(elem)
                ),
            ));
        }
        // Each string takes at least its 8-byte length.
        self.check_remaining(count.saturating_mul(8), key)?;
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..count {
            out.push(self.string(&format!("{key}[{i}]"))?);
        }
        Ok(out)
    }

    /// Skips a value this reader does not need, without allocating for it.
    fn skip_value(&mut self, ty: u32, key: &str, depth: u32) -> Result<(), GrammarError> {
        let at = self.pos;
        if let Some(n) = fixed_size(ty) {
            return self.skip(n, key);
        }
        match ty {
            STRING => {
                let n = self.u64(key)?;
                self.skip(n, key)
            }
            ARRAY => {
                if depth >= 4 {
                    return Err(self.error(at, format!("`{key}`: arrays nested deeper than 4")));
                }
                let (elem, count) = self.array_head(key, u64::MAX)?;
                match fixed_size(elem) {
                    Some(n) => self.skip(count.saturating_mul(n), key),
                    None => {
                        // Every element takes at least 8 bytes (a length).
                        self.check_remaining(count.saturating_mul(8), key)?;
                        for _ in 0..count {
                            self.skip_value(elem, key, depth + 1)?;
                        }
                        Ok(())
                    }
                }
            }
            other => Err(self.error(at, format!("`{key}` has unknown value type {other}"))),
        }
    }

    fn skip(&mut self, n: u64, what: &str) -> Result<(), GrammarError> {
        self.check_remaining(n, what)?;
        let copied = std::io::copy(&mut (&mut self.inner).take(n), &mut std::io::sink())
            .map_err(|e| self.error(self.pos, format!("reading `{what}`: {e}")))?;
        if copied != n {
            return Err(self.error(self.pos, format!("`{what}`: file ends early")));
        }
        self.pos += n;
        Ok(())
    }
}

/// Writing small GGUF files, for tests and fixtures.
pub mod write {
    /// A metadata value.
    pub enum Value<'a> {
        U32(u32),
        I32(i32),
        Bool(bool),
        F32(f32),
        Str(&'a str),
        Strs(Vec<&'a str>),
        I32s(Vec<i32>),
    }

    /// A GGUF v3 file with these metadata entries and no tensors.
    pub fn gguf(entries: &[(&str, Value<'_>)]) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(0u64.to_le_bytes());
        out.extend((entries.len() as u64).to_le_bytes());
        let string = |out: &mut Vec<u8>, s: &str| {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        };
        for (key, value) in entries {
            string(&mut out, key);
            match value {
                Value::U32(v) => {
                    out.extend(super::UINT32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Value::I32(v) => {
                    out.extend(super::INT32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Value::Bool(v) => {
                    out.extend(super::BOOL.to_le_bytes());
                    out.push(*v as u8);
                }
                Value::F32(v) => {
                    out.extend(super::FLOAT32.to_le_bytes());
                    out.extend(v.to_le_bytes());
                }
                Value::Str(s) => {
                    out.extend(super::STRING.to_le_bytes());
                    string(&mut out, s);
                }
                Value::Strs(list) => {
                    out.extend(super::ARRAY.to_le_bytes());
                    out.extend(super::STRING.to_le_bytes());
                    out.extend((list.len() as u64).to_le_bytes());
                    for s in list {
                        string(&mut out, s);
                    }
                }
                Value::I32s(list) => {
                    out.extend(super::ARRAY.to_le_bytes());
                    out.extend(super::INT32.to_le_bytes());
                    out.extend((list.len() as u64).to_le_bytes());
                    for v in list {
                        out.extend(v.to_le_bytes());
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::write::{Value, gguf};
    use super::*;

    fn parse(bytes: &[u8]) -> Result<GgufTokenizer, GrammarError> {
        GgufTokenizer::from_reader(bytes, bytes.len() as u64, "test.gguf")
    }

    /// A byte-level BPE vocabulary in the shape of SmolLM2's.
    fn bpe_file() -> Vec<u8> {
        gguf(&[
            ("general.architecture", Value::Str("llama")),
            ("general.name", Value::Str("tiny")),
            ("llama.block_count", Value::U32(2)),
            ("general.languages", Value::Strs(vec!["en", "fr"])),
            ("llama.rope.freq_base", Value::F32(1e4)),
            ("llama.vocab_size", Value::U32(8)),
            ("tokenizer.ggml.model", Value::Str("gpt2")),
            ("tokenizer.ggml.pre", Value::Str("smollm")),
            (
                "tokenizer.ggml.tokens",
                Value::Strs(vec![
                    "<|endoftext|>",
                    "<|im_end|>",
                    "Ġthe",
                    "Ċ",
                    "é",
                    "😀",
                    "<tool>",
                ]),
            ),
            (
                "tokenizer.ggml.token_type",
                Value::I32s(vec![3, 3, 1, 1, 1, 1, 4]),
            ),
            ("tokenizer.ggml.merges", Value::Strs(vec!["Ġ t", "Ġt he"])),
            ("tokenizer.ggml.eos_token_id", Value::U32(0)),
            ("tokenizer.ggml.add_bos_token", Value::Bool(false)),
        ])
    }

    #[test]
    fn reads_a_byte_level_vocabulary() {
        let t = parse(&bpe_file()).unwrap();
        assert_eq!(t.model, "gpt2");
        assert_eq!(t.pre.as_deref(), Some("smollm"));
        assert_eq!(t.architecture.as_deref(), Some("llama"));
        assert_eq!(t.merges, ["Ġ t", "Ġt he"]);
        assert_eq!(t.add_bos_token, Some(false));
        assert_eq!(t.vocab_size, Some(8));
        let v = t.to_vocabulary().unwrap();
        assert_eq!(v.vocab_type(), VocabType::ByteLevel);
        assert_eq!(v.tokenizer_size(), 7);
        assert_eq!(v.vocab_size(), 8);
        assert!(v.is_padding(7));
        assert_eq!(v.grammar_bytes(2), Some(&b" the"[..]));
        assert_eq!(v.grammar_bytes(3), Some(&b"\n"[..]));
        // "é" is GPT-2's spelling of byte 0xE9; "😀" is outside its table
        // and stands for its own UTF-8 bytes (as the `tokenizers` decoder does).
        assert_eq!(v.grammar_bytes(4), Some(&[0xE9][..]));
        assert_eq!(v.grammar_bytes(5), Some("😀".as_bytes()));
        // A user-defined (added) token is plain text, matched by grammars.
        assert_eq!(v.grammar_bytes(6), Some(&b"<tool>"[..]));
        // eos and the ChatML end of turn are stop tokens; both are special.
        assert_eq!(v.stop_tokens(), [0, 1]);
        assert!(v.grammar_bytes(0).is_none() && v.is_special(1));
        assert_eq!(t.token_to_id("<|im_end|>"), Some(1));
    }

    #[test]
    fn reads_a_sentencepiece_vocabulary() {
        let bytes = gguf(&[
            ("tokenizer.ggml.model", Value::Str("llama")),
            (
                "tokenizer.ggml.tokens",
                Value::Strs(vec!["<unk>", "<s>", "</s>", "<0x0A>", "▁the", "<0x41>x"]),
            ),
            (
                "tokenizer.ggml.token_type",
                Value::I32s(vec![2, 3, 3, 6, 1, 1]),
            ),
            ("tokenizer.ggml.bos_token_id", Value::U32(1)),
            ("tokenizer.ggml.eos_token_id", Value::I32(2)),
        ]);
        let t = parse(&bytes).unwrap();
        assert_eq!(t.bos_token_id, Some(1));
        let v = t.to_vocabulary().unwrap();
        assert_eq!(v.vocab_type(), VocabType::ByteFallback);
        assert_eq!(v.grammar_bytes(3), Some(&b"\n"[..]));
        assert_eq!(v.grammar_bytes(4), Some(&b" the"[..]));
        // Only BYTE tokens are byte tokens.
        assert_eq!(v.grammar_bytes(5), Some(&b"<0x41>x"[..]));
        assert!(v.is_special(0) && v.grammar_bytes(0).is_none());
        assert_eq!(v.stop_tokens(), [2]);
    }

    fn message(e: GrammarError) -> String {
        match e {
            GrammarError::Vocabulary { message, .. } => message,
            other => panic!("expected a vocabulary error, got {other:?}"),
        }
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = bpe_file();
        for cut in 0..bytes.len() {
            let e = parse(&bytes[..cut]).expect_err("a truncated file must not parse");
            let m = message(e);
            assert!(m.starts_with("GGUF byte "), "{m}");
        }
    }

    #[test]
    fn huge_lengths_are_refused_before_allocating() {
        // A token list claiming 2^60 strings, and one claiming 1000 in a tiny file.
        let mut bytes = gguf(&[("tokenizer.ggml.tokens", Value::Strs(vec!["a"]))]);
        let count_at = bytes.len() - 8 - 1 - 8; // the count before the one string
        bytes[count_at..count_at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
        let m = message(parse(&bytes).unwrap_err());
        assert!(m.contains("exceed the limit"), "{m}");
        bytes[count_at..count_at + 8].copy_from_slice(&1000u64.to_le_bytes());
        let m = message(parse(&bytes).unwrap_err());
        assert!(
            m.contains("tokenizer.ggml.tokens") && m.contains("left"),
            "{m}"
        );
        // A string claiming 2^40 bytes.
        let mut bytes = gguf(&[("tokenizer.ggml.model", Value::Str("gpt2"))]);
        let len_at = bytes.len() - 8 - 4;
        bytes[len_at..len_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let m = message(parse(&bytes).unwrap_err());
        assert!(
            m.contains("tokenizer.ggml.model") && m.contains("limit"),
            "{m}"
        );
        // A metadata count of 2^40.
        let mut bytes = bpe_file();
        bytes[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(message(parse(&bytes).unwrap_err()).contains("metadata entries"));
    }

    #[test]
    fn malformed_files_name_what_is_wrong() {
        let m = message(parse(b"GGML\x03\0\0\0").unwrap_err());
        assert!(m.contains("not a GGUF file"), "{m}");
        let mut v1 = bpe_file();
        v1[4..8].copy_from_slice(&1u32.to_le_bytes());
        assert!(message(parse(&v1).unwrap_err()).contains("version 1"));
        let m = message(parse(&gguf(&[("general.name", Value::Str("x"))])).unwrap_err());
        assert!(m.contains("tokenizer.ggml.model"), "{m}");
        let no_tokens = gguf(&[("tokenizer.ggml.model", Value::Str("gpt2"))]);
        assert!(message(parse(&no_tokens).unwrap_err()).contains("tokenizer.ggml.tokens"));
        let wrong_type = gguf(&[("tokenizer.ggml.model", Value::U32(2))]);
        let m = message(parse(&wrong_type).unwrap_err());
        assert!(
            m.contains("`tokenizer.ggml.model` has value type uint32, expected string"),
            "{m}"
        );
        let mismatch = gguf(&[
            ("tokenizer.ggml.model", Value::Str("gpt2")),
            ("tokenizer.ggml.tokens", Value::Strs(vec!["a", "b"])),
            ("tokenizer.ggml.token_type", Value::I32s(vec![1])),
        ]);
        assert!(message(parse(&mismatch).unwrap_err()).contains("1 entries for 2 tokens"));
        let negative = gguf(&[("tokenizer.ggml.eos_token_id", Value::I32(-1))]);
        assert!(message(parse(&negative).unwrap_err()).contains("negative"));
        let bert = gguf(&[
            ("tokenizer.ggml.model", Value::Str("bert")),
            ("tokenizer.ggml.tokens", Value::Strs(vec!["[CLS]"])),
        ]);
        let e = parse(&bert).unwrap().to_vocabulary().unwrap_err();
        assert!(
            e.to_string()
                .contains("tokenizer model `bert` is not supported"),
            "{e}"
        );
        // A model vocab size of 2^32 would make 128 GiB of per-id tables.
        let huge = gguf(&[
            ("general.architecture", Value::Str("llama")),
            ("tokenizer.ggml.model", Value::Str("gpt2")),
            ("tokenizer.ggml.tokens", Value::Strs(vec!["a", "b"])),
            ("llama.vocab_size", Value::U32(u32::MAX)),
        ]);
        let e = parse(&huge).unwrap().to_vocabulary().unwrap_err();
        assert!(e.to_string().contains("exceeds the limit"), "{e}");
        let mut bad_utf8 = gguf(&[("tokenizer.ggml.model", Value::Str("gp"))]);
        let n = bad_utf8.len();
        bad_utf8[n - 1] = 0xFF;
        assert!(message(parse(&bad_utf8).unwrap_err()).contains("not UTF-8"));
    }

    /// The SmolLM2 file `scripts/fetch-model.sh` fetches, when present.
    pub(crate) fn smollm2_path() -> Option<std::path::PathBuf> {
        let dir = std::env::var_os("TOKENSIEVE_MODELS")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| std::path::PathBuf::from(h).join(".cache/tokensieve/models"))
            })?;
        let p = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
        p.exists().then_some(p)
    }

    #[test]
    fn reads_the_real_smollm2_file() {
        let Some(path) = smollm2_path() else {
            crate::skip!("no SmolLM2 GGUF (run scripts/fetch-model.sh)");
            return;
        };
        let t = GgufTokenizer::from_file(&path).unwrap();
        assert_eq!(
            (t.model.as_str(), t.pre.as_deref()),
            ("gpt2", Some("smollm"))
        );
        assert_eq!(t.tokens.len(), 49152);
        assert_eq!(t.merges.len(), 48900);
        assert!(t.chat_template.as_deref().unwrap().contains("<|im_start|>"));
        let v = t.to_vocabulary().unwrap();
        assert_eq!(v.vocab_size(), 49152);
        // <|endoftext|> 0 and <|im_start|> 1 special, <|im_end|> 2 is eos.
        assert_eq!(v.stop_tokens(), [0, 2]);
        assert_eq!(v.special_count(), 17);
        assert_eq!(t.token_to_id("<|im_start|>"), Some(1));
        let id = |s: &str| t.token_to_id(s).unwrap();
        assert_eq!(v.grammar_bytes(id("Ġ{")), Some(&b" {"[..]));
        assert_eq!(v.grammar_bytes(id("Ċ")), Some(&b"\n"[..]));
        // Printable ASCII, tab and newline are tokens of their own (SmolLM2
        // has no single-byte tokens for bytes that are rare in UTF-8 text).
        let mut bytes = [false; 256];
        for (_, b) in v.grammar_tokens() {
            if let [b] = b {
                bytes[*b as usize] = true;
            }
        }
        assert!(
            bytes[0x20..0x7F].iter().all(|b| *b) && bytes[b'\n' as usize] && bytes[b'\t' as usize]
        );
    }
}
