//! `apply_token_bitmask_inplace`: -inf into forbidden logits, in place, on
//! numpy arrays and torch CPU tensors through the reference CPU device, and
//! on CUDA tensors through tokensieve's CUDA device (feature `cuda`).

use crate::buffers::{Elem, Place, View, view};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use tokensieve::{CpuDevice, DeviceError, LogitsMut, MaskDevice};

fn device_error(e: DeviceError) -> PyErr {
    match e {
        DeviceError::Shape(_) | DeviceError::IndexOutOfRange { .. } => {
            PyValueError::new_err(e.to_string())
        }
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// `(batch, vocab)` of a 1-D or 2-D logits view.
fn logits_shape(v: &View<'_>) -> PyResult<(usize, usize)> {
    match v.shape.as_slice() {
        [n] => Ok((1, *n)),
        [b, n] => Ok((*b, *n)),
        s => Err(PyValueError::new_err(format!(
            "logits: expected shape [batch, vocab] or [vocab], got {s:?}"
        ))),
    }
}

/// `(rows, words)` of a 1-D or 2-D bitmask view, checked against the logits.
fn mask_shape(v: &View<'_>, batch: usize, vocab: usize) -> PyResult<(usize, usize)> {
    if !matches!(v.elem, Elem::I32 | Elem::U32) {
        return Err(PyValueError::new_err(format!(
            "bitmask: dtype must be int32 (or uint32), got {}",
            v.dtype_name
        )));
    }
    let (rows, words) = match v.shape.as_slice() {
        [w] => (1, *w),
        [r, w] => (*r, *w),
        s => {
            return Err(PyValueError::new_err(format!(
                "bitmask: expected shape [rows, words] or [words], got {s:?}"
            )));
        }
    };
    if rows != batch {
        return Err(PyValueError::new_err(format!(
            "bitmask has {rows} rows for {batch} rows of logits (row r of the logits is masked \
             by row r of the bitmask)"
        )));
    }
    if words < vocab.div_ceil(32) {
        return Err(PyValueError::new_err(format!(
            "bitmask rows have {words} words, {vocab} logits need {}",
            vocab.div_ceil(32)
        )));
    }
    Ok((rows, words))
}

fn logits_elem(v: &View<'_>) -> PyResult<Elem> {
    match v.elem {
        Elem::F32 | Elem::F16 | Elem::Bf16 => Ok(v.elem),
        _ => Err(PyValueError::new_err(format!(
            "logits: dtype must be float32, float16 or bfloat16 (bfloat16 as a torch tensor), \
             got {}",
            v.dtype_name
        ))),
    }
}

fn indices_u32(indices: Option<Vec<i64>>) -> PyResult<Option<Vec<u32>>> {
    indices
        .map(|ix| {
            ix.into_iter()
                .map(|i| {
                    u32::try_from(i)
                        .map_err(|_| PyValueError::new_err(format!("indices: {i} is not a row")))
                })
                .collect()
        })
        .transpose()
}

/// CPU logits (numpy float32/float16, torch float32/float16/bfloat16).
#[pyfunction]
#[pyo3(signature = (logits, bitmask, indices=None))]
pub fn apply_token_bitmask_inplace_cpu(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<i64>>,
) -> PyResult<()> {
    let lv = view(logits, "logits")?;
    let elem = logits_elem(&lv)?;
    if lv.place != Place::Cpu {
        return Err(PyValueError::new_err(format!(
            "logits: on {:?}; this call masks CPU memory",
            lv.place
        )));
    }
    if !lv.writable {
        return Err(PyValueError::new_err(
            "logits: the array is read-only (or a tensor that requires grad: pass \
             logits.detach())",
        ));
    }
    let (batch, vocab) = logits_shape(&lv)?;
    let mv = view(bitmask, "bitmask")?;
    if mv.place != Place::Cpu {
        return Err(PyValueError::new_err(
            "bitmask: CPU logits need a CPU bitmask",
        ));
    }
    let (rows, words) = mask_shape(&mv, batch, vocab)?;
    let indices = indices_u32(indices)?;
    let (l_addr, l_bytes) = (
        lv.addr(),
        batch * vocab * if elem == Elem::F32 { 4 } else { 2 },
    );
    let (m_addr, m_len) = (mv.addr(), rows * words);
    if l_addr < m_addr + m_len * 4 && m_addr < l_addr + l_bytes && l_bytes > 0 && m_len > 0 {
        return Err(PyValueError::new_err("logits and bitmask share memory"));
    }
    py.detach(|| {
        // SAFETY: both views (kept alive by `lv` and `mv` until after this
        // closure) are C-contiguous, aligned, of these lengths, and do not
        // overlap (checked above).
        let mask = unsafe { std::slice::from_raw_parts(m_addr as *const u32, m_len) };
        let n = batch * vocab;
        let logits = unsafe {
            match elem {
                Elem::F32 => LogitsMut::F32(std::slice::from_raw_parts_mut(l_addr as *mut f32, n)),
                Elem::F16 => {
                    LogitsMut::F16(std::slice::from_raw_parts_mut(l_addr as *mut half::f16, n))
                }
                _ => LogitsMut::Bf16(std::slice::from_raw_parts_mut(l_addr as *mut half::bf16, n)),
            }
        };
        CpuDevice.apply_token_bitmask_inplace(logits, vocab, mask, indices.as_deref())
    })
    .map_err(device_error)
}

/// CUDA logits and bitmask (torch tensors on one GPU); `indices`, when
/// given, an int32 CUDA tensor of row numbers. With `stream` (a CUstream
/// handle of the logits' device, as torch's `Stream.cuda_stream` gives it)
/// the kernel is queued there and not waited for, as torch's own operations
/// are; without it, the caller has synchronised torch's current stream and
/// this call waits for the mask to be written.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, indices=None, stream=None))]
pub fn apply_token_bitmask_inplace_cuda(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<&Bound<'_, PyAny>>,
    stream: Option<usize>,
) -> PyResult<()> {
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (py, logits, bitmask, indices, stream);
        Err(PyRuntimeError::new_err(
            "logits on a CUDA device: this tokensieve wheel was built without the `cuda` \
             feature (build it with `maturin build --features cuda`), or move the logits to \
             the CPU",
        ))
    }
    #[cfg(feature = "cuda")]
    {
        cuda::apply(py, logits, bitmask, indices, stream)
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    use tokensieve::DType;
    use tokensieve::cuda::CudaDevice;
    use tokensieve::device::ApplyShape;

    /// One device (context, stream, loaded kernels) per GPU, made on first use.
    fn device(ordinal: usize) -> Result<Arc<CudaDevice>, DeviceError> {
        static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = OnceLock::new();
        let mut map = DEVICES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(d) = map.get(&ordinal) {
            return Ok(d.clone());
        }
        let d = Arc::new(CudaDevice::new(ordinal)?);
        map.insert(ordinal, d.clone());
        Ok(d)
    }

    pub fn apply(
        py: Python<'_>,
        logits: &Bound<'_, PyAny>,
        bitmask: &Bound<'_, PyAny>,
        indices: Option<&Bound<'_, PyAny>>,
        stream: Option<usize>,
    ) -> PyResult<()> {
        let lv = view(logits, "logits")?;
        let elem = logits_elem(&lv)?;
        let Place::Cuda(ordinal) = lv.place else {
            return Err(PyValueError::new_err("logits: not a CUDA tensor"));
        };
        if !lv.writable {
            return Err(PyValueError::new_err(
                "logits: a tensor that requires grad (pass logits.detach())",
            ));
        }
        let (batch, vocab) = logits_shape(&lv)?;
        let mv = view(bitmask, "bitmask")?;
        if mv.place != Place::Cuda(ordinal) {
            return Err(PyValueError::new_err(format!(
                "bitmask: must be on the logits' device cuda:{ordinal}, is on {:?}",
                mv.place
            )));
        }
        let (_, words) = mask_shape(&mv, batch, vocab)?;
        let iv = indices.map(|ix| view(ix, "indices")).transpose()?;
        let index = match &iv {
            None => None,
            Some(v) => {
                if v.place != Place::Cuda(ordinal) || !matches!(v.elem, Elem::I32 | Elem::U32) {
                    return Err(PyValueError::new_err(
                        "indices: an int32 tensor on the logits' device is needed",
                    ));
                }
                Some((v.device_addr(), v.len()))
            }
        };
        let dtype = match elem {
            Elem::F32 => DType::F32,
            Elem::F16 => DType::F16,
            _ => DType::Bf16,
        };
        let shape = ApplyShape {
            batch,
            vocab,
            words,
        };
        let (l, m) = (lv.device_addr(), mv.device_addr());
        py.detach(|| {
            let dev = device(ordinal)?;
            match stream {
                // SAFETY: the tensors are contiguous device buffers of these
                // shapes on this GPU, written only through `stream` (the
                // caller's current torch stream, in this device's primary
                // context), so the kernel runs after the work torch queued
                // before it. Torch's caching allocator hands the memory of a
                // tensor freed after this call only to work queued on that
                // stream after the kernel.
                Some(s) => unsafe { dev.apply_raw_on_stream(dtype, l, shape, m, index, s as _) },
                None => {
                    // SAFETY: as above; torch's stream was synchronised by
                    // the caller, and the launch is waited for before
                    // returning, while the views keep the tensors alive.
                    unsafe { dev.apply_raw(dtype, l, shape, m, index)? };
                    dev.synchronize()
                }
            }
        })
        .map_err(device_error)
    }
}
