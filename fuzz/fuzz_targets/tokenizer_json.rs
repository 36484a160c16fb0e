//! libFuzzer entry of the `tokenizer_json` target; its body is
//! `tokensieve_fuzz::readers::tokenizer_json`.
//!
//! A panic inside the `tokenizers` crate is caught by core's `hf` loader
//! and becomes a vocabulary error (its BPE model panics on some merges).
//! libFuzzer's panic hook aborts before any `catch_unwind` runs, so this
//! entry lets panics located in that crate's sources unwind to the loader;
//! every other panic still aborts and is reported.
#![no_main]

use std::sync::Once;

static HOOK: Once = Once::new();

fn panics_inside_tokenizers(info: &std::panic::PanicHookInfo<'_>) -> bool {
    info.location()
        .is_some_and(|l| l.file().replace('\\', "/").contains("/tokenizers-"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    HOOK.call_once(|| {
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !panics_inside_tokenizers(info) {
                abort(info);
            }
        }));
    });
    tokensieve_fuzz::readers::tokenizer_json(data)
});
