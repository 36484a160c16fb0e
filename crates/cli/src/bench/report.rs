//! `tokensieve bench report`: the scoring of the MaskBench contract
//! (section 4) over result files, as markdown: one column per file. The
//! numbers agree with peerbench's `report.py` (same buckets, same
//! percentile rule), so either tool can score either tool's output.

use super::plot;
use crate::common::{self, BadInput};
use clap::Args;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use tokensieve::maskbench::split_of;

#[derive(Args)]
pub struct ReportArgs {
    /// Result files (JSONL, one record per schema file): from
    /// `tokensieve bench maskbench` or peerbench's `run.py`.
    #[arg(required = true)]
    pub results: Vec<String>,
    /// Compile time limit (seconds) at which a compile timeout counts in TTFM
    /// when its record does not say (records carry `timeout_s`).
    #[arg(long, default_value_t = 30.0)]
    pub compile_timeout_s: f64,
    /// Also draw the TBM and TTFM distributions per engine into this SVG.
    #[arg(long)]
    pub plot: Option<String>,
}

const TBM_PERCENTILES: [f64; 7] = [25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9];
const TTFM_PERCENTILES: [f64; 6] = [25.0, 50.0, 75.0, 90.0, 95.0, 99.0];

/// File-level buckets (contract section 4; first match wins: timeout, OOM,
/// crash, compile error; then validation and invalidation errors, which a
/// file can have both of).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts {
    pub schemas: usize,
    /// MaskBench-compatible: the end of the output is not checked.
    pub passing: usize,
    /// Every valid test accepted with `end_ok`, no invalid test accepted
    /// with `end_ok`.
    pub passing_strict: usize,
    pub compile_error: usize,
    pub crash: usize,
    pub oom: usize,
    pub timeout: usize,
    pub validation_error: usize,
    pub invalidation_error: usize,
    /// Invalidation errors counting only instances accepted with `end_ok`.
    pub invalidation_error_strict: usize,
    pub engine_error: usize,
}

/// One result file, scored.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Column name: the engine of the records, or the file name.
    pub engine: String,
    pub version: String,
    /// Every `mask_ns` entry in µs, sorted.
    pub tbm_us: Vec<f64>,
    /// Compile times in µs of files without a compile error (timeouts at the
    /// limit), sorted.
    pub ttfm_us: Vec<f64>,
    pub counts: Counts,
    /// split -> (passing strict, passing MaskBench-compatible, schemas).
    pub per_split: BTreeMap<String, (usize, usize, usize)>,
}

/// MaskBench's percentile (peerbench `report.py`): the element at index
/// `int(n * p / 100)`, clamped to the last one.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p / 100.0) as usize).min(sorted.len() - 1);
    sorted[i]
}

fn is_set(v: &Value) -> bool {
    // Python truthiness for the fields the scoring tests: null, false, "" and
    // 0 are unset.
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        _ => true,
    }
}

pub fn summarize(records: &[Value], default_timeout_s: f64) -> Summary {
    let mut s = Summary::default();
    let c = &mut s.counts;
    for r in records {
        c.schemas += 1;
        let split = r["split"]
            .as_str()
            .map_or_else(|| split_of(r["id"].as_str().unwrap_or("")), str::to_string);
        let entry = s.per_split.entry(split).or_default();
        entry.2 += 1;
        let tests = r["tests"].as_array().map(Vec::as_slice).unwrap_or_default();
        for t in tests {
            for ns in t["mask_ns"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                s.tbm_us.push(ns.as_f64().unwrap_or(f64::NAN) / 1000.0);
            }
        }
        if r["timeout"].as_str() == Some("compile") {
            let limit = r["timeout_s"].as_f64().unwrap_or(default_timeout_s);
            s.ttfm_us.push(limit * 1e6);
        } else if let (Some(us), false) = (r["compile_us"].as_f64(), is_set(&r["compile_error"])) {
            s.ttfm_us.push(us);
        }
        if is_set(&r["timeout"]) {
            c.timeout += 1;
            continue;
        }
        if is_set(&r["oom"]) {
            c.oom += 1;
            continue;
        }
        if is_set(&r["crash"]) {
            c.crash += 1;
            continue;
        }
        if is_set(&r["compile_error"]) {
            c.compile_error += 1;
            continue;
        }
        let valid = |t: &Value| t["valid"].as_bool() == Some(true);
        let accepted = |t: &Value| t["accepted"].as_bool() == Some(true);
        let end_ok = |t: &Value| t["end_ok"].as_bool() == Some(true);
        let bad_v = tests.iter().any(|t| valid(t) && !accepted(t));
        let bad_i = tests.iter().any(|t| !valid(t) && accepted(t));
        let bad_i_strict = tests.iter().any(|t| !valid(t) && accepted(t) && end_ok(t));
        let engine_error = tests.iter().any(|t| {
            t["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("engine error"))
        });
        c.validation_error += bad_v as usize;
        c.invalidation_error += bad_i as usize;
        c.invalidation_error_strict += bad_i_strict as usize;
        c.engine_error += engine_error as usize;
        if !(bad_v || bad_i || engine_error) {
            c.passing += 1;
            entry.1 += 1;
        }
        let strict_ok = tests.iter().all(|t| (accepted(t) && end_ok(t)) == valid(t));
        if strict_ok && !engine_error {
            c.passing_strict += 1;
            entry.0 += 1;
        }
    }
    s.tbm_us.sort_by(f64::total_cmp);
    s.ttfm_us.sort_by(f64::total_cmp);
    s
}

/// µs the way `report.py` prints them: one decimal below 100, else whole
/// numbers with thousands separators; `-` for no data.
pub fn fmt_us(v: f64) -> String {
    if v.is_nan() {
        return "-".into();
    }
    if v < 100.0 {
        return format!("{v:.1}");
    }
    group_thousands(&format!("{v:.0}"))
}

fn fmt_count(n: usize) -> String {
    group_thousands(&n.to_string())
}

fn group_thousands(digits: &str) -> String {
    let (sign, digits) = digits.strip_prefix('-').map_or(("", digits), |d| ("-", d));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// A markdown table, first column left-aligned, the others right-aligned.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (k, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let pad = " ".repeat(widths[i] - cell.chars().count());
                if i == 0 {
                    format!("{cell}{pad}")
                } else {
                    format!("{pad}{cell}")
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
        if k == 0 {
            let rule: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    if i == 0 {
                        format!(":{}", "-".repeat(w + 1))
                    } else {
                        format!("{}:", "-".repeat(w + 1))
                    }
                })
                .collect();
            out.push_str(&format!("|{}|\n", rule.join("|")));
        }
    }
    out
}

pub fn render(summaries: &[Summary]) -> String {
    let mut rows = vec![
        std::iter::once("metric".to_string())
            .chain(summaries.iter().map(|s| s.engine.clone()))
            .collect(),
    ];
    let mut add = |name: String, f: &dyn Fn(&Summary) -> String| {
        rows.push(
            std::iter::once(name)
                .chain(summaries.iter().map(f))
                .collect(),
        );
    };
    add("TBM avg".into(), &|s| fmt_us(mean(&s.tbm_us)));
    for p in TBM_PERCENTILES {
        add(format!("TBM p{p}"), &|s| fmt_us(percentile(&s.tbm_us, p)));
    }
    add("TBM max".into(), &|s| {
        fmt_us(s.tbm_us.last().copied().unwrap_or(f64::NAN))
    });
    add("TTFM avg".into(), &|s| fmt_us(mean(&s.ttfm_us)));
    for p in TTFM_PERCENTILES {
        add(format!("TTFM p{p}"), &|s| fmt_us(percentile(&s.ttfm_us, p)));
    }
    add("TTFM max".into(), &|s| {
        fmt_us(s.ttfm_us.last().copied().unwrap_or(f64::NAN))
    });
    add("tokens".into(), &|s| fmt_count(s.tbm_us.len()));
    type Count = fn(&Counts) -> usize;
    let counts: [(&str, Count); 11] = [
        ("schemas", |c| c.schemas),
        ("passing, end checked", |c| c.passing_strict),
        ("passing (MaskBench, end not checked)", |c| c.passing),
        ("compile error", |c| c.compile_error),
        ("timeout", |c| c.timeout),
        ("crash", |c| c.crash),
        ("OOM", |c| c.oom),
        ("validation error", |c| c.validation_error),
        ("invalidation error", |c| c.invalidation_error),
        ("invalidation error, end checked", |c| {
            c.invalidation_error_strict
        }),
        ("engine error in test", |c| c.engine_error),
    ];
    for (label, f) in &counts {
        add(label.to_string(), &|s| fmt_count(f(&s.counts)));
    }
    add("version".into(), &|s| s.version.clone());

    let mut out = String::from("## Results\n\n");
    out.push_str(
        "Times in microseconds (µs), TTFM too. TBM = compute the mask + check the token + commit it, \
         per token, all files. TTFM = schema compile time (to a matcher ready for its first mask); \
         files with a compile error are left out, compile timeouts count at the time limit. \
         Percentiles: the element at index int(n·p/100) of the sorted values (MaskBench's rule).\n\n",
    );
    out.push_str(&table(&rows));
    out.push_str(
        "\nFile buckets, first match wins: timeout, OOM, crash, compile error; then *validation error* \
         (a valid instance rejected) and *invalidation error* (an invalid instance accepted; a file can \
         have both) and *engine error in test* (a token in the mask that the matcher refused); else \
         passing. *Passing, end checked* also requires that every accepted valid instance may end \
         there (a stop token is allowed) and counts an invalid instance as wrongly accepted only when \
         it may end there; *invalidation error, end checked* counts those. MaskBench's own scoring \
         does not check the end.\n",
    );

    let splits: std::collections::BTreeSet<&String> =
        summaries.iter().flat_map(|s| s.per_split.keys()).collect();
    for (title, pick) in [
        ("Passing per split, end checked", 0usize),
        ("Passing per split (MaskBench, end not checked)", 1),
    ] {
        let mut srows = vec![
            std::iter::once("split (passing/schemas)".to_string())
                .chain(summaries.iter().map(|s| s.engine.clone()))
                .collect::<Vec<_>>(),
        ];
        let cell = |p: usize, n: usize| format!("{p}/{n}");
        for split in &splits {
            srows.push(
                std::iter::once(split.to_string())
                    .chain(summaries.iter().map(|s| {
                        let (strict, compat, n) =
                            s.per_split.get(*split).copied().unwrap_or_default();
                        cell(if pick == 0 { strict } else { compat }, n)
                    }))
                    .collect(),
            );
        }
        srows.push(
            std::iter::once("TOTAL".to_string())
                .chain(summaries.iter().map(|s| {
                    let p = if pick == 0 {
                        s.counts.passing_strict
                    } else {
                        s.counts.passing
                    };
                    cell(p, s.counts.schemas)
                }))
                .collect(),
        );
        out.push_str(&format!("\n### {title}\n\n"));
        out.push_str(&table(&srows));
    }
    out
}

fn load_records(path: &str) -> Result<Vec<Value>, BadInput> {
    let text = common::read_file("results", path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l)
                .map_err(|e| BadInput(format!("{path}:{}: not a JSON record: {e}", i + 1)))?;
            if !v.is_object() || !v["id"].is_string() {
                return Err(BadInput(format!(
                    "{path}:{}: not a MaskBench record (no \"id\")",
                    i + 1
                )));
            }
            Ok(v)
        })
        .collect()
}

fn file_stem(path: &str) -> String {
    let name = Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
    name.strip_suffix(".jsonl")
        .map(str::to_string)
        .unwrap_or(name)
}

pub fn run(args: &ReportArgs) -> anyhow::Result<u8> {
    let mut summaries = Vec::new();
    for path in &args.results {
        let records = load_records(path)?;
        let mut s = summarize(&records, args.compile_timeout_s);
        let first = |key: &str| {
            records.iter().find_map(|r| {
                r[key]
                    .as_str()
                    .filter(|x| !x.is_empty())
                    .map(str::to_string)
            })
        };
        s.engine = first("engine").unwrap_or_else(|| file_stem(path));
        s.version = first("version").unwrap_or_else(|| "?".into());
        summaries.push(s);
    }
    let mut names: Vec<&str> = summaries.iter().map(|s| s.engine.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        for (s, path) in summaries.iter_mut().zip(&args.results) {
            s.engine = format!("{} ({})", s.engine, file_stem(path));
        }
    }
    print!("{}", render(&summaries));
    if let Some(svg) = &args.plot {
        plot::draw(svg, &summaries).map_err(|e| BadInput(format!("cannot draw {svg}: {e}")))?;
        eprintln!("plot -> {svg}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn percentile_is_maskbench_rule() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 6.0);
        assert_eq!(percentile(&v, 99.9), 10.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn formats_like_report_py() {
        assert_eq!(fmt_us(4.56), "4.6");
        assert_eq!(fmt_us(99.96), "100.0");
        assert_eq!(fmt_us(1234567.4), "1,234,567");
        assert_eq!(fmt_us(f64::NAN), "-");
        assert_eq!(fmt_count(1000), "1,000");
        assert_eq!(fmt_count(999), "999");
    }

    fn test(valid: bool, accepted: bool, end_ok: Option<bool>, ns: &[u64]) -> Value {
        json!({"valid": valid, "accepted": accepted, "tokens": ns.len(), "reason": if accepted { None } else { Some("token 0 (id 1) not in mask") }, "end_ok": end_ok, "mask_ns": ns})
    }

    #[test]
    fn buckets_and_end_check() {
        let recs = vec![
            // passes both ways
            json!({"id": "A---1.json", "compile_us": 10, "compile_error": null, "tests": [test(true, true, Some(true), &[1000, 3000]), test(false, false, None, &[2000])], "timeout": null, "crash": null, "oom": false}),
            // valid accepted but cannot end: passes only without the end check
            json!({"id": "A---2.json", "compile_us": 20, "compile_error": null, "tests": [test(true, true, Some(false), &[5000])], "timeout": null, "crash": null, "oom": false}),
            // invalid accepted and may end: invalidation error both ways
            json!({"id": "B---1.json", "compile_us": 30, "compile_error": null, "tests": [test(false, true, Some(true), &[4000])], "timeout": null, "crash": null, "oom": false}),
            // invalid accepted as a prefix only: strict passes, compatible does not
            json!({"id": "B---2.json", "compile_us": 30, "compile_error": null, "tests": [test(false, true, Some(false), &[4000])], "timeout": null, "crash": null, "oom": false}),
            json!({"id": "C---1.json", "compile_us": 5, "compile_error": "x is not supported", "tests": [], "timeout": null, "crash": null, "oom": false}),
            json!({"id": "C---2.json", "compile_us": null, "compile_error": null, "tests": [], "timeout": "compile", "timeout_s": 2.0, "crash": null, "oom": false}),
            json!({"id": "C---3.json", "compile_us": null, "compile_error": null, "tests": [], "timeout": "compile", "crash": null, "oom": false}),
            json!({"id": "C---4.json", "compile_us": null, "compile_error": null, "tests": [], "timeout": null, "crash": "panic", "oom": false}),
        ];
        let s = summarize(&recs, 30.0);
        let c = &s.counts;
        assert_eq!((c.schemas, c.passing, c.passing_strict), (8, 2, 2));
        assert_eq!((c.compile_error, c.timeout, c.crash, c.oom), (1, 2, 1, 0));
        assert_eq!(
            (
                c.validation_error,
                c.invalidation_error,
                c.invalidation_error_strict
            ),
            (0, 2, 1)
        );
        assert_eq!(s.per_split["A"], (1, 2, 2));
        assert_eq!(s.per_split["B"], (1, 0, 2));
        assert_eq!(s.tbm_us, vec![1.0, 2.0, 3.0, 4.0, 4.0, 5.0]);
        assert_eq!(s.ttfm_us, vec![10.0, 20.0, 30.0, 30.0, 2e6, 30e6]);
        let md = render(&[s]);
        assert!(md.contains("| passing, end checked "), "{md}");
        assert!(md.contains("| TOTAL "), "{md}");
    }
}
