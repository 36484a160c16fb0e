//! libFuzzer entry of the `regex` target; its body is
//! `tokensieve_fuzz::front_ends::regex`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokensieve_fuzz::front_ends::regex(data));
