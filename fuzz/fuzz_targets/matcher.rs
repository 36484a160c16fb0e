//! libFuzzer entry of the `matcher` target; its body is
//! `tokensieve_fuzz::matcher::matcher`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokensieve_fuzz::matcher::matcher(data));
