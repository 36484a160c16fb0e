//! Zero-copy views of the caller's arrays: numpy arrays (and any object with
//! the buffer protocol) and torch tensors (through `data_ptr()`). Every check
//! (type, dtype, shape, C-contiguity, writability, device) happens here,
//! before anything is written, and fails with a message naming the argument.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::ptr::NonNull;

/// Element types the bindings read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    I32,
    U32,
    F32,
    F16,
    Bf16,
    /// Anything else, by its name (for the error message).
    Other,
}

impl Elem {
    fn size(self) -> usize {
        match self {
            Elem::I32 | Elem::U32 | Elem::F32 => 4,
            Elem::F16 | Elem::Bf16 => 2,
            Elem::Other => 0,
        }
    }
}

/// Where the memory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Cpu,
    /// A CUDA tensor on this device index.
    Cuda(usize),
    /// Another torch device (`mps`, `xpu`, `meta` ...).
    Other(String),
}

/// What keeps the memory alive (and, for the buffer protocol, locked against
/// resizing) while the view is used.
enum Keep<'py> {
    Buffer(#[allow(dead_code)] PyUntypedBuffer),
    Tensor(#[allow(dead_code)] Bound<'py, PyAny>),
}

/// A C-contiguous array of the caller's, described by address, shape and
/// element type. The address stays valid while the view lives.
pub struct View<'py> {
    addr: usize,
    pub shape: Vec<usize>,
    pub elem: Elem,
    /// The dtype as the caller spells it (`int32`, `torch.float16` ...).
    pub dtype_name: String,
    pub place: Place,
    pub writable: bool,
    _keep: Keep<'py>,
}

impl View<'_> {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The address as an integer, to move into a closure that runs without
    /// the GIL (the view itself stays with the caller, keeping it alive).
    pub fn addr(&self) -> usize {
        if self.len() == 0 {
            // Empty arrays may report a null address; slices need a
            // non-null, aligned one even when empty.
            NonNull::<u32>::dangling().as_ptr() as usize
        } else {
            self.addr
        }
    }

    /// The device address of a CUDA tensor.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn device_addr(&self) -> u64 {
        self.addr as u64
    }
}

/// `[rows, words]` view of a bitmask argument, checked for dtype (int32 or
/// uint32), C-contiguity, writability and the CPU.
pub struct BitmaskView<'py> {
    pub view: View<'py>,
    pub rows: usize,
    pub words: usize,
}

impl BitmaskView<'_> {
    /// The rows as one mutable slice.
    ///
    /// # Safety
    /// The caller holds the view for as long as the slice is used and makes
    /// sure no other slice of the same memory is alive.
    pub unsafe fn slice_at<'a>(addr: usize, rows: usize, words: usize) -> &'a mut [u32] {
        // SAFETY: forwarded to the caller; `addr` is aligned (checked when
        // the view was made) and spans rows * words u32.
        unsafe { std::slice::from_raw_parts_mut(addr as *mut u32, rows * words) }
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

fn is_torch_tensor(obj: &Bound<'_, PyAny>) -> bool {
    // Duck-typed so torch need not be imported: a torch.Tensor (or subclass)
    // has all of these; numpy arrays have none of `data_ptr`/`is_cuda`.
    obj.hasattr("data_ptr").unwrap_or(false)
        && obj.hasattr("is_cuda").unwrap_or(false)
        && obj.hasattr("layout").unwrap_or(false)
}

fn torch_view<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<View<'py>> {
    let dtype_name = obj.getattr("dtype")?.str()?.to_string();
    let elem = match dtype_name.as_str() {
        "torch.int32" => Elem::I32,
        "torch.uint32" => Elem::U32,
        "torch.float32" => Elem::F32,
        "torch.float16" => Elem::F16,
        "torch.bfloat16" => Elem::Bf16,
        _ => Elem::Other,
    };
    let layout = obj.getattr("layout")?.str()?.to_string();
    if layout != "torch.strided" {
        return Err(PyValueError::new_err(format!(
            "{what}: a dense (torch.strided) tensor is needed, got layout {layout}"
        )));
    }
    let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
    if !obj.call_method0("is_contiguous")?.extract::<bool>()? {
        return Err(PyValueError::new_err(format!(
            "{what}: the tensor must be contiguous (call .contiguous() on a copy, then copy back)"
        )));
    }
    let device = obj.getattr("device")?;
    let device_type = device.getattr("type")?.str()?.to_string();
    let place = match device_type.as_str() {
        "cpu" => Place::Cpu,
        "cuda" => {
            let index: Option<usize> = device.getattr("index")?.extract()?;
            Place::Cuda(index.unwrap_or(0))
        }
        other => Place::Other(other.to_string()),
    };
    // In-place writes to a tensor that autograd tracks would corrupt its
    // graph without torch knowing; torch itself refuses them on leaves.
    let writable = !obj.getattr("requires_grad")?.extract::<bool>()?;
    let addr: usize = obj.call_method0("data_ptr")?.extract()?;
    Ok(View {
        addr,
        shape,
        elem,
        dtype_name,
        place,
        writable,
        _keep: Keep::Tensor(obj.clone()),
    })
}

fn buffer_view<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<View<'py>> {
    let buf = PyUntypedBuffer::get(obj).map_err(|_| {
        PyTypeError::new_err(format!(
            "{what}: expected a numpy array, a torch tensor or another object with the buffer \
             protocol, got {}",
            type_name(obj)
        ))
    })?;
    let format = buf.format().to_string_lossy().into_owned();
    // Native byte order only ('@', '=', '<' on little-endian machines).
    let native_prefix = ['@', '='];
    let code = match format.as_str() {
        f if f.len() == 1 => f.chars().next(),
        f if f.len() == 2 && native_prefix.contains(&f.chars().next().unwrap_or(' ')) => {
            f.chars().nth(1)
        }
        f if f.len() == 2 && cfg!(target_endian = "little") && f.starts_with('<') => {
            f.chars().nth(1)
        }
        _ => None,
    };
    let size = buf.item_size();
    let elem = match (code, size) {
        (Some('i' | 'l' | 'q' | 'n'), 4) => Elem::I32,
        (Some('I' | 'L' | 'Q' | 'N'), 4) => Elem::U32,
        (Some('f'), 4) => Elem::F32,
        (Some('e'), 2) => Elem::F16,
        _ => Elem::Other,
    };
    let dtype_name = match elem {
        Elem::I32 => "int32".to_string(),
        Elem::U32 => "uint32".to_string(),
        Elem::F32 => "float32".to_string(),
        Elem::F16 => "float16".to_string(),
        _ => match obj.getattr("dtype") {
            Ok(d) => d.str()?.to_string(),
            Err(_) => format!("buffer format {format:?} ({size}-byte items)"),
        },
    };
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{what}: the array must be C-contiguous (numpy.ascontiguousarray makes a copy; \
             masks must be written in place)"
        )));
    }
    let shape = buf.shape().to_vec();
    let writable = !buf.readonly();
    let addr = buf.buf_ptr() as usize;
    Ok(View {
        addr,
        shape,
        elem,
        dtype_name,
        place: Place::Cpu,
        writable,
        _keep: Keep::Buffer(buf),
    })
}

/// A view of `obj`, whichever kind of array it is.
pub fn view<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<View<'py>> {
    // SAFETY: `obj` is a live object; the call only reads its type's slots.
    // Asking first spares numpy arrays the failed attribute lookups of the
    // torch test (an exception each), which cost more than the fill of a
    // small mask.
    let has_buffer = unsafe { pyo3::ffi::PyObject_CheckBuffer(obj.as_ptr()) } == 1;
    let v = if !has_buffer && is_torch_tensor(obj) {
        torch_view(obj, what)?
    } else {
        buffer_view(obj, what)?
    };
    if v.len() > 0 && v.elem != Elem::Other && v.addr % v.elem.size() != 0 {
        return Err(PyValueError::new_err(format!(
            "{what}: the data is not aligned to its {}-byte elements",
            v.elem.size()
        )));
    }
    Ok(v)
}

/// A host bitmask to write: int32/uint32, 1-D `[words]` or 2-D `[rows,
/// words]`, C-contiguous, writable, on the CPU, `words >= min_words`.
pub fn bitmask_view<'py>(obj: &Bound<'py, PyAny>, min_words: usize) -> PyResult<BitmaskView<'py>> {
    let what = "bitmask";
    let view = view(obj, what)?;
    if !matches!(view.elem, Elem::I32 | Elem::U32) {
        return Err(PyValueError::new_err(format!(
            "{what}: dtype must be int32 (or uint32), got {}",
            view.dtype_name
        )));
    }
    if view.place != Place::Cpu {
        return Err(PyValueError::new_err(format!(
            "{what}: masks are filled on the CPU; got a tensor on {:?} (fill a CPU buffer, \
             then copy it to the device)",
            view.place
        )));
    }
    if !view.writable {
        return Err(PyValueError::new_err(format!(
            "{what}: the array is read-only (or a tensor that requires grad)"
        )));
    }
    let (rows, words) = match view.shape.as_slice() {
        [w] => (1, *w),
        [r, w] => (*r, *w),
        s => {
            return Err(PyValueError::new_err(format!(
                "{what}: expected shape [rows, words] or [words], got {s:?}"
            )));
        }
    };
    if words < min_words {
        return Err(PyValueError::new_err(format!(
            "{what}: rows have {words} words, the vocabulary needs ceil(vocab_size / 32) = \
             {min_words} (allocate it with allocate_token_bitmask(rows, vocab_size))"
        )));
    }
    Ok(BitmaskView { view, rows, words })
}
