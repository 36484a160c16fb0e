//! The backend registry. Backends register at link time with
//! `inventory::submit!(BackendRegistration { .. })` or at run time with
//! [`register_backend`]; [`instantiate_backend`] looks a name up (run-time
//! registrations first, then link-time ones, then an error listing every name).
//!
//! The facade's `tokensieve::create_backend` adds the reasoner wrapper on top
//! when the config names a think-end token.

use crate::error::GrammarError;
use crate::grammar::GrammarBackend;
use crate::vocab::Vocabulary;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// Plain-data configuration handed to every backend factory. Every knob is
/// optional; backend-specific knobs go in `options` (documented per backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendConfig {
    /// Steps a matcher keeps for `rollback` (speculative decoding). Default 32.
    pub max_rollback: usize,
    /// Reasoning models: the token that ends the thinking section
    /// (e.g. `</think>`). When set, `tokensieve::create_backend` wraps the
    /// backend in the reasoner.
    pub think_end_token: Option<String>,
    /// Backend-specific knobs, `name -> value` (e.g. `max_dfa_states`).
    pub options: BTreeMap<String, String>,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            max_rollback: 32,
            think_end_token: None,
            options: BTreeMap::new(),
        }
    }
}

impl BackendConfig {
    /// Refuses an option `backend` does not take (`known`: the names it
    /// reads), naming the option and listing those it takes: a misspelt
    /// knob would otherwise be read as absent, and a run made with its
    /// default (`shared_lexeme=false` benchmarking warm).
    pub fn check_options(&self, backend: &str, known: &[&str]) -> Result<(), GrammarError> {
        match self.options.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(unknown) => Err(GrammarError::InvalidConfig(format!(
                "backend `{backend}` has no option `{unknown}` (its options: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ))),
        }
    }

    /// A backend knob parsed as `T`, or `default` when absent. A value that
    /// does not parse is an error naming the knob.
    pub fn option<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, GrammarError> {
        match self.options.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                GrammarError::InvalidConfig(format!("option `{name}`: cannot parse `{v}`"))
            }),
        }
    }
}

/// Builds a backend for a vocabulary.
pub type BackendFactory =
    fn(&BackendConfig, Arc<Vocabulary>) -> Result<Arc<dyn GrammarBackend>, GrammarError>;

/// A link-time registration, collected by `inventory`.
pub struct BackendRegistration {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// One line for `tokensieve backends`.
    pub description: &'static str,
    pub factory: BackendFactory,
}

inventory::collect!(BackendRegistration);

type DynFactory = Arc<
    dyn Fn(&BackendConfig, Arc<Vocabulary>) -> Result<Arc<dyn GrammarBackend>, GrammarError>
        + Send
        + Sync,
>;

struct RuntimeEntry {
    description: String,
    factory: DynFactory,
}

static RUNTIME: RwLock<BTreeMap<String, RuntimeEntry>> = RwLock::new(BTreeMap::new());

/// Registers (or replaces) a backend at run time. Run-time registrations are
/// looked up before link-time ones, so this can also override a built-in.
pub fn register_backend<F>(name: impl Into<String>, description: impl Into<String>, factory: F)
where
    F: Fn(&BackendConfig, Arc<Vocabulary>) -> Result<Arc<dyn GrammarBackend>, GrammarError>
        + Send
        + Sync
        + 'static,
{
    let mut map = RUNTIME.write().unwrap_or_else(|e| e.into_inner());
    map.insert(
        name.into(),
        RuntimeEntry {
            description: description.into(),
            factory: Arc::new(factory),
        },
    );
}

/// Removes a run-time registration; returns whether there was one.
pub fn unregister_backend(name: &str) -> bool {
    let mut map = RUNTIME.write().unwrap_or_else(|e| e.into_inner());
    map.remove(name).is_some()
}

/// A registered backend, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendInfo {
    pub name: String,
    pub aliases: Vec<String>,
    pub description: String,
    /// `runtime` or `builtin` (link-time).
    pub origin: &'static str,
}

/// Every registered backend: run-time ones first, then link-time ones, each
/// group by name. A link-time name shadowed by a run-time one is left out.
pub fn available_backends() -> Vec<BackendInfo> {
    let map = RUNTIME.read().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<BackendInfo> = map
        .iter()
        .map(|(name, e)| BackendInfo {
            name: name.clone(),
            aliases: Vec::new(),
            description: e.description.clone(),
            origin: "runtime",
        })
        .collect();
    let mut builtin: Vec<&BackendRegistration> = inventory::iter::<BackendRegistration>
        .into_iter()
        .filter(|r| !map.contains_key(r.name))
        .collect();
    builtin.sort_by_key(|r| r.name);
    out.extend(builtin.into_iter().map(|r| BackendInfo {
        name: r.name.to_string(),
        aliases: r.aliases.iter().map(|a| a.to_string()).collect(),
        description: r.description.to_string(),
        origin: "builtin",
    }));
    out
}

/// Creates the backend registered as `name` (or with `name` as an alias).
/// Does not apply the reasoner wrapper; see `tokensieve::create_backend`.
pub fn instantiate_backend(
    name: &str,
    config: &BackendConfig,
    vocab: Arc<Vocabulary>,
) -> Result<Arc<dyn GrammarBackend>, GrammarError> {
    let runtime = {
        let map = RUNTIME.read().unwrap_or_else(|e| e.into_inner());
        map.get(name).map(|e| e.factory.clone())
    };
    if let Some(factory) = runtime {
        return factory(config, vocab);
    }
    let by_name = inventory::iter::<BackendRegistration>
        .into_iter()
        .find(|r| r.name == name);
    let found = by_name.or_else(|| {
        inventory::iter::<BackendRegistration>
            .into_iter()
            .find(|r| r.aliases.contains(&name))
    });
    match found {
        Some(r) => (r.factory)(config, vocab),
        None => Err(GrammarError::UnknownBackend {
            name: name.to_string(),
            available: available_backends().into_iter().map(|b| b.name).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::fixtures;

    #[test]
    fn unknown_backend_lists_names() {
        let err = instantiate_backend(
            "nope",
            &BackendConfig::default(),
            Arc::new(fixtures::json_tiny()),
        )
        .err()
        .unwrap();
        let msg = err.to_string();
        assert!(msg.contains("unknown backend `nope`"), "{msg}");
        assert!(msg.contains("none"), "{msg}");
    }

    #[test]
    fn runtime_registration_shadows_builtin() {
        register_backend("core-test-runtime", "test", |c, v| {
            Ok(Arc::new(crate::none_backend::NoneBackend::new(v, c)))
        });
        let b = instantiate_backend(
            "core-test-runtime",
            &BackendConfig::default(),
            Arc::new(fixtures::json_tiny()),
        )
        .unwrap();
        assert_eq!(b.name(), "none");
        assert!(
            available_backends()
                .iter()
                .any(|b| b.name == "core-test-runtime" && b.origin == "runtime")
        );
        assert!(unregister_backend("core-test-runtime"));
    }

    #[test]
    fn bad_option_is_named() {
        let mut c = BackendConfig::default();
        c.options.insert("max_dfa_states".into(), "lots".into());
        let e = c.option::<usize>("max_dfa_states", 10).unwrap_err();
        assert!(e.to_string().contains("max_dfa_states"));
    }

    #[test]
    fn an_option_the_backend_does_not_take_is_named() {
        let mut c = BackendConfig::default();
        assert!(c.check_options("b", &[]).is_ok());
        c.options.insert("max_dfa_state".into(), "9".into());
        let e = c
            .check_options("b", &["max_dfa_states", "minimize"])
            .unwrap_err();
        let e = e.to_string();
        assert!(e.contains("`b`") && e.contains("`max_dfa_state`"), "{e}");
        assert!(e.contains("max_dfa_states, minimize"), "{e}");
        assert!(c.check_options("b", &["max_dfa_state"]).is_ok());
        // The `none` backend takes no option.
        let e = instantiate_backend("none", &c, Arc::new(Vocabulary::from_byte_tokens([b"a"])));
        assert!(e.is_err_and(|e| e.to_string().contains("its options: none")));
    }
}
