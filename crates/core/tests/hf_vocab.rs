//! The Hugging Face vocabulary loader (`tokensieve_core::hf`): token id ->
//! exact bytes, special / stop / padding tokens, and `encode` round trips.
//!
//! Two sets of inputs: the small hand-made `tokenizer.json` files in
//! `tests/fixtures/` (always run), and the six real tokenizers in
//! `../shared/data/tokenizers` (skipped, with a note, when that folder is
//! absent). The real ones are checked against `reference_encodings.json`
//! (ids from the Python `tokenizers` library) and against the `tokenizers`
//! crate itself (the unmodified tokenizer) as an oracle.
#![cfg(feature = "hf")]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;
use tokensieve_core::error::{GrammarError, Location};
use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::{VocabType, Vocabulary};

// ---------------------------------------------------------------- helpers

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn load_fixture(name: &str) -> HfTokenizer {
    HfTokenizer::from_file(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn shared_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/tokenizers");
    dir.is_dir().then_some(dir)
}

const REAL: &[&str] = &[
    "llama3",
    "llama3.0",
    "qwen2.5",
    "mistral7b",
    "gpt2",
    "phi3.5-mini",
];

struct Real {
    name: &'static str,
    tok: HfTokenizer,
    /// The same file loaded by the `tokenizers` crate, untouched: the oracle.
    oracle: tokenizers::Tokenizer,
}

/// The six real tokenizers, loaded once per test binary (with load times
/// printed); `None` (and a note) when the shared folder is absent.
fn real() -> Option<&'static [Real]> {
    static REAL_TOKENIZERS: OnceLock<Option<Vec<Real>>> = OnceLock::new();
    REAL_TOKENIZERS
        .get_or_init(|| {
            let Some(dir) = shared_dir() else {
                tokensieve_core::skip!("../shared/data/tokenizers is absent");
                return None;
            };
            let mut out = Vec::new();
            for &name in REAL {
                let path = dir.join(name).join("tokenizer.json");
                let t0 = Instant::now();
                let tok = HfTokenizer::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                let oracle = tokenizers::Tokenizer::from_file(&path).expect("oracle loads");
                eprintln!(
                    "loaded {name}: {} tokens, {:?}, in {ms:.0} ms",
                    tok.vocabulary().tokenizer_size(),
                    tok.vocabulary().vocab_type()
                );
                out.push(Real { name, tok, oracle });
            }
            Some(out)
        })
        .as_deref()
}

fn reference() -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(shared_dir()?.join("reference_encodings.json")).ok()?;
    Some(serde_json::from_str(&text).expect("reference_encodings.json is JSON"))
}

/// `encode(text)` spells `text` exactly, using grammar tokens only.
fn assert_round_trip(name: &str, tok: &HfTokenizer, text: &str) -> Vec<u32> {
    let ids = tok
        .encode(text)
        .unwrap_or_else(|e| panic!("{name}: encode({text:?}): {e}"));
    let v = tok.vocabulary();
    assert_eq!(
        String::from_utf8_lossy(&v.decode(&ids)),
        text,
        "{name}: ids {ids:?}"
    );
    assert_eq!(v.decode(&ids), text.as_bytes(), "{name}: {text:?}");
    for &id in &ids {
        assert!(
            v.grammar_bytes(id).is_some(),
            "{name}: encode({text:?}) uses non-grammar token {id}"
        );
    }
    ids
}

/// Texts every tokenizer must spell exactly.
const CORPUS: &[&str] = &[
    "hello world",
    "Hello, World! 123 + 4.5e-6 = x_y; a\tb",
    "The quick brown fox jumps over the lazy dog.",
    "é à ü ñ ß Ünïcode naïve café",
    "日本語テキスト、中文字符，한국어",
    "Ελληνικά и кириллица",
    "😀🙂👍🏽",
    "👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈",
    "{\"name\": \"Ünïcode ☃\", \"n\": [1, 2.5e-3]}",
    "{\"a\":\"\\u00e9\\n\\t\\\"q\\\"\\\\\",\"b\":null,\"c\":true,\"d\":false}",
    "{\n  \"nested\": {\"list\": [1, -2, 3.25, 1e10, -0.0, {\"deep\": [[]]}]},\n  \"x\": {}\n}",
    "[123456789, 0.000001, -1.5E+300, 42]",
    " leading space",
    "   three leading spaces",
    "\nleading newline",
    "\n\n\ttwo newlines and a tab",
    "\r\nCRLF line\r\nnext\r\n",
    "trailing spaces   ",
    "trailing newline\n",
    " ",
    "\n",
    "\r\n",
    "x",
    "7",
    "{",
    "é",
    "日",
    "🙂",
    "1234567890",
    "fn main() { println!(\"{}\", 1 + 2); }",
    "<|eot_id|> <|im_end|> </s> <s> <|endoftext|> <unk> <0x0A>",
    "▁ literal lower-one-eighth block",
    "a\u{0}b\u{7f}c\u{1b}[0m",
];

// ---------------------------------------------------------------- fixtures

#[test]
fn fixture_byte_level_bpe_maps_ids_to_bytes() {
    let tok = load_fixture("byte_level_bpe.json");
    let v = tok.vocabulary();
    assert_eq!(v.vocab_type(), VocabType::ByteLevel);
    assert!(!tok.prepends_space());
    // 256 bytes + 10 merges + <|endoftext|> 266, <tool> 267, <|eot|> 268.
    assert_eq!(v.tokenizer_size(), 269);
    assert_eq!(v.vocab_size(), 269);
    for b in 0..=255u32 {
        assert_eq!(v.grammar_bytes(b), Some(&[b as u8][..]), "byte {b}");
    }
    let id = |s: &str| {
        tok.token_to_id(s)
            .unwrap_or_else(|| panic!("no token {s:?}"))
    };
    assert_eq!(v.token_bytes(id("Ġthe")), b" the");
    assert_eq!(v.token_bytes(id("ĊĊ")), b"\n\n");
    assert_eq!(v.token_bytes(id("čĊ")), b"\r\n");
    assert_eq!(v.token_bytes(id("Ã©")), "é".as_bytes());
    assert_eq!(v.token_bytes(id("ĠĠĠĠ")), b"    ");
    // Added tokens: special ones are not grammar tokens, plain ones are.
    assert_eq!(id("<|endoftext|>"), 266);
    assert_eq!(id("<tool>"), 267);
    assert_eq!(id("<|eot|>"), 268);
    assert!(v.is_special(266) && v.is_special(268) && !v.is_special(267));
    assert_eq!(v.grammar_bytes(266), None);
    assert_eq!(v.grammar_bytes(268), None);
    assert_eq!(v.token_bytes(268), b"<|eot|>");
    assert_eq!(v.grammar_bytes(267), Some(&b"<tool>"[..]));
    // Stop tokens: known names among added tokens only (not `<|eot|>`).
    assert_eq!(v.stop_tokens(), &[266]);
    assert_eq!(v.grammar_tokens().count(), 267);
}

#[test]
fn fixture_byte_level_bpe_encodes_exactly() {
    let tok = load_fixture("byte_level_bpe.json");
    let id = |s: &str| tok.token_to_id(s).unwrap();
    for text in CORPUS {
        assert_round_trip("byte_level_bpe", &tok, text);
    }
    assert_eq!(tok.encode(" the").unwrap(), vec![id("Ġthe")]);
    assert_eq!(
        tok.encode("{\"é\":\n\n").unwrap(),
        vec![id("{\""), id("Ã©"), id("\":"), id("ĊĊ")]
    );
    assert_eq!(tok.encode("").unwrap(), Vec::<u32>::new());
    // Special-token names are spelled as text; plain added tokens are used.
    let ids = assert_round_trip("byte_level_bpe", &tok, "<|endoftext|><|eot|>");
    assert!(!ids.contains(&266) && !ids.contains(&268));
    assert_eq!(tok.encode("<tool>").unwrap(), vec![267]);
    // `<tool>` has rstrip in the file; `encode` keeps the spaces after it.
    let ids = assert_round_trip("byte_level_bpe", &tok, "<tool>  x");
    assert_eq!(ids[0], 267);
}

#[test]
fn fixture_stop_tokens_are_overridable() {
    let tok = load_fixture("byte_level_bpe.json")
        .with_stop_tokens(&[268, 10])
        .unwrap();
    let v = tok.vocabulary();
    assert_eq!(v.stop_tokens(), &[10, 268]);
    assert!(v.is_stop(268) && v.is_stop(10) && !v.is_stop(266));
    // A stop token is never a grammar token; the old stop stays special.
    assert_eq!(v.grammar_bytes(10), None);
    assert_eq!(v.grammar_bytes(266), None);
    let v = v.clone().with_stop_tokens(&[]).unwrap();
    assert!(v.stop_tokens().is_empty());
    assert_eq!(v.grammar_bytes(10), Some(&b"\n"[..]));
    let err = load_fixture("byte_level_bpe.json")
        .with_stop_tokens(&[269])
        .unwrap_err();
    assert!(matches!(err, GrammarError::Vocabulary { .. }), "{err}");
}

#[test]
fn fixture_padding_rows_are_masked() {
    let tok = load_fixture("byte_level_bpe.json")
        .with_vocab_size(320)
        .unwrap();
    let v = tok.vocabulary();
    assert_eq!(
        (v.tokenizer_size(), v.vocab_size(), v.mask_words()),
        (269, 320, 10)
    );
    for id in 269..320 {
        assert!(v.is_padding(id));
        assert_eq!(v.grammar_bytes(id), None);
        assert_eq!(v.token_bytes(id), b"");
    }
    assert!(!v.is_padding(268) && !v.is_padding(320));
    assert!(v.grammar_tokens().all(|(id, _)| id < 269));
    let err = load_fixture("byte_level_bpe.json")
        .with_vocab_size(100)
        .unwrap_err();
    assert!(matches!(err, GrammarError::Vocabulary { .. }), "{err}");
}

#[test]
fn fixture_byte_fallback_bpe_maps_ids_to_bytes() {
    let tok = load_fixture("byte_fallback_bpe.json");
    let v = tok.vocabulary();
    assert_eq!(v.vocab_type(), VocabType::ByteFallback);
    assert!(tok.prepends_space());
    for b in 0..=255u32 {
        let name = format!("<0x{b:02X}>");
        assert_eq!(tok.token_to_id(&name), Some(3 + b));
        assert_eq!(v.grammar_bytes(3 + b), Some(&[b as u8][..]), "{name}");
    }
    assert_eq!(v.token_bytes(13), b"\n");
    let id = |s: &str| tok.token_to_id(s).unwrap();
    assert_eq!(v.token_bytes(id("▁")), b" ");
    assert_eq!(v.token_bytes(id("▁the")), b" the");
    assert_eq!(v.token_bytes(id("▁▁")), b"  ");
    assert_eq!(v.token_bytes(id("é")), "é".as_bytes());
    assert_eq!(v.stop_tokens(), &[2]);
    for s in 0..2 {
        assert!(v.is_special(s));
        assert_eq!(v.grammar_bytes(s), None);
    }
    // `</s>` is a plain added token in the file (as in Phi-3), but named
    // like a stop token: a stop, never a grammar token.
    assert!(!v.is_special(2) && v.is_stop(2));
    assert_eq!(v.grammar_bytes(2), None);
}

#[test]
fn fixture_byte_fallback_bpe_encodes_continuations() {
    let tok = load_fixture("byte_fallback_bpe.json");
    let id = |s: &str| tok.token_to_id(s).unwrap();
    for text in CORPUS {
        assert_round_trip("byte_fallback_bpe", &tok, text);
    }
    // No `▁` is prepended: "the" and " the" differ, as mid-text.
    assert_eq!(tok.encode("the").unwrap(), vec![id("t"), id("he")]);
    assert_eq!(tok.encode(" the").unwrap(), vec![id("▁the")]);
    assert_eq!(tok.encode("\nthe").unwrap(), vec![13, id("t"), id("he")]);
    assert_eq!(
        tok.encode("{\"name\":").unwrap(),
        vec![id("{\""), id("name"), id("\":")]
    );
    // Characters outside the vocabulary fall back to their bytes.
    assert_eq!(
        tok.encode("日").unwrap(),
        vec![3 + 0xE6, 3 + 0x97, 3 + 0xA5]
    );
}

#[test]
fn fixture_metaspace_bpe() {
    let tok = load_fixture("metaspace_bpe.json");
    let v = tok.vocabulary();
    assert_eq!(v.vocab_type(), VocabType::Metaspace);
    assert!(tok.prepends_space());
    let id = |s: &str| tok.token_to_id(s).unwrap();
    assert_eq!(v.token_bytes(id("▁hell")), b" hell");
    assert_eq!(v.stop_tokens(), &[1]);
    // Id 18 has no string (a gap in the model vocabulary): never matched.
    assert_eq!(v.tokenizer_size(), 20);
    assert_eq!(tok.token_to_id("or"), Some(19));
    assert_eq!(v.token_bytes(18), b"");
    assert_eq!(v.grammar_bytes(18), None);
    assert!(!v.is_padding(18) && !v.is_stop(18));
    let ids = assert_round_trip("metaspace_bpe", &tok, "hello world");
    assert_eq!(ids[0], id("h"));
    assert_eq!(tok.encode(" hello").unwrap()[0], id("▁hell"));
    // No byte fallback: an unknown character is an error, not wrong bytes.
    let err = tok.encode("hü").unwrap_err();
    match &err {
        GrammarError::Vocabulary { location, message } => {
            assert!(
                matches!(location, Location::File(p) if p.ends_with("metaspace_bpe.json")),
                "{err}"
            );
            assert!(message.contains("cannot spell"), "{err}");
        }
        other => panic!("unexpected error {other:?}"),
    }
    // The byte-reachability check fails here, as it must.
    assert!(single_byte_tokens(v).len() < 256);
}

// ---------------------------------------------------------------- bad input

fn assert_vocab_error_names(err: GrammarError, file: &Path, what: &str) {
    let shown = err.to_string();
    match &err {
        GrammarError::Vocabulary {
            location: Location::File(p),
            ..
        } => assert_eq!(Path::new(p), file, "{shown}"),
        other => panic!("{what}: expected a Vocabulary error naming the file, got {other:?}"),
    }
    assert!(shown.contains(&file.display().to_string()), "{shown}");
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tokensieve-hf-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn malformed_files_are_vocabulary_errors_naming_the_file() {
    let dir = temp_dir("bad");
    let missing = dir.join("missing.json");
    let err = HfTokenizer::from_file(&missing).unwrap_err();
    assert_vocab_error_names(err, &missing, "missing file");

    let cases: &[(&str, &[u8])] = &[
        ("empty.json", b""),
        ("not_json.json", b"this is not json {"),
        ("truncated.json", b"{\"version\": \"1.0\", \"model\": {"),
        ("binary.json", &[0xFF, 0xFE, 0x00, 0x7B]),
        ("array.json", b"[1, 2, 3]"),
        ("object.json", b"{\"a\": 1}"),
        (
            "bad_model.json",
            b"{\"model\": {\"type\": \"BPE\", \"vocab\": 7, \"merges\": []}}",
        ),
        // A merge longer than every token of the vocabulary: `tokenizers`
        // 0.23 slices past its buffer and panics (found by the fuzzer).
        (
            "merge_longer_than_every_token.json",
            b"{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[],\
              \"normalizer\":null,\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":null,\
              \"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\
              \"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":false,\
              \"byte_fallback\":false,\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
        ),
        (
            "wordpiece.json",
            b"{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[],\
              \"normalizer\":null,\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":null,\
              \"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\
              \"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":100,\
              \"vocab\":{\"[UNK]\":0,\"a\":1,\"##b\":2}}}",
        ),
    ];
    for (name, bytes) in cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = HfTokenizer::from_file(&path).unwrap_err();
        assert_vocab_error_names(err, &path, name);
    }
    // from_json_str names its origin the same way.
    let err = HfTokenizer::from_json_str("{}", "inline.json").unwrap_err();
    assert_vocab_error_names(err, Path::new("inline.json"), "inline");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn model_eos_from_config_files_beside_the_tokenizer() {
    let dir = temp_dir("eos");
    let path = dir.join("tokenizer.json");
    std::fs::copy(fixture("byte_level_bpe.json"), &path).unwrap();
    // tokenizer_config.json's eos_token (object form) adds <|eot|>.
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"eos_token": {"content": "<|eot|>", "special": true}}"#,
    )
    .unwrap();
    let tok = HfTokenizer::from_file(&path).unwrap();
    assert_eq!(tok.vocabulary().stop_tokens(), &[266, 268]);
    // generation_config.json's eos_token_id list, too.
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"eos_token": "<|eot|>"}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("generation_config.json"),
        r#"{"eos_token_id": [267, 100000]}"#,
    )
    .unwrap();
    let tok = HfTokenizer::from_file(&path).unwrap();
    assert_eq!(tok.vocabulary().stop_tokens(), &[266, 267, 268]);
    assert_eq!(tok.vocabulary().grammar_bytes(267), None);
    // A broken config is an error naming that file.
    let cfg = dir.join("generation_config.json");
    std::fs::write(&cfg, "{oops").unwrap();
    let err = HfTokenizer::from_file(&path).unwrap_err();
    assert_vocab_error_names(err, &cfg, "broken generation_config.json");
    std::fs::remove_dir_all(&dir).ok();
}

// ---------------------------------------------------------------- real tokenizers

fn single_byte_tokens(v: &Vocabulary) -> HashSet<u8> {
    v.grammar_tokens()
        .filter(|(_, b)| b.len() == 1)
        .map(|(_, b)| b[0])
        .collect()
}

/// name, type, tokenizer size, special count, stop tokens (README table).
const EXPECTED: &[(&str, VocabType, usize, usize, &[u32])] = &[
    (
        "llama3",
        VocabType::ByteLevel,
        128_256,
        256,
        &[128_001, 128_008, 128_009],
    ),
    (
        "llama3.0",
        VocabType::ByteLevel,
        128_256,
        256,
        &[128_001, 128_009],
    ),
    (
        "qwen2.5",
        VocabType::ByteLevel,
        151_665,
        14,
        &[151_643, 151_645],
    ),
    ("mistral7b", VocabType::ByteFallback, 32_000, 3, &[2]),
    ("gpt2", VocabType::ByteLevel, 50_257, 1, &[50_256]),
    // `</s>` (2) is an added, non-special token named like a stop token: it
    // is a stop (the Llama 2 eos), not the literal text "</s>".
    (
        "phi3.5-mini",
        VocabType::ByteFallback,
        32_011,
        13,
        &[2, 32_000, 32_007],
    ),
];

#[test]
fn real_tokenizers_types_sizes_specials_and_stops() {
    let Some(real) = real() else { return };
    for r in real {
        let (_, ty, size, specials, stops) = *EXPECTED.iter().find(|e| e.0 == r.name).unwrap();
        let v = r.tok.vocabulary();
        assert_eq!(v.vocab_type(), ty, "{}", r.name);
        assert_eq!(v.tokenizer_size(), size, "{}", r.name);
        assert_eq!(v.vocab_size(), size, "{}", r.name);
        assert_eq!(
            v.tokenizer_size(),
            r.oracle.get_vocab_size(true),
            "{}",
            r.name
        );
        assert_eq!(v.special_count(), specials, "{}", r.name);
        assert_eq!(v.stop_tokens(), stops, "{}", r.name);
        let prepends = matches!(r.name, "mistral7b" | "phi3.5-mini");
        assert_eq!(r.tok.prepends_space(), prepends, "{}", r.name);
        // Every special or stop token is out of grammar matching; the others
        // are in it (no gaps in these files, no empty tokens).
        let mut grammar = 0;
        for id in 0..size as u32 {
            let excluded = v.is_special(id) || v.is_stop(id);
            assert_eq!(
                v.grammar_bytes(id).is_none(),
                excluded,
                "{} id {id}",
                r.name
            );
            assert!(!v.token_bytes(id).is_empty(), "{} id {id}", r.name);
            grammar += usize::from(!excluded);
        }
        assert_eq!(v.grammar_tokens().count(), grammar, "{}", r.name);
        // Each special added token in the file is special here.
        for (id, t) in r.oracle.get_added_tokens_decoder() {
            assert_eq!(v.is_special(id), t.special, "{} {}", r.name, t.content);
            assert_eq!(v.token_bytes(id), t.content.as_bytes(), "{}", r.name);
        }
    }
}

#[test]
fn real_stop_tokens_by_name_and_overridable() {
    let Some(real) = real() else { return };
    for r in real {
        let v = r.tok.vocabulary();
        let named: Vec<String> = v
            .stop_tokens()
            .iter()
            .map(|&id| String::from_utf8_lossy(v.token_bytes(id)).into_owned())
            .collect();
        eprintln!("{}: stop tokens {:?} = {named:?}", r.name, v.stop_tokens());
        let expect: &[(&str, &str)] = match r.name {
            "llama3" => &[
                ("<|eot_id|>", "eos"),
                ("<|end_of_text|>", ""),
                ("<|eom_id|>", ""),
            ],
            "llama3.0" => &[("<|eot_id|>", "eos"), ("<|end_of_text|>", "")],
            "qwen2.5" => &[("<|im_end|>", "eos"), ("<|endoftext|>", "")],
            "mistral7b" => &[("</s>", "eos")],
            "gpt2" => &[("<|endoftext|>", "eos")],
            "phi3.5-mini" => &[("<|endoftext|>", "eos"), ("<|end|>", "")],
            other => panic!("unexpected {other}"),
        };
        for (name, _) in expect {
            let id = r.tok.token_to_id(name).unwrap();
            assert!(v.is_stop(id), "{}: {name} ({id}) is not a stop", r.name);
        }
        // Override: one chosen id only; the former stops stay special.
        let pick = v.stop_tokens()[0];
        let w = v.clone().with_stop_tokens(&[pick]).unwrap();
        assert_eq!(w.stop_tokens(), &[pick]);
        for &old in &v.stop_tokens()[1..] {
            assert!(!w.is_stop(old));
            assert_eq!(w.grammar_bytes(old).is_none(), w.is_special(old));
        }
        let too_big = v.tokenizer_size() as u32;
        assert!(v.clone().with_stop_tokens(&[too_big]).is_err());
    }
}

#[test]
fn phi35_model_vocab_size_pads_with_masked_rows() {
    let Some(dir) = shared_dir() else {
        tokensieve_core::skip!("../shared/data/tokenizers is absent");
        return;
    };
    let tok = HfTokenizer::from_file(dir.join("phi3.5-mini/tokenizer.json"))
        .unwrap()
        .with_vocab_size(32_064)
        .unwrap();
    let v = tok.vocabulary();
    assert_eq!(
        (v.tokenizer_size(), v.vocab_size(), v.mask_words()),
        (32_011, 32_064, 1_002)
    );
    for id in 32_011..32_064 {
        assert!(v.is_padding(id), "{id}");
        assert_eq!(v.grammar_bytes(id), None);
        assert!(!v.is_stop(id) && !v.is_special(id));
    }
    assert!(!v.is_padding(32_010) && !v.is_padding(32_064));
    assert!(v.grammar_tokens().all(|(id, _)| id < 32_011));
    assert_eq!(v.grammar_tokens().count(), 32_011 - 13 - 1);
    // Encoding never produces a padding id.
    let ids = assert_round_trip("phi3.5-mini", &tok, "{\"a\": [1, 2]}\n");
    assert!(ids.iter().all(|&id| id < 32_011));
    // A model vocab_size below the tokenizer's is an error, not a panic.
    let err = tok.with_vocab_size(32_000).unwrap_err();
    assert!(matches!(err, GrammarError::Vocabulary { .. }), "{err}");
}

#[test]
fn real_byte_tokens_and_every_byte_reachable() {
    let Some(real) = real() else { return };
    for r in real {
        let v = r.tok.vocabulary();
        let bytes = single_byte_tokens(v);
        assert_eq!(bytes.len(), 256, "{}: some byte has no token", r.name);
        if v.vocab_type() == VocabType::ByteFallback {
            for b in 0..=255u8 {
                let id = r.tok.token_to_id(&format!("<0x{b:02X}>")).unwrap();
                assert_eq!(v.grammar_bytes(id), Some(&[b][..]), "{}", r.name);
            }
            assert_eq!(r.tok.token_to_id("<0x0A>"), Some(13));
            assert_eq!(v.token_bytes(13), b"\n");
            let space = r.tok.token_to_id("▁").unwrap();
            assert_eq!(v.token_bytes(space), b" ");
        } else {
            assert_eq!(v.token_bytes(r.tok.token_to_id("Ġ").unwrap()), b" ");
            assert_eq!(v.token_bytes(r.tok.token_to_id("Ċ").unwrap()), b"\n");
            assert_eq!(v.token_bytes(r.tok.token_to_id("ĊĊ").unwrap()), b"\n\n");
        }
        // No decoded token contains the metaspace or byte-level stand-ins
        // where they would be wrong.
        if v.vocab_type() == VocabType::ByteFallback {
            assert!(
                v.grammar_tokens()
                    .all(|(_, b)| !b.windows(3).any(|w| w == "▁".as_bytes())),
                "{}: a ▁ was left in",
                r.name
            );
        }
    }
}

#[test]
fn real_round_trips_on_corpus_and_reference_strings() {
    let Some(real) = real() else { return };
    let reference = reference().expect("reference_encodings.json");
    let strings: Vec<&str> = reference["strings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    for r in real {
        for text in CORPUS.iter().chain(strings.iter()) {
            assert_round_trip(r.name, &r.tok, text);
        }
        // Unicode that NFC would change (qwen2.5 normalizes with NFC) still
        // comes back byte for byte.
        assert_round_trip(r.name, &r.tok, "e\u{301} A\u{30A} \u{212B} \u{FB01}");
    }
}

#[test]
fn real_encode_matches_reference_ids() {
    let Some(real) = real() else { return };
    let reference = reference().expect("reference_encodings.json");
    let strings = reference["strings"].as_array().unwrap();
    for r in real {
        let refs = reference["tokenizers"][r.name].as_array().unwrap();
        assert_eq!(refs.len(), strings.len());
        for (s, e) in strings.iter().zip(refs) {
            let s = s.as_str().unwrap();
            let want: Vec<u32> = e["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_u64().unwrap() as u32)
                .collect();
            if !r.tok.prepends_space() {
                assert_eq!(r.tok.encode(s).unwrap(), want, "{} {s:?}", r.name);
                continue;
            }
            // SentencePiece style: the reference starts with the prepended
            // `▁`; `encode` leaves it out, so `encode(" " + s)` is the
            // reference exactly, and where the `▁` stood alone, `encode(s)`
            // is the rest of it.
            assert_eq!(
                r.tok.encode(&format!(" {s}")).unwrap(),
                want,
                "{} {s:?}",
                r.name
            );
            let v = r.tok.vocabulary();
            if v.token_bytes(want[0]) == b" " {
                assert_eq!(r.tok.encode(s).unwrap(), want[1..], "{} {s:?}", r.name);
            }
            assert!(
                v.decode(&want).starts_with(b" "),
                "{}: reference does not start with the prepended space",
                r.name
            );
        }
    }
}

/// `encode` against the unmodified `tokenizers` tokenizer on the whole corpus:
/// the same ids (after the prepended space, for SentencePiece style).
#[test]
fn real_encode_agrees_with_the_tokenizers_crate() {
    let Some(real) = real() else { return };
    for r in real {
        for text in CORPUS {
            // Special-token names are spelled as text by `encode` only, and
            // the oracle reads a literal `▁` as a space in SentencePiece style.
            if text.contains('<') || text.contains('\u{2581}') {
                continue;
            }
            let want = r.oracle.encode(*text, false).unwrap().get_ids().to_vec();
            let got = if r.tok.prepends_space() {
                r.tok.encode(&format!(" {text}")).unwrap()
            } else {
                r.tok.encode(text).unwrap()
            };
            assert_eq!(got, want, "{} {text:?}", r.name);
        }
    }
}

/// The doubts about prepended-space tokenizers: texts starting with a space,
/// a newline, a digit, `{`, a non-ASCII character… never get a `▁` in front.
#[test]
fn real_sentencepiece_continuations_have_no_prepended_space() {
    let Some(real) = real() else { return };
    let starts = [
        " x",
        "  x",
        "\nx",
        "\n\nx",
        "\r\nx",
        "\tx",
        "7",
        "42 apples",
        "{\"a\": 1}",
        "[1]",
        "é",
        "Ünïcode",
        "日本",
        "🙂 ok",
        "\"quoted\"",
        "-1",
        ".5",
        "}",
    ];
    for r in real.iter().filter(|r| r.tok.prepends_space()) {
        let v = r.tok.vocabulary();
        for text in starts {
            let ids = assert_round_trip(r.name, &r.tok, text);
            // The first token starts with what the text starts with.
            let first = v.token_bytes(ids[0]);
            assert_eq!(first[0], text.as_bytes()[0], "{} {text:?}: {ids:?}", r.name);
            // Mid-text (after "x"), the same tokens follow, as the model
            // would generate them after a word.
            let after = r.tok.encode(&format!("x{text}")).unwrap();
            if v.token_bytes(after[0]) == b"x" {
                assert_eq!(after[1..], ids, "{} {text:?}", r.name);
            }
        }
    }
}

#[test]
fn real_special_token_names_are_encoded_as_text() {
    let Some(real) = real() else { return };
    for r in real {
        let v = r.tok.vocabulary();
        for &stop in v.stop_tokens() {
            let name = String::from_utf8_lossy(v.token_bytes(stop)).into_owned();
            let ids = assert_round_trip(r.name, &r.tok, &name);
            assert!(!ids.contains(&stop), "{} {name}", r.name);
        }
    }
}

/// Every grammar token's bytes, where they are UTF-8, encode back to
/// exactly those bytes (in debug builds, a sample).
#[test]
fn real_grammar_token_bytes_re_encode() {
    let Some(real) = real() else { return };
    let stride = if cfg!(debug_assertions) { 97 } else { 1 };
    for r in real {
        let v = r.tok.vocabulary();
        let t0 = Instant::now();
        let (mut checked, mut single) = (0usize, 0usize);
        for (id, b) in v.grammar_tokens().step_by(stride) {
            let Ok(s) = std::str::from_utf8(b) else {
                continue;
            };
            let ids = r
                .tok
                .encode(s)
                .unwrap_or_else(|e| panic!("{} token {id}: {e}", r.name));
            assert_eq!(v.decode(&ids), b, "{} token {id}", r.name);
            checked += 1;
            single += usize::from(ids == [id]);
        }
        eprintln!(
            "{}: {checked} token strings re-encoded ({single} to themselves) in {:.2} s",
            r.name,
            t0.elapsed().as_secs_f64()
        );
        assert!(checked > 0);
    }
}

/// Load times (printed; run with `--release -- --nocapture`), fresh loads.
#[test]
fn real_load_times() {
    if cfg!(debug_assertions) {
        tokensieve_core::skip!("load times are measured in release builds only");
        return;
    }
    let Some(dir) = shared_dir() else {
        tokensieve_core::skip!("../shared/data/tokenizers is absent");
        return;
    };
    for &name in REAL {
        let path = dir.join(name).join("tokenizer.json");
        let t0 = Instant::now();
        let oracle = tokenizers::Tokenizer::from_file(&path).unwrap();
        let crate_ms = t0.elapsed().as_secs_f64() * 1e3;
        drop(oracle);
        let t0 = Instant::now();
        let tok = HfTokenizer::from_file(&path).unwrap();
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        println!(
            "load {name:12} {:>7} tokens: HfTokenizer::from_file {ms:7.1} ms \
             (tokenizers::Tokenizer::from_file alone {crate_ms:7.1} ms)",
            tok.vocabulary().tokenizer_size()
        );
    }
}
