//! The README and docs/ against the binary they describe: every `tokensieve`
//! command line they show names a real subcommand and only flags its
//! `--help` lists, the sample outputs are what the binary prints, every
//! subcommand is in the README's table, and the README stays a product page.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

/// Writes straight to the process's stderr: libtest captures `eprintln!` of
/// passing tests, and a skip must show in the plain test output.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The pages whose command lines are checked (the Python pages show Python).
const PAGES: [&str; 5] = [
    "README.md",
    "docs/benchmarks.md",
    "docs/engines.md",
    "docs/gpu.md",
    "docs/reliability.md",
];

/// The brief's ceiling: past it the README is a log again, not a product page.
const README_MAX_LINES: usize = 450;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(page: &str) -> String {
    std::fs::read_to_string(repo().join(page)).unwrap_or_else(|e| panic!("reading {page}: {e}"))
}

fn tokensieve(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tokensieve"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("running tokensieve")
}

/// The fenced code blocks of a markdown page: (info string, lines).
fn code_blocks(md: &str) -> Vec<(String, Vec<String>)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for line in md.lines() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                let info = line.trim_start().trim_start_matches('`').trim().to_string();
                open = Some((info, Vec::new()));
            }
            (Some(_), true) => blocks.push(open.take().expect("an open block")),
            (Some((_, lines)), false) => lines.push(line.to_string()),
            (None, false) => {}
        }
    }
    blocks
}

/// Shell lines of the `sh` and `text` blocks, a line ending in `\` joined
/// with the next.
fn shell_lines(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (info, lines) in code_blocks(md) {
        if info != "sh" && info != "text" {
            continue;
        }
        let mut pending = String::new();
        for line in lines {
            match line.trim_end().strip_suffix('\\') {
                Some(head) => {
                    pending.push_str(head);
                    pending.push(' ');
                }
                None => {
                    pending.push_str(&line);
                    out.push(std::mem::take(&mut pending));
                }
            }
        }
        if !pending.is_empty() {
            out.push(pending);
        }
    }
    out
}

/// One `tokensieve` command line on a page: the subcommand path
/// (`["bench", "report"]`) and the flags written after it.
#[derive(Debug)]
struct Invocation {
    command: Vec<String>,
    flags: Vec<String>,
    line: String,
}

/// A subcommand name as clap spells them; a word in capitals (`DIR`) after
/// the binary's path means the binary is an argument, not the command.
fn is_subcommand_word(w: &str) -> bool {
    let mut chars = w.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Where words stop belonging to the command: a comment, a pipe, a
/// redirection or the next command.
fn ends_command(word: &str) -> bool {
    word.starts_with('#')
        || word.starts_with('>')
        || word.starts_with('<')
        || word.starts_with("2>")
        || matches!(word, "&&" | "||" | "|" | ";")
}

fn invocations(line: &str) -> Vec<Invocation> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut found = Vec::new();
    for (i, &w) in words.iter().enumerate() {
        if ends_command(w) && w.starts_with('#') {
            break;
        }
        let bare = w.trim_start_matches(['"', '\'']);
        let binary = bare == "tokensieve" || bare.ends_with("/tokensieve");
        // `cargo run ... -p tokensieve-cli [--features F] -- SUBCOMMAND`
        let via_cargo = w == "--" && words[..i].contains(&"tokensieve-cli");
        if !binary && !via_cargo {
            continue;
        }
        // A binary inside a quoted command (`cmd:"…/tokensieve bench packs …"`)
        // owns the words up to the closing quote only.
        let quoted = w.contains('"');
        let Some(&first) = words.get(i + 1) else {
            continue;
        };
        if !is_subcommand_word(first) {
            continue;
        }
        let mut command = vec![first.to_string()];
        let mut rest = i + 2;
        if first == "bench" {
            if let Some(&sub) = words.get(i + 2).filter(|s| is_subcommand_word(s)) {
                command.push(sub.to_string());
                rest += 1;
            }
        }
        let mut flags = Vec::new();
        // Inside `( … | … )` a bar separates alternatives of a synopsis.
        let mut depth = 0usize;
        for &word in &words[rest.min(words.len())..] {
            if ends_command(word) && !(word == "|" && depth > 0) {
                break;
            }
            depth += word.matches('(').count();
            depth = depth.saturating_sub(word.matches(')').count());
            let clean = word
                .trim_start_matches(['[', '('])
                .trim_end_matches([']', ')', '|', ',', '"']);
            if let Some(name) = clean.strip_prefix("--") {
                let name = name.split('=').next().unwrap_or_default();
                if !name.is_empty() {
                    flags.push(format!("--{name}"));
                }
            }
            if quoted && word.ends_with('"') {
                break;
            }
        }
        found.push(Invocation {
            command,
            flags,
            line: line.trim().to_string(),
        });
    }
    found
}

/// Subcommands a build may leave out: `generate` and `bench e2e` need the
/// CLI's `generate` feature.
fn needs_generate(command: &[String]) -> bool {
    command.first().is_some_and(|c| c == "generate") || command.get(1).is_some_and(|c| c == "e2e")
}

/// `flag` as a whole word in a help text (`--json` is not `--json-x`).
fn help_lists(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        !help[at + flag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

#[test]
fn every_command_line_in_the_docs_is_one_the_binary_takes() {
    let mut help: HashMap<Vec<String>, Option<String>> = HashMap::new();
    let mut checked = 0;
    let mut skipped = 0;
    let mut wrong = Vec::new();
    for page in PAGES {
        for line in shell_lines(&read(page)) {
            for inv in invocations(&line) {
                if needs_generate(&inv.command) && !cfg!(feature = "generate") {
                    skipped += 1;
                    continue;
                }
                let text = help.entry(inv.command.clone()).or_insert_with(|| {
                    let mut args: Vec<&str> = inv.command.iter().map(String::as_str).collect();
                    args.push("--help");
                    let out = tokensieve(&args);
                    out.status
                        .success()
                        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
                });
                let Some(text) = text else {
                    wrong.push(format!(
                        "{page}: `tokensieve {}` is no subcommand: {}",
                        inv.command.join(" "),
                        inv.line
                    ));
                    continue;
                };
                for flag in &inv.flags {
                    if !help_lists(text, flag) {
                        wrong.push(format!(
                            "{page}: `tokensieve {}` has no {flag}: {}",
                            inv.command.join(" "),
                            inv.line
                        ));
                    }
                }
                checked += 1;
            }
        }
    }
    if skipped > 0 {
        report!(
            "skipped: {skipped} command lines of `generate` / `bench e2e` (this build has no `generate` feature)"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    report!("checked {checked} command lines of {PAGES:?}");
    // The pages show about twenty; fewer means the parser lost them.
    assert!(checked >= 15, "only {checked} command lines found");
}

/// The parser finds what the pages write, and leaves out what is no
/// `tokensieve` command.
#[test]
fn command_lines_are_read_as_a_shell_reads_them() {
    let line = r#"python run.py --engine cmd:"$P/target/release/tokensieve bench packs --backend $b" --out x.jsonl"#;
    let inv = invocations(line);
    assert_eq!(inv.len(), 1);
    assert_eq!(inv[0].command, ["bench", "packs"]);
    assert_eq!(inv[0].flags, ["--backend"]);

    let inv = invocations(
        "cargo run --release -p tokensieve-cli --features cuda -- generate --device cuda PROMPT",
    );
    assert_eq!(inv[0].command, ["generate"]);
    assert_eq!(inv[0].flags, ["--device"]);

    let inv = invocations("t/tokensieve mask [--vocab-size N] (--schema F | --json) # --not-this");
    assert_eq!(inv[0].flags, ["--vocab-size", "--schema", "--json"]);

    assert!(invocations("scripts/count-instructions.sh target/release/tokensieve DIR").is_empty());
    assert!(invocations("cargo install --path crates/cli").is_empty());

    assert!(help_lists("  --json  Any JSON", "--json"));
    assert!(!help_lists("  --json-schema X", "--json"));
}

/// The `$ tokensieve backends` block of the README, less the prompt line.
fn readme_sample(prompt: &str) -> Option<Vec<String>> {
    code_blocks(&read("README.md"))
        .into_iter()
        .find_map(|(_, lines)| {
            (lines.first().map(|l| l.trim()) == Some(prompt)).then(|| lines[1..].to_vec())
        })
}

fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_readme_backends_listing_is_what_the_binary_prints() {
    let sample = readme_sample("$ tokensieve backends")
        .expect("the README shows `$ tokensieve backends` with its output");
    let out = tokensieve(&["backends"]);
    assert!(out.status.success());
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let expected: Vec<String> = printed.lines().map(squeeze).collect();
    let shown: Vec<String> = sample.iter().map(|l| squeeze(l)).collect();
    assert_eq!(
        shown, expected,
        "the README's `tokensieve backends` block should read:\n{printed}"
    );
}

/// Splits a shell command line into words: single and double quotes, no
/// expansions (the README's lines have none).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            None => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// `generate`'s default model, where `scripts/fetch-model.sh` puts it.
fn default_model() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("TOKENSIEVE_MODELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/tokensieve/models"),
    };
    let model = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if model.exists() {
        Ok(model)
    } else {
        Err(model.display().to_string())
    }
}

/// Each README command followed by a `# prints: OUTPUT   (exit N…)` line is
/// run from the repository root and must print OUTPUT and exit with N.
#[test]
fn the_readme_sample_outputs_are_what_the_binary_prints() {
    let lines = shell_lines(&read("README.md"));
    let mut ran = 0;
    for pair in lines.windows(2) {
        let Some(note) = pair[1].trim().strip_prefix("# prints: ") else {
            continue;
        };
        let (expected, exit) = note
            .split_once("   (exit ")
            .expect("a `# prints:` line ends with `   (exit N…)`");
        let code: i32 = exit
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .expect("an exit code after `(exit `");
        let words = shell_words(&pair[0]);
        // `tokensieve ARGS…` or `cargo run … -p tokensieve-cli -- ARGS…`
        let at = words
            .iter()
            .position(|w| w == "tokensieve")
            .or_else(|| {
                let cli = words.iter().position(|w| w == "tokensieve-cli")?;
                Some(cli + words[cli..].iter().position(|w| w == "--")?)
            })
            .expect("the line before `# prints:` runs tokensieve");
        let args: Vec<&str> = words[at + 1..].iter().map(String::as_str).collect();
        if args.first() == Some(&"generate") {
            if !cfg!(feature = "generate") {
                report!(
                    "skipped: `{}` (this build has no `generate` feature)",
                    pair[0].trim()
                );
                continue;
            }
            if let Err(missing) = default_model() {
                report!(
                    "skipped: `{}`: no model at {missing} (run scripts/fetch-model.sh)",
                    pair[0].trim()
                );
                continue;
            }
        }
        let missing: Vec<&&str> = args
            .iter()
            .filter(|a| a.starts_with("../shared/") && !repo().join(a).exists())
            .collect();
        if !missing.is_empty() {
            report!(
                "skipped: `{}` needs {missing:?} (../shared/data absent)",
                pair[0].trim()
            );
            continue;
        }
        let out = tokensieve(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout.trim_end(),
            expected.trim(),
            "`{}` printed otherwise than the README says",
            pair[0].trim()
        );
        assert_eq!(
            out.status.code(),
            Some(code),
            "exit code of `{}`",
            pair[0].trim()
        );
        ran += 1;
    }
    report!("ran {ran} README sample commands");
}

#[test]
fn every_subcommand_is_in_the_readme_table() {
    let readme = read("README.md");
    let mut missing = Vec::new();
    for args in [vec!["--help"], vec!["bench", "--help"]] {
        let out = tokensieve(&args);
        let help = String::from_utf8_lossy(&out.stdout).into_owned();
        let names = help
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|&n| n != "help");
        for name in names {
            if !readme.contains(&format!("`{name}`")) {
                missing.push(name.to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in the README's command table: {missing:?}"
    );
}

#[test]
fn the_readme_stays_a_product_page() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines: figures belong in docs/"
    );
}
