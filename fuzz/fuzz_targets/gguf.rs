//! libFuzzer entry of the `gguf` target; its body is
//! `tokensieve_fuzz::readers::gguf`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokensieve_fuzz::readers::gguf(data));
