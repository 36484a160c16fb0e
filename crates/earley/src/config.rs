//! [`EarleyConfig`]: every knob of the earley backend, its default and what
//! it costs. Through the registry the same knobs are read from
//! `BackendConfig::options` under the field names.

use tokensieve_automata::DfaLimits;
use tokensieve_core::{BackendConfig, GrammarError};

/// Knobs and limits of the earley backend. Every limit, when exceeded, is an
/// error naming it (at compile time a `GrammarError::LimitExceeded`, at step
/// time a `StepError::LimitExceeded` that also poisons the matcher).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarleyConfig {
    /// Steps a matcher keeps for `rollback`. Default 32 (`BackendConfig`).
    pub max_rollback: usize,
    /// Most DFA states of one lexeme of a grammar (a regular part of it). A
    /// regular rule whose DFA is larger stays a grammar rule, split into
    /// smaller lexemes. Every lexeme state costs one trie walk the first
    /// time a mask needs it, so small lexemes keep the mask tail short.
    /// Default 2,000.
    pub max_lexeme_states: usize,
    /// Most states of all the lexemes of one grammar together (DFA states
    /// of eager lexemes; for lazy ones a quarter of their NFA states, about
    /// the DFA states an NFA that size stands for): bounds a compile's
    /// memory whatever the grammar. Default 200,000.
    pub max_total_lexeme_states: usize,
    /// Longest regex of one lexeme, in bytes; longer regular rules stay
    /// grammar rules. Default 64 KiB.
    pub max_lexeme_regex_len: usize,
    /// Most DFA states of a whole `regex` or `choice` constraint (one
    /// lexeme). Default 50,000, as regex-fsm.
    pub max_dfa_states: usize,
    /// NFA heap bytes of one lexeme. Default 10 MiB.
    pub nfa_size_limit: usize,
    /// DFA heap bytes while determinizing one lexeme. Default 32 MiB.
    pub dfa_size_limit: usize,
    /// Heap bytes of the NFA state sets while determinizing one lexeme or a
    /// whole `regex` constraint: the work of determinization, as in
    /// regex-fsm. Default 8 MiB (at most about 1.1 s here).
    pub determinize_size_limit: usize,
    /// Most Earley items in the set after one byte. A grammar that is
    /// ambiguous enough to exceed it poisons the matcher. Default 20,000.
    pub max_items: usize,
    /// Work allowed for one mask or one token (item operations, the
    /// llguidance "fuel"): 10 to 50 ns each, so the default of 20,000,000
    /// bounds a step at well under a second. Exceeding it poisons the
    /// matcher (the mask holds the tokens proven so far: never a wider one).
    pub max_step_work: usize,
    /// Heap bytes of mask summaries a compiled grammar keeps (one per set
    /// shape met: a mask row and the few subtrees left to the stack; and
    /// the walks of [`EarleyConfig::group_walks`], each with the rows it
    /// was walked over); past it they are dropped and recomputed on
    /// demand. Default 64 MiB.
    pub mask_cache_bytes: usize,
    /// Grammars whose mask summaries outlive them: compiling the same
    /// constraint (equal, not only canonically: the same schema text)
    /// again (a serving engine that evicted it, a benchmark that
    /// compiles per file) starts with the summaries the last compile
    /// learned. 0 = every compile starts cold. Only with `shared_lexemes`
    /// (summaries name the states of the very lexemes they were made
    /// with). Default 64.
    pub shared_summaries: usize,
    /// Whether lexemes (their DFAs and the trie walks of their states)
    /// are kept process-wide and shared by every grammar of the same
    /// vocabulary: the JSON string body is then built and walked once per
    /// process, not once per schema. `false` builds every lexeme afresh
    /// for each compile (a cold benchmark). Default true.
    pub shared_lexemes: bool,
    /// Whether the lexemes of grammar rules (GBNF, `json_object`,
    /// structural tags) get lazily built DFAs: a compile builds their NFAs
    /// only, and a DFA state is made when a walk first reaches it (at most
    /// `max_dfa_states` a lexeme; past it the step is an error). A regular
    /// rule is then one lexeme when its regex weighs (about its NFA states)
    /// at most 4 × `max_lexeme_states`. `false` builds every DFA whole and
    /// minimized at compile. Default true.
    pub lazy_lexemes: bool,
    /// With `lazy_lexemes`, whether a lexeme's NFA too waits until a step
    /// or a mask first enters the lexeme (kept as its syntax tree until
    /// then, charged to `max_total_lexeme_states` by the tree's weight):
    /// the compile of a big schema, hundreds of lexemes of which an output
    /// enters a few, costs only what it reads; the first mask that enters
    /// a lexeme pays its NFA (tens of µs for most). An NFA past
    /// `nfa_size_limit` is then a step error naming it, not a compile
    /// error. `false` makes every NFA at compile. Default true.
    pub defer_lexemes: bool,
    /// Whether a mask walks the trie below a node holding a few lexeme
    /// items by those lexemes' own walks (their precomputed rows, the
    /// parser only where one may end), or every node through the parser.
    /// The two give the same masks; `false` is slower, and is there to
    /// test the parser's walk on every node. Default true.
    pub lexeme_walks: bool,
    /// A lexeme state with more exits than this (trie nodes where it may
    /// end inside a token: a name ends at every letter) walks on only from
    /// those with a child that may follow the lexeme at its place in the
    /// grammar (its FOLLOW set, in bytes). The masks are the same either
    /// way; `0` filters every exit and `usize::MAX` none, to test both.
    /// Default 16.
    pub follow_exits: usize,
    /// A set met for the first time with at least this many lexeme items
    /// is summarized item by item: each item's walk (its lexeme, and what
    /// follows it up to its rule's end) is kept apart and shared by every
    /// set that holds the item, and only the completions into the set
    /// itself are walked for it. The start of a C statement under another
    /// stack is another set of mostly the same items. Fewer items are
    /// walked together, as one. The masks are the same either way; `1`
    /// summarizes every set by its items and `usize::MAX` none, to test
    /// both. Default 8.
    pub item_summaries: usize,
    /// A completion into an older set left pending at this many trie nodes
    /// or more (a name that may end at every letter of a token, and what
    /// follows it) is walked apart from the other completions of the same
    /// mask, and the walk is kept by the rule, the nodes and the shape of
    /// the set after the completion, for every later mask whose rows hold
    /// what this one's did: the same completion recurs under other stacks,
    /// where the whole mask's key does not. Fewer nodes are walked
    /// together, as one. The masks are the same either way; `1` walks
    /// every completion apart and `usize::MAX` none, to test both.
    /// Default 32.
    pub group_walks: usize,
    /// Longest whitespace run of the builtin JSON grammar (`json_object`)
    /// between tokens, as regex-fsm's: a model cannot loop on whitespace.
    /// Default 20.
    pub max_whitespace: u32,
}

impl Default for EarleyConfig {
    fn default() -> Self {
        EarleyConfig {
            max_rollback: 32,
            max_lexeme_states: 2_000,
            max_total_lexeme_states: 200_000,
            max_lexeme_regex_len: 64 << 10,
            max_dfa_states: 50_000,
            nfa_size_limit: 10 << 20,
            dfa_size_limit: 32 << 20,
            determinize_size_limit: 8 << 20,
            max_items: 20_000,
            max_step_work: 20_000_000,
            mask_cache_bytes: 64 << 20,
            shared_summaries: 64,
            shared_lexemes: true,
            lazy_lexemes: true,
            defer_lexemes: true,
            lexeme_walks: true,
            follow_exits: 16,
            item_summaries: 8,
            group_walks: 32,
            max_whitespace: 20,
        }
    }
}

impl EarleyConfig {
    /// The names of the knobs [`EarleyConfig::from_backend_config`] reads
    /// from `options`.
    pub const OPTIONS: [&'static str; 19] = [
        "max_lexeme_states",
        "max_total_lexeme_states",
        "max_lexeme_regex_len",
        "max_dfa_states",
        "nfa_size_limit",
        "dfa_size_limit",
        "determinize_size_limit",
        "max_items",
        "max_step_work",
        "mask_cache_bytes",
        "shared_summaries",
        "shared_lexemes",
        "lazy_lexemes",
        "defer_lexemes",
        "lexeme_walks",
        "follow_exits",
        "item_summaries",
        "group_walks",
        "max_whitespace",
    ];

    /// The config from the registry's [`BackendConfig`]: `max_rollback` from
    /// its field, every other knob from `options` under its field name.
    pub fn from_backend_config(config: &BackendConfig) -> Result<Self, GrammarError> {
        config.check_options(crate::BACKEND_NAME, &EarleyConfig::OPTIONS)?;
        let d = EarleyConfig::default();
        let c = EarleyConfig {
            max_rollback: config.max_rollback,
            max_lexeme_states: config.option("max_lexeme_states", d.max_lexeme_states)?,
            max_total_lexeme_states: config
                .option("max_total_lexeme_states", d.max_total_lexeme_states)?,
            max_lexeme_regex_len: config.option("max_lexeme_regex_len", d.max_lexeme_regex_len)?,
            max_dfa_states: config.option("max_dfa_states", d.max_dfa_states)?,
            nfa_size_limit: config.option("nfa_size_limit", d.nfa_size_limit)?,
            dfa_size_limit: config.option("dfa_size_limit", d.dfa_size_limit)?,
            determinize_size_limit: config
                .option("determinize_size_limit", d.determinize_size_limit)?,
            max_items: config.option("max_items", d.max_items)?,
            max_step_work: config.option("max_step_work", d.max_step_work)?,
            mask_cache_bytes: config.option("mask_cache_bytes", d.mask_cache_bytes)?,
            shared_summaries: config.option("shared_summaries", d.shared_summaries)?,
            shared_lexemes: config.option("shared_lexemes", d.shared_lexemes)?,
            lazy_lexemes: config.option("lazy_lexemes", d.lazy_lexemes)?,
            defer_lexemes: config.option("defer_lexemes", d.defer_lexemes)?,
            lexeme_walks: config.option("lexeme_walks", d.lexeme_walks)?,
            follow_exits: config.option("follow_exits", d.follow_exits)?,
            item_summaries: config.option("item_summaries", d.item_summaries)?,
            group_walks: config.option("group_walks", d.group_walks)?,
            max_whitespace: config.option("max_whitespace", d.max_whitespace)?,
        };
        c.validate()?;
        Ok(c)
    }

    /// Rejects values no grammar could work with.
    pub fn validate(&self) -> Result<(), GrammarError> {
        for (name, value, least) in [
            ("max_lexeme_states", self.max_lexeme_states, 2),
            ("max_dfa_states", self.max_dfa_states, 2),
            ("max_items", self.max_items, 1),
            ("max_step_work", self.max_step_work, 1),
        ] {
            if value < least {
                return Err(GrammarError::InvalidConfig(format!(
                    "option `{name}` must be at least {least}"
                )));
            }
        }
        Ok(())
    }

    /// DFA limits for a lexeme of at most `max_states` states. The
    /// determinization budget follows the state limit (about 1 KiB per
    /// state before minimization), so a regular rule too big to be one
    /// lexeme is found out in microseconds, not after building a huge DFA.
    pub(crate) fn dfa_limits(&self, max_states: usize) -> DfaLimits {
        DfaLimits {
            nfa_size_limit: self.nfa_size_limit,
            dfa_size_limit: self.dfa_size_limit.min(max_states.saturating_mul(1 << 10)),
            determinize_size_limit: self
                .determinize_size_limit
                .min(max_states.saturating_mul(1 << 10)),
            max_dfa_states: max_states,
            minimize: true,
        }
    }

    /// Limits of a lazily built lexeme: `max_dfa_states` states and
    /// `dfa_size_limit` heap bytes as it is walked.
    pub(crate) fn lazy_limits(&self) -> DfaLimits {
        DfaLimits {
            nfa_size_limit: self.nfa_size_limit,
            dfa_size_limit: self.dfa_size_limit,
            determinize_size_limit: self.determinize_size_limit,
            max_dfa_states: self.max_dfa_states,
            minimize: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_read_by_name() {
        let mut c = BackendConfig::default();
        c.options.insert("max_items".into(), "77".into());
        let e = EarleyConfig::from_backend_config(&c).unwrap();
        assert_eq!(e.max_items, 77);
        assert_eq!(e.max_rollback, 32);
        assert!(e.shared_lexemes);
        c.options.insert("shared_lexemes".into(), "false".into());
        assert!(
            !EarleyConfig::from_backend_config(&c)
                .unwrap()
                .shared_lexemes
        );
        c.options.insert("max_step_work".into(), "0".into());
        assert!(matches!(
            EarleyConfig::from_backend_config(&c),
            Err(GrammarError::InvalidConfig(m)) if m.contains("max_step_work")
        ));
        c.options.insert("max_step_work".into(), "lots".into());
        assert!(EarleyConfig::from_backend_config(&c).is_err());
    }

    /// A knob the backend does not read (misspelt, or another backend's)
    /// is refused by name, not run with the default.
    #[test]
    fn an_unknown_option_is_refused() {
        let mut c = BackendConfig::default();
        c.options.insert("shared_lexeme".into(), "false".into());
        let e = EarleyConfig::from_backend_config(&c)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`shared_lexeme`") && e.contains("shared_lexemes"),
            "{e}"
        );
        // Every option listed is one the config reads: each given alone
        // with a value no knob takes fails on its value, not its name.
        for name in EarleyConfig::OPTIONS {
            let mut c = BackendConfig::default();
            c.options.insert(name.into(), "-".into());
            let e = EarleyConfig::from_backend_config(&c)
                .unwrap_err()
                .to_string();
            assert!(e.contains("cannot parse"), "{name}: {e}");
        }
    }
}
