//! # tokensieve-cuda
//!
//! The CUDA mask device: writes `-inf` into the logits of forbidden tokens on
//! an NVIDIA GPU, with the kernel from `kernels/apply_token_bitmask.cu`
//! compiled at run time by NVRTC for the GPU it runs on.
//!
//! The CUDA driver (`libcuda`) and NVRTC (`libnvrtc`) are loaded at run time
//! through [`cudarc`]'s dynamic loading: this crate builds, and its tests
//! compile and run, on machines without CUDA. [`CudaDevice::new`] then returns
//! [`DeviceError::Unavailable`] saying what is missing; it never panics.
//!
//! Two ways in:
//!
//! - **Device-resident buffers** (what an inference engine holds):
//!   [`CudaDevice::apply_inplace`] masks a [`CudaSlice`]/[`CudaViewMut`] of
//!   `f32`, [`half::f16`] or [`half::bf16`] logits with a bitmask already on
//!   the GPU, asynchronously on the device's stream;
//!   [`CudaDevice::apply_raw`] does the same on raw device addresses (a
//!   PyTorch tensor's `data_ptr()`, say), and
//!   [`CudaDevice::apply_raw_on_stream`] on a stream another library owns
//!   (PyTorch's current stream), without waiting.
//! - **Host buffers**: the [`MaskDevice`] impl copies logits, bitmask and
//!   indices to the GPU, applies, copies the logits back and waits. It exists
//!   for tests and simple callers; the copies cost far more than the masking.
//!
//! Every path writes the `-inf` bit pattern through integer stores, and
//! allowed logits it rewrites (whole 32-byte sectors, in launches of at
//! least [`SECTOR_MIN_TILES`] tiles) with the bits it read, so results match
//! [`tokensieve_core::CpuDevice`] bit for bit (NaN and infinite allowed
//! logits included).
//!
//! ```no_run
//! use tokensieve_cuda::CudaDevice;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = CudaDevice::new(0)?;
//! let stream = device.stream();
//! let (batch, vocab) = (2, 40);
//! let mut logits = stream.clone_htod(&vec![1.0f32; batch * vocab])?;
//! let bitmask = stream.clone_htod(&vec![0x0000_00ffu32; batch * 2])?;
//! device.apply_inplace(&mut logits, vocab, &bitmask, None)?;
//! device.synchronize()?;
//! # Ok(()) }
//! ```

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

pub use cudarc;
pub use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut};
use cudarc::driver::{
    CudaFunction, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg,
    sys::CUdeviceptr,
};
use cudarc::nvrtc::Ptx;
use half::{bf16, f16};
pub use tokensieve_core::device::ApplyShape;
use tokensieve_core::device::{NEG_INF_BF16_BITS, NEG_INF_F16_BITS};
use tokensieve_core::{DType, DeviceError, LogitsMut, MaskDevice};

/// The kernel source, shipped in the repository's `kernels/` folder.
pub const KERNEL_SOURCE: &str = include_str!("../../../kernels/apply_token_bitmask.cu");

/// Threads per block: 4 warps, each masking 1024-logit tiles.
const BLOCK_THREADS: u32 = 128;
const TILE_LOGITS: usize = 1024;
/// Launches of at least this many 1,024-logit tiles (rows x tiles per row:
/// 128 rows of 32,000 logits, 33 of 128,256) write whole sectors. Whole
/// sectors read a mixed sector before writing it, so a tile waits on memory
/// up to five times (f32: its bitmask word, then four batches of loads; 16-bit
/// pairs: twice) where logit-by-logit stores wait once; with fewer tiles than
/// the GPU has warps to spare, that latency is not hidden.
pub const SECTOR_MIN_TILES: usize = 4096;
/// CUDA's limit on `gridDim.y`; larger row counts loop inside the kernel.
const MAX_GRID_Y: usize = 65_535;

/// Logit element types the kernel handles: `f32`, [`half::f16`], [`half::bf16`].
pub trait CudaLogit: DeviceRepr + Copy + sealed::Sealed {
    const DTYPE: DType;
}
impl CudaLogit for f32 {
    const DTYPE: DType = DType::F32;
}
impl CudaLogit for f16 {
    const DTYPE: DType = DType::F16;
}
impl CudaLogit for bf16 {
    const DTYPE: DType = DType::Bf16;
}
mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// The kernel's entry points, as named in [`KERNEL_SOURCE`].
pub const ENTRY_POINTS: [&str; 4] = [B32, B32_SECTORS, B16, B16_PAIRS];
const B32: &str = "apply_bitmask_b32";
const B32_SECTORS: &str = "apply_bitmask_b32_sectors";
const B16: &str = "apply_bitmask_b16";
const B16_PAIRS: &str = "apply_bitmask_b16_pairs";

/// One apply's launch: which entry point, on which grid, with which scalar
/// arguments. [`launch_plan`] makes it; [`CudaDevice`] launches exactly that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchPlan {
    /// One of [`ENTRY_POINTS`].
    pub kernel: &'static str,
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub num_rows: u32,
    pub batch: u32,
    pub vocab: u32,
    pub words: u32,
    /// The 16-bit `-inf` pattern, the last argument of the 16-bit kernels;
    /// `None` for f32.
    pub neg16: Option<u32>,
}

/// Plans masking `num_rows` rows (`shape.batch`, or the length of the index
/// list) of `dtype` logits starting at device address `logits`. `Ok(None)`
/// when there is nothing to mask; an error when a size does not fit the
/// kernel's 32-bit arguments.
///
/// A launch of at least [`SECTOR_MIN_TILES`] tiles writes whole 32-byte
/// sectors: f32 rows with `apply_bitmask_b32_sectors`, 16-bit rows as 4-byte
/// pairs with `apply_bitmask_b16_pairs` where the vocabulary is even and the
/// logits 4-byte aligned (every row then starts on a pair). Smaller launches,
/// and 16-bit rows off a pair, store logit by logit (`apply_bitmask_b32`,
/// `apply_bitmask_b16`).
pub fn launch_plan(
    dtype: DType,
    shape: ApplyShape,
    num_rows: usize,
    logits: CUdeviceptr,
) -> Result<Option<LaunchPlan>, DeviceError> {
    if num_rows == 0 || shape.batch == 0 {
        return Ok(None);
    }
    let to_u32 = |what: &str, n: usize| {
        u32::try_from(n)
            .map_err(|_| DeviceError::Shape(format!("{what} {n} does not fit in 32 bits")))
    };
    let (num_rows_u, batch, vocab, words) = (
        to_u32("row count", num_rows)?,
        to_u32("batch", shape.batch)?,
        to_u32("vocab", shape.vocab)?,
        to_u32("bitmask row words", shape.words)?,
    );
    let tiles = shape.vocab.div_ceil(TILE_LOGITS);
    let sectors = num_rows.saturating_mul(tiles) >= SECTOR_MIN_TILES;
    let kernel = match dtype {
        DType::F32 if sectors => B32_SECTORS,
        DType::F32 => B32,
        DType::F16 | DType::Bf16
            if sectors && shape.vocab.is_multiple_of(2) && logits.is_multiple_of(4) =>
        {
            B16_PAIRS
        }
        DType::F16 | DType::Bf16 => B16,
    };
    let warps = (BLOCK_THREADS / 32) as usize;
    Ok(Some(LaunchPlan {
        kernel,
        grid: (
            to_u32("grid", tiles.div_ceil(warps))?,
            num_rows.min(MAX_GRID_Y) as u32,
            1,
        ),
        block: (BLOCK_THREADS, 1, 1),
        num_rows: num_rows_u,
        batch,
        vocab,
        words,
        neg16: match dtype {
            DType::F16 => Some(u32::from(NEG_INF_F16_BITS)),
            DType::Bf16 => Some(u32::from(NEG_INF_BF16_BITS)),
            DType::F32 => None,
        },
    }))
}

/// A CUDA GPU that applies token bitmasks; see the crate docs.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Every entry point of [`ENTRY_POINTS`], by name.
    kernels: Vec<(&'static str, CudaFunction)>,
    ordinal: usize,
    device_name: String,
    compute_capability: (i32, i32),
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("ordinal", &self.ordinal)
            .field("device_name", &self.device_name)
            .field("compute_capability", &self.compute_capability)
            .finish_non_exhaustive()
    }
}

impl CudaDevice {
    /// Opens GPU `ordinal`, compiles the kernel for it with NVRTC and makes a
    /// stream. [`DeviceError::Unavailable`] when the driver or NVRTC library
    /// is missing, there is no such GPU, or compilation fails.
    pub fn new(ordinal: usize) -> Result<Self, DeviceError> {
        // cudarc panics when a library it loads lazily is missing: probe
        // first, and catch what a probe cannot foresee (a missing symbol).
        // SAFETY: the probes only try to open the shared libraries.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(DeviceError::Unavailable(
                "no CUDA driver found: libcuda could not be loaded (no NVIDIA driver installed, \
                 or not on the library path)"
                    .into(),
            ));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(DeviceError::Unavailable(
                "no NVRTC found: libnvrtc could not be loaded (install the CUDA toolkit or the \
                 nvidia-cuda-nvrtc package and put its lib folder on LD_LIBRARY_PATH)"
                    .into(),
            ));
        }
        catch_unwind(AssertUnwindSafe(|| Self::open(ordinal))).unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(DeviceError::Unavailable(format!(
                "CUDA initialisation failed: {msg}"
            )))
        })
    }

    fn open(ordinal: usize) -> Result<Self, DeviceError> {
        let unavailable = |what: &str, e: &dyn std::fmt::Display| {
            DeviceError::Unavailable(format!("CUDA device {ordinal}: {what}: {e}"))
        };
        let count = CudaContext::device_count().map_err(|e| unavailable("cuInit", &e))?;
        if ordinal >= count.max(0) as usize {
            return Err(DeviceError::Unavailable(format!(
                "no CUDA device {ordinal}: the driver sees {count} device(s)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| unavailable("context", &e))?;
        let device_name = ctx.name().map_err(|e| unavailable("name", &e))?;
        let compute_capability = ctx
            .compute_capability()
            .map_err(|e| unavailable("compute capability", &e))?;
        let module = ctx
            .load_module(compile_kernel(compute_capability)?)
            .map_err(|e| unavailable("loading the kernel module", &e))?;
        let kernels = ENTRY_POINTS
            .iter()
            .map(|&name| {
                let function = module
                    .load_function(name)
                    .map_err(|e| unavailable(&format!("kernel {name}"), &e))?;
                Ok((name, function))
            })
            .collect::<Result<_, DeviceError>>()?;
        let stream = device_stream(&ctx).map_err(|e| unavailable("stream", &e))?;
        Ok(CudaDevice {
            ctx,
            stream,
            kernels,
            ordinal,
            device_name,
            compute_capability,
        })
    }

    /// The CUDA context (allocate buffers for [`Self::apply_inplace`] on it or
    /// on [`Self::stream`]).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every apply is launched on: the device's own, made so that
    /// cudarc records no events per launch (it does in a context with
    /// streams of its own making). Buffers allocated on it hold it: it
    /// outlives the device while they do.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The GPU's name, e.g. `NVIDIA H200`.
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// Waits until every apply launched so far has finished.
    pub fn synchronize(&self) -> Result<(), DeviceError> {
        self.stream.synchronize().map_err(device_err)
    }

    /// Masks device-resident `logits` (`[batch, vocab]`) in place with
    /// `bitmask` (`[batch, words]`, `words >= ceil(vocab/32)`), on
    /// [`Self::stream`], asynchronously: call [`Self::synchronize`] (or order
    /// later work on the stream) before reading the logits.
    ///
    /// With `indices`, only the listed rows are masked (any order, duplicates
    /// harmless). Indices cannot be checked on the host without a copy:
    /// entries `>= batch` are ignored by the kernel.
    pub fn apply_inplace<T, L, B>(
        &self,
        logits: &mut L,
        vocab: usize,
        bitmask: &B,
        indices: Option<&CudaView<'_, u32>>,
    ) -> Result<(), DeviceError>
    where
        T: CudaLogit,
        L: DevicePtrMut<T>,
        B: DevicePtr<u32>,
    {
        let shape = ApplyShape::validate(logits.len(), vocab, bitmask.len(), None)?;
        let (logits_ptr, _logits_guard) = logits.device_ptr_mut(&self.stream);
        let (mask_ptr, _mask_guard) = bitmask.device_ptr(&self.stream);
        let (index_ptr, _index_guard) = match indices {
            Some(ix) => {
                let (ptr, guard) = ix.device_ptr(&self.stream);
                (Some((ptr, ix.len())), Some(guard))
            }
            None => (None, None),
        };
        // SAFETY: the pointers come from live buffers of the lengths that
        // `shape` was validated against; the guards order the launch after
        // earlier writes and are dropped after it.
        unsafe { self.launch(T::DTYPE, logits_ptr, shape, mask_ptr, index_ptr) }
    }

    /// [`Self::apply_inplace`] on raw device addresses in this device's
    /// context (a PyTorch tensor's `data_ptr()`, say): `logits` holds
    /// `shape.batch * shape.vocab` elements of `dtype`, `bitmask`
    /// `shape.batch * shape.words` u32, `indices` (address, count) u32 row
    /// numbers.
    ///
    /// # Safety
    ///
    /// The addresses must be valid device memory of those sizes in this
    /// device's context, not freed before the launch completes, and not
    /// written by other streams while it runs.
    pub unsafe fn apply_raw(
        &self,
        dtype: DType,
        logits: CUdeviceptr,
        shape: ApplyShape,
        bitmask: CUdeviceptr,
        indices: Option<(CUdeviceptr, usize)>,
    ) -> Result<(), DeviceError> {
        let shape = validate_raw(dtype, logits, shape, bitmask, indices)?;
        // SAFETY: forwarded to the caller.
        unsafe { self.launch(dtype, logits, shape, bitmask, indices) }
    }

    /// [`Self::apply_raw`] launched on `stream`, a stream of this device's
    /// context that another library owns (PyTorch's current stream, say; null
    /// is the context's legacy default stream), and not waited for: the
    /// kernel runs after the work queued on `stream` before it and before
    /// the work queued after it, as that library's own operations do.
    ///
    /// # Safety
    ///
    /// As [`Self::apply_raw`], with "not written by other streams" meaning
    /// streams other than `stream`; and `stream` must be a live stream of
    /// this device's context.
    pub unsafe fn apply_raw_on_stream(
        &self,
        dtype: DType,
        logits: CUdeviceptr,
        shape: ApplyShape,
        bitmask: CUdeviceptr,
        indices: Option<(CUdeviceptr, usize)>,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<(), DeviceError> {
        let shape = validate_raw(dtype, logits, shape, bitmask, indices)?;
        // SAFETY: the caller vouches for `stream`; the wrapper does not own
        // it and is dropped when this call returns.
        let stream = unsafe { self.ctx.wrap_borrowed_stream(stream) };
        // SAFETY: forwarded to the caller.
        unsafe { self.launch_on(&stream, dtype, logits, shape, bitmask, indices) }
    }

    /// # Safety
    ///
    /// See [`Self::apply_raw`]; `shape` must describe the buffers.
    unsafe fn launch(
        &self,
        dtype: DType,
        logits: CUdeviceptr,
        shape: ApplyShape,
        bitmask: CUdeviceptr,
        indices: Option<(CUdeviceptr, usize)>,
    ) -> Result<(), DeviceError> {
        // SAFETY: forwarded to the caller.
        unsafe { self.launch_on(&self.stream, dtype, logits, shape, bitmask, indices) }
    }

    /// # Safety
    ///
    /// See [`Self::apply_raw`]; `shape` must describe the buffers, and
    /// `stream` must be a stream of this device's context.
    unsafe fn launch_on(
        &self,
        stream: &Arc<CudaStream>,
        dtype: DType,
        logits: CUdeviceptr,
        shape: ApplyShape,
        bitmask: CUdeviceptr,
        indices: Option<(CUdeviceptr, usize)>,
    ) -> Result<(), DeviceError> {
        let num_rows = indices.map_or(shape.batch, |(_, n)| n);
        let Some(plan) = launch_plan(dtype, shape, num_rows, logits)? else {
            return Ok(());
        };
        let (_, kernel) = self
            .kernels
            .iter()
            .find(|(name, _)| *name == plan.kernel)
            .expect("launch_plan picks one of ENTRY_POINTS, all loaded in open()");
        let cfg = LaunchConfig {
            grid_dim: plan.grid,
            block_dim: plan.block,
            shared_mem_bytes: 0,
        };
        let index_ptr: CUdeviceptr = indices.map_or(0, |(p, _)| p);
        let mut launch = stream.launch_builder(kernel);
        launch
            .arg(&logits)
            .arg(&bitmask)
            .arg(&index_ptr)
            .arg(&plan.num_rows)
            .arg(&plan.batch)
            .arg(&plan.vocab)
            .arg(&plan.words);
        if let Some(neg16) = &plan.neg16 {
            launch.arg(neg16);
        }
        // SAFETY: the argument list matches the kernel's signature (three
        // device addresses, four u32, plus the -inf pattern for 16-bit).
        unsafe { launch.launch(cfg) }.map_err(device_err)?;
        Ok(())
    }

    fn apply_host<T: CudaLogit>(
        &self,
        logits: &mut [T],
        shape: ApplyShape,
        bitmask: &[u32],
        indices: Option<&[u32]>,
    ) -> Result<(), DeviceError> {
        let s = &self.stream;
        let mut d_logits = s.clone_htod(logits).map_err(device_err)?;
        let d_mask = s.clone_htod(bitmask).map_err(device_err)?;
        let d_indices = match indices {
            Some(ix) if !ix.is_empty() => Some(s.clone_htod(ix).map_err(device_err)?),
            _ => None,
        };
        match (indices, &d_indices) {
            // An empty index list masks nothing.
            (Some(_), None) => {}
            (_, Some(ix)) => {
                self.apply_inplace(&mut d_logits, shape.vocab, &d_mask, Some(&ix.as_view()))?
            }
            (None, None) => self.apply_inplace(&mut d_logits, shape.vocab, &d_mask, None)?,
        }
        s.memcpy_dtoh(&d_logits, logits).map_err(device_err)?;
        s.synchronize().map_err(device_err)
    }
}

impl MaskDevice for CudaDevice {
    fn name(&self) -> String {
        format!("cuda:{}", self.ordinal)
    }

    fn apply_token_bitmask_inplace(
        &self,
        logits: LogitsMut<'_>,
        vocab: usize,
        bitmask: &[u32],
        indices: Option<&[u32]>,
    ) -> Result<(), DeviceError> {
        let shape = ApplyShape::validate(logits.len(), vocab, bitmask.len(), indices)?;
        if shape.batch == 0 {
            return Ok(());
        }
        match logits {
            LogitsMut::F32(x) => self.apply_host(x, shape, bitmask, indices),
            LogitsMut::F16(x) => self.apply_host(x, shape, bitmask, indices),
            LogitsMut::Bf16(x) => self.apply_host(x, shape, bitmask, indices),
        }
    }
}

/// [`CudaDevice::apply_raw`]'s checks of what it can see: sizes that fit
/// and addresses aligned for their element types.
fn validate_raw(
    dtype: DType,
    logits: CUdeviceptr,
    shape: ApplyShape,
    bitmask: CUdeviceptr,
    indices: Option<(CUdeviceptr, usize)>,
) -> Result<ApplyShape, DeviceError> {
    let elems = |per_row: usize, what: &str| {
        shape.batch.checked_mul(per_row).ok_or_else(|| {
            DeviceError::Shape(format!(
                "{what}: batch {} x {per_row} overflows usize",
                shape.batch
            ))
        })
    };
    let shape = ApplyShape::validate(
        elems(shape.vocab, "logits")?,
        shape.vocab,
        elems(shape.words, "bitmask")?,
        None,
    )?;
    let aligned = |what: &str, addr: CUdeviceptr, align: u64| {
        if addr.is_multiple_of(align) {
            Ok(())
        } else {
            Err(DeviceError::Shape(format!(
                "{what} address {addr:#x} is not {align}-byte aligned"
            )))
        }
    };
    aligned("logits", logits, dtype.size() as u64)?;
    aligned("bitmask", bitmask, 4)?;
    if let Some((ix, _)) = indices {
        aligned("indices", ix, 4)?;
    }
    Ok(shape)
}

/// The device's stream: a non-blocking stream made through the driver API and
/// wrapped, not `CudaContext::new_stream`. A stream of cudarc's making puts
/// the context in "multi-stream mode", where every launch on a cudarc buffer
/// waits on and records events for it; work on one stream is ordered
/// without them. On an H200 (docs/gpu.md) back-to-back applies at
/// batch <= 16 ran 1.25-1.9x faster without them; larger batches the same. A
/// user who makes streams of their own through cudarc turns the mode on for
/// the buffers made after. The stream is destroyed with the device when
/// nothing else holds it, else with the context.
fn device_stream(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>, cudarc::driver::DriverError> {
    use cudarc::driver::result::stream;
    ctx.bind_to_thread()?;
    let raw = stream::create(stream::StreamKind::NonBlocking)?;
    // SAFETY: `raw` is a stream of this context, bound just above; it is
    // destroyed only in `CudaDevice::drop`, once no wrapper but the
    // device's is left.
    Ok(unsafe { ctx.wrap_borrowed_stream(raw) })
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        if Arc::strong_count(&self.stream) == 1 && !self.stream.cu_stream().is_null() {
            let _ = self.ctx.bind_to_thread();
            // SAFETY: the stream came from `device_stream` (a wrapper that
            // does not own it) and no other wrapper is left to use it; work
            // still queued on it completes before the driver frees it.
            let _ = unsafe { cudarc::driver::result::stream::destroy(self.stream.cu_stream()) };
        }
    }
}

fn device_err(e: impl std::fmt::Display) -> DeviceError {
    DeviceError::Device(format!("CUDA: {e}"))
}

/// Compiles [`KERNEL_SOURCE`] to a cubin for `sm_<major><minor>`; when this
/// NVRTC does not know that architecture (a GPU newer than the toolkit),
/// falls back to PTX for NVRTC's default target, which the driver JITs.
fn compile_kernel((major, minor): (i32, i32)) -> Result<Ptx, DeviceError> {
    let arch = format!("sm_{major}{minor}");
    match nvrtc_cubin(KERNEL_SOURCE, &arch) {
        Ok(cubin) => Ok(Ptx::from_binary(cubin)),
        Err(cubin_err) => cudarc::nvrtc::compile_ptx(KERNEL_SOURCE).map_err(|ptx_err| {
            DeviceError::Unavailable(format!(
                "NVRTC could not compile kernels/apply_token_bitmask.cu: for {arch}: {cubin_err}; \
                 as PTX: {ptx_err}"
            ))
        }),
    }
}

/// NVRTC straight to machine code (cudarc's safe API stops at PTX, and PTX
/// from an NVRTC newer than the driver does not load).
pub fn nvrtc_cubin(source: &str, arch: &str) -> Result<Vec<u8>, String> {
    use cudarc::nvrtc::{result, sys};
    use std::ffi::{CStr, CString};

    let src = CString::new(source).map_err(|e| e.to_string())?;
    let name = c"apply_token_bitmask.cu";
    let prog = result::create_program(&src, Some(name)).map_err(|e| format!("{e:?}"))?;
    let options = [format!("--gpu-architecture={arch}"), "--std=c++17".into()];
    // SAFETY: `prog` is live until destroyed below; buffers are sized from
    // NVRTC's own size queries.
    unsafe {
        let compiled = result::compile_program(prog, &options);
        let out = match compiled {
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                    .unwrap_or_default();
                Err(format!("{e:?}: {log}"))
            }
            Ok(()) => {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| format!("nvrtcGetCUBINSize: {e:?}"))
                    .and_then(|()| {
                        let mut cubin = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast())
                            .result()
                            .map(|()| cubin)
                            .map_err(|e| format!("nvrtcGetCUBIN: {e:?}"))
                    })
            }
        };
        let _ = result::destroy_program(prog);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_never_panics_and_explains_itself() {
        match CudaDevice::new(0) {
            Ok(d) => eprintln!(
                "CUDA device: {} {:?}",
                d.device_name(),
                d.compute_capability()
            ),
            Err(DeviceError::Unavailable(why)) => {
                assert!(!why.is_empty());
                tokensieve_core::skip!("no CUDA device ({why})");
            }
            Err(e) => panic!("unexpected error kind: {e}"),
        }
    }

    #[test]
    fn missing_ordinal_is_unavailable() {
        match CudaDevice::new(1 << 20) {
            Err(DeviceError::Unavailable(why)) => assert!(!why.is_empty()),
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    #[test]
    fn raw_addresses_and_sizes_are_checked() {
        let shape = |batch, vocab, words| ApplyShape {
            batch,
            vocab,
            words,
        };
        let ok = validate_raw(
            DType::F16,
            0x1002,
            shape(2, 33, 2),
            0x2000,
            Some((0x3004, 1)),
        );
        assert_eq!(ok.unwrap(), shape(2, 33, 2));
        // (dtype, logits, batch, bitmask, indices, what the error says)
        let bad = [
            (DType::F16, 0x1001, 1, 0x2000, None, "logits address 0x1001"),
            (DType::F32, 0x1002, 1, 0x2000, None, "4-byte aligned"),
            (DType::F32, 0x1000, 1, 0x2002, None, "bitmask address"),
            (
                DType::F32,
                0x1000,
                1,
                0x2000,
                Some((0x3001, 1)),
                "indices address",
            ),
            (DType::F32, 0x1000, usize::MAX, 0x2000, None, "overflows"),
        ];
        for (dtype, logits, batch, bitmask, indices, needle) in bad {
            let e = validate_raw(dtype, logits, shape(batch, 8, 1), bitmask, indices).unwrap_err();
            assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
        }
    }

    #[test]
    fn entry_points_are_in_the_kernel_source() {
        for name in ENTRY_POINTS {
            let decl = format!("extern \"C\" __global__ void {name}(");
            assert!(KERNEL_SOURCE.contains(&decl), "{name} not in the kernel");
        }
    }

    #[test]
    fn launch_plan_picks_the_kernel_by_element_size_and_covers_every_row() {
        let shape = |batch, vocab| ApplyShape {
            batch,
            vocab,
            words: usize::div_ceil(vocab, 32),
        };
        let at = |dtype, batch, vocab, addr| {
            launch_plan(dtype, shape(batch, vocab), batch, addr)
                .unwrap()
                .unwrap()
        };
        let (aligned, off_pair) = (0x7f00_0000_0100, 0x7f00_0000_0102);
        let plan = |dtype, vocab| at(dtype, 2, vocab, aligned);
        // Small launches: logit by logit.
        assert_eq!(plan(DType::F32, 1000).kernel, B32);
        assert_eq!(plan(DType::F32, 1000).neg16, None);
        assert_eq!(plan(DType::Bf16, 1001).kernel, B16);
        assert_eq!(plan(DType::Bf16, 1001).neg16, Some(0xFF80));
        assert_eq!(plan(DType::F16, 1004).kernel, B16);
        // From SECTOR_MIN_TILES tiles on, whole sectors: 128 rows of 32,000
        // logits (32 tiles each), 33 of 128,256 (126 tiles), not 32.
        assert_eq!(at(DType::F32, 128, 32_000, aligned).kernel, B32_SECTORS);
        assert_eq!(at(DType::F32, 127, 32_000, aligned).kernel, B32);
        assert_eq!(at(DType::F32, 33, 128_256, aligned + 4).kernel, B32_SECTORS);
        assert_eq!(at(DType::F32, 32, 128_256, aligned).kernel, B32);
        // 16-bit whole sectors as pairs only where every row starts on one.
        assert_eq!(at(DType::Bf16, 128, 32_000, aligned).kernel, B16_PAIRS);
        assert_eq!(at(DType::F16, 128, 32_000, aligned + 4).kernel, B16_PAIRS);
        assert_eq!(at(DType::Bf16, 128, 32_000, off_pair).kernel, B16);
        assert_eq!(at(DType::Bf16, 128, 32_001, aligned).kernel, B16);
        // 4 warps of 1,024 logits per block: 128,256 logits take 32 blocks.
        assert_eq!(plan(DType::F32, 128_256).grid, (32, 2, 1));
        assert_eq!(launch_plan(DType::F32, shape(2, 32), 0, 0), Ok(None));
        assert_eq!(launch_plan(DType::F32, shape(0, 32), 3, 0), Ok(None));
        let many = launch_plan(DType::F16, shape(4, 5000), 70_000, 0).unwrap();
        let many = many.unwrap();
        assert_eq!((many.grid, many.block), ((2, 65_535, 1), (128, 1, 1)));
        assert_eq!(many.neg16, Some(0xFC00));
    }

    /// Compiles the kernel wherever NVRTC can be loaded, GPU or not (e.g.
    /// with the `nvidia-cuda-nvrtc` wheel's lib folder on LD_LIBRARY_PATH).
    #[test]
    fn kernel_compiles_with_nvrtc() {
        // SAFETY: only tries to open the library.
        use std::io::Write as _;
        // Straight to stderr: libtest captures eprintln! of passing tests,
        // and the CI log must show whether the kernel was really compiled.
        let mut log = std::io::stderr();
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            tokensieve_core::skip!("no NVRTC library to compile the kernel with");
            return;
        }
        for arch in ["sm_80", "sm_90"] {
            let cubin = nvrtc_cubin(KERNEL_SOURCE, arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
            assert!(cubin.starts_with(b"\x7fELF"), "{arch}: not an ELF cubin");
            let _ = writeln!(
                log,
                "NVRTC compiled kernels/apply_token_bitmask.cu for {arch}: {} bytes of cubin",
                cubin.len()
            );
        }
    }
}
