//! Generated JSON Schema instances through a compiled grammar, each
//! compared with a validator's verdict: the check that a backend's language
//! is the schema's, neither wider (an invalid instance accepted, the worst
//! bug a constrained decoder can have) nor narrower (a valid one refused).
//!
//! The instances come from [`instances`] (built from the schema's own
//! keywords, then mutated at its boundaries); the verdicts from the
//! caller's validator ([`Verdict`]: this crate has no validator of its own,
//! the workspace's tests and CLI use the `jsonschema` crate). Each instance
//! is fed as text in every [`forms`] spelling through
//! [`GrammarObject::accept_bytes`](crate::GrammarObject::accept_bytes), and
//! its [`Outcome`] is the pair of verdicts. [`check_grammar`] does that for
//! one grammar, and also walks a few accepted instances token by token
//! (every token in the mask before it is accepted, the output may end
//! after the last) with a real tokenizer's encoding.
//!
//! ```
//! use std::sync::Arc;
//! use tokensieve::instance_check::{check_grammar, Outcome, Verdict};
//! use tokensieve::instances::{instances, InstanceOptions};
//!
//! let schema = serde_json::json!({"type": "integer", "maximum": 9});
//! let vocab = Arc::new(tokensieve::vocab::fixtures::json_tiny());
//! let backend = tokensieve::create_backend("none", &Default::default(), vocab.clone())?;
//! let grammar = backend.compile(&tokensieve::Constraint::json_schema(schema.to_string()))?;
//! // A stand-in validator for the example: only integers up to 9.
//! let judged: Vec<_> = instances(&schema, &InstanceOptions::default())
//!     .into_iter()
//!     .map(|i| {
//!         let valid = i.value.as_i64().is_some_and(|n| n <= 9);
//!         (i, Verdict { valid, format_valid: valid })
//!     })
//!     .collect();
//! let report = check_grammar(grammar.as_ref(), &vocab, &judged, None, 0);
//! // `none` allows any text: every invalid instance is accepted.
//! assert!(report.count(Outcome::InvalidAccepted) > 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::bench_protocol::{WalkOptions, walk};
use crate::maskbench::dumps_python;
use crate::{CompiledGrammar, Vocabulary};
use serde_json::Value;

pub use tokensieve_json_schema::instances::{Instance, InstanceOptions, Intent, instances};

/// A validator's verdict on one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Valid with `format` an annotation (what JSON Schema 2020-12 says by
    /// default).
    pub valid: bool,
    /// Valid with the formats the validator knows asserted too.
    pub format_valid: bool,
}

/// A backend's verdict beside the validator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Invalid, but the whole text was accepted and the output may end
    /// there: the backend's language is wider than the schema's.
    InvalidAccepted,
    /// Valid even with formats asserted, but refused: narrower.
    ValidRefused,
    /// Valid only with formats as annotations: the backends enforce the
    /// formats they know, so either verdict is within the documented
    /// reading.
    FormatOnly,
    /// Both verdicts agree.
    Agree,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::InvalidAccepted,
        Outcome::ValidRefused,
        Outcome::FormatOnly,
        Outcome::Agree,
    ];

    /// The outcome of an instance the validator judged `verdict` and a
    /// backend `accepted` (or not).
    pub fn of(verdict: Verdict, accepted: bool) -> Outcome {
        match (verdict.valid, verdict.format_valid, accepted) {
            (false, _, true) => Outcome::InvalidAccepted,
            (true, true, false) => Outcome::ValidRefused,
            (true, false, _) => Outcome::FormatOnly,
            _ => Outcome::Agree,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Outcome::InvalidAccepted => "invalid-accepted",
            Outcome::ValidRefused => "valid-refused",
            Outcome::FormatOnly => "format-only",
            Outcome::Agree => "agree",
        }
    }
}

/// The spellings of `value` fed to a grammar: compact (`{"a":1}`), and
/// Python's `json.dumps` (`{"a": 1}`, what MaskBench's instances are),
/// both within every backend's default whitespace. One entry when they
/// are the same text.
pub fn forms(value: &Value) -> Vec<(&'static str, String)> {
    let compact = value.to_string();
    let python = dumps_python(value);
    if python == compact {
        vec![("compact", compact)]
    } else {
        vec![("compact", compact), ("python", python)]
    }
}

/// Whether a fresh matcher of `grammar` takes all of `text` and may end
/// after it.
pub fn accepts(grammar: &dyn CompiledGrammar, text: &[u8]) -> bool {
    let mut m = grammar.matcher();
    m.accept_bytes(text).is_ok() && m.is_accepting()
}

/// One instance text whose outcome is not [`Outcome::Agree`].
#[derive(Debug, Clone)]
pub struct Finding {
    pub outcome: Outcome,
    /// The instance's [`Instance::how`].
    pub how: String,
    /// Which of [`forms`].
    pub form: &'static str,
    pub text: String,
}

/// What [`check_grammar`] found for one grammar.
#[derive(Debug, Default, Clone)]
pub struct GrammarReport {
    /// Texts per outcome, in [`Outcome::ALL`] order.
    pub counts: [usize; 4],
    /// Every text whose outcome is not [`Outcome::Agree`].
    pub findings: Vec<Finding>,
    /// Valid instances walked token by token.
    pub token_walks: usize,
    /// Walks that failed although the text was accepted as bytes: a token
    /// missing from its mask, a mask/matcher disagreement, or an end the
    /// mask does not allow.
    pub token_failures: Vec<String>,
}

impl GrammarReport {
    pub fn count(&self, outcome: Outcome) -> usize {
        self.counts[Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0)]
    }
}

/// A text's tokens under a real tokenizer (`None`: the text cannot be
/// encoded, and is not walked).
pub type Encoder<'a> = &'a dyn Fn(&str) -> Option<Vec<u32>>;

/// Every judged instance through `grammar`, in every [`forms`] spelling;
/// then the first `token_walks` instances that are valid and accepted (in
/// their Python spelling, as MaskBench tokenizes) walked token by token
/// with `encode`, checking the mask at every step
/// ([`WalkOptions::check_consistency`]).
pub fn check_grammar(
    grammar: &dyn CompiledGrammar,
    vocab: &Vocabulary,
    judged: &[(Instance, Verdict)],
    encode: Option<Encoder<'_>>,
    token_walks: usize,
) -> GrammarReport {
    let mut report = GrammarReport::default();
    let mut walk_texts = Vec::new();
    for (instance, verdict) in judged {
        for (form, text) in forms(&instance.value) {
            let accepted = accepts(grammar, text.as_bytes());
            let outcome = Outcome::of(*verdict, accepted);
            report.counts[Outcome::ALL.iter().position(|o| *o == outcome).unwrap()] += 1;
            if outcome != Outcome::Agree {
                report.findings.push(Finding {
                    outcome,
                    how: instance.how.clone(),
                    form,
                    text: text.clone(),
                });
            }
            if accepted
                && verdict.valid
                && form == "python"
                && walk_texts.len() < token_walks
                && encode.is_some()
            {
                walk_texts.push(text);
            }
        }
    }
    let Some(encode) = encode else {
        return report;
    };
    let mut row = vec![0u32; vocab.mask_words()];
    for text in walk_texts {
        let Some(tokens) = encode(&text) else {
            continue;
        };
        report.token_walks += 1;
        let w = walk(
            grammar,
            vocab,
            &tokens,
            &mut row,
            WalkOptions {
                check_consistency: true,
            },
        );
        if !w.matches() || w.mismatch.is_some() {
            report.token_failures.push(format!(
                "{text}: {}",
                w.mismatch
                    .or(w.reason)
                    .unwrap_or_else(|| "accepted, but the mask does not allow the end".into())
            ));
        }
    }
    report
}
