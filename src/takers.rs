//! The wrapper [`create_backend`](crate::create_backend) puts around every
//! backend: when it refuses a constraint as unsupported (or past one of its
//! limits), the error names the registered backends that compile it.

use std::sync::Arc;

use tokensieve_core::{
    BackendConfig, CancelToken, CompiledGrammar, Constraint, GrammarBackend, GrammarError,
    GuardedBackend, SpecKind, Vocabulary,
};

/// A backend whose refusals say which other backends take the constraint.
/// Costs nothing until a refusal; then one compile with each other
/// registered backend that supports the kind (`none`, which takes
/// everything by allowing everything, is never named), each under its own
/// counted budgets and the caller's cancel token: a refused compile costs
/// at most one bounded compile per registered backend.
pub(crate) struct NamesTakers {
    pub inner: Arc<dyn GrammarBackend>,
    /// The config the others are made with: the same rollback window, none
    /// of this backend's options (knobs are per backend).
    pub config: BackendConfig,
}

impl NamesTakers {
    /// Every other registered backend, made for this vocabulary: not this
    /// one (by name or alias, or a wrapper reporting its name), not `none`.
    fn others(&self) -> impl Iterator<Item = (String, Arc<dyn GrammarBackend>)> + '_ {
        let me = self.inner.name();
        crate::available_backends()
            .into_iter()
            .filter(move |info| {
                info.name != me && info.name != "none" && !info.aliases.iter().any(|a| a == me)
            })
            .filter_map(move |info| {
                let other = tokensieve_core::instantiate_backend(
                    &info.name,
                    &self.config,
                    self.inner.vocabulary().clone(),
                )
                .ok()?;
                // `none` under another name is no taker either.
                (other.name() != me && other.name() != "none").then_some((info.name, other))
            })
    }

    fn explain(
        &self,
        constraint: &Constraint,
        error: GrammarError,
        cancel: &CancelToken,
    ) -> GrammarError {
        if !error.is_refusal() {
            return error;
        }
        let kind = constraint.kind();
        let mut takers = Vec::new();
        for (name, other) in self.others() {
            // Guarded: a panic of theirs is a no, not ours.
            if other.supported_kinds().contains(&kind)
                && GuardedBackend(other)
                    .compile_cancellable(constraint, cancel)
                    .is_ok()
            {
                takers.push(name);
            }
        }
        if takers.is_empty() {
            error
        } else {
            GrammarError::TakenElsewhere {
                error: Box::new(error),
                takers,
            }
        }
    }
}

impl GrammarBackend for NamesTakers {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn supported_kinds(&self) -> &[SpecKind] {
        self.inner.supported_kinds()
    }

    fn vocabulary(&self) -> &Arc<Vocabulary> {
        self.inner.vocabulary()
    }

    fn compile(&self, constraint: &Constraint) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        self.inner
            .compile(constraint)
            .map_err(|e| self.explain(constraint, e, &CancelToken::new()))
    }

    fn compile_cancellable(
        &self,
        constraint: &Constraint,
        cancel: &CancelToken,
    ) -> Result<Arc<dyn CompiledGrammar>, GrammarError> {
        self.inner
            .compile_cancellable(constraint, cancel)
            .map_err(|e| self.explain(constraint, e, cancel))
    }

    /// A kind this backend does not take at all: the others that take the
    /// kind are named (no compile: their kinds say it).
    fn unsupported_spec(&self, kind: SpecKind) -> GrammarError {
        let error = self.inner.unsupported_spec(kind);
        let takers: Vec<String> = self
            .others()
            .filter(|(_, other)| other.supported_kinds().contains(&kind))
            .map(|(name, _)| name)
            .collect();
        if takers.is_empty() {
            error
        } else {
            GrammarError::TakenElsewhere {
                error: Box::new(error),
                takers,
            }
        }
    }
}
