//! libFuzzer entry of the `gguf` target; its body is
//! `tokensieve_fuzz::readers::gguf`. A GGUF tokenizer is built through
//! tokenizer.json text, so panics inside the `tokenizers` crate unwind to
//! the loader that reports them (`fuzz/common/tokenizers_panics.rs`).
#![no_main]

#[path = "../common/tokenizers_panics.rs"]
mod tokenizers_panics;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tokenizers_panics::let_them_unwind();
    tokensieve_fuzz::readers::gguf(data)
});
