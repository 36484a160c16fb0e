//! Device conformance: every mask device against the CPU reference
//! ([`tokensieve::CpuDevice`]), bit for bit, on random and adversarial cases:
//! vocab sizes that are not multiples of 32 (1, 31, 33, 50257 …) and real
//! ones (32000, 128256, 151936), padded model vocabularies, bitmask rows wider
//! than needed, empty/full/single-token masks, `indices` absent, subsets,
//! empty, reversed, duplicated; f32/f16/bf16 logits with NaN (several
//! payloads), ±inf and -0.0 that must stay bit-identical where allowed.
//!
//! The CPU reference itself is checked against a naive per-logit model
//! first, so this file tests something even without a GPU feature. With
//! `--features cuda` / `--features wgpu`, each device runs the whole suite
//! through its host-copy [`MaskDevice`] impl and a part of it through its
//! buffer-level API. A device that cannot be opened prints
//! `skipped: no CUDA device (<reason>)` / `skipped: no WebGPU adapter
//! (<reason>)`; one that runs prints its name (run with `--nocapture`).

#![allow(dead_code)]

/// Writes straight to the process's stderr: libtest captures `eprintln!` of
/// passing tests, and the CI log must show what ran and what was skipped.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use half::{bf16, f16};
use tokensieve::testing::SplitMix64 as Rng;
use tokensieve::{CpuDevice, DType, LogitsMut, MaskDevice};

#[derive(Clone, Copy, Debug, PartialEq)]
enum MaskKind {
    /// About half the words all ones, the rest random bits (bits past the
    /// vocab random too: they must be ignored).
    Random,
    Empty,
    Full,
    /// One allowed token per row.
    Single,
    /// The model's vocab is padded past the tokenizer's: ids
    /// `>= tokenizer_vocab` always masked, the rest random.
    Padded {
        tokenizer_vocab: usize,
    },
}

#[derive(Clone, Debug, PartialEq)]
enum IndexKind {
    All,
    /// A random subset in random order.
    Subset,
    Empty,
    Reversed,
    /// A subset with repeated rows.
    Duplicates,
    /// Only the middle row (odd vocab: both its boundary words are shared
    /// with rows left alone).
    Middle,
}

#[derive(Clone, Debug)]
struct Case {
    batch: usize,
    vocab: usize,
    /// Bitmask words per row beyond `ceil(vocab/32)` (filled with garbage).
    extra_words: usize,
    dtype: DType,
    mask: MaskKind,
    index: IndexKind,
    /// Sprinkle NaN, ±inf and -0.0 into the logits.
    specials: bool,
    seed: u64,
}

#[derive(Clone, Debug, PartialEq)]
enum HostLogits {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
}

impl HostLogits {
    fn as_mut(&mut self) -> LogitsMut<'_> {
        match self {
            HostLogits::F32(x) => LogitsMut::F32(x),
            HostLogits::F16(x) => LogitsMut::F16(x),
            HostLogits::Bf16(x) => LogitsMut::Bf16(x),
        }
    }
    fn bits(&self) -> Vec<u32> {
        match self {
            HostLogits::F32(x) => x.iter().map(|v| v.to_bits()).collect(),
            HostLogits::F16(x) => x.iter().map(|v| u32::from(v.to_bits())).collect(),
            HostLogits::Bf16(x) => x.iter().map(|v| u32::from(v.to_bits())).collect(),
        }
    }
    fn as_bytes(&self) -> &[u8] {
        match self {
            HostLogits::F32(x) => bytemuck_bytes(x),
            HostLogits::F16(x) => bytemuck_bytes(x),
            HostLogits::Bf16(x) => bytemuck_bytes(x),
        }
    }
    fn from_bytes(dtype: DType, bytes: &[u8]) -> HostLogits {
        let n = bytes.len() / dtype.size();
        match dtype {
            DType::F32 => HostLogits::F32(
                (0..n)
                    .map(|i| f32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap()))
                    .collect(),
            ),
            DType::F16 => HostLogits::F16(
                (0..n)
                    .map(|i| f16::from_bits(u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]])))
                    .collect(),
            ),
            DType::Bf16 => HostLogits::Bf16(
                (0..n)
                    .map(|i| bf16::from_bits(u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]])))
                    .collect(),
            ),
        }
    }
}

fn bytemuck_bytes<T: Copy>(x: &[T]) -> &[u8] {
    // SAFETY: f32/f16/bf16 are plain bit patterns without padding.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), std::mem::size_of_val(x)) }
}

/// One case's inputs.
struct Inputs {
    logits: HostLogits,
    bitmask: Vec<u32>,
    words: usize,
    indices: Option<Vec<u32>>,
}

fn random_bits(rng: &mut Rng, dtype: DType, specials: bool) -> u32 {
    if specials && rng.chance(30) {
        let pick = rng.below(6);
        return match dtype {
            DType::F32 => [
                0x7FC0_0000,
                0xFFC0_0001,
                0x7F80_0001,
                0x7F80_0000,
                0xFF80_0000,
                0x8000_0000,
            ][pick],
            DType::F16 => [0x7E00, 0xFE01, 0x7C01, 0x7C00, 0xFC00, 0x8000][pick],
            DType::Bf16 => [0x7FC0, 0xFFC1, 0x7F81, 0x7F80, 0xFF80, 0x8000][pick],
        };
    }
    let r = rng.next_u32();
    match dtype {
        // sign | exponent 100..=154 | mantissa: finite, non-zero
        DType::F32 => (r & 0x8000_0000) | ((100 + r % 55) << 23) | (rng.next_u32() & 0x7F_FFFF),
        DType::F16 => (r & 0x8000) | ((1 + r % 30) << 10) | ((r >> 16) & 0x3FF),
        DType::Bf16 => (r & 0x8000) | ((100 + r % 55) << 7) | ((r >> 16) & 0x7F),
    }
}

fn build(case: &Case) -> Inputs {
    let mut rng = Rng(case.seed);
    let n = case.batch * case.vocab;
    let mut bits = (0..n).map(|_| random_bits(&mut rng, case.dtype, case.specials));
    let logits = match case.dtype {
        DType::F32 => HostLogits::F32(bits.by_ref().map(f32::from_bits).collect()),
        DType::F16 => HostLogits::F16(bits.by_ref().map(|b| f16::from_bits(b as u16)).collect()),
        DType::Bf16 => HostLogits::Bf16(bits.by_ref().map(|b| bf16::from_bits(b as u16)).collect()),
    };
    let words = case.vocab.div_ceil(32) + case.extra_words;
    let mut bitmask = vec![0u32; case.batch * words];
    for row in bitmask.chunks_mut(words) {
        match case.mask {
            MaskKind::Random | MaskKind::Padded { .. } => row.iter_mut().for_each(|w| {
                *w = if rng.chance(500) {
                    u32::MAX
                } else {
                    rng.next_u32()
                }
            }),
            MaskKind::Empty => row.fill(0),
            MaskKind::Full => row.fill(u32::MAX),
            MaskKind::Single => {
                row.fill(0);
                let t = rng.below(case.vocab);
                row[t / 32] |= 1 << (t % 32);
            }
        }
        if let MaskKind::Padded { tokenizer_vocab } = case.mask {
            for t in tokenizer_vocab..words * 32 {
                row[t / 32] &= !(1 << (t % 32));
            }
        }
    }
    let subset = |rng: &mut Rng| {
        let mut rows: Vec<u32> = (0..case.batch as u32).filter(|_| rng.chance(500)).collect();
        if rows.is_empty() {
            rows.push(rng.below(case.batch) as u32);
        }
        for i in (1..rows.len()).rev() {
            rows.swap(i, rng.below(i + 1));
        }
        rows
    };
    let indices = match case.index {
        IndexKind::All => None,
        IndexKind::Subset => Some(subset(&mut rng)),
        IndexKind::Empty => Some(vec![]),
        IndexKind::Reversed => Some((0..case.batch as u32).rev().collect()),
        IndexKind::Duplicates => {
            let mut rows = subset(&mut rng);
            let extra: Vec<u32> = (0..rows.len().max(2))
                .map(|i| rows[i % rows.len()])
                .collect();
            rows.extend(extra);
            Some(rows)
        }
        IndexKind::Middle => Some(vec![(case.batch / 2) as u32]),
    };
    Inputs {
        logits,
        bitmask,
        words,
        indices,
    }
}

/// The expected output: the CPU reference.
fn expected(case: &Case, inputs: &Inputs) -> HostLogits {
    let mut out = inputs.logits.clone();
    CpuDevice
        .apply_token_bitmask_inplace(
            out.as_mut(),
            case.vocab,
            &inputs.bitmask,
            inputs.indices.as_deref(),
        )
        .unwrap_or_else(|e| panic!("cpu reference failed on {case:?}: {e}"));
    out
}

/// Panics with the first differing logits.
fn assert_bits_equal(
    device: &str,
    case: &Case,
    inputs: &Inputs,
    want: &HostLogits,
    got: &HostLogits,
) {
    let (want, got, before) = (want.bits(), got.bits(), inputs.logits.bits());
    assert_eq!(
        want.len(),
        got.len(),
        "{device}: length differs on {case:?}"
    );
    let bad: Vec<usize> = (0..want.len())
        .filter(|&i| want[i] != got[i])
        .take(5)
        .collect();
    if !bad.is_empty() {
        let total = (0..want.len()).filter(|&i| want[i] != got[i]).count();
        let detail: Vec<String> = bad
            .iter()
            .map(|&i| {
                let (row, col) = (i / case.vocab, i % case.vocab);
                let bit = inputs.bitmask[row * inputs.words + col / 32] >> (col % 32) & 1;
                format!(
                    "[row {row}, col {col}] mask bit {bit}: before {:#x}, cpu {:#x}, {device} {:#x}",
                    before[i], want[i], got[i]
                )
            })
            .collect();
        panic!(
            "{device} differs from cpu at {total} logits on {case:?} (indices {:?}):\n  {}",
            inputs.indices.as_ref().map(|ix| &ix[..ix.len().min(16)]),
            detail.join("\n  ")
        );
    }
}

/// The corpus. Total work stays small enough for a software Vulkan driver:
/// large batch x large vocab only in the last few cases.
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut seed = 1u64;
    let mut push = |batch, vocab, extra_words, dtype, mask, index, specials| {
        seed += 1;
        out.push(Case {
            batch,
            vocab,
            extra_words,
            dtype,
            mask,
            index,
            specials,
            seed,
        });
    };
    let indices = [
        IndexKind::All,
        IndexKind::Subset,
        IndexKind::Empty,
        IndexKind::Reversed,
        IndexKind::Duplicates,
        IndexKind::Middle,
    ];
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for vocab in [
            1, 2, 31, 32, 33, 63, 1000, 1001, 32000, 32002, 50257, 128256, 151936,
        ] {
            let batches: &[usize] = if vocab <= 1001 {
                &[1, 3, 17, 512]
            } else {
                &[1, 3]
            };
            for (i, &batch) in batches.iter().enumerate() {
                let index = indices[(i + vocab) % indices.len()].clone();
                push(batch, vocab, 0, dtype, MaskKind::Random, index, true);
            }
            let batch = if vocab <= 1001 { 5 } else { 2 };
            push(
                batch,
                vocab,
                0,
                dtype,
                MaskKind::Empty,
                IndexKind::All,
                true,
            );
            push(batch, vocab, 0, dtype, MaskKind::Full, IndexKind::All, true);
            push(
                batch,
                vocab,
                0,
                dtype,
                MaskKind::Single,
                IndexKind::Subset,
                false,
            );
            push(
                batch,
                vocab,
                2,
                dtype,
                MaskKind::Random,
                IndexKind::Middle,
                true,
            );
            push(
                batch,
                vocab,
                1,
                dtype,
                MaskKind::Random,
                IndexKind::Duplicates,
                false,
            );
        }
        // Model vocab padded past the tokenizer's.
        let pad = |tokenizer_vocab| MaskKind::Padded { tokenizer_vocab };
        push(4, 32064, 0, dtype, pad(32000), IndexKind::All, true);
        push(3, 50304, 0, dtype, pad(50257), IndexKind::Subset, true);
        push(2, 151936, 0, dtype, pad(151665), IndexKind::Reversed, false);
        push(5, 40, 3, dtype, pad(33), IndexKind::Middle, true);
    }
    // A few large ones.
    push(
        512,
        32000,
        0,
        DType::F32,
        MaskKind::Random,
        IndexKind::All,
        true,
    );
    push(
        64,
        151936,
        0,
        DType::Bf16,
        MaskKind::Random,
        IndexKind::Subset,
        true,
    );
    push(
        32,
        128256,
        0,
        DType::F16,
        MaskKind::Random,
        IndexKind::Duplicates,
        true,
    );
    push(
        96,
        50257,
        0,
        DType::F16,
        MaskKind::Random,
        IndexKind::Reversed,
        true,
    );
    out
}

/// Runs every case through `apply` and compares with the CPU. Returns the
/// number of cases run.
fn run_suite(
    device: &str,
    cases: &[Case],
    mut apply: impl FnMut(&Case, &Inputs) -> HostLogits,
) -> usize {
    for case in cases {
        let inputs = build(case);
        let want = expected(case, &inputs);
        let got = apply(case, &inputs);
        assert_bits_equal(device, case, &inputs, &want, &got);
    }
    cases.len()
}

fn via_mask_device(device: &dyn MaskDevice) -> impl FnMut(&Case, &Inputs) -> HostLogits + '_ {
    move |case, inputs| {
        let mut got = inputs.logits.clone();
        device
            .apply_token_bitmask_inplace(
                got.as_mut(),
                case.vocab,
                &inputs.bitmask,
                inputs.indices.as_deref(),
            )
            .unwrap_or_else(|e| panic!("{} failed on {case:?}: {e}", device.name()));
        got
    }
}

/// An independent per-logit model of the contract, to check the oracle.
fn naive(case: &Case, inputs: &Inputs) -> HostLogits {
    let mut bits = inputs.logits.bits();
    let neg = match case.dtype {
        DType::F32 => 0xFF80_0000,
        DType::F16 => 0xFC00,
        DType::Bf16 => 0xFF80,
    };
    let rows: Vec<usize> = match &inputs.indices {
        None => (0..case.batch).collect(),
        Some(ix) => ix.iter().map(|&r| r as usize).collect(),
    };
    for r in rows {
        for c in 0..case.vocab {
            if inputs.bitmask[r * inputs.words + c / 32] >> (c % 32) & 1 == 0 {
                bits[r * case.vocab + c] = neg;
            }
        }
    }
    let mut bytes = Vec::new();
    for b in bits {
        match case.dtype {
            DType::F32 => bytes.extend_from_slice(&b.to_le_bytes()),
            _ => bytes.extend_from_slice(&(b as u16).to_le_bytes()),
        }
    }
    HostLogits::from_bytes(case.dtype, &bytes)
}

#[test]
fn cpu_reference_matches_the_naive_model() {
    let n = run_suite("naive", &cases(), naive);
    report!("cpu reference: {n} cases match the naive model");
}

#[test]
fn corpus_covers_what_it_claims() {
    let cases = cases();
    for vocab in [1, 31, 32, 33, 32000, 128256, 151936] {
        assert!(
            cases.iter().any(|c| c.vocab == vocab),
            "vocab {vocab} missing"
        );
    }
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        assert!(cases.iter().any(|c| c.dtype == dtype && c.specials));
    }
    assert!(cases.iter().any(|c| c.batch == 512));
    assert!(cases.iter().any(|c| c.batch == 1));
    // A case that masks nothing would hide a device that does nothing.
    let masked = cases
        .iter()
        .filter(|c| {
            let inputs = build(c);
            inputs.logits != expected(c, &inputs)
        })
        .count();
    assert!(
        masked > cases.len() / 2,
        "only {masked} cases change any logit"
    );
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use std::sync::OnceLock;
    use tokensieve::cuda::{CudaDevice, CudaLogit, CudaSlice};

    fn device() -> Option<&'static CudaDevice> {
        static DEVICE: OnceLock<Result<CudaDevice, String>> = OnceLock::new();
        match DEVICE.get_or_init(|| CudaDevice::new(0).map_err(|e| e.to_string())) {
            Ok(d) => {
                report!(
                    "CUDA conformance on {} ({}), compute capability {:?}",
                    d.device_name(),
                    d.name(),
                    d.compute_capability()
                );
                Some(d)
            }
            Err(why) => {
                tokensieve::skip!("no CUDA device ({why})");
                None
            }
        }
    }

    #[test]
    fn host_api_matches_cpu() {
        let Some(dev) = device() else { return };
        let n = run_suite(&dev.name(), &cases(), via_mask_device(dev));
        report!("cuda host API: {n} cases bit-identical to cpu");
    }

    fn upload<T: CudaLogit>(dev: &CudaDevice, x: &[T], offset: usize) -> CudaSlice<T> {
        // `offset` leading elements shift the logits' start (off 16-byte
        // alignment for an odd offset).
        let mut padded = x.to_vec();
        if offset > 0 {
            padded.splice(0..0, std::iter::repeat_n(x[0], offset));
        }
        dev.stream().clone_htod(&padded).unwrap()
    }

    fn apply_device<T: CudaLogit>(
        dev: &CudaDevice,
        case: &Case,
        inputs: &Inputs,
        x: &[T],
        offset: usize,
    ) -> Vec<T> {
        let s = dev.stream();
        let mut logits = upload(dev, x, offset);
        let mask = s.clone_htod(&inputs.bitmask).unwrap();
        let ix = inputs
            .indices
            .as_ref()
            .filter(|ix| !ix.is_empty())
            .map(|ix| s.clone_htod(ix).unwrap());
        let skip = matches!(&inputs.indices, Some(ix) if ix.is_empty());
        if !skip {
            let mut view = logits.slice_mut(offset..offset + x.len());
            dev.apply_inplace(
                &mut view,
                case.vocab,
                &mask,
                ix.as_ref().map(|i| i.as_view()).as_ref(),
            )
            .unwrap();
        }
        let out = s.clone_dtoh(&logits).unwrap();
        dev.synchronize().unwrap();
        out[offset..].to_vec()
    }

    fn via_buffers(
        dev: &CudaDevice,
        offset: usize,
    ) -> impl FnMut(&Case, &Inputs) -> HostLogits + '_ {
        move |case, inputs| match &inputs.logits {
            HostLogits::F32(x) => HostLogits::F32(apply_device(dev, case, inputs, x, offset)),
            HostLogits::F16(x) => HostLogits::F16(apply_device(dev, case, inputs, x, offset)),
            HostLogits::Bf16(x) => HostLogits::Bf16(apply_device(dev, case, inputs, x, offset)),
        }
    }

    #[test]
    fn buffer_api_matches_cpu() {
        let Some(dev) = device() else { return };
        let n = run_suite("cuda:0 (buffers)", &cases(), via_buffers(dev, 0));
        report!("cuda buffer API: {n} cases bit-identical to cpu");
    }

    /// Logits starting one element past an allocation (off 16-byte
    /// alignment): the kernel needs only element alignment.
    #[test]
    fn unaligned_views_match_cpu() {
        let Some(dev) = device() else { return };
        let cases: Vec<Case> = cases()
            .into_iter()
            .filter(|c| c.batch * c.vocab <= 1 << 20)
            .collect();
        let n = run_suite("cuda:0 (unaligned view)", &cases, via_buffers(dev, 1));
        report!("cuda unaligned views: {n} cases bit-identical to cpu");
    }

    #[test]
    fn bad_shapes_are_errors() {
        let Some(dev) = device() else { return };
        let mut l = vec![0f32; 10];
        let e = dev.apply_token_bitmask_inplace(LogitsMut::F32(&mut l), 3, &[0], None);
        assert!(matches!(e, Err(tokensieve::DeviceError::Shape(_))), "{e:?}");
        let e = dev.apply_token_bitmask_inplace(LogitsMut::F32(&mut l), 5, &[0, 0], Some(&[2]));
        assert!(
            matches!(e, Err(tokensieve::DeviceError::IndexOutOfRange { .. })),
            "{e:?}"
        );
    }

    /// The device's stream is not one of cudarc's making, so its context
    /// records no events per launch; a buffer made on that stream outlives
    /// the device and stays usable (the stream goes only with its last
    /// holder).
    #[test]
    fn own_stream_without_event_tracking() {
        if device().is_none() {
            return;
        }
        let dev = CudaDevice::new(0).unwrap();
        assert!(
            !dev.context().is_in_multi_stream_mode(),
            "CudaDevice::new put the context in cudarc's multi-stream mode"
        );
        let s = dev.stream().clone();
        let mut logits = s.clone_htod(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let mask = s.clone_htod(&[0b0101u32]).unwrap();
        dev.apply_inplace(&mut logits, 4, &mask, None).unwrap();
        drop(dev);
        let got = s.clone_dtoh(&logits).unwrap();
        assert_eq!(got, [1.0, f32::NEG_INFINITY, 3.0, f32::NEG_INFINITY]);
        drop((logits, mask, s));
        // A device whose stream nothing else holds destroys it on drop.
        drop(CudaDevice::new(0).unwrap());
        report!("cuda own stream: no multi-stream mode; buffers outlive the device");
    }
}

#[cfg(feature = "wgpu")]
mod webgpu {
    use super::*;
    use std::sync::OnceLock;
    use tokensieve::wgpu::{ApplyBuffers, WgpuDevice, wgpu};
    use wgpu::util::DeviceExt;

    fn device() -> Option<&'static WgpuDevice> {
        static DEVICE: OnceLock<Result<WgpuDevice, String>> = OnceLock::new();
        match DEVICE.get_or_init(|| WgpuDevice::new().map_err(|e| e.to_string())) {
            Ok(d) => {
                let info = d.adapter_info();
                report!(
                    "WebGPU conformance on adapter \"{}\" ({:?}, {:?}, driver {} {})",
                    info.name,
                    info.backend,
                    info.device_type,
                    info.driver,
                    info.driver_info
                );
                Some(d)
            }
            Err(why) => {
                tokensieve::skip!("no WebGPU adapter ({why})");
                None
            }
        }
    }

    #[test]
    fn host_api_matches_cpu() {
        let Some(dev) = device() else { return };
        let n = run_suite(&dev.name(), &cases(), via_mask_device(dev));
        report!("wgpu host API: {n} cases bit-identical to cpu");
    }

    /// The same cases through `apply_buffers` on GPU buffers.
    #[test]
    fn buffer_api_matches_cpu() {
        let Some(dev) = device() else { return };
        let (d, q) = (dev.device(), dev.queue());
        let storage = wgpu::BufferUsages::STORAGE;
        let apply = |case: &Case, inputs: &Inputs| {
            let mut bytes = inputs.logits.as_bytes().to_vec();
            let len = bytes.len();
            bytes.resize(len.div_ceil(4) * 4, 0);
            let logits = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: &bytes,
                usage: storage | wgpu::BufferUsages::COPY_SRC,
            });
            let mask = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: u32_bytes(&inputs.bitmask),
                usage: storage,
            });
            // Always a real buffer, even for an empty list (wgpu forbids
            // zero-sized bindings, so pad it).
            let ix = inputs.indices.as_ref().map(|ix| {
                let mut v = ix.clone();
                v.push(u32::MAX);
                (
                    d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: None,
                        contents: u32_bytes(&v),
                        usage: storage,
                    }),
                    ix.len(),
                )
            });
            let submission = dev
                .apply_buffers(&ApplyBuffers {
                    logits: &logits,
                    dtype: case.dtype,
                    batch: case.batch,
                    vocab: case.vocab,
                    bitmask: &mask,
                    words: inputs.words,
                    indices: ix.as_ref().map(|(b, n)| (b, *n)),
                })
                .unwrap_or_else(|e| panic!("apply_buffers failed on {case:?}: {e}"));
            dev.wait(Some(submission)).unwrap();
            let readback = d.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes.len() as u64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = d.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&logits, 0, &readback, 0, bytes.len() as u64);
            let done = q.submit([enc.finish()]);
            readback.map_async(wgpu::MapMode::Read, .., |r| r.unwrap());
            dev.wait(Some(done)).unwrap();
            let out = readback.get_mapped_range(..).unwrap()[..len].to_vec();
            HostLogits::from_bytes(case.dtype, &out)
        };
        let n = run_suite(&format!("{} (buffers)", dev.name()), &cases(), apply);
        report!("wgpu buffer API: {n} cases bit-identical to cpu");
    }

    fn u32_bytes(x: &[u32]) -> &[u8] {
        // SAFETY: u32 has no padding.
        unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), std::mem::size_of_val(x)) }
    }

    #[test]
    fn bad_shapes_are_errors() {
        let Some(dev) = device() else { return };
        let mut l = vec![0f32; 10];
        let e = dev.apply_token_bitmask_inplace(LogitsMut::F32(&mut l), 3, &[0], None);
        assert!(matches!(e, Err(tokensieve::DeviceError::Shape(_))), "{e:?}");
        let e = dev.apply_token_bitmask_inplace(LogitsMut::F32(&mut l), 5, &[0, 0], Some(&[2]));
        assert!(
            matches!(e, Err(tokensieve::DeviceError::IndexOutOfRange { .. })),
            "{e:?}"
        );
    }
}
