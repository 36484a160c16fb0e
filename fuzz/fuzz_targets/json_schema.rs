//! libFuzzer entry of the `json_schema` target; its body is
//! `tokensieve_fuzz::front_ends::json_schema`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokensieve_fuzz::front_ends::json_schema(data));
