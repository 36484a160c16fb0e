//! The reasoner around a real inner grammar (the example `Choice` backend).

use std::sync::Arc;
use tokensieve_core::bitmask::{row_allowed_tokens, row_count_allowed, row_is_allowed};
use tokensieve_core::{
    BackendConfig, Constraint, GrammarBackend, GrammarObject, StepError, VocabType, Vocabulary,
    instantiate_backend,
};
use tokensieve_reasoner::ReasonerBackend;

// Link the example crate so its `example-choice` registration is present.
use tokensieve_example_custom_backend::NAME as CHOICE;

/// Bytes 0..=255, `</think>` (special), `<eos>` (special, stop), then padding to 300.
fn vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
    tokens.push((b"yes".to_vec(), false));
    tokens.push((b"</think>".to_vec(), true));
    tokens.push((b"<eos>".to_vec(), true));
    let v = Vocabulary::new(VocabType::Raw, tokens)
        .with_stop_tokens(&[258])
        .unwrap()
        .with_vocab_size(300)
        .unwrap();
    Arc::new(v)
}

const THINK_END: u32 = 257;
const EOS: u32 = 258;
const YES: u32 = 256;

fn reasoner(max_rollback: usize) -> ReasonerBackend {
    let config = BackendConfig {
        max_rollback,
        ..Default::default()
    };
    let inner = instantiate_backend(CHOICE, &config, vocab()).unwrap();
    ReasonerBackend::new(inner, "</think>", max_rollback).unwrap()
}

fn mask(m: &mut dyn GrammarObject) -> Vec<u32> {
    let mut row = vec![0u32; 300usize.div_ceil(32)];
    m.fill_bitmask(&mut row);
    row
}

#[test]
fn thinking_is_free_then_the_inner_grammar_constrains() {
    let g = reasoner(32)
        .compile(&Constraint::choice(["yes", "no"]))
        .unwrap();
    let mut m = g.matcher();
    // Thinking: every tokenizer id allowed, padding never.
    let row = mask(m.as_mut());
    assert_eq!(row_count_allowed(&row, 300), 259);
    assert!(!row_is_allowed(&row, 259));
    for &b in b"x{\"" {
        m.accept_token(b as u32).unwrap();
    }
    assert!(!m.is_accepting());
    m.accept_token(THINK_END).unwrap();
    // Constrained now: only the first bytes of "yes"/"no" and the `yes` token.
    let row = mask(m.as_mut());
    assert_eq!(
        row_allowed_tokens(&row, 300),
        vec![b'n' as u32, b'y' as u32, YES]
    );
    assert_eq!(
        m.accept_token(b'x' as u32),
        Err(StepError::TokenRejected { token: b'x' as u32 })
    );
    // The think-end token was not fed to the inner grammar: "no" is still whole.
    m.accept_token(b'n' as u32).unwrap();
    m.accept_token(b'o' as u32).unwrap();
    assert!(m.is_accepting());
    assert!(row_is_allowed(&mask(m.as_mut()), EOS));
    m.accept_token(EOS).unwrap();
    assert!(m.is_terminated());
}

#[test]
fn a_second_think_end_is_an_ordinary_inner_token() {
    let g = reasoner(32).compile(&Constraint::choice(["yes"])).unwrap();
    let mut m = g.matcher();
    m.accept_token(THINK_END).unwrap();
    // `</think>` is special: the inner grammar refuses it.
    assert!(m.accept_token(THINK_END).is_err());
}

#[test]
fn rollback_crosses_the_think_end_boundary() {
    let g = reasoner(32)
        .compile(&Constraint::choice(["yes", "no"]))
        .unwrap();
    let mut m = g.matcher();
    m.accept_token(b'a' as u32).unwrap();
    let thinking_mask = mask(m.as_mut());
    m.accept_token(THINK_END).unwrap();
    m.accept_token(b'n' as u32).unwrap();
    let after_n = mask(m.as_mut());
    assert_eq!(m.rollback_available(), 3);
    m.rollback(2).unwrap();
    assert_eq!(mask(m.as_mut()), thinking_mask, "back to thinking");
    assert!(!m.is_accepting());
    m.accept_token(THINK_END).unwrap();
    m.accept_token(b'n' as u32).unwrap();
    assert_eq!(mask(m.as_mut()), after_n, "same state after replay");
    assert!(matches!(
        m.rollback(4),
        Err(StepError::RollbackTooFar {
            requested: 4,
            available: 3
        })
    ));
}

#[test]
fn rollback_is_bounded_by_the_configured_maximum() {
    let g = reasoner(2).compile(&Constraint::choice(["yes"])).unwrap();
    let mut m = g.matcher();
    for &b in b"abcd" {
        m.accept_token(b as u32).unwrap();
    }
    assert_eq!(m.rollback_available(), 2);
    assert!(m.rollback(3).is_err());
    m.rollback(2).unwrap();
}

#[test]
fn init_reasoning_false_starts_constrained_and_fork_is_independent() {
    let g = reasoner(32).compile(&Constraint::choice(["yes"])).unwrap();
    let mut m = g.matcher();
    m.maybe_init_reasoning(false);
    assert_eq!(
        row_allowed_tokens(&mask(m.as_mut()), 300),
        vec![b'y' as u32, YES]
    );
    let mut f = m.fork();
    f.accept_token(YES).unwrap();
    assert!(f.is_accepting());
    assert!(!m.is_accepting());
    m.reset();
    assert_eq!(
        row_allowed_tokens(&mask(m.as_mut()), 300),
        vec![b'y' as u32, YES],
        "reset keeps the init choice"
    );
}

#[test]
fn stop_while_thinking_terminates_and_rolls_back() {
    let g = reasoner(32).compile(&Constraint::choice(["yes"])).unwrap();
    let mut m = g.matcher();
    m.accept_token(EOS).unwrap();
    assert!(m.is_terminated());
    assert_eq!(m.accept_token(b'a' as u32), Err(StepError::Terminated));
    m.rollback(1).unwrap();
    assert!(!m.is_terminated());
}

#[test]
fn unknown_think_end_token_is_a_clear_error() {
    let inner = instantiate_backend(CHOICE, &BackendConfig::default(), vocab()).unwrap();
    let err = ReasonerBackend::new(inner, "<|end_think|>", 8)
        .err()
        .unwrap();
    assert!(err.to_string().contains("<|end_think|>"), "{err}");
}

#[test]
fn kinds_and_errors_come_from_the_inner_backend() {
    let r = reasoner(8);
    assert_eq!(r.supported_kinds(), &[tokensieve_core::SpecKind::Choice]);
    assert!(r.compile(&Constraint::regex("a")).is_err());
    assert!(r.name().ends_with("+reasoner"));
}
