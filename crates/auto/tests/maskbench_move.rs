//! Real MaskBench instances with the real Llama 3 tokenizer: at every step
//! of a valid instance, auto's mask equals earley's, and where auto has a
//! table (the schema's language is regular) also regex-fsm's; the auto
//! matcher is held on earley for the first half of the tokens and moves onto
//! the table in the middle. Invalid instances are refused at the same token
//! by all three. Needs `../shared/data` (the sample list of the facade's
//! MaskBench test); without it the test says so on stderr and returns.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokensieve_auto::{AutoBackend, AutoConfig};
use tokensieve_core::hf::HfTokenizer;
use tokensieve_core::maskbench::MaskBenchFile;
use tokensieve_core::{CancelToken, Constraint, GrammarBackend, GrammarObject, bitmask};
use tokensieve_earley::{EarleyBackend, EarleyConfig};
use tokensieve_regex_fsm::{RegexFsmBackend, RegexFsmConfig};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn data(path: &str) -> PathBuf {
    Path::new(ROOT).join("../shared/data").join(path)
}

/// Steps all matchers through `tokens`, comparing masks before each;
/// `auto` moves at `move_at`. Returns the index of the first token refused
/// (by all alike), or `None` when every token was accepted.
fn walk(
    words: usize,
    tokens: &[u32],
    grammar: &tokensieve_auto::AutoGrammar,
    others: &mut [Box<dyn GrammarObject>],
    label: &str,
) -> (Option<usize>, bool) {
    let mut auto = grammar.auto_matcher();
    auto.pin_to_earley(true);
    auto.reset();
    let move_at = tokens.len() / 2;
    let mut moved = false;
    let (mut row, mut other_row) = (vec![0u32; words], vec![0u32; words]);
    for (i, &t) in tokens.iter().enumerate() {
        if i == move_at && grammar.wait_for_table() {
            auto.pin_to_earley(false);
            moved = true;
        }
        auto.fill_bitmask(&mut row);
        assert_eq!(auto.on_table(), moved, "{label}: token {i}");
        for (k, m) in others.iter_mut().enumerate() {
            m.fill_bitmask(&mut other_row);
            assert!(
                row == other_row,
                "{label}: the masks before token {i} differ (auto on the table: {moved}, other {k})"
            );
        }
        if !bitmask::row_is_allowed(&row, t) {
            return (Some(i), moved);
        }
        auto.accept_token(t).unwrap();
        for m in others.iter_mut() {
            m.accept_token(t).unwrap();
        }
    }
    let end = auto.is_accepting();
    for m in others.iter() {
        assert_eq!(m.is_accepting(), end, "{label}: the end");
    }
    (None, moved)
}

#[test]
fn masks_equal_earleys_and_regex_fsms_with_the_move_in_the_middle() {
    let tokenizer = data("tokenizers/llama3/tokenizer.json");
    let dev = data("maskbench-dev");
    if !tokenizer.exists() || !dev.is_dir() {
        tokensieve_core::skip!(
            "{} or {} not found: no real MaskBench instances walked",
            tokenizer.display(),
            dev.display()
        );
        return;
    }
    let tok = HfTokenizer::from_file(&tokenizer).expect("the Llama 3 tokenizer loads");
    let vocab = Arc::new(tok.vocabulary().clone());
    let words = vocab.mask_words();
    let auto = AutoBackend::new(
        vocab.clone(),
        AutoConfig {
            // Each build its own: every file moves from earley.
            table_cache_entries: 0,
            ..AutoConfig::default()
        },
    );
    let earley = EarleyBackend::new(vocab.clone(), EarleyConfig::default());
    let regex = RegexFsmBackend::new(vocab.clone(), RegexFsmConfig::default());
    let list = std::fs::read_to_string(Path::new(ROOT).join("tests/fixtures/maskbench_sample.txt"))
        .expect("the facade's sample list");
    let names: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let (mut files, mut with_table, mut moves, mut refusals) = (0, 0, 0, 0);
    for name in names {
        let file = MaskBenchFile::load(&dev.join(name)).expect("a MaskBench file");
        let constraint = Constraint::json_schema(file.schema.to_string());
        let Ok(grammar) = auto.compile_auto(&constraint, &CancelToken::new()) else {
            continue;
        };
        files += 1;
        let reference = earley
            .compile(&constraint)
            .expect("earley compiles what auto does");
        let table = grammar.wait_for_table();
        // Where auto has a table, regex-fsm alone serves the same language.
        let standalone = if table {
            with_table += 1;
            Some(
                regex
                    .compile(&constraint)
                    .expect("regex-fsm compiles a regular schema"),
            )
        } else {
            None
        };
        // The first valid and the first invalid instance of each file.
        for valid in [true, false] {
            let Some(test) = file.tests.iter().find(|t| t.valid == valid) else {
                continue;
            };
            let tokens = tok.encode(&test.text()).expect("instance text tokenizes");
            let mut others = vec![reference.matcher()];
            others.extend(standalone.as_ref().map(|g| g.matcher()));
            let label = format!("{name} ({})", if valid { "valid" } else { "invalid" });
            let (refused, moved) = walk(words, &tokens, &grammar, &mut others, &label);
            moves += moved as usize;
            refusals += refused.is_some() as usize;
        }
    }
    eprintln!(
        "maskbench move: {files} files compiled, {with_table} with a table, {moves} walks moved in the middle, {refusals} refused a token"
    );
    assert!(with_table > 0 && moves > 0, "no file exercised the move");
}
