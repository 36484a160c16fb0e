//! Mask application: write `-inf` into the logits of forbidden tokens.
//!
//! [`MaskDevice`] is the interface every device implements (CPU here, CUDA and
//! WebGPU in their crates) on host buffers; device crates add APIs on
//! device-resident buffers. Masking only ever *writes the `-inf` bit pattern*
//! (f32 `0xFF800000`, f16 `0xFC00`, bf16 `0xFF80`) and never touches allowed
//! logits, so every device must agree with [`CpuDevice`] bit for bit.

use half::{bf16, f16};
use thiserror::Error;

/// The `-inf` bit patterns masking writes.
pub const NEG_INF_F32_BITS: u32 = 0xFF80_0000;
pub const NEG_INF_F16_BITS: u16 = 0xFC00;
pub const NEG_INF_BF16_BITS: u16 = 0xFF80;

/// A batch of logits on the host, `[batch, vocab]` row-major.
#[derive(Debug)]
pub enum LogitsMut<'a> {
    F32(&'a mut [f32]),
    F16(&'a mut [f16]),
    Bf16(&'a mut [bf16]),
}

impl LogitsMut<'_> {
    pub fn len(&self) -> usize {
        match self {
            LogitsMut::F32(x) => x.len(),
            LogitsMut::F16(x) => x.len(),
            LogitsMut::Bf16(x) => x.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype(&self) -> DType {
        match self {
            LogitsMut::F32(_) => DType::F32,
            LogitsMut::F16(_) => DType::F16,
            LogitsMut::Bf16(_) => DType::Bf16,
        }
    }
}

/// Element type of logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    Bf16,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
        }
    }
}

/// Mask-application failures: bad shapes or a device problem.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DeviceError {
    #[error("shape mismatch: {0}")]
    Shape(String),
    #[error("row index {index} out of range for a batch of {batch}")]
    IndexOutOfRange { index: u32, batch: usize },
    #[error("device unavailable: {0}")]
    Unavailable(String),
    #[error("device error: {0}")]
    Device(String),
}

/// Shape of one apply call, validated once for every device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyShape {
    /// Rows of logits (and of the bitmask).
    pub batch: usize,
    /// Logits per row.
    pub vocab: usize,
    /// Bitmask words per row (`>= ceil(vocab / 32)`).
    pub words: usize,
}

impl ApplyShape {
    /// Checks logits and bitmask lengths against `vocab`, and `indices`
    /// against the batch. Row `r` of the logits is masked by row `r` of the
    /// bitmask (the XGrammar convention); `indices` picks which rows.
    pub fn validate(
        logits_len: usize,
        vocab: usize,
        bitmask_len: usize,
        indices: Option<&[u32]>,
    ) -> Result<ApplyShape, DeviceError> {
        if vocab == 0 {
            return Err(DeviceError::Shape("vocab size is 0".into()));
        }
        if !logits_len.is_multiple_of(vocab) {
            return Err(DeviceError::Shape(format!(
                "logits length {logits_len} is not a multiple of vocab size {vocab}"
            )));
        }
        let batch = logits_len / vocab;
        if batch == 0 {
            return Ok(ApplyShape {
                batch,
                vocab,
                words: vocab.div_ceil(32),
            });
        }
        if !bitmask_len.is_multiple_of(batch) {
            return Err(DeviceError::Shape(format!(
                "bitmask length {bitmask_len} is not a multiple of the batch size {batch}"
            )));
        }
        let words = bitmask_len / batch;
        if words < vocab.div_ceil(32) {
            return Err(DeviceError::Shape(format!(
                "bitmask rows have {words} words, {vocab} logits need {}",
                vocab.div_ceil(32)
            )));
        }
        if let Some(ix) = indices {
            if let Some(&bad) = ix.iter().find(|&&i| i as usize >= batch) {
                return Err(DeviceError::IndexOutOfRange { index: bad, batch });
            }
        }
        Ok(ApplyShape {
            batch,
            vocab,
            words,
        })
    }
}

/// A device that applies token bitmasks to logits.
pub trait MaskDevice: Send + Sync {
    /// Short name: `cpu`, `cuda:0`, `wgpu:<adapter>`.
    fn name(&self) -> String;

    /// Masks `logits` (`[batch, vocab]`, host memory) in place with `bitmask`
    /// (`[batch, words]`). With `indices`, only those rows are masked (in any
    /// order; duplicates are harmless); without, every row.
    fn apply_token_bitmask_inplace(
        &self,
        logits: LogitsMut<'_>,
        vocab: usize,
        bitmask: &[u32],
        indices: Option<&[u32]>,
    ) -> Result<(), DeviceError>;
}

/// The reference device: plain Rust on the host.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuDevice;

impl MaskDevice for CpuDevice {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn apply_token_bitmask_inplace(
        &self,
        logits: LogitsMut<'_>,
        vocab: usize,
        bitmask: &[u32],
        indices: Option<&[u32]>,
    ) -> Result<(), DeviceError> {
        let shape = ApplyShape::validate(logits.len(), vocab, bitmask.len(), indices)?;
        match logits {
            LogitsMut::F32(x) => {
                apply_rows(x, shape, bitmask, indices, f32::from_bits(NEG_INF_F32_BITS))
            }
            LogitsMut::F16(x) => {
                apply_rows(x, shape, bitmask, indices, f16::from_bits(NEG_INF_F16_BITS))
            }
            LogitsMut::Bf16(x) => apply_rows(
                x,
                shape,
                bitmask,
                indices,
                bf16::from_bits(NEG_INF_BF16_BITS),
            ),
        }
        Ok(())
    }
}

fn apply_rows<T: Copy>(
    logits: &mut [T],
    s: ApplyShape,
    bitmask: &[u32],
    indices: Option<&[u32]>,
    neg_inf: T,
) {
    let row = |r: usize, logits: &mut [T]| {
        apply_row(
            &mut logits[r * s.vocab..(r + 1) * s.vocab],
            &bitmask[r * s.words..r * s.words + s.vocab.div_ceil(32)],
            neg_inf,
        )
    };
    match indices {
        Some(ix) => ix.iter().for_each(|&r| row(r as usize, logits)),
        None => (0..s.batch).for_each(|r| row(r, logits)),
    }
}

/// One row: words that are all ones (the common case under loose grammars)
/// are skipped, words that are all zeros filled with `-inf`; in a mixed word
/// every logit is rewritten, kept or `-inf` by its bit, without a branch per
/// bit (which mispredicts half the time on a mask of scattered tokens) and in
/// vector registers where the word covers a whole chunk of 32.
fn apply_row<T: Copy>(logits: &mut [T], mask: &[u32], neg_inf: T) {
    for (chunk, &word) in logits.chunks_mut(32).zip(mask) {
        if word == u32::MAX {
            continue;
        }
        if word == 0 {
            chunk.fill(neg_inf);
            continue;
        }
        match <&mut [T; 32]>::try_from(&mut *chunk) {
            Ok(full) => {
                for (j, x) in full.iter_mut().enumerate() {
                    *x = if word & (1 << j) != 0 { *x } else { neg_inf };
                }
            }
            Err(_) => {
                for (j, x) in chunk.iter_mut().enumerate() {
                    *x = if word & (1 << j) != 0 { *x } else { neg_inf };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_exactly_the_clear_bits() {
        let vocab = 40;
        let mut logits: Vec<f32> = (0..2 * vocab).map(|i| i as f32).collect();
        let mut mask = vec![u32::MAX; 4];
        mask[2] = 0b101; // row 1: tokens 0 and 2 allowed in the first word
        CpuDevice
            .apply_token_bitmask_inplace(LogitsMut::F32(&mut logits), vocab, &mask, Some(&[1]))
            .unwrap();
        assert!(logits[..vocab].iter().all(|x| x.is_finite()));
        let row1 = &logits[vocab..];
        assert_eq!(row1[0], 40.0);
        assert_eq!(row1[1].to_bits(), NEG_INF_F32_BITS);
        assert_eq!(row1[2], 42.0);
        assert!(row1[3..32].iter().all(|x| x.to_bits() == NEG_INF_F32_BITS));
        assert!(row1[32..].iter().all(|x| x.is_finite()));
    }

    #[test]
    fn bad_shapes_are_errors() {
        let mut l = vec![0f32; 10];
        let e = CpuDevice.apply_token_bitmask_inplace(LogitsMut::F32(&mut l), 3, &[0], None);
        assert!(matches!(e, Err(DeviceError::Shape(_))));
        let e =
            CpuDevice.apply_token_bitmask_inplace(LogitsMut::F32(&mut l), 5, &[0, 0], Some(&[2]));
        assert!(matches!(e, Err(DeviceError::IndexOutOfRange { .. })));
    }
}
