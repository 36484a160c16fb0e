//! Real vocabularies from `../shared/data/tokenizers/*/tokenizer.json`: texts
//! tokenized by the real tokenizer are accepted (matching) or rejected
//! (non-matching) token by token, with the mask agreeing at every step.
//! Skipped, with a message, when the data folder is absent.

mod common;

use common::PrefixOracle;
use std::path::PathBuf;
use std::sync::Arc;
use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::{Constraint, GrammarBackend};
use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};

fn tokenizer_files() -> Option<Vec<(String, PathBuf)>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/tokenizers");
    let Ok(dir) = std::fs::read_dir(&root) else {
        tokensieve_core::skip!("{} not found", root.display());
        return None;
    };
    let mut files: Vec<(String, PathBuf)> = dir
        .filter_map(|e| e.ok())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.path().join("tokenizer.json"),
            )
        })
        .filter(|(_, p)| p.is_file())
        .collect();
    files.sort();
    Some(files)
}

/// (constraint, texts it matches, texts it does not).
fn cases() -> Vec<(Constraint, Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (
            Constraint::regex("[a-z]+( [a-z]+)*"),
            vec!["hello world", "the quick brown fox"],
            vec!["hello World", "hello  world", "hello world "],
        ),
        (
            Constraint::regex(r#"\{"name": "[A-Za-z ]+", "age": [0-9]{1,3}\}"#),
            vec![r#"{"name": "Ada Lovelace", "age": 36}"#],
            vec![
                r#"{"name": "Ada", "age": 1234}"#,
                r#"{"name": "Ada", "age": 36} "#,
            ],
        ),
        (
            Constraint::regex(r"\d{4}-\d{2}-\d{2}"),
            vec!["2024-05-17"],
            vec!["2024-5-17", "2024-05-177"],
        ),
        (
            Constraint::choice(["Paris", "London", "New York"]),
            vec!["Paris", "New York"],
            vec!["Berlin", "New  York", "Londo"],
        ),
        (
            Constraint::regex(r#"[^"]{1,12}"#),
            vec!["héllo 日本語 😀", "a"],
            vec!["a\"b", "0123456789abc"],
        ),
    ]
}

#[test]
fn real_tokenizations_are_accepted_and_rejected() {
    let Some(files) = tokenizer_files() else {
        return;
    };
    let mut tested = 0;
    let mut skipped = Vec::new();
    for (name, path) in files {
        let tok = match HfTokenizer::from_file(&path) {
            Ok(t) => t,
            Err(e) => {
                tokensieve_core::skip!("{name}: the loader cannot read it: {e}");
                skipped.push(name);
                continue;
            }
        };
        let vocab = Arc::new(tok.vocabulary().clone());
        let stop = *vocab.stop_tokens().first().expect("a stop token");
        let backend = RegexFsmBackend::new(vocab.clone(), RegexFsmConfig::default());
        let mut row = vec![0u32; vocab.mask_words()];
        for (constraint, good, bad) in cases() {
            let grammar = backend
                .compile(&constraint)
                .unwrap_or_else(|e| panic!("{name}: {constraint:?}: {e}"));
            for text in good {
                let ids = tok.encode(text).unwrap();
                assert_eq!(vocab.decode(&ids), text.as_bytes(), "{name}: {text:?}");
                let mut m = grammar.matcher();
                for &id in &ids {
                    m.fill_bitmask(&mut row);
                    assert!(
                        tokensieve_core::bitmask::row_is_allowed(&row, id),
                        "{name}: {text:?}: token {id} {:?} not in the mask",
                        String::from_utf8_lossy(vocab.token_bytes(id))
                    );
                    m.accept_token(id)
                        .unwrap_or_else(|e| panic!("{name}: {text:?}: {e}"));
                }
                assert!(m.is_accepting(), "{name}: {text:?}");
                m.fill_bitmask(&mut row);
                assert!(tokensieve_core::bitmask::row_is_allowed(&row, stop));
                m.accept_token(stop).unwrap();
                assert!(m.is_terminated());
            }
            for text in bad {
                let ids = tok.encode(text).unwrap();
                let mut m = grammar.matcher();
                let mut rejected = false;
                for &id in &ids {
                    m.fill_bitmask(&mut row);
                    let in_mask = tokensieve_core::bitmask::row_is_allowed(&row, id);
                    let ok = m.accept_token(id).is_ok();
                    assert_eq!(in_mask, ok, "{name}: {text:?}: mask and matcher disagree");
                    if !ok {
                        rejected = true;
                        break;
                    }
                }
                assert!(
                    rejected || !m.is_accepting(),
                    "{name}: {text:?} must be rejected"
                );
                if !rejected {
                    assert!(m.accept_token(stop).is_err());
                }
            }
        }
        check_masks_by_brute_force(&name, &tok, &backend);
        tested += 1;
    }
    eprintln!("real vocabularies tested: {tested}, skipped: {skipped:?}");
    assert!(tested > 0, "no tokenizer could be loaded");
}

/// Along a real tokenization, for a strided sample of the vocabulary, the mask
/// bit must equal "the prefix plus this token can still be completed" (an
/// oracle built on a plain `regex-automata` DFA) and must agree with
/// `accept_token`.
fn check_masks_by_brute_force(name: &str, tok: &HfTokenizer, backend: &RegexFsmBackend) {
    let pattern = r#"\{"name": "([^"\\]|\\.){0,20}", "tags": \[("[a-zé日本 ]+"(, )?){0,3}\]\}"#;
    let text = r#"{"name": "Zoë \"the\" 日本", "tags": ["a b", "日本"]}"#;
    let grammar = backend.compile_regex(pattern).unwrap();
    let mut oracle = PrefixOracle::new(pattern);
    let vocab = tokensieve_core::GrammarBackend::vocabulary(backend).clone();
    let ids = tok.encode(text).unwrap();
    let mut m = grammar.regex_matcher();
    let mut row = vec![0u32; vocab.mask_words()];
    let mut prefix = Vec::new();
    let stride = (vocab.vocab_size() / 600).max(1);
    for (step, &next) in ids.iter().enumerate() {
        tokensieve_core::GrammarObject::fill_bitmask(&mut m, &mut row);
        // A different sample at every step, always including the next token.
        let sample = (step % stride..vocab.vocab_size())
            .step_by(stride)
            .map(|i| i as u32);
        for id in sample.chain([next]) {
            let bit = tokensieve_core::bitmask::row_is_allowed(&row, id);
            let expect = vocab.grammar_bytes(id).is_some_and(|b| {
                let mut extended = prefix.clone();
                extended.extend_from_slice(b);
                oracle.viable(&extended)
            }) || (vocab.is_stop(id) && oracle.full_match(&prefix));
            assert_eq!(
                bit,
                expect,
                "{name}: token {id} after {:?}",
                String::from_utf8_lossy(&prefix)
            );
            let mut fork = m.clone();
            let accepted = tokensieve_core::GrammarObject::accept_token(&mut fork, id).is_ok();
            assert_eq!(accepted, expect, "{name}: accept_token({id})");
        }
        tokensieve_core::GrammarObject::accept_token(&mut m, next).unwrap();
        prefix.extend_from_slice(vocab.token_bytes(next));
    }
    assert!(tokensieve_core::GrammarObject::is_accepting(&m));
}
