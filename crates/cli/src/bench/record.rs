//! The per-file result record of the MaskBench contract (section 3), as JSON.

use serde_json::{Value, json};
use tokensieve::bench_protocol::Walk;

/// One test's entry in `tests`.
pub fn test_json(valid: bool, walk: &Walk) -> Value {
    json!({
        "valid": valid,
        "accepted": walk.accepted,
        "tokens": walk.mask_ns.len(),
        "reason": walk.reason,
        "end_ok": walk.end_ok,
        "mask_ns": walk.mask_ns,
    })
}

/// How a file ended, for progress lines: the first matching bucket of the
/// contract's scoring (timeout, crash, compile error, then validation /
/// invalidation errors, else pass).
pub fn status_of(record: &Value) -> &'static str {
    if !record["timeout"].is_null() {
        return "timeout";
    }
    if !record["crash"].is_null() {
        return "crash";
    }
    if !record["compile_error"].is_null() {
        return "compile_error";
    }
    let tests = record["tests"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let accepted = |t: &Value| t["accepted"].as_bool() == Some(true);
    let valid = |t: &Value| t["valid"].as_bool() == Some(true);
    let bad_v = tests.iter().any(|t| valid(t) && !accepted(t));
    let bad_i = tests.iter().any(|t| !valid(t) && accepted(t));
    match (bad_v, bad_i) {
        (true, true) => "validation+invalidation_error",
        (true, false) => "validation_error",
        (false, true) => "invalidation_error",
        (false, false) => "pass",
    }
}
