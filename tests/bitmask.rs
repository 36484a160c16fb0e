//! Batch mask filling: constrained rows equal a single-matcher fill,
//! unconstrained and terminated requests get full rows, on both the serial
//! and the parallel path.

use std::sync::Arc;
use tokensieve::vocab::fixtures;
use tokensieve::{BackendConfig, Constraint, GrammarObject, TokenBitmask, create_backend};
use tokensieve_example_custom_backend::NAME as CHOICE;

fn check_batch(batch: usize) {
    let vocab = Arc::new(fixtures::json_tiny());
    let backend = create_backend(CHOICE, &BackendConfig::default(), vocab.clone()).unwrap();
    let grammar = backend
        .compile(&Constraint::choice(["null", "nil"]))
        .unwrap();
    let mut matchers: Vec<Box<dyn GrammarObject>> = (0..batch).map(|_| grammar.matcher()).collect();
    // Row 0: fresh; row 1: after "n"; row 2 (if any): terminated.
    if batch > 1 {
        matchers[1].accept_token(b'n' as u32).unwrap();
    }
    if batch > 2 {
        matchers[2]
            .accept_tokens(&vocab.encode_greedy(b"nil").unwrap())
            .unwrap();
        matchers[2].accept_token(vocab.stop_tokens()[0]).unwrap();
        assert!(matchers[2].is_terminated());
    }
    let expected: Vec<Vec<u32>> = matchers
        .iter_mut()
        .map(|m| {
            let mut row = vec![0u32; vocab.mask_words()];
            m.fill_bitmask(&mut row);
            row
        })
        .collect();
    let mut mask = TokenBitmask::new(batch, vocab.vocab_size());
    mask.as_mut_slice().fill(0x5555_5555); // garbage that must be overwritten
    let mut slots: Vec<Option<&mut dyn GrammarObject>> = matchers
        .iter_mut()
        .enumerate()
        .map(|(i, m)| {
            if i == batch - 1 && batch > 3 {
                None
            } else {
                Some(m.as_mut())
            }
        })
        .collect();
    mask.fill_batch(&mut slots);
    for (i, exp) in expected.iter().enumerate() {
        let full = (i == 2 && batch > 2) || (i == batch - 1 && batch > 3);
        if full {
            assert!(
                mask.row(i).iter().all(|&w| w == u32::MAX),
                "row {i} should be full"
            );
        } else {
            assert_eq!(mask.row(i), exp.as_slice(), "row {i}");
        }
    }
}

#[test]
fn serial_path() {
    check_batch(1);
    check_batch(3);
}

#[test]
fn parallel_path() {
    check_batch(tokensieve::bitmask::PARALLEL_FILL_THRESHOLD);
    check_batch(17);
}
