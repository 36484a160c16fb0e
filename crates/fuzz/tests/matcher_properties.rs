//! The matcher invariants as seeded property tests: many random call
//! sequences (accept, fill, rollback, fork, reset, jump-forward, stop) on
//! every grammar of the `matcher` target and on random grammars, both
//! backends, each checked against the reference recognizer after every
//! call (see `tokensieve_fuzz::matcher`).

use tokensieve_core::testing::SplitMix64;
use tokensieve_fuzz::matcher::{GRAMMARS, matcher};

/// A random call sequence for grammar `grammar` (an index of [`GRAMMARS`],
/// or past them for a random grammar): mostly small bytes, so that most
/// tokens come from the mask and the text grows.
fn sequence(grammar: usize, r: &mut SplitMix64) -> Vec<u8> {
    let mut input = vec![grammar as u8];
    let len = 16 + r.below(240);
    input.extend((0..len).map(|_| {
        if r.below(4) == 0 {
            r.next_u32() as u8
        } else {
            r.below(160) as u8
        }
    }));
    input
}

#[test]
fn every_grammar_on_both_backends_agrees_with_the_recognizer() {
    let mut r = SplitMix64(0x4D41_5443);
    for grammar in 0..GRAMMARS.len() {
        for _ in 0..8 {
            matcher(&sequence(grammar, &mut r));
        }
    }
}

#[test]
fn random_grammars_on_both_backends_agree_with_the_recognizer() {
    let mut r = SplitMix64(0x5241_4E44);
    for _ in 0..60 {
        matcher(&sequence(GRAMMARS.len(), &mut r));
    }
}
