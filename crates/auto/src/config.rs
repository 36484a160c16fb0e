//! [`AutoConfig`]: the knobs of the auto backend, its table budget and
//! cache, with their defaults and what they cost.

use std::collections::BTreeMap;

use tokensieve_core::{BackendConfig, GrammarError};
use tokensieve_earley::EarleyConfig;
use tokensieve_regex_fsm::RegexFsmConfig;

/// Configuration of the auto backend. Plain data; every field has a
/// documented default ([`Default`]).
///
/// Through the registry (`BackendConfig::options`) the knobs below are read
/// by their field names, and every knob of earley (`EarleyConfig::OPTIONS`)
/// is passed on to the earley half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoConfig {
    /// Steps a matcher keeps for `rollback`, on both halves. Default 32
    /// (from `BackendConfig::max_rollback`).
    pub max_rollback: usize,
    /// Whether regex-fsm tables are built at all. `false` makes this
    /// backend earley with no thread (a measurement of the earley half
    /// alone). Default true.
    pub tables: bool,
    /// Most states of a table's DFA: a spec whose DFA is bigger stays on
    /// earley. Each state costs one trie walk of the vocabulary in the
    /// background (microseconds at a literal position, about a millisecond
    /// inside a free string on a 128k vocabulary, fewer where states share a
    /// walk), so this bounds the background work of one spec. Default
    /// 10,000 (regex-fsm's own default is 50,000).
    pub table_max_dfa_states: usize,
    /// Most heap bytes of one table's token index: past it the spec stays
    /// on earley. Default 128 MiB (regex-fsm's own default is 512 MiB).
    pub table_max_index_bytes: usize,
    /// Most finished tables (and specs known to have none) kept for later
    /// compiles of the same constraint; the least recently used goes first.
    /// Default 64. 0 keeps none (every compile builds its own).
    pub table_cache_entries: usize,
    /// Most heap bytes of the tables kept (their DFAs and indexes).
    /// Default 256 MiB.
    pub table_cache_bytes: usize,
    /// The earley half (answers every spec, from the first mask on).
    pub earley: EarleyConfig,
}

impl Default for AutoConfig {
    fn default() -> Self {
        AutoConfig {
            max_rollback: 32,
            tables: true,
            table_max_dfa_states: 10_000,
            table_max_index_bytes: 128 << 20,
            table_cache_entries: 64,
            table_cache_bytes: 256 << 20,
            earley: EarleyConfig::default(),
        }
    }
}

impl AutoConfig {
    /// The knobs of this backend's own, read from `options` by name (beside
    /// earley's, which go to the earley half).
    pub const OPTIONS: [&'static str; 5] = [
        "tables",
        "table_max_dfa_states",
        "table_max_index_bytes",
        "table_cache_entries",
        "table_cache_bytes",
    ];

    /// Reads the knobs from a registry [`BackendConfig`]: this backend's
    /// own ([`AutoConfig::OPTIONS`]) and earley's; any other option is an
    /// error naming it and listing those taken.
    pub fn from_backend_config(config: &BackendConfig) -> Result<Self, GrammarError> {
        let known: Vec<&str> = Self::OPTIONS
            .iter()
            .chain(EarleyConfig::OPTIONS.iter())
            .copied()
            .collect();
        config.check_options(crate::BACKEND_NAME, &known)?;
        let earley_options: BTreeMap<String, String> = config
            .options
            .iter()
            .filter(|(k, _)| EarleyConfig::OPTIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let earley = EarleyConfig::from_backend_config(&BackendConfig {
            options: earley_options,
            think_end_token: None,
            ..config.clone()
        })?;
        let d = AutoConfig::default();
        let parsed = AutoConfig {
            max_rollback: config.max_rollback,
            tables: config.option("tables", d.tables)?,
            table_max_dfa_states: config.option("table_max_dfa_states", d.table_max_dfa_states)?,
            table_max_index_bytes: config
                .option("table_max_index_bytes", d.table_max_index_bytes)?,
            table_cache_entries: config.option("table_cache_entries", d.table_cache_entries)?,
            table_cache_bytes: config.option("table_cache_bytes", d.table_cache_bytes)?,
            earley,
        };
        parsed.table_config().validate().map_err(|e| match e {
            GrammarError::InvalidConfig(m) => {
                GrammarError::InvalidConfig(m.replace("max_dfa_states", "table_max_dfa_states"))
            }
            other => other,
        })?;
        Ok(parsed)
    }

    /// The regex-fsm configuration tables are built with: regex-fsm's
    /// defaults under this backend's budget, one thread (the background
    /// thread itself).
    pub fn table_config(&self) -> RegexFsmConfig {
        RegexFsmConfig {
            max_rollback: self.max_rollback,
            max_dfa_states: self.table_max_dfa_states,
            max_index_bytes: self.table_max_index_bytes,
            max_whitespace: self.earley.max_whitespace,
            nfa_size_limit: self.earley.nfa_size_limit,
            dfa_size_limit: self.earley.dfa_size_limit,
            determinize_size_limit: self.earley.determinize_size_limit,
            parallel_build: false,
            ..RegexFsmConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_and_earley_options_are_read_and_others_refused() {
        let mut c = BackendConfig {
            max_rollback: 5,
            ..Default::default()
        };
        c.options
            .insert("table_max_dfa_states".into(), "300".into());
        c.options.insert("max_items".into(), "777".into());
        c.options.insert("tables".into(), "false".into());
        let a = AutoConfig::from_backend_config(&c).unwrap();
        assert_eq!(a.table_max_dfa_states, 300);
        assert_eq!(a.table_config().max_dfa_states, 300);
        assert_eq!(a.table_config().max_rollback, 5);
        assert_eq!(a.earley.max_items, 777);
        assert_eq!(a.earley.max_rollback, 5);
        assert!(!a.tables);

        c.options.insert("walk_cache_bytes".into(), "0".into());
        let e = AutoConfig::from_backend_config(&c).unwrap_err().to_string();
        assert!(
            e.contains("`auto`") && e.contains("no option `walk_cache_bytes`"),
            "{e}"
        );
        c.options.remove("walk_cache_bytes");
        c.options.insert("table_max_dfa_states".into(), "1".into());
        let e = AutoConfig::from_backend_config(&c).unwrap_err().to_string();
        assert!(e.contains("table_max_dfa_states"), "{e}");
        c.options
            .insert("table_max_dfa_states".into(), "many".into());
        let e = AutoConfig::from_backend_config(&c).unwrap_err().to_string();
        assert!(e.contains("table_max_dfa_states"), "{e}");
    }
}
