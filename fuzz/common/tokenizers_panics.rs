//! A panic inside the `tokenizers` crate is caught by core's `hf` loader
//! and becomes a vocabulary error (its BPE model panics on some merges).
//! libFuzzer's panic hook aborts before any `catch_unwind` runs, so the
//! targets that load tokenizer.json text (`tokenizer_json`, `gguf`) let
//! panics located in that crate's sources unwind to the loader; every
//! other panic still aborts and is reported.

use std::sync::Once;

static HOOK: Once = Once::new();

fn inside_tokenizers(info: &std::panic::PanicHookInfo<'_>) -> bool {
    info.location()
        .is_some_and(|l| l.file().replace('\\', "/").contains("/tokenizers-"))
}

/// Wraps the panic hook in place (libFuzzer's), once per process.
pub fn let_them_unwind() {
    HOOK.call_once(|| {
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !inside_tokenizers(info) {
                abort(info);
            }
        }));
    });
}
