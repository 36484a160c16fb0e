//! Running the bodies on stable: each target's committed seeds (and, for
//! `json_schema`, MaskBench schemas when `../shared/data` is there), then a
//! fixed number of seeded mutations of each, the kind libFuzzer makes
//! (bytes flipped, inserted, deleted, chunks copied, dictionary words
//! inserted, cut short). A failing input is named in the panic with its
//! bytes, so it can be saved as a regression fixture.

use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokensieve_core::testing::SplitMix64;

use crate::Target;

/// This crate's folder (seeds, dictionaries, regressions and slow inputs
/// live under it).
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A named input.
pub type Input = (String, Vec<u8>);

/// The files under `dir`, recursively, sorted by path (none if it does not
/// exist).
pub fn files_under(dir: &Path) -> Vec<Input> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path.display().to_string(), bytes));
            }
        }
    }
    out.sort();
    out
}

/// A target's committed seeds (`seeds/<target>/`) and regression inputs
/// (`regressions/<target>/`).
pub fn seeds(target: &str) -> Vec<Input> {
    let dir = crate_dir();
    let mut out = files_under(&dir.join("seeds").join(target));
    out.extend(files_under(&dir.join("regressions").join(target)));
    out
}

/// The folder of the MaskBench dev files, when present.
pub fn maskbench_dir() -> Option<PathBuf> {
    let dir = crate_dir().join("../../../shared/data/maskbench-dev");
    dir.is_dir().then_some(dir)
}

/// The `schema` of every `step`-th MaskBench file (sorted by name), as
/// JSON text.
pub fn maskbench_schemas(dir: &Path, step: usize) -> Vec<Input> {
    files_under(dir)
        .into_iter()
        .step_by(step.max(1))
        .filter_map(|(name, bytes)| {
            let doc: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
            Some((name, doc.get("schema")?.to_string().into_bytes()))
        })
        .collect()
}

/// The words of a libFuzzer dictionary (`dicts/<target>.dict`: one
/// `"word"` per line, `\\`, `\"` and `\xNN` escapes), or none.
pub fn dictionary(target: &str) -> Vec<Vec<u8>> {
    let path = crate_dir().join("dicts").join(format!("{target}.dict"));
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with('#') {
                return None;
            }
            let quoted = line.get(line.find('"')?..)?;
            let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
            let mut word = Vec::new();
            let mut bytes = inner.bytes();
            while let Some(b) = bytes.next() {
                if b != b'\\' {
                    word.push(b);
                    continue;
                }
                match bytes.next()? {
                    b'x' => {
                        let hex = [bytes.next()?, bytes.next()?];
                        let hex = std::str::from_utf8(&hex).ok()?;
                        word.push(u8::from_str_radix(hex, 16).ok()?);
                    }
                    other => word.push(other),
                }
            }
            Some(word)
        })
        .collect()
}

/// One to four random edits of `data`.
pub fn mutate(data: &[u8], dict: &[Vec<u8>], r: &mut SplitMix64) -> Vec<u8> {
    let mut s = data.to_vec();
    for _ in 0..1 + r.below(4) {
        let at = r.below(s.len() + 1);
        match r.below(8) {
            0 if at < s.len() => s[at] ^= 1 << r.below(8),
            1 if at < s.len() => s[at] = r.next_u32() as u8,
            2 => s.insert(
                at,
                [b'"', b'\\', b'(', b'{', b'[', b'*', b'0', 0xFF][r.below(8)],
            ),
            3 if at < s.len() => {
                let end = (at + 1 + r.below(8)).min(s.len());
                s.drain(at..end);
            }
            4 if !s.is_empty() => {
                // A chunk of the input copied elsewhere (grows nesting).
                let from = r.below(s.len());
                let end = (from + 1 + r.below(32)).min(s.len());
                let chunk = s[from..end].to_vec();
                s.splice(at..at, chunk);
            }
            5 if !dict.is_empty() => {
                let word = &dict[r.below(dict.len())];
                s.splice(at..at, word.iter().copied());
            }
            6 => s.truncate(at),
            _ if at < s.len() => s[at] = s[at].wrapping_add(1),
            _ => s.push(r.next_u32() as u8),
        }
    }
    s
}

/// Runs `target` on each input and on `mutations` mutations of each
/// (seeded by `seed`); a panic is re-raised naming the input. Returns the
/// number of runs.
pub fn run(target: &Target, inputs: &[Input], mutations: usize, seed: u64) -> usize {
    let dict = dictionary(target.name);
    let mut r = SplitMix64(seed);
    let mut runs = 0;
    for (name, data) in inputs {
        run_one(target, name, data);
        runs += 1;
        let mut current = data.clone();
        for i in 0..mutations {
            // Mostly mutations of the seed, some of the last mutant (so a
            // few edits can stack up).
            let base = if r.below(3) == 0 { &current } else { data };
            current = mutate(base, &dict, &mut r);
            run_one(target, &format!("{name} (mutation {i})"), &current);
            runs += 1;
        }
    }
    runs
}

/// A run longer than this is named on stderr.
const SLOW: Duration = Duration::from_secs(1);

/// Runs `target` on one input; a panic is re-raised with the input.
pub fn run_one(target: &Target, name: &str, data: &[u8]) {
    let started = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| (target.body)(data)));
    let took = started.elapsed();
    if took > SLOW {
        // Not a failure here (a debug build on a busy machine), but the
        // input to look at when a run gets long.
        let _ = writeln!(std::io::stderr(), "{}: {name} took {took:.1?}", target.name);
    }
    if let Err(panic) = result {
        let _ = writeln!(
            std::io::stderr(),
            "{}: {name} failed; input ({} bytes): {:?}",
            target.name,
            data.len(),
            String::from_utf8_lossy(data)
        );
        let _ = writeln!(std::io::stderr(), "bytes: {data:?}");
        resume_unwind(panic);
    }
}
