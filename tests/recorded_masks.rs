//! The recorded masks the GPU apply benches replay (`benches/fixtures/masks/`,
//! made by `examples/record_masks.rs`): each file decodes, its header fits
//! its body and its tokenizer, no bit is set past the tokenizer's tokens, and
//! it holds the two kinds of row a serving stack applies (a handful of tokens
//! allowed, nearly all of them).

use std::path::Path;

fn decode(name: &str) -> (usize, usize, Vec<u32>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/fixtures/masks")
        .join(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut data = Vec::new();
    lzma_rs::xz_decompress(&mut std::io::BufReader::new(file), &mut data)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    assert_eq!(&data[..8], b"TSMASKS1", "{name}: magic");
    let field =
        |i: usize| u32::from_le_bytes(data[8 + 4 * i..12 + 4 * i].try_into().unwrap()) as usize;
    let (tokens, words, rows) = (field(0), field(1), field(2));
    assert_eq!(words, tokens.div_ceil(32), "{name}: words per row");
    assert_eq!(data.len(), 20 + 4 * rows * words, "{name}: body size");
    let body = data[20..]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (tokens, rows, body)
}

#[test]
fn recorded_masks_decode_and_hold_both_kinds_of_row() {
    for (name, tokens_want) in [
        ("masks-llama3.bin.xz", 128_256),
        ("masks-qwen2.5.bin.xz", 151_665),
    ] {
        let (tokens, rows, body) = decode(name);
        assert_eq!(tokens, tokens_want, "{name}: the tokenizer's token count");
        assert_eq!(rows, 3000, "{name}: rows");
        let words = tokens.div_ceil(32);
        let (mut sparse, mut dense) = (0, 0);
        for row in body.chunks_exact(words) {
            if tokens % 32 != 0 {
                assert_eq!(
                    row[words - 1] >> (tokens % 32),
                    0,
                    "{name}: a bit past the tokens"
                );
            }
            let allowed: usize = row.iter().map(|w| w.count_ones() as usize).sum();
            assert!(allowed > 0, "{name}: a row allows nothing");
            sparse += usize::from(allowed * 100 < tokens);
            dense += usize::from(allowed * 100 > tokens * 95);
        }
        assert!(
            sparse > rows / 2 && dense > rows / 10,
            "{name}: {sparse} sparse, {dense} dense rows"
        );
        // A tokenizer present: its count is the file's.
        let folder = if name.contains("llama3") {
            "llama3"
        } else {
            "qwen2.5"
        };
        let tok = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/tokenizers")
            .join(folder)
            .join("tokenizer.json");
        if tok.exists() {
            let vocab = tokensieve::hf::HfTokenizer::from_file(&tok).unwrap();
            assert_eq!(
                vocab.vocabulary().vocab_size(),
                tokens,
                "{name}: against {}",
                tok.display()
            );
        } else {
            tokensieve::skip!(
                "{} absent: the token count is not checked against it",
                tok.display()
            );
        }
    }
}
