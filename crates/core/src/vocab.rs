//! The vocabulary: token id -> the exact bytes that token appends to the output.
//!
//! This is all a grammar backend knows of a tokenizer (the llguidance
//! `toktrie` idea): Hugging Face quirks (ByteLevel, `<0xNN>` byte fallback,
//! `▁` metaspace) are resolved once, by the loader in [`crate::hf`].
//!
//! Ids `0..tokenizer_size` are the tokenizer's; ids `tokenizer_size..vocab_size`
//! are the model's padding rows, which no grammar ever allows. Special tokens
//! (`<|begin_of_text|>` …) are never matched by a grammar; stop tokens are the
//! special tokens a matcher allows exactly when its grammar may end.

use crate::error::{GrammarError, Location};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// The largest model vocabulary size [`Vocabulary::with_vocab_size`] takes
/// (the largest real vocabularies are a few hundred thousand tokens).
pub const MAX_VOCAB_SIZE: usize = 1 << 24;

/// How a tokenizer spells bytes in its vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VocabType {
    /// GPT-2 style byte-to-unicode mapping (GPT-2, Llama 3, Qwen).
    ByteLevel,
    /// SentencePiece-style `▁` for space with `<0xNN>` byte tokens (Llama 2, Mistral, Phi-3).
    ByteFallback,
    /// `▁` for space without byte tokens.
    Metaspace,
    /// Token strings are the bytes themselves (tiktoken-style / test fixtures).
    Raw,
}

impl VocabType {
    pub fn as_str(self) -> &'static str {
        match self {
            VocabType::ByteLevel => "byte_level",
            VocabType::ByteFallback => "byte_fallback",
            VocabType::Metaspace => "metaspace",
            VocabType::Raw => "raw",
        }
    }
}

/// Token id -> bytes, plus which ids are special, stop or padding.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// Concatenated token bytes; token `i` is `bytes[offsets[i]..offsets[i+1]]`.
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    special: Vec<bool>,
    stop: Vec<bool>,
    stop_ids: Vec<u32>,
    vocab_size: usize,
    vocab_type: VocabType,
}

impl Vocabulary {
    /// Builds a vocabulary from `(bytes, is_special)` per token id, in id order.
    /// Special tokens keep their text in `bytes` (for display) but are never
    /// matched by a grammar. No stop tokens; see [`Vocabulary::with_stop_tokens`].
    pub fn new(vocab_type: VocabType, tokens: impl IntoIterator<Item = (Vec<u8>, bool)>) -> Self {
        let mut bytes = Vec::new();
        let mut offsets = vec![0u32];
        let mut special = Vec::new();
        for (b, s) in tokens {
            bytes.extend_from_slice(&b);
            offsets.push(u32::try_from(bytes.len()).expect("vocabulary bytes exceed 4 GiB"));
            special.push(s);
        }
        let n = special.len();
        Vocabulary {
            bytes,
            offsets,
            special,
            stop: vec![false; n],
            stop_ids: Vec::new(),
            vocab_size: n,
            vocab_type,
        }
    }

    /// A vocabulary of plain byte strings (all normal tokens, type `Raw`).
    pub fn from_byte_tokens<B: AsRef<[u8]>>(tokens: impl IntoIterator<Item = B>) -> Self {
        Self::new(
            VocabType::Raw,
            tokens.into_iter().map(|t| (t.as_ref().to_vec(), false)),
        )
    }

    /// Parses a tiktoken vocabulary (`.tiktoken` files: one `BASE64 RANK`
    /// line per token; ranks are the token ids) plus its special tokens
    /// (`(text, id)`, e.g. `("<|endoftext|>", 100257)`), which become special
    /// tokens. Ids nobody names are kept as empty, never-matched tokens.
    /// `origin` names the file in errors.
    pub fn from_tiktoken(
        text: &str,
        specials: &[(&str, u32)],
        origin: &str,
    ) -> Result<Self, GrammarError> {
        let err = |line: usize, message: String| GrammarError::Vocabulary {
            location: Location::LineColumn { line, column: 1 },
            message: format!("{origin}: {message}"),
        };
        // Ids are ranks, dense in real files: one far past the number of
        // tokens named would make a slot for every id below it (a one-line
        // file could ask for 16 million), so it is refused.
        let named = text.lines().filter(|l| !l.trim().is_empty()).count() + specials.len();
        let most = (2 * named + 4096).min(1 << 24);
        let mut tokens: Vec<Option<(Vec<u8>, bool)>> = Vec::new();
        let mut put = |id: u32, entry: (Vec<u8>, bool), line: usize| -> Result<(), GrammarError> {
            let i = id as usize;
            if i >= most {
                return Err(err(
                    line,
                    format!("token id {id} is implausibly large for {named} tokens"),
                ));
            }
            if tokens.len() <= i {
                tokens.resize(i + 1, None);
            }
            if tokens[i].is_some() {
                return Err(err(line, format!("token id {id} appears twice")));
            }
            tokens[i] = Some(entry);
            Ok(())
        };
        for (n, line) in text.lines().enumerate() {
            let line_no = n + 1;
            if line.trim().is_empty() {
                continue;
            }
            let (b64, rank) = line
                .split_once(' ')
                .ok_or_else(|| err(line_no, "expected `BASE64 RANK`".into()))?;
            let bytes = decode_base64(b64)
                .ok_or_else(|| err(line_no, format!("invalid base64 {b64:?}")))?;
            let id: u32 = rank
                .trim()
                .parse()
                .map_err(|_| err(line_no, format!("invalid rank {rank:?}")))?;
            put(id, (bytes, false), line_no)?;
        }
        for &(text, id) in specials {
            put(id, (text.as_bytes().to_vec(), true), 0)?;
        }
        if tokens.is_empty() {
            return Err(err(1, "no tokens".into()));
        }
        Ok(Self::new(
            VocabType::Raw,
            tokens.into_iter().map(|t| t.unwrap_or((Vec::new(), true))),
        ))
    }

    /// Replaces the stop tokens. Each id must be a token of the tokenizer.
    /// Stop tokens are taken out of grammar matching (they are matched only
    /// as "end of output").
    pub fn with_stop_tokens(mut self, ids: &[u32]) -> Result<Self, GrammarError> {
        let n = self.tokenizer_size();
        self.stop = vec![false; n];
        self.stop_ids.clear();
        for &id in ids {
            if id as usize >= n {
                return Err(GrammarError::Vocabulary {
                    location: Location::None,
                    message: format!("stop token id {id} is outside the tokenizer's {n} tokens"),
                });
            }
            if !self.stop[id as usize] {
                self.stop[id as usize] = true;
                self.stop_ids.push(id);
            }
        }
        self.stop_ids.sort_unstable();
        Ok(self)
    }

    /// Sets the model's vocabulary size (the logits width), which may exceed
    /// the tokenizer's: the extra ids are padding and always masked.
    pub fn with_vocab_size(mut self, vocab_size: usize) -> Result<Self, GrammarError> {
        // A size read from a file (a GGUF's `{arch}.vocab_size`) is
        // untrusted: rows and per-id tables are made of it.
        if vocab_size > MAX_VOCAB_SIZE {
            return Err(GrammarError::Vocabulary {
                location: Location::None,
                message: format!(
                    "model vocab_size {vocab_size} exceeds the limit of {MAX_VOCAB_SIZE} tokens"
                ),
            });
        }
        if vocab_size < self.tokenizer_size() {
            return Err(GrammarError::Vocabulary {
                location: Location::None,
                message: format!(
                    "model vocab_size {vocab_size} is smaller than the tokenizer's {} tokens",
                    self.tokenizer_size()
                ),
            });
        }
        self.vocab_size = vocab_size;
        Ok(self)
    }

    /// The model's vocabulary size: the width of logits and bitmask rows.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// How many ids the tokenizer defines (`<= vocab_size`).
    pub fn tokenizer_size(&self) -> usize {
        self.special.len()
    }

    /// 32-bit words per bitmask row.
    pub fn mask_words(&self) -> usize {
        self.vocab_size.div_ceil(32)
    }

    pub fn vocab_type(&self) -> VocabType {
        self.vocab_type
    }

    /// The bytes of token `id` (a special token's text; empty for padding).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        if i >= self.tokenizer_size() {
            return &[];
        }
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The bytes a grammar may match for `id`: `None` for special, stop and
    /// padding tokens and for empty tokens.
    pub fn grammar_bytes(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        if i >= self.tokenizer_size() || self.special[i] || self.stop[i] {
            return None;
        }
        let b = self.token_bytes(id);
        (!b.is_empty()).then_some(b)
    }

    /// All tokens a grammar may match, with their bytes.
    pub fn grammar_tokens(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        (0..self.tokenizer_size() as u32).filter_map(|id| self.grammar_bytes(id).map(|b| (id, b)))
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    pub fn is_stop(&self, id: u32) -> bool {
        self.stop.get(id as usize).copied().unwrap_or(false)
    }

    /// Padding ids: beyond the tokenizer, inside the model's vocab_size.
    pub fn is_padding(&self, id: u32) -> bool {
        let i = id as usize;
        i >= self.tokenizer_size() && i < self.vocab_size
    }

    /// Stop token ids, ascending.
    pub fn stop_tokens(&self) -> &[u32] {
        &self.stop_ids
    }

    pub fn special_count(&self) -> usize {
        self.special.iter().filter(|s| **s).count()
    }

    /// A hash of everything that affects grammar matching, so per-vocabulary
    /// precomputation (token indices) can be cached and checked.
    pub fn fingerprint(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.bytes.hash(&mut h);
        self.offsets.hash(&mut h);
        self.special.hash(&mut h);
        self.stop_ids.hash(&mut h);
        self.vocab_size.hash(&mut h);
        h.finish()
    }

    /// Greedy longest-match tokenization over grammar tokens. Not what a real
    /// tokenizer produces (use [`crate::hf::HfTokenizer::encode`] for that),
    /// but a valid tokenization: for tests and fixtures. At each position it
    /// takes the longest token after which the rest can still be spelled
    /// (lowest id among equal bytes), so it finds a tokenization whenever
    /// one exists; `None` if none does. Linear in `text.len()` times the
    /// longest token.
    pub fn encode_greedy(&self, text: &[u8]) -> Option<Vec<u32>> {
        let mut by_bytes: HashMap<&[u8], u32> = HashMap::new();
        let mut max_len = 0;
        for (id, b) in self.grammar_tokens() {
            by_bytes.entry(b).or_insert(id);
            max_len = max_len.max(b.len());
        }
        // best[pos]: the token to take at `pos` (longest with a spellable
        // rest), filled from the end; best[len] is the empty rest.
        let n = text.len();
        let mut best: Vec<Option<(u32, usize)>> = vec![None; n + 1];
        let mut spellable = vec![false; n + 1];
        spellable[n] = true;
        for pos in (0..n).rev() {
            for len in (1..=max_len.min(n - pos)).rev() {
                if !spellable[pos + len] {
                    continue;
                }
                if let Some(&id) = by_bytes.get(&text[pos..pos + len]) {
                    best[pos] = Some((id, len));
                    spellable[pos] = true;
                    break;
                }
            }
        }
        if !spellable[0] {
            return None;
        }
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < n {
            let (id, len) = best[pos]?;
            out.push(id);
            pos += len;
        }
        Some(out)
    }

    /// Concatenated bytes of `ids` (special tokens as their text).
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        ids.iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect()
    }
}

/// Standard base64 (with optional `=` padding), as tiktoken files use.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// Stop tokens recognised by name: each one that is an added token of the
/// tokenizer (special or not) is a stop token. The model's own eos, when a
/// `tokenizer_config.json` / `generation_config.json` lies beside the file,
/// is added by `HfTokenizer::from_file` (and the GGUF reader adds
/// the file's `eos_token_id`).
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

/// GPT-2's printable-unicode -> byte table, indexed by code point (all of
/// its characters are below U+0144).
pub(crate) type ByteDecoder = [Option<u8>; 0x144];

/// The exact bytes of a base-vocabulary token string.
pub(crate) fn token_bytes(s: &str, ty: VocabType, byte_decoder: &ByteDecoder) -> Vec<u8> {
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
pub(crate) fn parse_byte_token(s: &str) -> Option<u8> {
    let hex = s.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's `bytes_to_unicode`, inverted: printable bytes stand for
/// themselves, the other 68 bytes are U+0100.. in byte order.
pub(crate) fn byte_level_decoder() -> ByteDecoder {
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

/// Small built-in vocabularies, so tests run with no files at all.
pub mod fixtures {
    use super::*;

    /// A 300-odd token vocabulary: every single byte, common JSON pieces, and
    /// `<eos>` (special, stop) as the last id. Byte tokens make every string
    /// reachable; the multi-byte tokens exercise tokens that cross grammar
    /// boundaries (`", "`, `":`, `true`).
    pub fn json_tiny() -> Vocabulary {
        const MULTI: &[&str] = &[
            "{\"", "\":", "\": ", "\", \"", "\"}", "\",", ", ", ": ", "true", "false", "null",
            "name", "age", "id", "type", "\"", "  ", "\n", "}", "]}", "[\"", "\"]", "00", "12",
            "123", "abc", "the", " the", "é", "😀", "ab", "bc", "cd",
        ];
        let mut tokens: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
        tokens.extend(MULTI.iter().map(|s| (s.as_bytes().to_vec(), false)));
        tokens.push((b"<eos>".to_vec(), true));
        let eos = tokens.len() as u32 - 1;
        Vocabulary::new(VocabType::Raw, tokens)
            .with_stop_tokens(&[eos])
            .expect("eos is in range")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_and_specials_are_not_grammar_tokens() {
        let v = fixtures::json_tiny().with_vocab_size(400).unwrap();
        let eos = v.stop_tokens()[0];
        assert!(v.grammar_bytes(eos).is_none());
        assert!(v.is_padding(399));
        assert!(v.grammar_bytes(399).is_none());
        assert_eq!(v.mask_words(), 13);
        assert_eq!(v.grammar_bytes(b'a' as u32), Some(&b"a"[..]));
    }

    #[test]
    fn greedy_encoding_round_trips() {
        let v = fixtures::json_tiny();
        let text = "{\"name\": \"é😀\", \"age\": 12}";
        let ids = v.encode_greedy(text.as_bytes()).unwrap();
        assert_eq!(v.decode(&ids), text.as_bytes());
        assert!(ids.len() < text.len());
    }

    #[test]
    fn greedy_encoding_backtracks_out_of_dead_ends() {
        // Longest match first would take "abc" and then find no "d".
        let v = Vocabulary::from_byte_tokens(["ab", "abc", "cd", "x"]);
        assert_eq!(v.encode_greedy(b"abcd"), Some(vec![0, 2]));
        assert_eq!(v.encode_greedy(b"abcx"), Some(vec![1, 3]));
        assert_eq!(v.encode_greedy(b"abd"), None);
        assert_eq!(v.encode_greedy(b""), Some(vec![]));
        // Special, stop and empty tokens are never used.
        let v = Vocabulary::new(
            VocabType::Raw,
            [
                (b"a".to_vec(), false),
                (b"ab".to_vec(), true),
                (b"abc".to_vec(), false),
                (Vec::new(), false),
                (b"b".to_vec(), false),
            ],
        )
        .with_stop_tokens(&[2])
        .unwrap();
        assert_eq!(v.encode_greedy(b"ab"), Some(vec![0, 4]));
        assert_eq!(v.encode_greedy(b"abc"), None);
    }

    #[test]
    fn tiktoken_files_parse_with_specials() {
        // "IQ==" = "!", "aGVsbG8=" = "hello", "IHdvcmxk" = " world"
        let text = "IQ== 0\naGVsbG8= 1\nIHdvcmxk 3\n";
        let v = Vocabulary::from_tiktoken(text, &[("<|endoftext|>", 4)], "t.tiktoken").unwrap();
        assert_eq!(v.tokenizer_size(), 5);
        assert_eq!(v.grammar_bytes(1), Some(&b"hello"[..]));
        assert_eq!(v.grammar_bytes(3), Some(&b" world"[..]));
        assert_eq!(v.grammar_bytes(2), None, "gap");
        assert!(v.is_special(4));
        let v = v.with_stop_tokens(&[4]).unwrap();
        assert_eq!(v.stop_tokens(), &[4]);
        // An id far past the tokens named would be millions of empty slots.
        let e = Vocabulary::from_tiktoken("IQ== 16777215", &[], "t.tiktoken").unwrap_err();
        assert!(
            e.to_string().contains("implausibly large for 1 tokens"),
            "{e}"
        );
        assert!(Vocabulary::from_tiktoken("IQ== 4096", &[], "t.tiktoken").is_ok());
        for bad in ["IQ==", "!!! 0", "IQ== x", "IQ== 0\nIQ== 0"] {
            let e = Vocabulary::from_tiktoken(bad, &[], "t.tiktoken").unwrap_err();
            assert!(e.to_string().contains("t.tiktoken"), "{e}");
        }
    }

    #[test]
    fn base64_round_trips() {
        assert_eq!(decode_base64("").unwrap(), b"");
        assert_eq!(decode_base64("Zg==").unwrap(), b"f");
        assert_eq!(decode_base64("Zm8=").unwrap(), b"fo");
        assert_eq!(decode_base64("Zm9v").unwrap(), b"foo");
        assert_eq!(decode_base64("Zm9vYg").unwrap(), b"foob");
        assert!(decode_base64("Z").is_none());
    }

    #[test]
    fn bad_sizes_are_errors() {
        let v = fixtures::json_tiny();
        assert!(v.clone().with_vocab_size(3).is_err());
        assert!(v.with_stop_tokens(&[100_000]).is_err());
    }

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
