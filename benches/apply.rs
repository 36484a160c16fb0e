//! Mask-application throughput per device: `apply/<device>/<dtype>/b<batch>_v<vocab>`
//! for batch {1, 16, 128, 512} x vocab {32000, 128256, 151936}, and batch 4096
//! too on GPUs (2.5 GB of f32 logits at the largest vocabulary: too much for
//! the CPU bench's machines).
//!
//! Devices: `cpu` ([`tokensieve::CpuDevice`], one thread) always; `cuda` with
//! `--features cuda`; `wgpu` with `--features wgpu`, each when a device
//! exists. dtypes: f32 everywhere, bf16 on the GPUs too.
//!
//! Mask: in every row, each 32-bit word is all ones with probability 1/2
//! (skipped by every device) and random bits otherwise, so about 75% of the
//! tokens are allowed: loose and tight grammar regions mixed. Logits are
//! random, non-zero.
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
    for vocab in VOCABS {
        for batch in BATCHES {
            let mut group = configure(c, "apply/cpu/f32".into(), DType::F32, batch, vocab);
            let mask = realistic_mask(batch, vocab, 7);
            let mut logits = random_logits(batch * vocab, 11);
            group.bench_function(format!("b{batch}_v{vocab}"), |b| {
                b.iter(|| {
                    CpuDevice
                        .apply_token_bitmask_inplace(
                            LogitsMut::F32(std::hint::black_box(&mut logits)),
                            vocab,
                            &mask,
                            None,
                        )
                        .unwrap()
                })
            });
            group.finish();
        }
    }
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
        for vocab in VOCABS {
            for batch in GPU_BATCHES {
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
                            s.clone_htod(&realistic_mask(batch, vocab, 7 + i as u64))
                                .unwrap()
                        })
                        .collect();
                    dev.synchronize().unwrap();
                    (logits, masks)
                };
                let mut inputs = None;
                let mut group = configure(
                    c,
                    format!("apply/{label}/{}", dtype.as_str()),
                    dtype,
                    batch,
                    vocab,
                );
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
    for dtype in [DType::F32, DType::Bf16] {
        for vocab in VOCABS {
            for batch in GPU_BATCHES {
                let logit_bytes = (batch * vocab * dtype.size()) as u64;
                let name = format!("apply/wgpu/{}", dtype.as_str());
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
                                contents: u32_bytes(&realistic_mask(batch, vocab, 7 + i as u64)),
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
