//! JSON Schema -> regular expression lowering (being written).

use tokensieve_core::{GrammarError, SpecOptions};

/// Lowers a JSON Schema (JSON text) to a regex whose whole-match language is
/// exactly the JSON texts valid under the schema (or a subset of them, never a
/// superset). `max_whitespace` bounds each run of whitespace under
/// `Whitespace::Any`.
pub fn schema_to_regex(_schema_json: &str, _options: &SpecOptions, _max_whitespace: u32) -> Result<String, GrammarError> {
    Err(GrammarError::unsupported_at("", "JSON Schema lowering (not written yet)"))
}

/// A regex for any JSON object, nested at most `options.max_depth` deep
/// (an error when `max_depth` is `None`: a regex cannot express unbounded nesting).
pub fn json_object_regex(_options: &SpecOptions, _max_whitespace: u32) -> Result<String, GrammarError> {
    Err(GrammarError::unsupported_at("", "JSON object lowering (not written yet)"))
}
