//! Runs the CUDA kernel, `kernels/apply_token_bitmask.cu` unmodified, on the
//! CPU under a lockstep-warp emulator (`tests/emulator/`) and compares every
//! logit with the CPU reference device, bit for bit. No GPU needed: this is
//! where the kernel's indexing, its tile skip and the host's
//! launch decision ([`launch_plan`], the plan `CudaDevice` launches) are
//! executed before a user's GPU runs them.
//!
//! The emulator is compiled with the system's C++ compiler (`$CXX`, else
//! `c++`, `g++` or `clang++`); without one each test prints `skipped: no C++
//! compiler (...)` to stderr and passes. A compile failure fails the test.
//!
//! The harness is checked too: kernels with planted bugs and a launch plan
//! with the wrong `-inf` pattern must mismatch, and the emulator must report
//! diverged warps, invalid launch configurations, misaligned and
//! out-of-bounds accesses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use half::{bf16, f16};
use tokensieve_core::device::ApplyShape;
use tokensieve_core::testing::SplitMix64 as Rng;
use tokensieve_core::{CpuDevice, DType, LogitsMut, MaskDevice};
use tokensieve_cuda::{ENTRY_POINTS, KERNEL_SOURCE, LaunchPlan, launch_plan};

/// Writes straight to the process's stderr: libtest captures `eprintln!` of
/// passing tests, and the CI log must show what ran and what was skipped.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

const KERNEL_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../kernels/apply_token_bitmask.cu"
);
const EMULATOR_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/emulator");

// ---- building and running the emulator --------------------------------------

/// The C++ compiler as a program and its arguments, or why there is none.
fn compiler() -> Option<&'static [String]> {
    static CXX: OnceLock<Result<Vec<String>, String>> = OnceLock::new();
    let found = CXX.get_or_init(|| {
        let from_env = std::env::var("CXX").ok().filter(|c| !c.trim().is_empty());
        let candidates = from_env
            .iter()
            .map(|c| c.split_whitespace().map(String::from).collect::<Vec<_>>())
            .chain(["c++", "g++", "clang++"].map(|c| vec![c.to_string()]));
        let mut tried = Vec::new();
        for cmd in candidates {
            match Command::new(&cmd[0])
                .args(&cmd[1..])
                .arg("--version")
                .output()
            {
                Ok(out) if out.status.success() => return Ok(cmd),
                Ok(out) => tried.push(format!("{}: {}", cmd.join(" "), out.status)),
                Err(e) => tried.push(format!("{}: {e}", cmd.join(" "))),
            }
        }
        Err(tried.join("; "))
    });
    match found {
        Ok(cxx) => Some(cxx),
        Err(why) => {
            tokensieve_core::skip!("no C++ compiler ({why})");
            None
        }
    }
}

/// A compiled emulator: the driver with one kernel source.
struct Emulator {
    exe: PathBuf,
}

/// Compiles `tests/emulator/driver.cpp` with `kernel` (a file with the
/// entry points of apply_token_bitmask.cu) into the test's temporary folder.
fn compile(cxx: &[String], kernel: &Path, name: &str) -> Emulator {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("simt-{name}"));
    let dir = Path::new(EMULATOR_DIR);
    let mut failures = Vec::new();
    // A misaligned access must trap, as on a GPU, without needing a sanitizer
    // runtime. GCC 12 knows only the first spelling; the second is clang's.
    for trap in [
        "-fsanitize-undefined-trap-on-error",
        "-fsanitize-trap=alignment",
    ] {
        let out = Command::new(&cxx[0])
            .args(&cxx[1..])
            .args(["-std=c++20", "-O2", "-fno-strict-aliasing"])
            .args(["-Wno-unknown-pragmas", "-fsanitize=alignment", trap])
            .arg("-include")
            .arg(dir.join("simt.hpp"))
            .arg("-include")
            .arg(kernel)
            .arg(dir.join("driver.cpp"))
            .arg("-o")
            .arg(&exe)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", cxx.join(" ")));
        if out.status.success() {
            return Emulator { exe };
        }
        failures.push(format!(
            "with {trap}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    panic!(
        "{} could not compile the emulator for {}:\n{}",
        cxx.join(" "),
        kernel.display(),
        failures.join("\n")
    );
}

/// The emulator with the real kernel, compiled once per test run.
fn real_kernel() -> Option<&'static Emulator> {
    static EMULATOR: OnceLock<Emulator> = OnceLock::new();
    let cxx = compiler()?;
    Some(EMULATOR.get_or_init(|| {
        let shipped = std::fs::read_to_string(KERNEL_PATH).expect("reading the kernel");
        assert_eq!(
            shipped, KERNEL_SOURCE,
            "{KERNEL_PATH} is not the source the crate ships"
        );
        compile(cxx, Path::new(KERNEL_PATH), "apply_token_bitmask")
    }))
}

/// One launch as the driver reads it.
struct Launch<'a> {
    plan: LaunchPlan,
    /// The logits address mod 16.
    align: u32,
    /// 0: blocks and lanes in order; otherwise a seed to shuffle both.
    schedule: u32,
    logits: &'a [u8],
    bitmask: &'a [u32],
    indices: Option<&'a [u32]>,
}

/// The emulator stopped: the launch (if it names one) and its message.
#[derive(Debug)]
struct EmulatorError {
    launch: Option<usize>,
    message: String,
}

struct Ran {
    /// Each launch's logits afterwards.
    logits: Vec<Vec<u8>>,
    /// The emulator's statistics line.
    stats: String,
}

impl Emulator {
    fn run(&self, launches: &[Launch<'_>]) -> Result<Ran, EmulatorError> {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let stem = format!("{}-{}-{run}", self.exe.display(), std::process::id());
        let (input, output) = (format!("{stem}.cases"), format!("{stem}.out"));
        let mut bytes = Vec::new();
        for l in launches {
            encode(&mut bytes, l);
        }
        std::fs::write(&input, &bytes).expect("writing the cases");
        let out = Command::new(&self.exe)
            .args([&input, &output])
            .output()
            .expect("running the emulator");
        let result = if out.status.success() {
            let all = std::fs::read(&output).expect("reading the emulator's output");
            let mut rest = &all[..];
            let logits = launches
                .iter()
                .map(|l| {
                    let (this, next) = rest.split_at(l.logits.len());
                    rest = next;
                    this.to_vec()
                })
                .collect();
            assert!(rest.is_empty(), "the emulator wrote more than it was given");
            let stats = String::from_utf8_lossy(&out.stdout).trim().to_string();
            Ok(Ran { logits, stats })
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let message = format!("{} ({})", stderr.trim(), out.status);
            let launch = message
                .strip_prefix("simt error: case ")
                .and_then(|m| m.split(':').next()?.parse().ok());
            Err(EmulatorError { launch, message })
        };
        let _ = std::fs::remove_file(&input);
        let _ = std::fs::remove_file(&output);
        result
    }
}

/// The driver's input format (see `tests/emulator/driver.cpp`).
fn encode(out: &mut Vec<u8>, l: &Launch<'_>) {
    fn put(out: &mut Vec<u8>, values: &[u32]) {
        values
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    }
    let p = &l.plan;
    let indices = l.indices.unwrap_or(&[]);
    put(out, &[0x544D_4953, p.kernel.len() as u32]);
    out.extend_from_slice(p.kernel.as_bytes());
    put(
        out,
        &[
            p.grid.0, p.grid.1, p.grid.2, p.block.0, p.block.1, p.block.2,
        ],
    );
    put(out, &[p.num_rows, p.batch, p.vocab, p.words]);
    put(out, &[u32::from(p.neg16.is_some()), p.neg16.unwrap_or(0)]);
    put(out, &[l.align, l.schedule]);
    out.extend_from_slice(&(l.logits.len() as u64).to_le_bytes());
    out.extend_from_slice(l.logits);
    out.extend_from_slice(&(l.bitmask.len() as u64).to_le_bytes());
    put(out, l.bitmask);
    put(out, &[u32::from(l.indices.is_some())]);
    out.extend_from_slice(&(indices.len() as u64).to_le_bytes());
    put(out, indices);
}

// ---- cases ------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mask {
    /// Per word: all ones, all zeros or random bits.
    Random,
    /// Per 32-word tile (1024 logits, one warp's work): all ones, all zeros
    /// or random words.
    Tiles,
    /// Every nibble neither 0 nor 0xf: every 4 (f32) or 8 (16-bit) logits
    /// of 16 bytes hold allowed and forbidden tokens.
    MixedVectors,
    Empty,
    Full,
    /// One allowed token per row.
    Single,
    /// Each token allowed with probability 1/8: tiles written in whole
    /// sectors, most sectors holding an allowed token among forbidden ones.
    Sparse,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Rows {
    /// No index list.
    All,
    /// A random subset in random order.
    Subset,
    /// An empty list: nothing to launch.
    Empty,
    Reversed,
    /// A subset with repeated rows.
    Duplicates,
    /// In-range rows mixed with rows `>= batch` (ignored by the kernel).
    OutOfRange,
    /// This many entries cycling through the batch and past it: more rows
    /// than a grid's y dimension holds.
    Many(usize),
}

#[derive(Clone, Debug)]
struct Case {
    dtype: DType,
    vocab: usize,
    batch: usize,
    /// Bitmask words per row beyond `ceil(vocab/32)`, filled with garbage.
    extra_words: usize,
    mask: Mask,
    rows: Rows,
    /// Bytes from a 16-byte boundary to the logits (a multiple of the
    /// element size, like a view at an element offset).
    offset: usize,
    seed: u64,
}

struct Inputs {
    /// Bit patterns (16-bit ones zero-extended).
    logits: Vec<u32>,
    bitmask: Vec<u32>,
    words: usize,
    indices: Option<Vec<u32>>,
}

/// NaNs with several payloads (quiet, signalling, negative), ±inf, ±0 and
/// subnormals: all must come out bit-identical unless masked.
fn specials(dtype: DType) -> &'static [u32] {
    match dtype {
        DType::F32 => &[
            0x7FC0_0000,
            0xFFC0_0001,
            0x7F80_0001,
            0x7FBF_FFFF,
            0x7F80_0000,
            0xFF80_0000,
            0x8000_0000,
            0x0000_0000,
            0x0000_0001,
            0x807F_FFFF,
        ],
        DType::F16 => &[
            0x7E00, 0xFE01, 0x7C01, 0x7DFF, 0x7C00, 0xFC00, 0x8000, 0x0000, 0x0001, 0x83FF,
        ],
        DType::Bf16 => &[
            0x7FC0, 0xFFC1, 0x7F81, 0x7FBF, 0x7F80, 0xFF80, 0x8000, 0x0000, 0x0001, 0x807F,
        ],
    }
}

/// NaN, ±inf, ±0 or subnormal: exponent all ones or all zeros.
fn is_special(dtype: DType, bits: u32) -> bool {
    let exponent = match dtype {
        DType::F32 => bits >> 23 & 0xFF,
        DType::F16 => bits >> 10 & 0x1F,
        DType::Bf16 => bits >> 7 & 0xFF,
    };
    let all_ones = match dtype {
        DType::F16 => 0x1F,
        _ => 0xFF,
    };
    exponent == 0 || exponent == all_ones
}

fn neg_inf_bits(dtype: DType) -> u32 {
    match dtype {
        DType::F32 => 0xFF80_0000,
        DType::F16 => 0xFC00,
        DType::Bf16 => 0xFF80,
    }
}

fn random_logit(rng: &mut Rng, dtype: DType) -> u32 {
    if rng.chance(50) {
        let s = specials(dtype);
        return s[rng.below(s.len())];
    }
    let r = rng.next_u32();
    match dtype {
        DType::F32 => (r & 0x8000_0000) | ((100 + r % 55) << 23) | (rng.next_u32() & 0x7F_FFFF),
        DType::F16 => (r & 0x8000) | ((1 + r % 30) << 10) | ((r >> 16) & 0x3FF),
        DType::Bf16 => (r & 0x8000) | ((100 + r % 55) << 7) | ((r >> 16) & 0x7F),
    }
}

fn mixed_word(rng: &mut Rng) -> u32 {
    (0..8).fold(0, |w, i| w | (1 + rng.below(14) as u32) << (4 * i))
}

fn build(case: &Case) -> Inputs {
    let mut rng = Rng(case.seed);
    let logits = (0..case.batch * case.vocab)
        .map(|_| random_logit(&mut rng, case.dtype))
        .collect();
    let needed = case.vocab.div_ceil(32);
    let words = needed + case.extra_words;
    let mut bitmask = vec![0u32; case.batch * words];
    for row in bitmask.chunks_mut(words) {
        let (used, extra) = row.split_at_mut(needed);
        match case.mask {
            Mask::Random => used.iter_mut().for_each(|w| {
                *w = match rng.below(4) {
                    0 | 1 => u32::MAX,
                    2 => 0,
                    _ => rng.next_u32(),
                }
            }),
            Mask::Tiles => used.chunks_mut(32).for_each(|tile| match rng.below(3) {
                0 => tile.fill(u32::MAX),
                1 => tile.fill(0),
                _ => tile.iter_mut().for_each(|w| *w = rng.next_u32()),
            }),
            Mask::MixedVectors => used.iter_mut().for_each(|w| *w = mixed_word(&mut rng)),
            Mask::Sparse => used
                .iter_mut()
                .for_each(|w| *w = rng.next_u32() & rng.next_u32() & rng.next_u32()),
            Mask::Empty => used.fill(0),
            Mask::Full => used.fill(u32::MAX),
            Mask::Single => {
                used.fill(0);
                let t = rng.below(case.vocab);
                used[t / 32] |= 1 << (t % 32);
            }
        }
        // Bits past the vocab and words past `needed` must be ignored.
        if !case.vocab.is_multiple_of(32)
            && matches!(case.mask, Mask::Random | Mask::MixedVectors | Mask::Sparse)
        {
            used[needed - 1] ^= rng.next_u32() & (u32::MAX << (case.vocab % 32));
        }
        extra.iter_mut().for_each(|w| *w = rng.next_u32());
    }
    let batch = case.batch as u32;
    let shuffle = |rng: &mut Rng, rows: &mut Vec<u32>| {
        for i in (1..rows.len()).rev() {
            rows.swap(i, rng.below(i + 1));
        }
    };
    let subset = |rng: &mut Rng| {
        let mut rows: Vec<u32> = (0..batch).filter(|_| rng.chance(500)).collect();
        if rows.is_empty() {
            rows.push(rng.below(case.batch) as u32);
        }
        shuffle(rng, &mut rows);
        rows
    };
    let indices = match case.rows {
        Rows::All => None,
        Rows::Subset => Some(subset(&mut rng)),
        Rows::Empty => Some(vec![]),
        Rows::Reversed => Some((0..batch).rev().collect()),
        Rows::Duplicates => {
            let mut rows = subset(&mut rng);
            rows.extend(rows.clone());
            rows.push(rows[0]);
            shuffle(&mut rng, &mut rows);
            Some(rows)
        }
        Rows::OutOfRange => {
            let mut rows = subset(&mut rng);
            rows.extend([batch, batch + 1, batch + 1000, u32::MAX, u32::MAX - 31]);
            shuffle(&mut rng, &mut rows);
            Some(rows)
        }
        Rows::Many(n) => Some((0..n as u32).map(|i| i % (batch + 2)).collect()),
    };
    Inputs {
        logits,
        bitmask,
        words,
        indices,
    }
}

fn to_bytes(dtype: DType, bits: &[u32]) -> Vec<u8> {
    match dtype {
        DType::F32 => bits.iter().flat_map(|b| b.to_le_bytes()).collect(),
        _ => bits
            .iter()
            .flat_map(|&b| (b as u16).to_le_bytes())
            .collect(),
    }
}

fn from_bytes(dtype: DType, bytes: &[u8]) -> Vec<u32> {
    match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        _ => bytes
            .chunks_exact(2)
            .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
    }
}

/// The CPU reference on the in-range rows: the kernel ignores rows
/// `>= batch`, the CPU device rejects them.
fn expected(case: &Case, inputs: &Inputs) -> Vec<u32> {
    let in_range: Option<Vec<u32>> = inputs.indices.as_ref().map(|ix| {
        ix.iter()
            .copied()
            .filter(|&r| (r as usize) < case.batch)
            .collect()
    });
    let apply = |logits: LogitsMut<'_>| {
        CpuDevice
            .apply_token_bitmask_inplace(logits, case.vocab, &inputs.bitmask, in_range.as_deref())
            .unwrap_or_else(|e| panic!("cpu reference failed on {case:?}: {e}"))
    };
    let bits = &inputs.logits;
    match case.dtype {
        DType::F32 => {
            let mut x: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
            apply(LogitsMut::F32(&mut x));
            x.iter().map(|v| v.to_bits()).collect()
        }
        DType::F16 => {
            let mut x: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b as u16)).collect();
            apply(LogitsMut::F16(&mut x));
            x.iter().map(|v| u32::from(v.to_bits())).collect()
        }
        DType::Bf16 => {
            let mut x: Vec<bf16> = bits.iter().map(|&b| bf16::from_bits(b as u16)).collect();
            apply(LogitsMut::Bf16(&mut x));
            x.iter().map(|v| u32::from(v.to_bits())).collect()
        }
    }
}

/// The plan `CudaDevice::apply_inplace` makes for this case.
fn plan(case: &Case, inputs: &Inputs) -> Option<LaunchPlan> {
    let shape = ApplyShape::validate(inputs.logits.len(), case.vocab, inputs.bitmask.len(), None)
        .unwrap_or_else(|e| panic!("bad shape in {case:?}: {e}"));
    let num_rows = inputs.indices.as_ref().map_or(case.batch, Vec::len);
    // The emulator places the logits `offset` bytes past a 16-byte boundary.
    launch_plan(case.dtype, shape, num_rows, case.offset as u64)
        .unwrap_or_else(|e| panic!("launch_plan failed on {case:?}: {e}"))
}

const VOCABS: [usize; 12] = [
    1, 31, 32, 33, 1000, 1023, 1024, 1025, 4104, 32000, 128256, 151936,
];
const MASKS: [Mask; 7] = [
    Mask::Random,
    Mask::Tiles,
    Mask::MixedVectors,
    Mask::Empty,
    Mask::Full,
    Mask::Single,
    Mask::Sparse,
];
const ROWS: [Rows; 6] = [
    Rows::All,
    Rows::Subset,
    Rows::Reversed,
    Rows::Duplicates,
    Rows::OutOfRange,
    Rows::Empty,
];

/// Every dtype x vocab, each at four logits addresses (a 16-byte boundary,
/// 16-48 bytes past one, and two element-aligned addresses off 16-byte
/// alignment) under every mask kind (large vocabularies: three of them, batch 1-2),
/// cycling through index lists, batch sizes and bitmask padding; then two
/// launches with more rows than `gridDim.y` holds.
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut n = 0usize;
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for vocab in VOCABS {
            let large = vocab > 4104;
            let misaligned = |k: usize| match dtype {
                DType::F32 => [4, 8, 12][k % 3],
                _ => [2, 6, 10, 14][k % 4],
            };
            let offsets = [0, 16 * (1 + n % 3), misaligned(n), misaligned(n + 1)];
            for (a, offset) in offsets.into_iter().enumerate() {
                let masks = if large {
                    vec![
                        MASKS[a % 2],
                        Mask::MixedVectors,
                        MASKS[3 + a % 3],
                        Mask::Sparse,
                    ]
                } else {
                    MASKS.to_vec()
                };
                for mask in masks {
                    n += 1;
                    let batch = match vocab {
                        _ if large => 1 + usize::from(n.is_multiple_of(3)),
                        4104 => [1, 2, 5, 9][n % 4],
                        _ => [1, 2, 5, 17, 64][n % 5],
                    };
                    out.push(Case {
                        dtype,
                        vocab,
                        batch,
                        extra_words: [0, 0, 1, 37][n % 4],
                        mask,
                        rows: ROWS[n % ROWS.len()],
                        offset,
                        seed: n as u64,
                    });
                }
            }
        }
    }
    // gridDim.y is capped at 65535: the kernel's row loop takes the rest.
    let many = |dtype, vocab, batch, rows| Case {
        dtype,
        vocab,
        batch,
        extra_words: 0,
        mask: Mask::Random,
        rows,
        offset: 0,
        seed: 7,
    };
    out.push(many(DType::F16, 1000, 3, Rows::Many(65_535 + 700)));
    out.push(many(DType::F32, 4, 65_535 + 300, Rows::All));
    out
}

// ---- the suite ----------------------------------------------------------------

/// Why a suite run failed.
#[derive(Debug)]
enum Failure {
    /// Logits differ from the CPU reference.
    Mismatch(String),
    /// The emulator stopped with an error.
    Emulator(String),
}

#[derive(Default)]
struct Summary {
    cases: usize,
    launched: usize,
    logits: usize,
    masked: usize,
    specials_kept: usize,
    kernels: BTreeMap<&'static str, usize>,
    stats: String,
}

/// Runs `cases` on `emulator` with the plans [`launch_plan`] makes (changed
/// by `tweak`) and compares with the CPU reference.
fn run_suite(
    emulator: &Emulator,
    cases: &[Case],
    mut tweak: impl FnMut(&Case, &mut LaunchPlan),
) -> Result<Summary, Failure> {
    let mut summary = Summary {
        cases: cases.len(),
        ..Summary::default()
    };
    let inputs: Vec<Inputs> = cases.iter().map(build).collect();
    let bytes: Vec<Vec<u8>> = cases
        .iter()
        .zip(&inputs)
        .map(|(c, i)| to_bytes(c.dtype, &i.logits))
        .collect();
    let mut launches = Vec::new();
    let mut launched_case = Vec::new();
    for (k, (case, input)) in cases.iter().zip(&inputs).enumerate() {
        let Some(mut plan) = plan(case, input) else {
            continue;
        };
        tweak(case, &mut plan);
        *summary.kernels.entry(plan.kernel).or_default() += 1;
        launched_case.push(k);
        launches.push(Launch {
            plan,
            align: (case.offset % 16) as u32,
            // Every other case runs blocks and lanes in a shuffled order:
            // a race-free kernel gives the same logits either way.
            schedule: if case.seed % 2 == 1 {
                case.seed as u32
            } else {
                0
            },
            logits: &bytes[k],
            bitmask: &input.bitmask,
            indices: input.indices.as_deref(),
        });
    }
    summary.launched = launches.len();
    let ran = emulator.run(&launches).map_err(|e| {
        let case = e.launch.map(|l| &cases[launched_case[l]]);
        Failure::Emulator(format!("{}\n  on {case:?}", e.message))
    })?;
    summary.stats = ran.stats;
    let mut outputs: Vec<Option<(LaunchPlan, Vec<u32>)>> = vec![None; cases.len()];
    for ((k, out), launch) in launched_case.iter().zip(ran.logits).zip(&launches) {
        outputs[*k] = Some((launch.plan, from_bytes(cases[*k].dtype, &out)));
    }
    for ((case, input), output) in cases.iter().zip(&inputs).zip(outputs) {
        // Nothing launched: the logits must be untouched.
        let (plan, got) = match output {
            Some((plan, got)) => (Some(plan), got),
            None => (None, input.logits.clone()),
        };
        let want = expected(case, input);
        compare(case, input, plan, &got, &want)?;
        let neg = neg_inf_bits(case.dtype);
        summary.logits += want.len();
        for (&w, &before) in want.iter().zip(&input.logits) {
            summary.masked += usize::from(w == neg && before != neg);
            summary.specials_kept += usize::from(w == before && is_special(case.dtype, before));
        }
    }
    Ok(summary)
}

/// Names the case and the first few differing logits (row, column, got and
/// expected bits).
fn compare(
    case: &Case,
    inputs: &Inputs,
    plan: Option<LaunchPlan>,
    got: &[u32],
    want: &[u32],
) -> Result<(), Failure> {
    assert_eq!(got.len(), want.len(), "{case:?}: length differs");
    let bad: Vec<usize> = (0..want.len()).filter(|&i| got[i] != want[i]).collect();
    if bad.is_empty() {
        return Ok(());
    }
    let width = 2 + 2 * case.dtype.size();
    let detail: Vec<String> = bad
        .iter()
        .take(5)
        .map(|&i| {
            let (row, col) = (i / case.vocab, i % case.vocab);
            let bit = inputs.bitmask[row * inputs.words + col / 32] >> (col % 32) & 1;
            format!(
                "row {row}, column {col}: got {:#0width$x}, expected {:#0width$x} \
                 (before {:#0width$x}, mask bit {bit})",
                got[i], want[i], inputs.logits[i]
            )
        })
        .collect();
    let ix = inputs.indices.as_ref().map(|ix| &ix[..ix.len().min(12)]);
    Err(Failure::Mismatch(format!(
        "{} logits differ from the cpu reference on {case:?} (plan {:?}, indices {ix:?}):\n  {}",
        bad.len(),
        plan,
        detail.join("\n  ")
    )))
}

#[test]
fn kernel_matches_cpu_reference_under_emulation() {
    let Some(emulator) = real_kernel() else {
        return;
    };
    let started = std::time::Instant::now();
    let summary = run_suite(emulator, &cases(), |_, _| {}).unwrap_or_else(|f| panic!("{f:?}"));
    for entry in ENTRY_POINTS {
        assert!(
            summary.kernels.contains_key(entry),
            "{entry} never launched"
        );
    }
    let kernels: Vec<String> = summary
        .kernels
        .iter()
        .map(|(k, n)| format!("{k} x{n}"))
        .collect();
    report!(
        "kernel emulation: {} cases ({} launched), {} logits bit-identical to cpu ({} masked, \
         {} NaN/inf/zero/subnormal kept); kernels: {}; emulator: {}; {:.1?}",
        summary.cases,
        summary.launched,
        summary.logits,
        summary.masked,
        summary.specials_kept,
        kernels.join(", "),
        summary.stats,
        started.elapsed()
    );
}

/// The kernel a case runs on when its launch is forced to whole sectors
/// (`sectors`) or to logit-by-logit stores, whatever its size: 16-bit rows
/// off a 4-byte pair always take `apply_bitmask_b16`.
fn forced(case: &Case, plan: &mut LaunchPlan, sectors: bool) {
    let pairs_fit = case.vocab.is_multiple_of(2) && case.offset.is_multiple_of(4);
    plan.kernel = match (case.dtype, sectors) {
        (DType::F32, true) => "apply_bitmask_b32_sectors",
        (DType::F32, false) => "apply_bitmask_b32",
        (_, true) if pairs_fit => "apply_bitmask_b16_pairs",
        _ => "apply_bitmask_b16",
    };
}

/// `launch_plan` writes whole sectors only in launches of many tiles, so
/// the suite above runs most cases logit by logit. Here every case runs on
/// the whole-sector kernels, then on the logit-by-logit ones.
#[test]
fn every_case_matches_on_both_kinds_of_kernel() {
    let Some(emulator) = real_kernel() else {
        return;
    };
    for sectors in [true, false] {
        let summary = run_suite(emulator, &cases(), |case, plan| forced(case, plan, sectors))
            .unwrap_or_else(|f| panic!("sectors {sectors}: {f:?}"));
        let kernels: Vec<String> = summary
            .kernels
            .iter()
            .map(|(k, n)| format!("{k} x{n}"))
            .collect();
        let want: &[&str] = if sectors {
            &[
                "apply_bitmask_b16",
                "apply_bitmask_b16_pairs",
                "apply_bitmask_b32_sectors",
            ]
        } else {
            &["apply_bitmask_b16", "apply_bitmask_b32"]
        };
        assert!(
            summary.kernels.keys().copied().eq(want.iter().copied()),
            "{kernels:?}"
        );
        report!(
            "kernel emulation, {}: {} cases, {} logits bit-identical to cpu; kernels: {}",
            if sectors {
                "whole sectors"
            } else {
                "logit by logit"
            },
            summary.cases,
            summary.logits,
            kernels.join(", ")
        );
    }
}

/// A copy of the kernel source with each `(from, to, n)` replaced; each
/// `from` must occur exactly `n` times, so a changed kernel fails here,
/// loudly.
fn mutant(name: &str, edits: &[(&str, &str, usize)]) -> PathBuf {
    let mut source = KERNEL_SOURCE.to_string();
    for (from, to, n) in edits {
        assert_eq!(
            source.matches(from).count(),
            *n,
            "`{from}` is not in the kernel {n} times: update this mutation"
        );
        source = source.replace(from, to);
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.cu"));
    std::fs::write(&path, source).expect("writing the mutant");
    path
}

/// How the planted-bug runs change the launch plans.
#[derive(Clone, Copy)]
enum Tweak {
    None,
    /// Every case on the whole-sector kernels.
    Sectors,
    /// The f16 `-inf` pattern passed for bf16 too.
    F16Pattern,
}

/// The suite must fail for planted bugs: a row's last logit is never
/// masked; tiles whose words have only their low bytes set are skipped as if
/// all allowed; a whole-sector write loses the allowed half of a 16-bit pair,
/// or the allowed f32 logits of a mixed sector;
/// and a launch plan passes the f16 `-inf` pattern for bf16 too.
/// (A plan with too few blocks is no bug: the kernel's grid-stride loops
/// cover any grid.)
#[test]
fn planted_bugs_are_caught() {
    let (Some(cxx), Some(real)) = (compiler(), real_kernel()) else {
        return;
    };
    let bound = compile(
        cxx,
        &mutant(
            "planted-bound",
            &[("if (col < vocab && ", "if (col + 1u < vocab && ", 1)],
        ),
        "planted-bound",
    );
    let skip = compile(
        cxx,
        &mutant(
            "planted-skip",
            // In all three row loops.
            &[(
                "__all_sync(FULL_WARP, word == FULL_WARP)",
                "__all_sync(FULL_WARP, (word & 0xffu) == 0xffu)",
                3,
            )],
        ),
        "planted-skip",
    );
    // Whole sectors: a pair with one allowed half is not read, so that half
    // is written back as zero.
    let merge = compile(
        cxx,
        &mutant(
            "planted-merge",
            &[(
                "touch[k] && halves[k] != 0u;",
                "touch[k] && halves[k] == 3u;",
                1,
            )],
        ),
        "planted-merge",
    );
    // Whole f32 sectors: a mixed sector's allowed logits are not read, so
    // they are written back as zero.
    let merge_f32 = compile(
        cxx,
        &mutant(
            "planted-merge-f32",
            &[(
                "(in && allowed && mixed) ? row_ptr[col] : 0xFF800000u",
                "(in && allowed && mixed) ? 0u : 0xFF800000u",
                1,
            )],
        ),
        "planted-merge-f32",
    );
    let small: Vec<Case> = cases().into_iter().filter(|c| c.vocab <= 4104).collect();
    for (what, emulator, tweak) in [
        ("row bound", &bound, Tweak::None),
        ("tile skip", &skip, Tweak::None),
        ("whole-sector merge of pairs", &merge, Tweak::Sectors),
        ("whole-sector merge of f32", &merge_f32, Tweak::Sectors),
        ("bf16 masked with the f16 pattern", real, Tweak::F16Pattern),
    ] {
        let outcome = run_suite(emulator, &small, |case, plan| match tweak {
            Tweak::None => {}
            Tweak::Sectors => forced(case, plan, true),
            Tweak::F16Pattern => plan.neg16 = plan.neg16.map(|_| 0xFC00),
        });
        match outcome {
            Err(Failure::Mismatch(why)) => {
                report!(
                    "planted bug caught ({what}): {}",
                    why.lines().next().unwrap_or("")
                )
            }
            Err(Failure::Emulator(why)) => panic!("{what}: the emulator failed instead: {why}"),
            Ok(_) => panic!("{what}: the planted bug went unnoticed"),
        }
    }
}

/// Launches one hand-made plan on 64 logits of `kernel`'s element size.
fn launch_error(
    emulator: &Emulator,
    plan: LaunchPlan,
    align: u32,
    indices: Option<&[u32]>,
) -> String {
    let elem = if plan.neg16.is_some() { 2 } else { 4 };
    let logits = vec![0x3Cu8; (plan.batch * plan.vocab) as usize * elem];
    // Allowed and forbidden logits in every word: every launch stores.
    let bitmask = vec![0x00FF_0F0Fu32; (plan.batch * plan.words) as usize];
    let launch = Launch {
        plan,
        align,
        schedule: 0,
        logits: &logits,
        bitmask: &bitmask,
        indices,
    };
    match emulator.run(&[launch]) {
        Ok(_) => panic!("{plan:?} (align {align}, indices {indices:?}) ran without an error"),
        Err(e) => e.message,
    }
}

/// What would be undefined or fail on a GPU must stop the emulator with a
/// message that says what: diverged warps (a lane returns early, lanes at
/// different intrinsics or call sites), a mask leaving out lanes, a partial
/// warp under FULL_WARP, a misaligned store, reads past a buffer, a
/// grid CUDA rejects, an argument list that does not match the kernel.
#[test]
fn undefined_behaviour_is_reported() {
    let (Some(cxx), Some(real)) = (compiler(), real_kernel()) else {
        return;
    };
    let divergent = compile(
        cxx,
        &Path::new(EMULATOR_DIR).join("divergent.cu"),
        "divergent",
    );
    let base = LaunchPlan {
        kernel: "apply_bitmask_b32",
        grid: (1, 1, 1),
        block: (32, 1, 1),
        num_rows: 1,
        batch: 1,
        vocab: 64,
        words: 2,
        neg16: None,
    };
    let b16 = LaunchPlan {
        kernel: "apply_bitmask_b16",
        neg16: Some(0xFC00),
        ..base
    };
    let expect = |got: String, want: &str| {
        assert!(got.contains(want), "expected `{want}` in: {got}");
        report!("reported: {}", got.lines().next().unwrap_or(""));
    };
    for (plan, want) in [
        (
            base,
            "lane 5 returned from the kernel while lanes 0-4,6-31 wait at __shfl_sync",
        ),
        (b16, "lane 5 is at __all_sync at divergent.cu"),
        (
            LaunchPlan { vocab: 96, ..base },
            "passes mask 0x0000ffff but the warp's lanes are 0-31",
        ),
        (
            LaunchPlan { vocab: 96, ..b16 },
            "lane 5 is at __shfl_sync at divergent.cu:41",
        ),
    ] {
        expect(launch_error(&divergent, plan, 0, None), want);
    }

    let real_plan = |dtype, vocab, batch, num_rows| {
        let shape = ApplyShape {
            batch,
            vocab,
            words: usize::div_ceil(vocab, 32),
        };
        launch_plan(dtype, shape, num_rows, 0).unwrap().unwrap()
    };
    let f32_plan = real_plan(DType::F32, 1024, 2, 2);
    assert_eq!(f32_plan.kernel, "apply_bitmask_b32");
    expect(launch_error(real, f32_plan, 2, None), "misaligned access");
    let f16_plan = real_plan(DType::F16, 1024, 2, 2);
    expect(launch_error(real, f16_plan, 1, None), "misaligned access");
    expect(
        launch_error(real, real_plan(DType::F32, 1024, 2, 3), 0, Some(&[0, 1])),
        "out-of-bounds access to indices: byte 8 of a 8-byte buffer",
    );
    // 48 threads: the second warp has 16 lanes (and work, with 4 tiles).
    let partial_warp = LaunchPlan {
        block: (48, 1, 1),
        ..real_plan(DType::F32, 4096, 2, 2)
    };
    expect(
        launch_error(real, partial_warp, 0, None),
        "passes mask 0xffffffff but the warp's lanes are 0-15",
    );
    let tall = LaunchPlan {
        grid: (1, 65_536, 1),
        ..f32_plan
    };
    expect(
        launch_error(real, tall, 0, None),
        "invalid launch configuration",
    );
    let extra_arg = LaunchPlan {
        neg16: Some(0xFC00),
        ..real_plan(DType::F32, 1000, 1, 1)
    };
    expect(
        launch_error(real, extra_arg, 0, None),
        "the plan passes the -inf pattern to apply_bitmask_b32, which takes 7 parameters",
    );
}
