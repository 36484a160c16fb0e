//! [`RegexFsmConfig`]: every knob of the regex backend, with its default and
//! what it costs.

use tokensieve_core::{BackendConfig, GrammarError};

/// Configuration of the regex backend. Plain data: every field has a
/// documented default ([`Default`]), so set only what you need:
///
/// ```
/// use tokensieve_regex_fsm::RegexFsmConfig;
/// let config = RegexFsmConfig { max_dfa_states: 10_000, ..Default::default() };
/// assert_eq!(config.max_whitespace, 20);
/// ```
///
/// Through the registry (`BackendConfig::options`), the same knobs are read
/// by name: `max_dfa_states`, `nfa_size_limit`, `dfa_size_limit`,
/// `max_index_bytes`, `minimize`, `max_whitespace`, `parallel_build`,
/// `walk_cache_bytes`, `max_compile_work`
/// (see [`RegexFsmConfig::from_backend_config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexFsmConfig {
    /// Steps a matcher keeps for `rollback`. Default 32 (from
    /// `BackendConfig::max_rollback`). Cost: 8 bytes per step per matcher.
    pub max_rollback: usize,
    /// Most states the final (pruned, minimized) DFA may have. Default
    /// 50,000. Each state costs one walk of the vocabulary trie at build time
    /// (microseconds for a literal position, about a millisecond for a state
    /// inside a free string on a 128k vocabulary) and one row index.
    pub max_dfa_states: usize,
    /// Heap bytes the Thompson NFA may use while compiling the regex. Default
    /// 10 MiB (the `regex` crate's default). Bounds huge counted repetitions
    /// such as `(a|b){1000}{1000}` before any time is spent determinizing.
    pub nfa_size_limit: usize,
    /// Heap bytes the dense DFA may use. Default 32 MiB.
    pub dfa_size_limit: usize,
    /// Heap bytes the determinizer may use for the NFA state sets behind
    /// the DFA's states: their total size is the work of determinization
    /// (a DFA of few states, each a set of thousands of NFA states, costs
    /// seconds in a small table). Default 8 MiB, reached in 0.03–0.3 s on
    /// this 2-core machine by the slowest regexes and grammars fuzzing
    /// found (`.{0,1000}{4}`, `x{0,10010}`, identifiers with an optional
    /// separator). Two MaskBench dev schemas need more than 8 MiB.
    pub determinize_size_limit: usize,
    /// Heap bytes the token index (distinct mask rows + per-state row ids)
    /// may use. Default 512 MiB. A dense row costs `vocab_size / 8` bytes
    /// (16 KiB for Llama 3); rows are deduplicated across states and stored
    /// sparsely when few tokens are allowed.
    pub max_index_bytes: usize,
    /// Minimize the DFA (Hopcroft) before building the index. Default `true`:
    /// it costs well under a millisecond for typical JSON-schema regexes and
    /// saves one trie walk per merged state.
    pub minimize: bool,
    /// Under `Whitespace::Any`, the longest run of JSON whitespace allowed
    /// between tokens of a JSON value. Default 20: bounded, so a model cannot
    /// loop on whitespace forever and the DFA stays small.
    pub max_whitespace: u32,
    /// Build the token index on rayon's global thread pool. Default `false`
    /// (benchmarks are single-threaded; a serving engine compiling in the
    /// background may prefer `true`).
    pub parallel_build: bool,
    /// Budget in bytes of the process-wide cache of loop walks (see
    /// `TokenIndex`): the walk of a loop shape, such as the JSON string body,
    /// is kept for every later build on the same vocabulary. Default 64 MiB;
    /// 0 turns it off, so every build starts cold.
    pub walk_cache_bytes: usize,
    /// Trie nodes the token index build may visit, over all its walks: the
    /// work budget of a compile, counted, not timed (a walk the
    /// process-wide cache already holds is charged as if walked), so the
    /// same regex compiles or fails the same way on every machine and in
    /// every process. A node costs about 8 ns on a 2-core x86-64 machine
    /// (1.0 s for the 120 million nodes of the default), so with
    /// determinization (at most 0.3 s on any regex seen) a compile ends
    /// within about a second of CPU. 1,985 of the 1,995 MaskBench dev
    /// schemas whose DFA regex-fsm builds need fewer; the other ten need
    /// 140–240 million (the DFA's states times the part of the vocabulary
    /// each walk reaches: a small DFA whose states each take much of the
    /// vocabulary, such as `([a-z ]{0,200}[.!?]){0,40}`, needs 456 million),
    /// and `auto` and `earley` serve them. Determinization, before it, is
    /// bounded by `determinize_size_limit`.
    pub max_compile_work: u64,
}

impl Default for RegexFsmConfig {
    fn default() -> Self {
        RegexFsmConfig {
            max_rollback: 32,
            max_dfa_states: 50_000,
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 8 << 20,
            max_index_bytes: 512 << 20,
            minimize: true,
            max_whitespace: 20,
            parallel_build: false,
            walk_cache_bytes: 64 << 20,
            max_compile_work: 120_000_000,
        }
    }
}

impl RegexFsmConfig {
    /// The names of the knobs [`RegexFsmConfig::from_backend_config`] reads
    /// from `options`.
    pub const OPTIONS: [&'static str; 10] = [
        "max_dfa_states",
        "nfa_size_limit",
        "dfa_size_limit",
        "determinize_size_limit",
        "max_index_bytes",
        "minimize",
        "max_whitespace",
        "parallel_build",
        "walk_cache_bytes",
        "max_compile_work",
    ];

    /// Reads the knobs from a registry [`BackendConfig`]: `max_rollback` from
    /// the field of that name, every other knob from `options` under its field
    /// name (absent = default; a value that does not parse is an error naming
    /// the knob; an option this backend does not read, misspelt or another
    /// backend's, is an error naming it).
    pub fn from_backend_config(config: &BackendConfig) -> Result<Self, GrammarError> {
        config.check_options(crate::BACKEND_NAME, &RegexFsmConfig::OPTIONS)?;
        let d = RegexFsmConfig::default();
        let parsed = RegexFsmConfig {
            max_rollback: config.max_rollback,
            max_dfa_states: config.option("max_dfa_states", d.max_dfa_states)?,
            nfa_size_limit: config.option("nfa_size_limit", d.nfa_size_limit)?,
            dfa_size_limit: config.option("dfa_size_limit", d.dfa_size_limit)?,
            determinize_size_limit: config
                .option("determinize_size_limit", d.determinize_size_limit)?,
            max_index_bytes: config.option("max_index_bytes", d.max_index_bytes)?,
            minimize: config.option("minimize", d.minimize)?,
            max_whitespace: config.option("max_whitespace", d.max_whitespace)?,
            parallel_build: config.option("parallel_build", d.parallel_build)?,
            walk_cache_bytes: config.option("walk_cache_bytes", d.walk_cache_bytes)?,
            max_compile_work: config.option("max_compile_work", d.max_compile_work)?,
        };
        parsed.validate()?;
        Ok(parsed)
    }

    /// Rejects values no build could succeed with.
    pub fn validate(&self) -> Result<(), GrammarError> {
        if self.max_dfa_states < 2 {
            return Err(GrammarError::InvalidConfig(
                "option `max_dfa_states` must be at least 2 (the dead state and a start state)"
                    .into(),
            ));
        }
        if self.max_dfa_states > u32::MAX as usize / 512 {
            return Err(GrammarError::InvalidConfig(format!(
                "option `max_dfa_states` must be at most {}",
                u32::MAX as usize / 512
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_read_by_name() {
        let mut c = BackendConfig {
            max_rollback: 7,
            ..Default::default()
        };
        c.options.insert("max_dfa_states".into(), "123".into());
        c.options.insert("minimize".into(), "false".into());
        let r = RegexFsmConfig::from_backend_config(&c).unwrap();
        assert_eq!(r.max_rollback, 7);
        assert_eq!(r.max_dfa_states, 123);
        assert!(!r.minimize);
        assert_eq!(r.max_whitespace, 20);

        c.options.insert("max_whitespace".into(), "many".into());
        let e = RegexFsmConfig::from_backend_config(&c).unwrap_err();
        assert!(e.to_string().contains("max_whitespace"), "{e}");

        c.options.insert("max_whitespace".into(), "3".into());
        c.options.insert("max_dfa_states".into(), "1".into());
        let e = RegexFsmConfig::from_backend_config(&c).unwrap_err();
        assert!(e.to_string().contains("max_dfa_states"), "{e}");

        // Another backend's knob (or a misspelt one) is refused by name.
        c.options.insert("shared_lexemes".into(), "false".into());
        let e = RegexFsmConfig::from_backend_config(&c).unwrap_err();
        assert!(e.to_string().contains("no option `shared_lexemes`"), "{e}");
        // Every option listed is one the config reads: alone, a value no
        // knob takes fails on its value, not its name.
        for name in RegexFsmConfig::OPTIONS {
            let mut c = BackendConfig::default();
            c.options.insert(name.into(), "-".into());
            let e = RegexFsmConfig::from_backend_config(&c).unwrap_err();
            assert!(e.to_string().contains("cannot parse"), "{name}: {e}");
        }
    }
}
