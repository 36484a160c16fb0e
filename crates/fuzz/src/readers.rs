//! The vocabulary-reader targets: `tokenizer_json` (a Hugging Face
//! `tokenizer.json` through core's `hf` loader), `tiktoken` (a `.tiktoken`
//! file) and `gguf` (a GGUF file's tokenizer metadata, and the tokenizer
//! built from it). Each reads any bytes to a vocabulary or one error of its
//! own, and then uses what it read the way a backend and a server do.

use tokensieve_core::gguf::GgufTokenizer;
use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::{TokenTrie, Vocabulary};

use crate::backends::check_error;
use crate::input_seed;

/// Text a server encodes (a prompt piece, JSON, non-ASCII, a `▁`).
const SAMPLE: &str = "{\"name\": \"Zoë ▁x\"}\n  hello 😀";

/// A vocabulary that was read: its trie is built, a text is encoded
/// greedily and decoded back, the model is padded and the stop token
/// replaced, as backends and servers do.
fn use_vocabulary(v: &Vocabulary, seed: u64) {
    let trie = TokenTrie::new(v);
    assert!(trie.num_tokens() <= v.tokenizer_size());
    let _ = v.fingerprint();
    if let Some(ids) = v.encode_greedy(SAMPLE.as_bytes()) {
        assert_eq!(
            v.decode(&ids),
            SAMPLE.as_bytes(),
            "greedy encoding round trip"
        );
    }
    for id in 0..v.vocab_size().min(64) as u32 {
        let _ = (v.token_bytes(id), v.grammar_bytes(id), v.is_special(id));
    }
    let padded = v.clone().with_vocab_size(v.tokenizer_size() + 5);
    assert!(padded.is_ok(), "padding a vocabulary by 5: {padded:?}");
    let stop = (seed % (v.tokenizer_size() as u64 + 2)) as u32;
    match v.clone().with_stop_tokens(&[stop]) {
        Ok(s) => assert!(s.is_stop(stop)),
        Err(e) => check_error("with_stop_tokens", &e),
    }
}

/// A `tokenizer.json`: loaded, its vocabulary used, a text encoded.
pub fn tokenizer_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let tok = match HfTokenizer::from_json_str(text, "fuzz/tokenizer.json") {
        Ok(t) => t,
        Err(e) => return check_error("hf", &e),
    };
    use_vocabulary(tok.vocabulary(), input_seed(data));
    let _ = tok.prepends_space();
    if let Err(e) = tok.encode(SAMPLE) {
        check_error("hf encode", &e);
    }
}

/// A `.tiktoken` file: read without and with a special token (at an id
/// the input picks), its vocabulary used.
pub fn tiktoken(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let seed = input_seed(data);
    let special = ("<|endoftext|>", (seed % 512) as u32);
    for specials in [&[][..], &[special][..]] {
        match Vocabulary::from_tiktoken(text, specials, "fuzz.tiktoken") {
            Ok(v) => use_vocabulary(&v, seed),
            Err(e) => check_error("tiktoken", &e),
        }
    }
}

/// A GGUF file: its tokenizer metadata read, turned into a vocabulary and
/// into a tokenizer that encodes a text.
pub fn gguf(data: &[u8]) {
    let g = match GgufTokenizer::from_reader(data, data.len() as u64, "fuzz.gguf") {
        Ok(g) => g,
        Err(e) => return check_error("gguf", &e),
    };
    let _ = (g.vocab_type(), g.stop_token_ids(), g.token_to_id("a"));
    for id in 0..g.tokens.len().min(64) as u32 {
        let _ = g.is_special(id);
    }
    match g.to_vocabulary() {
        Ok(v) => use_vocabulary(&v, input_seed(data)),
        Err(e) => check_error("gguf vocabulary", &e),
    }
    match HfTokenizer::from_gguf(&g, "fuzz.gguf") {
        Ok(tok) => {
            if let Err(e) = tok.encode(SAMPLE) {
                check_error("gguf encode", &e);
            }
        }
        Err(e) => check_error("gguf tokenizer", &e),
    }
}
