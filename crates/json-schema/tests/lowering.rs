//! JSON Schema -> regex lowering against real schemas.
//!
//! For each MaskBench-format file (schema + valid and invalid instances):
//! lower the schema with default options, and check that **no invalid
//! instance matches** (a hard failure: the regex would accept output the
//! schema forbids) and count valid instances that do not match (a soft
//! metric: the regex is a subset). Runs the committed fixtures under
//! `tests/fixtures/` always, and `../shared/data/maskbench-dev` when present:
//! a fixed sample of it by default, all of it with `TOKENSIEVE_FULL_MASKBENCH=1`.
//!
//! ```text
//! cargo test -p tokensieve-json-schema --release --test lowering -- --nocapture
//! TOKENSIEVE_FULL_MASKBENCH=1 cargo test -p tokensieve-json-schema --release --test lowering -- --nocapture
//! ```
//!
//! `TOKENSIEVE_SHOW_REJECTIONS=1` lists the rejected valid instances per
//! file, `TOKENSIEVE_SHOW_ERRORS=1` the lowering error of each file.

use regex_automata::meta::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tokensieve_core::SpecOptions;
use tokensieve_core::maskbench::MaskBenchFile;
use tokensieve_json_schema::schema_to_regex;

const MAX_WHITESPACE: u32 = 20;
/// Files checked by default when the full corpus is not asked for.
const SAMPLE_SIZE: usize = 320;

#[derive(Default)]
struct Report {
    files: usize,
    compiled: usize,
    valid_total: usize,
    valid_rejected: usize,
    invalid_total: usize,
    /// Files where an invalid instance matched, with the instance.
    invalidations: Vec<String>,
    /// Files whose regex did not build (a lowering bug).
    broken_regex: Vec<String>,
    /// Lowering errors, normalised, with a count and an example file.
    errors: BTreeMap<String, (usize, String)>,
    /// Per-file soft failures (valid instances rejected).
    rejections: Vec<String>,
    /// Per-file lowering errors, as reported.
    file_errors: Vec<String>,
    /// (seconds, file, regex length) per file.
    timings: Vec<(f64, String, usize)>,
}

impl Report {
    fn merge(&mut self, other: Report) {
        self.files += other.files;
        self.compiled += other.compiled;
        self.valid_total += other.valid_total;
        self.valid_rejected += other.valid_rejected;
        self.invalid_total += other.invalid_total;
        self.invalidations.extend(other.invalidations);
        self.broken_regex.extend(other.broken_regex);
        for (k, (n, example)) in other.errors {
            let entry = self.errors.entry(k).or_insert((0, example));
            entry.0 += n;
        }
        self.rejections.extend(other.rejections);
        self.file_errors.extend(other.file_errors);
        self.timings.extend(other.timings);
    }

    fn print(&self, title: &str) {
        println!("== {title} ==");
        println!(
            "files compiled: {}/{} ({:.1}%)",
            self.compiled,
            self.files,
            100.0 * self.compiled as f64 / self.files.max(1) as f64
        );
        println!(
            "valid instances rejected (validation errors, soft): {}/{}",
            self.valid_rejected, self.valid_total
        );
        println!(
            "invalid instances accepted (invalidation errors, must be 0): {}/{}",
            self.invalidations.len(),
            self.invalid_total
        );
        let mut errors: Vec<_> = self.errors.iter().collect();
        errors.sort_by_key(|e| std::cmp::Reverse(e.1.0));
        if !errors.is_empty() {
            println!("top lowering errors (files that did not compile):");
            for (message, (n, example)) in errors.iter().take(25) {
                println!("  {n:5}  {message}   (e.g. {example})");
            }
        }
        let mut timings = self.timings.clone();
        timings.sort_by(|a, b| b.0.total_cmp(&a.0));
        println!("slowest files (lower + build + match):");
        for (secs, id, len) in timings.iter().take(5) {
            println!("  {secs:6.2}s  {id} (regex {len} bytes)");
        }
        if std::env::var_os("TOKENSIEVE_SHOW_REJECTIONS").is_some() {
            for r in &self.rejections {
                println!("  rejected: {r}");
            }
        }
        if std::env::var_os("TOKENSIEVE_SHOW_ERRORS").is_some() {
            let mut errors = self.file_errors.clone();
            errors.sort();
            for e in &errors {
                println!("  error: {e}");
            }
        }
    }
}

/// The error message without the pointer and quoted text, so that errors of
/// one kind count together.
fn normalise(message: &str) -> String {
    let mut out = String::new();
    let mut in_quote = false;
    for c in message.chars() {
        if c == '"' {
            if !in_quote {
                out.push_str("\"…\"");
            }
            in_quote = !in_quote;
        } else if !in_quote {
            out.push(c);
        }
    }
    // Drop the location prefix ("/definitions/x/pattern: ...").
    let out = match out.split_once(": ") {
        Some((loc, rest)) if loc.starts_with('/') || loc == "schema root" => rest.to_string(),
        _ => out,
    };
    out.chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect()
}

fn whole_regex(text: &str) -> Result<Regex, String> {
    Regex::builder()
        .syntax(regex_automata::util::syntax::Config::new().nest_limit(256))
        .configure(
            Regex::config()
                .nfa_size_limit(Some(1 << 30))
                .hybrid_cache_capacity(16 << 20),
        )
        .build(&format!("^(?:{text})$"))
        .map_err(|e| e.to_string())
}

fn check_file(path: &Path) -> Report {
    let mut report = Report {
        files: 1,
        ..Report::default()
    };
    let file = match MaskBenchFile::load(path) {
        Ok(f) => f,
        Err(e) => panic!("cannot load {}: {e}", path.display()),
    };
    let schema = serde_json::to_string(&file.schema).expect("a JSON value serialises");
    let started = std::time::Instant::now();
    let regex = match schema_to_regex(&schema, &SpecOptions::default(), MAX_WHITESPACE) {
        Ok(r) => r,
        Err(e) => {
            report
                .errors
                .insert(normalise(&e.to_string()), (1, file.id.clone()));
            report.file_errors.push(format!("{}: {e}", file.id));
            return report;
        }
    };
    let regex_len = regex.len();
    let regex = match whole_regex(&regex) {
        Ok(r) => r,
        Err(e) => {
            report.broken_regex.push(format!("{}: {e}", file.id));
            return report;
        }
    };
    report.compiled = 1;
    for test in &file.tests {
        let text = test.text();
        let matched = regex.is_match(text.as_bytes());
        if test.valid {
            report.valid_total += 1;
            if !matched {
                report.valid_rejected += 1;
                let shown: String = text.chars().take(160).collect();
                report.rejections.push(format!("{}: {shown}", file.id));
            }
        } else {
            report.invalid_total += 1;
            if matched {
                let shown: String = text.chars().take(300).collect();
                report.invalidations.push(format!("{}: {shown}", file.id));
            }
        }
    }
    report
        .timings
        .push((started.elapsed().as_secs_f64(), file.id.clone(), regex_len));
    report
}

/// Checks the files on all cores.
fn check_files(paths: &[PathBuf]) -> Report {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let reports: Vec<Report> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut report = Report::default();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = paths.get(i) else { break };
                        report.merge(check_file(path));
                    }
                    report
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let mut total = Report::default();
    for r in reports {
        total.merge(r);
    }
    total
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
}

fn assert_sound(report: &Report) {
    assert!(
        report.broken_regex.is_empty(),
        "lowered regexes that do not build:\n{}",
        report.broken_regex.join("\n")
    );
    assert!(
        report.invalidations.is_empty(),
        "INVALID instances accepted (the regex is wider than the schema):\n{}",
        report.invalidations.join("\n")
    );
}

#[test]
fn committed_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/json_schema");
    let paths = json_files(&dir);
    assert!(paths.len() >= 5, "fixtures missing in {}", dir.display());
    let report = check_files(&paths);
    report.print("committed fixtures");
    assert_sound(&report);
    // Every fixture is written to compile and to accept its valid instances.
    assert_eq!(report.compiled, report.files, "errors: {:?}", report.errors);
    assert_eq!(
        report.valid_rejected, 0,
        "rejected: {:#?}",
        report.rejections
    );
}

#[test]
fn maskbench_corpus() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/maskbench-dev"
    ));
    if !dir.is_dir() {
        tokensieve_core::skip!("{} not present", dir.display());
        return;
    }
    let mut paths = json_files(dir);
    let full = std::env::var_os("TOKENSIEVE_FULL_MASKBENCH").is_some_and(|v| v != "0");
    if !full && paths.len() > SAMPLE_SIZE {
        // A fixed, evenly spread sample: deterministic across runs.
        let step = paths.len() as f64 / SAMPLE_SIZE as f64;
        paths = (0..SAMPLE_SIZE)
            .map(|i| paths[(i as f64 * step) as usize].clone())
            .collect();
    }
    let started = std::time::Instant::now();
    let report = check_files(&paths);
    report.print(if full {
        "MaskBench (full)"
    } else {
        "MaskBench (sample; TOKENSIEVE_FULL_MASKBENCH=1 for all)"
    });
    println!("took {:.1}s", started.elapsed().as_secs_f64());
    assert_sound(&report);
    // Guard against regressions that make everything an error.
    assert!(
        report.compiled * 2 > report.files,
        "only {}/{} files compiled",
        report.compiled,
        report.files
    );
}

/// Prints the regex and the verdict per instance for one file:
/// `TOKENSIEVE_DEBUG_FILE=path cargo test ... debug_one_file -- --ignored --nocapture`.
#[test]
#[ignore = "a debugging aid"]
fn debug_one_file() {
    let Some(path) = std::env::var_os("TOKENSIEVE_DEBUG_FILE") else {
        println!("set TOKENSIEVE_DEBUG_FILE");
        return;
    };
    let file = MaskBenchFile::load(Path::new(&path)).expect("loads");
    let schema = serde_json::to_string(&file.schema).expect("serialises");
    let regex = schema_to_regex(&schema, &SpecOptions::default(), MAX_WHITESPACE);
    println!("{regex:?}");
    let Ok(regex) = regex else { return };
    let compiled = whole_regex(&regex).expect("builds");
    for test in &file.tests {
        let text = test.text();
        println!(
            "valid={} matched={} {}",
            test.valid,
            compiled.is_match(text.as_bytes()),
            text
        );
    }
}
