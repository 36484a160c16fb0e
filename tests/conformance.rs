//! One conformance corpus (testdata/conformance.json), run against every
//! registered backend that supports each case's spec kind, on the built-in
//! fixture vocabulary:
//! - accept strings walk through (every token's bit set, accepted, end allowed);
//! - reject strings fail (a clear bit, or the end not allowed);
//! - expected masks at chosen prefixes (which single-byte tokens, and whether
//!   a stop token, are allowed);
//! - at every prefix, mask and accept agree for every token of the vocabulary;
//! - backends that compile the same case give identical masks at every prefix.
//!
//! A backend that cannot compile a case is a counted skip, printed, never a pass.

/// Writes straight to the process's stderr: libtest captures `eprintln!` of
/// passing tests, and the CI log must show what ran and what was skipped.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokensieve::bitmask::row_is_allowed;
use tokensieve::vocab::fixtures;
use tokensieve::{BackendConfig, Constraint, ConstraintSpec, GrammarObject, Vocabulary};

use tokensieve_example_custom_backend as _;

fn spec_of(v: &Value) -> Constraint {
    let (kind, arg) = v
        .as_object()
        .and_then(|o| o.iter().next())
        .expect("spec object");
    match kind.as_str() {
        "regex" => Constraint::regex(arg.as_str().unwrap()),
        "choice" => Constraint::choice(
            arg.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string()),
        ),
        "json_schema" => Constraint::new(ConstraintSpec::JsonSchema(arg.to_string())),
        "json_object" => Constraint::new(ConstraintSpec::JsonObject),
        "structural_tag" => {
            Constraint::new(serde_json::from_value(v.clone()).expect("a structural_tag spec"))
        }
        "ebnf" => Constraint::new(ConstraintSpec::Ebnf {
            grammar: arg["grammar"].as_str().unwrap().to_string(),
            root: arg["root"].as_str().unwrap().to_string(),
        }),
        other => panic!("unknown spec kind {other}"),
    }
}

fn mask(m: &mut dyn GrammarObject, vocab: &Vocabulary) -> Vec<u32> {
    let mut row = vec![0u32; vocab.mask_words()];
    m.fill_bitmask(&mut row);
    row
}

/// Walks `text`; Ok(masks at each prefix) if accepted with the end allowed.
fn walk(
    m: &mut dyn GrammarObject,
    vocab: &Vocabulary,
    text: &str,
) -> Result<Vec<Vec<u32>>, String> {
    let tokens = vocab
        .encode_greedy(text.as_bytes())
        .ok_or("not tokenizable")?;
    let mut masks = Vec::new();
    for (i, &t) in tokens.iter().enumerate() {
        let row = mask(m, vocab);
        check_mask_agrees_with_accept(m, vocab, &row);
        masks.push(row.clone());
        if !row_is_allowed(&row, t) {
            return Err(format!("token {i} not in mask"));
        }
        m.accept_token(t)
            .map_err(|e| format!("engine error: in mask but refused: {e}"))?;
    }
    let row = mask(m, vocab);
    masks.push(row.clone());
    let eos = vocab.stop_tokens()[0];
    if row_is_allowed(&row, eos) != m.is_accepting() {
        return Err("stop token bit disagrees with is_accepting".into());
    }
    if !m.is_accepting() {
        return Err("end not allowed".into());
    }
    Ok(masks)
}

/// Bit set <=> a fork accepts the token.
fn check_mask_agrees_with_accept(m: &dyn GrammarObject, vocab: &Vocabulary, row: &[u32]) {
    for t in 0..vocab.vocab_size() as u32 {
        let mut f = m.fork();
        let ok = f.accept_token(t).is_ok();
        assert_eq!(
            ok,
            row_is_allowed(row, t),
            "token {t} ({:?}): mask and accept disagree",
            String::from_utf8_lossy(vocab.token_bytes(t))
        );
    }
}

#[test]
fn corpus_on_every_backend() {
    let cases: Vec<Value> =
        serde_json::from_str(include_str!("../testdata/conformance.json")).unwrap();
    let vocab = Arc::new(fixtures::json_tiny());
    let mut ran = 0;
    let mut skips: Vec<String> = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let constraint = spec_of(&case["spec"]);
        // backend -> masks along every accept string, for the differential check
        let mut seen: BTreeMap<String, Vec<Vec<Vec<u32>>>> = BTreeMap::new();
        for info in tokensieve::available_backends() {
            if info.name == "none" || info.origin == "runtime" {
                continue; // `none` constrains nothing by design
            }
            let backend =
                tokensieve::create_backend(&info.name, &BackendConfig::default(), vocab.clone())
                    .unwrap();
            if !backend.supported_kinds().contains(&constraint.kind()) {
                continue;
            }
            let grammar = match backend.compile(&constraint) {
                Ok(g) => g,
                Err(e) => {
                    skips.push(format!("{}: {name}: {e}", info.name));
                    continue;
                }
            };
            ran += 1;
            let mut all = Vec::new();
            for s in case["accept"].as_array().unwrap() {
                let s = s.as_str().unwrap();
                let mut m = grammar.matcher();
                match walk(m.as_mut(), &vocab, s) {
                    Ok(masks) => all.push(masks),
                    Err(e) => panic!("{}: {name}: valid {s:?} rejected: {e}", info.name),
                }
            }
            for s in case["reject"].as_array().unwrap() {
                let s = s.as_str().unwrap();
                let mut m = grammar.matcher();
                assert!(
                    walk(m.as_mut(), &vocab, s).is_err(),
                    "{}: {name}: invalid {s:?} accepted",
                    info.name
                );
            }
            for probe in case["masks"].as_array().into_iter().flatten() {
                let prefix = probe["prefix"].as_str().unwrap();
                let mut m = grammar.matcher();
                m.accept_bytes(prefix.as_bytes())
                    .unwrap_or_else(|e| panic!("{}: {name}: prefix {prefix:?}: {e}", info.name));
                let row = mask(m.as_mut(), &vocab);
                let single: Vec<u8> = (0..=255u8)
                    .filter(|&b| row_is_allowed(&row, b as u32))
                    .collect();
                if let Some(bytes) = probe["bytes"].as_str() {
                    assert_eq!(
                        String::from_utf8_lossy(&single),
                        bytes,
                        "{}: {name}: after {prefix:?}",
                        info.name
                    );
                }
                if let Some(excluded) = probe["bytes_excluded"].as_str() {
                    for b in excluded.bytes() {
                        assert!(
                            !single.contains(&b),
                            "{}: {name}: {:?} allowed after {prefix:?}",
                            info.name,
                            b as char
                        );
                    }
                }
                let eos = vocab.stop_tokens()[0];
                assert_eq!(
                    row_is_allowed(&row, eos),
                    probe["end"].as_bool().unwrap(),
                    "{}: {name}: end after {prefix:?}",
                    info.name
                );
            }
            seen.insert(info.name.clone(), all);
        }
        let mut it = seen.iter();
        if let Some((first_name, first)) = it.next() {
            for (other_name, other) in it {
                assert_eq!(
                    first, other,
                    "{name}: masks of {first_name} and {other_name} differ"
                );
            }
        }
    }
    for s in &skips {
        report!("skip: {s}");
    }
    report!(
        "conformance: {ran} (backend, case) runs, {} skips",
        skips.len()
    );
    assert!(ran > 0, "no backend ran any case");
}
