//! libFuzzer entry of the `gbnf` target; its body is
//! `tokensieve_fuzz::front_ends::gbnf`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokensieve_fuzz::front_ends::gbnf(data));
