//! placeholder, being written
use std::sync::Arc;
use tokensieve_core::{GrammarBackend, GrammarError};
pub struct ReasonerBackend;
impl ReasonerBackend {
    pub fn new(_inner: Arc<dyn GrammarBackend>, _t: &str) -> Result<Self, GrammarError> { Err(GrammarError::InvalidConfig("reasoner not written yet".into())) }
}
impl GrammarBackend for ReasonerBackend {
    fn name(&self) -> &str { "" }
    fn supported_kinds(&self) -> &[tokensieve_core::SpecKind] { &[] }
    fn vocabulary(&self) -> &Arc<tokensieve_core::Vocabulary> { unreachable!() }
    fn compile(&self, _c: &tokensieve_core::Constraint) -> Result<Arc<dyn tokensieve_core::CompiledGrammar>, GrammarError> { unreachable!() }
}
