//! Mask-application throughput per device: `apply/<device>/<dtype>/b<batch>_v<vocab>`
//! for batch {1, 16, 128, 512} x vocab {32000, 128256, 151936}, and batch 4096
//! too on GPUs (2.5 GB of f32 logits at the largest vocabulary: too much for
//! the CPU bench's machines).
//!
//! Devices: `cpu` ([`tokensieve::CpuDevice`], one thread) always; `cuda` with
//! `--features cuda`; `wgpu` with `--features wgpu`, each when a device
//! exists. dtypes: f32 everywhere, bf16 on the GPUs too and on the CPU at
//! batch 128.
//!
//! Masks (`APPLY_MASKS`, comma-separated; default `structured`):
//! - `structured`: in every row, each 32-bit word is all ones with
//!   probability 1/2 (skipped by every device) and random bits otherwise, so
//!   about 75% of the tokens are allowed: loose and tight grammar regions
//!   mixed. Its benches keep the plain names `apply/<device>/<dtype>/b<batch>_v<vocab>`;
//! - `iidP`: each token allowed independently with probability P (`iid0.001`,
//!   `iid0.05`, `iid0.5`, `iid0.95`): allowed and forbidden tokens scattered,
//!   so many 32-byte sectors of logits hold both (at P = 0.05, a third of
//!   the f32 sectors);
//! - `real`: rows that real backends filled while walking MaskBench
//!   instances (`examples/record_masks.rs`), replayed at their model's
//!   vocabulary: Llama 3's at 128,256, Qwen2.5's at 151,936 (its 271
//!   padded ids forbidden), from `benches/fixtures/masks/` or the folder
//!   `APPLY_REAL_MASKS` names; other vocabularies are skipped.
//!
//! Other kinds are named `apply/<device>/<dtype>/<kind>/b<batch>_v<vocab>`.
//! Logits are random, non-zero.
//!
//! Throughput is reported as effective bytes (decimal GB/s): logit bytes read + written
//! (`2 * batch * vocab * dtype size`) + bitmask bytes read
//! (`batch * ceil(vocab/32) * 4`), what a read-modify-write masked fill
//! touches (the convention of `benches/torch_masked_fill.py`, which times
//! PyTorch's `masked_fill_` on the same shapes).
//!
//! GPU numbers use device-resident buffers only (no host copies): CUDA times
//! `iters` launches on the device's stream and synchronises inside
//! `iter_custom`; WebGPU encodes `iters` applies into command buffers,
//! submits and waits. When one logits set is small, several sets (up to 64,
//! about 256 MiB together) are rotated so that repeated launches do not just
//! measure the GPU's L2 cache; `APPLY_SETS=N` fixes the number of sets.
//!
//! ```text
//! cargo bench --bench apply                          # cpu only
//! cargo bench --features cuda,wgpu --bench apply -- apply/cuda
//! APPLY_MASKS=structured,iid0.05,real cargo bench --features cuda --bench apply -- apply/cuda
//! ```

use std::time::Duration;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tokensieve::testing::SplitMix64 as Rng;
use tokensieve::{CpuDevice, DType, LogitsMut, MaskDevice};

const BATCHES: [usize; 4] = [1, 16, 128, 512];
#[cfg(any(feature = "cuda", feature = "wgpu"))]
const GPU_BATCHES: [usize; 5] = [1, 16, 128, 512, 4096];
const VOCABS: [usize; 3] = [32000, 128256, 151936];
/// GPU benches rotate through input sets of about this many bytes in all.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
const ROTATE_TARGET_BYTES: usize = 256 << 20;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
const MAX_SETS: usize = 64;

/// Half the words all ones, the rest random bits.
fn realistic_mask(batch: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    (0..batch * vocab.div_ceil(32))
        .map(|_| {
            if rng.next_u32() & 1 == 0 {
                u32::MAX
            } else {
                rng.next_u32()
            }
        })
        .collect()
}

/// A kind of mask the benches are run on (`APPLY_MASKS`).
#[derive(Clone, Debug)]
enum MaskKind {
    Structured,
    /// Each token allowed with this probability.
    Iid(f64),
    /// Recorded rows, by model vocabulary.
    Real,
}

impl MaskKind {
    fn all() -> Vec<(String, MaskKind)> {
        let spec = std::env::var("APPLY_MASKS").unwrap_or_else(|_| "structured".into());
        spec.split(',')
            .map(|k| {
                let kind = match k {
                    "structured" => MaskKind::Structured,
                    "real" => MaskKind::Real,
                    _ => match k.strip_prefix("iid").and_then(|p| p.parse::<f64>().ok()) {
                        Some(p) if (0.0..=1.0).contains(&p) => MaskKind::Iid(p),
                        _ => {
                            eprintln!(
                                "APPLY_MASKS: unknown mask kind {k:?} (structured, iidP with P in [0, 1], real)"
                            );
                            std::process::exit(2);
                        }
                    },
                };
                (k.to_string(), kind)
            })
            .collect()
    }

    /// The benches' group name for a device and dtype.
    fn group(name: &str, device: &str, dtype: DType) -> String {
        match name {
            "structured" => format!("apply/{device}/{}", dtype.as_str()),
            _ => format!("apply/{device}/{}/{name}", dtype.as_str()),
        }
    }

    /// `batch` rows for `vocab` tokens, or `None` where this kind has no rows
    /// at that vocabulary.
    fn rows(&self, batch: usize, vocab: usize, seed: u64) -> Option<Vec<u32>> {
        let words = vocab.div_ceil(32);
        match self {
            MaskKind::Structured => Some(realistic_mask(batch, vocab, seed)),
            MaskKind::Iid(p) => {
                let mut rng = Rng(seed);
                let cut = (p * 2f64.powi(32)).min(u32::MAX as f64 + 1.0);
                let mut out = vec![0u32; batch * words];
                for r in 0..batch {
                    for t in 0..vocab {
                        if (rng.next_u32() as f64) < cut {
                            out[r * words + t / 32] |= 1 << (t % 32);
                        }
                    }
                }
                Some(out)
            }
            MaskKind::Real => {
                let recorded = recorded_masks(vocab)?;
                let mut rng = Rng(seed);
                let mut out = vec![0u32; batch * words];
                for r in 0..batch {
                    let i = rng.next_u32() as usize % recorded.rows;
                    let src = &recorded.words[i * recorded.row_words..][..recorded.row_words];
                    out[r * words..][..recorded.row_words].copy_from_slice(src);
                }
                Some(out)
            }
        }
    }
}

/// Rows recorded by `examples/record_masks.rs`.
struct Recorded {
    rows: usize,
    row_words: usize,
    words: Vec<u32>,
}

/// The recorded rows for a model vocabulary (read once), `None` when there
/// are none for it.
fn recorded_masks(vocab: usize) -> Option<&'static Recorded> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static LOADED: OnceLock<Mutex<HashMap<usize, Option<&'static Recorded>>>> = OnceLock::new();
    let name = match vocab {
        128_256 => "llama3",
        151_936 => "qwen2.5",
        _ => return None,
    };
    let mut map = LOADED.get_or_init(Default::default).lock().unwrap();
    *map.entry(vocab).or_insert_with(|| {
        let dir = std::env::var("APPLY_REAL_MASKS")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/benches/fixtures/masks").into());
        let path = format!("{dir}/masks-{name}.bin.xz");
        let mut data = Vec::new();
        let read = std::fs::File::open(&path)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                lzma_rs::xz_decompress(&mut std::io::BufReader::new(f), &mut data)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = read {
            eprintln!("{path}: {e}; the real masks at vocabulary {vocab} are skipped");
            return None;
        }
        let field = |i: usize| u32::from_le_bytes(data[8 + 4 * i..12 + 4 * i].try_into().unwrap()) as usize;
        if data.len() < 20 || &data[..8] != b"TSMASKS1" {
            eprintln!("{path}: not a recorded-masks file");
            std::process::exit(2);
        }
        let (tokens, row_words, rows) = (field(0), field(1), field(2));
        if tokens > vocab || row_words != tokens.div_ceil(32) || data.len() != 20 + 4 * rows * row_words || rows == 0 {
            eprintln!("{path}: {rows} rows of {tokens} tokens do not fit vocabulary {vocab} or the file's size");
            std::process::exit(2);
        }
        let words = data[20..]
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        Some(&*Box::leak(Box::new(Recorded { rows, row_words, words })))
    })
}

/// Random, finite, non-zero f32 in roughly [-64, 64].
fn random_logits(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let r = rng.next_u32();
            f32::from_bits((r & 0x8000_0000) | ((120 + r % 12) << 23) | (r & 0x7F_FFFF))
        })
        .collect()
}

fn effective_bytes(dtype: DType, batch: usize, vocab: usize) -> u64 {
    (2 * batch * vocab * dtype.size() + batch * vocab.div_ceil(32) * 4) as u64
}

/// How many input sets to rotate through so that the working set is not
/// cache-resident; `APPLY_SETS=N` in the environment fixes it (1 to 64).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn sets_for(bytes: u64) -> usize {
    if let Ok(v) = std::env::var("APPLY_SETS") {
        match v.parse::<usize>() {
            Ok(n) if (1..=MAX_SETS).contains(&n) => return n,
            _ => {
                eprintln!("APPLY_SETS={v:?}: expected a number of input sets from 1 to {MAX_SETS}");
                std::process::exit(2);
            }
        }
    }
    (ROTATE_TARGET_BYTES as u64)
        .div_ceil(bytes.max(1))
        .clamp(1, MAX_SETS as u64) as usize
}

fn configure(
    c: &mut Criterion,
    name: String,
    dtype: DType,
    batch: usize,
    vocab: usize,
) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .throughput(Throughput::BytesDecimal(effective_bytes(
            dtype, batch, vocab,
        )))
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    group
}

fn bench_cpu(c: &mut Criterion) {
    for (name, kind) in MaskKind::all() {
        for vocab in VOCABS {
            for batch in BATCHES {
                let Some(mask) = kind.rows(batch, vocab, 7) else {
                    continue;
                };
                let group = |dtype| MaskKind::group(&name, "cpu", dtype);
                let logits = random_logits(batch * vocab, 11);
                let shape = (batch, vocab, mask.as_slice());
                bench_cpu_rows(c, group(DType::F32), shape, logits.clone(), |x| {
                    LogitsMut::F32(x)
                });
                // bf16 (what torch CPU tensors through the Python wheel
                // often hold) at the batch a serving step masks.
                if batch == 128 {
                    let bf16s = logits.into_iter().map(half::bf16::from_f32).collect();
                    bench_cpu_rows(c, group(DType::Bf16), shape, bf16s, |x| LogitsMut::Bf16(x));
                }
            }
        }
    }
}

/// One CPU bench: `batch` rows of `vocab` logits masked by `mask`.
fn bench_cpu_rows<T>(
    c: &mut Criterion,
    group_name: String,
    (batch, vocab, mask): (usize, usize, &[u32]),
    mut logits: Vec<T>,
    wrap: fn(&mut [T]) -> LogitsMut<'_>,
) {
    let dtype = wrap(&mut logits).dtype();
    let mut group = configure(c, group_name, dtype, batch, vocab);
    group.bench_function(format!("b{batch}_v{vocab}"), |b| {
        b.iter(|| {
            CpuDevice
                .apply_token_bitmask_inplace(
                    wrap(std::hint::black_box(&mut logits)),
                    vocab,
                    mask,
                    None,
                )
                .unwrap()
        })
    });
    group.finish();
}

#[cfg(feature = "cuda")]
fn bench_cuda(c: &mut Criterion) {
    use half::bf16;
    use tokensieve::cuda::{CudaDevice, CudaLogit, CudaSlice};

    let device = match CudaDevice::new(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e})");
            return;
        }
    };
    eprintln!(
        "cuda bench on {} {:?}",
        device.device_name(),
        device.compute_capability()
    );

    fn run<T: CudaLogit>(
        c: &mut Criterion,
        dev: &CudaDevice,
        label: &str,
        dtype: DType,
        convert: impl Fn(f32) -> T,
    ) {
        for (name, kind) in MaskKind::all() {
            for vocab in VOCABS {
                for batch in GPU_BATCHES {
                    if kind.rows(1, vocab, 0).is_none() {
                        continue;
                    }
                    let bytes = effective_bytes(dtype, batch, vocab);
                    let sets = sets_for(bytes);
                    // Inputs are made when criterion runs the bench (not for
                    // benches its filter leaves out: 2.5 GB at b4096_v151936).
                    let setup = || {
                        let s = dev.stream();
                        let host: Vec<T> = random_logits(batch * vocab, 11)
                            .into_iter()
                            .map(&convert)
                            .collect();
                        let logits: Vec<CudaSlice<T>> =
                            (0..sets).map(|_| s.clone_htod(&host).unwrap()).collect();
                        let masks: Vec<CudaSlice<u32>> = (0..sets)
                            .map(|i| {
                                s.clone_htod(&kind.rows(batch, vocab, 7 + i as u64).unwrap())
                                    .unwrap()
                            })
                            .collect();
                        dev.synchronize().unwrap();
                        (logits, masks)
                    };
                    let mut inputs = None;
                    let mut group =
                        configure(c, MaskKind::group(&name, label, dtype), dtype, batch, vocab);
                    group.bench_function(format!("b{batch}_v{vocab}"), |b| {
                        let (logits, masks) = inputs.get_or_insert_with(&setup);
                        b.iter_custom(|iters| {
                            dev.synchronize().unwrap();
                            let start = Instant::now();
                            for i in 0..iters as usize {
                                let k = i % sets;
                                dev.apply_inplace(&mut logits[k], vocab, &masks[k], None)
                                    .unwrap();
                            }
                            dev.synchronize().unwrap();
                            start.elapsed()
                        })
                    });
                    group.finish();
                }
            }
        }
    }
    run(c, &device, "cuda", DType::F32, |x| x);
    run(c, &device, "cuda", DType::Bf16, bf16::from_f32);
}

#[cfg(not(feature = "cuda"))]
fn bench_cuda(_: &mut Criterion) {}

#[cfg(feature = "wgpu")]
fn bench_wgpu(c: &mut Criterion) {
    use tokensieve::wgpu::{ApplyBuffers, WgpuDevice, wgpu};
    use wgpu::util::DeviceExt;

    let dev = match WgpuDevice::new() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipped: no WebGPU adapter ({e})");
            return;
        }
    };
    let info = dev.adapter_info();
    eprintln!(
        "wgpu bench on adapter \"{}\" ({:?})",
        info.name, info.backend
    );
    let limit = dev.device().limits().max_storage_buffer_binding_size;
    let d = dev.device();
    for (kind_name, kind) in MaskKind::all() {
        for dtype in [DType::F32, DType::Bf16] {
            for vocab in VOCABS {
                for batch in GPU_BATCHES {
                    if kind.rows(1, vocab, 0).is_none() {
                        continue;
                    }
                    let logit_bytes = (batch * vocab * dtype.size()) as u64;
                    let name = MaskKind::group(&kind_name, "wgpu", dtype);
                    if logit_bytes > limit {
                        eprintln!(
                            "{name}/b{batch}_v{vocab}: skipped, over the adapter's binding limit"
                        );
                        continue;
                    }
                    let sets = sets_for(effective_bytes(dtype, batch, vocab));
                    let setup = || {
                        let host = logit_bytes_of(dtype, &random_logits(batch * vocab, 11));
                        let storage = wgpu::BufferUsages::STORAGE;
                        let logits: Vec<wgpu::Buffer> = (0..sets)
                            .map(|_| {
                                d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                                    label: None,
                                    contents: &host,
                                    usage: storage,
                                })
                            })
                            .collect();
                        let masks: Vec<wgpu::Buffer> = (0..sets)
                            .map(|i| {
                                d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                                    label: None,
                                    contents: u32_bytes(
                                        &kind.rows(batch, vocab, 7 + i as u64).unwrap(),
                                    ),
                                    usage: storage,
                                })
                            })
                            .collect();
                        dev.wait(None).unwrap();
                        (logits, masks)
                    };
                    let mut inputs = None;
                    let mut group = configure(c, name, dtype, batch, vocab);
                    group.bench_function(format!("b{batch}_v{vocab}"), |b| {
                        let (logits, masks) = inputs.get_or_insert_with(&setup);
                        b.iter_custom(|iters| {
                            dev.wait(None).unwrap();
                            let start = Instant::now();
                            let mut left = iters as usize;
                            let mut i = 0;
                            while left > 0 {
                                // Bounded command buffers: many applies per submit.
                                let n = left.min(256);
                                let mut encoder = d.create_command_encoder(&Default::default());
                                for _ in 0..n {
                                    let k = i % sets;
                                    i += 1;
                                    let args = ApplyBuffers {
                                        logits: &logits[k],
                                        dtype,
                                        batch,
                                        vocab,
                                        bitmask: &masks[k],
                                        words: vocab.div_ceil(32),
                                        indices: None,
                                    };
                                    dev.encode_apply(&mut encoder, &args).unwrap();
                                }
                                dev.queue().submit([encoder.finish()]);
                                left -= n;
                            }
                            dev.wait(None).unwrap();
                            start.elapsed()
                        })
                    });
                    group.finish();
                }
            }
        }
    }

    /// The logits' bytes in `dtype` (bf16: the upper half of each f32).
    fn logit_bytes_of(dtype: DType, x: &[f32]) -> Vec<u8> {
        match dtype {
            DType::Bf16 => x
                .iter()
                .flat_map(|v| half::bf16::from_f32(*v).to_bits().to_le_bytes())
                .collect(),
            _ => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }
    fn u32_bytes(x: &[u32]) -> &[u8] {
        // SAFETY: u32 has no padding.
        unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), std::mem::size_of_val(x)) }
    }
}

#[cfg(not(feature = "wgpu"))]
fn bench_wgpu(_: &mut Criterion) {}

criterion_group!(benches, bench_cpu, bench_cuda, bench_wgpu);
criterion_main!(benches);
