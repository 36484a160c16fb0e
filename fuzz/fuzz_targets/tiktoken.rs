//! libFuzzer entry of the `tiktoken` target; its body is
//! `tokensieve_fuzz::readers::tiktoken`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokensieve_fuzz::readers::tiktoken(data));
