//! libFuzzer entry of the `tokenizer_json` target; its body is
//! `tokensieve_fuzz::readers::tokenizer_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokensieve_fuzz::readers::tokenizer_json(data));
