//! # tokensieve-fuzz
//!
//! The bodies of tokensieve's fuzz targets: plain `fn(&[u8])` that return
//! normally on any input and panic only on a real bug. The same bodies run
//! under libFuzzer (the cargo-fuzz project in `fuzz/`, through
//! `scripts/fuzz.sh`) and on stable in `cargo test` (this crate's tests:
//! each body over its committed seeds plus a fixed number of seeded
//! mutations), so the targets build and run wherever the workspace does.
//!
//! What counts as a bug: a panic, an error that is not a [`GrammarError`]
//! or [`StepError`] of its own (the backends are called directly, without
//! the registry's panic guard, so a panic is seen as one), and, where an
//! oracle exists, a wrong answer: a matcher that disagrees with the
//! reference recognizer (`Grammar::accepts`/`accepts_prefix`), a mask that
//! disagrees with `accept_token`, or two backends whose masks differ on a
//! constraint both compiled.
//!
//! ## Modules
//!
//! * [`backends`]: the two backends on a small fixture vocabulary, built
//!   once per process; compiling with both and walking the results.
//! * [`front_ends`]: the `gbnf`, `regex` and `json_schema` targets.
//! * [`readers`]: the `tokenizer_json`, `tiktoken` and `gguf` targets (the
//!   vocabulary readers of tokensieve-core).
//! * [`matcher`]: the `matcher` target, a random sequence of matcher calls
//!   on both backends checked against the recognizer.
//! * [`replay`]: seeds and seeded mutations, for running the bodies in
//!   `cargo test`.
//!
//! [`GrammarError`]: tokensieve_core::GrammarError
//! [`StepError`]: tokensieve_core::StepError

pub mod backends;
pub mod front_ends;
pub mod matcher;
pub mod readers;
pub mod replay;

/// A fuzz target: its name (the cargo-fuzz binary and the seed folder)
/// and its body.
pub struct Target {
    pub name: &'static str,
    pub body: fn(&[u8]),
}

/// Every target, in the order `scripts/fuzz.sh` lists them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "gbnf",
        body: front_ends::gbnf,
    },
    Target {
        name: "regex",
        body: front_ends::regex,
    },
    Target {
        name: "json_schema",
        body: front_ends::json_schema,
    },
    Target {
        name: "tokenizer_json",
        body: readers::tokenizer_json,
    },
    Target {
        name: "tiktoken",
        body: readers::tiktoken,
    },
    Target {
        name: "gguf",
        body: readers::gguf,
    },
    Target {
        name: "matcher",
        body: matcher::matcher,
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// A 64-bit FNV-1a hash of the input: the seed of the choices a body makes
/// that the input does not spell out, so a run is a function of its input.
pub fn input_seed(data: &[u8]) -> u64 {
    data.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3)
    })
}
