//! # tokensieve-wgpu
//!
//! The WebGPU mask device: writes `-inf` into the logits of forbidden tokens
//! with a [`wgpu`] compute pipeline running `shaders/apply_token_bitmask.wgsl`,
//! on any Vulkan, Metal or DX12 adapter, software ones included (Mesa's
//! lavapipe in CI).
//!
//! Two ways in:
//!
//! - **Buffers on the GPU**: [`WgpuDevice::encode_apply`] records the masking
//!   into a command encoder of yours and [`WgpuDevice::apply_buffers`] submits
//!   it, for `wgpu::Buffer`s of logits, bitmask and row indices (see
//!   [`ApplyBuffers`] for the layout and required usages).
//! - **Host buffers**: the [`MaskDevice`] impl uploads, applies, reads back and
//!   waits. It exists for tests and simple callers.
//!
//! Every dtype is stored as 32-bit words on the GPU (WGSL has no 16-bit
//! storage type to rely on): f32 one logit per word, f16/bf16 two, the lower
//! index in the low half. Only the `-inf` bit pattern is ever written, with
//! integer operations, so results match [`tokensieve_core::CpuDevice`] bit for
//! bit.
//!
//! ```no_run
//! use tokensieve_core::{LogitsMut, MaskDevice};
//! use tokensieve_wgpu::WgpuDevice;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = WgpuDevice::new()?;
//! println!("adapter: {}", device.adapter_info().name);
//! let mut logits = vec![0.5f32; 40];
//! let bitmask = [0b1u32, 0];
//! device.apply_token_bitmask_inplace(LogitsMut::F32(&mut logits), 40, &bitmask, None)?;
//! assert_eq!(logits[0], 0.5);
//! assert_eq!(logits[1], f32::NEG_INFINITY);
//! # Ok(()) }
//! ```

use std::sync::Mutex;

use tokensieve_core::device::{ApplyShape, NEG_INF_BF16_BITS, NEG_INF_F16_BITS};
use tokensieve_core::{DType, DeviceError, LogitsMut, MaskDevice};
pub use wgpu;
use wgpu::util::DeviceExt;

/// The shader source, shipped in the repository's `shaders/` folder.
pub const SHADER_SOURCE: &str = include_str!("../../../shaders/apply_token_bitmask.wgsl");

const APPLY_WORKGROUP: u32 = 256;
/// Elements (f32 logits, or 32-bit words of 16-bit logits) each invocation
/// masks: the shader's `PER_INVOCATION`. 4 rather than 1 ran 1.3-1.6x (f32)
/// and 1.0-1.8x (bf16) faster at batch >= 128 on an H200's Vulkan adapter
/// (docs/gpu.md).
const PER_INVOCATION: u32 = 4;
const MARK_WORKGROUP: u32 = 64;

/// Device buffers for [`WgpuDevice::encode_apply`]. Every buffer needs
/// `BufferUsages::STORAGE` and must come from this device.
#[derive(Debug, Clone, Copy)]
pub struct ApplyBuffers<'a> {
    /// `[batch, vocab]` logits of `dtype`, row-major, packed: for f16/bf16
    /// two logits per 32-bit word, so at least `ceil(batch*vocab*2 / 4) * 4`
    /// bytes; for f32 `batch*vocab*4`.
    pub logits: &'a wgpu::Buffer,
    pub dtype: DType,
    pub batch: usize,
    pub vocab: usize,
    /// `[batch, words]` u32 bitmask, `words >= ceil(vocab/32)`.
    pub bitmask: &'a wgpu::Buffer,
    pub words: usize,
    /// Rows to mask: a buffer of u32 row numbers and how many of them to
    /// use. `None`: every row. Entries `>= batch` are ignored.
    pub indices: Option<(&'a wgpu::Buffer, usize)>,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    batch: u32,
    vocab: u32,
    words: u32,
    num_rows: u32,
    has_indices: u32,
    neg16: u32,
    _pad: [u32; 2],
}

/// A WebGPU adapter that applies token bitmasks; see the crate docs.
pub struct WgpuDevice {
    adapter_info: wgpu::AdapterInfo,
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    apply_f32: wgpu::ComputePipeline,
    apply_16: wgpu::ComputePipeline,
    mark_rows: wgpu::ComputePipeline,
    /// Bound where a call has no indices.
    placeholder: wgpu::Buffer,
    /// Bound where a call needs no row flags (a separate buffer: one buffer
    /// cannot be both read-only and read-write in a dispatch).
    placeholder_rw: wgpu::Buffer,
    /// Per-row flags for 16-bit logits with an odd vocab and indices, grown
    /// on demand. Shared by calls: queue order keeps their uses apart.
    row_flags: Mutex<Option<wgpu::Buffer>>,
}

impl std::fmt::Debug for WgpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuDevice")
            .field("adapter", &self.adapter_info.name)
            .field("backend", &self.adapter_info.backend)
            .finish_non_exhaustive()
    }
}

impl WgpuDevice {
    /// Picks an adapter headlessly: a hardware one first, then a software
    /// fallback (lavapipe, WARP), then anything enumerated. Backends:
    /// Vulkan, Metal, DX12, narrowed by `WGPU_BACKEND` when set.
    /// [`DeviceError::Unavailable`] when there is no adapter.
    pub fn new() -> Result<Self, DeviceError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle().with_env();
        let native = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        desc.backends = if desc.backends.intersects(native) {
            desc.backends & native
        } else {
            native
        };
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(pick_adapter(&instance))?;
        Self::with_adapter(adapter)
    }

    /// Builds the device on a given adapter.
    pub fn with_adapter(adapter: wgpu::Adapter) -> Result<Self, DeviceError> {
        let adapter_info = adapter.get_info();
        let caps = adapter.get_downlevel_capabilities();
        if !caps.flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
            return Err(DeviceError::Unavailable(format!(
                "WebGPU adapter {} has no compute shaders",
                adapter_info.name
            )));
        }
        // Ask for everything the adapter allows: large batches of large
        // vocabularies exceed the default 128 MiB storage binding.
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("tokensieve"),
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .map_err(|e| {
            DeviceError::Unavailable(format!(
                "WebGPU adapter {}: request_device failed: {e}",
                adapter_info.name
            ))
        })?;

        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("apply_token_bitmask.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SHADER_SOURCE.into()),
        });
        let storage = |binding, read_only| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("apply_token_bitmask"),
            entries: &[
                storage(0, false),
                storage(1, true),
                storage(2, true),
                storage(3, false),
                wgpu::BindGroupLayoutEntry {
                    binding: 4,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                },
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("apply_token_bitmask"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = |entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let apply_f32 = pipeline("apply_f32");
        let apply_16 = pipeline("apply_16");
        let mark_rows = pipeline("mark_rows");
        let placeholder_buffer = |label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: 16,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        };
        let placeholder = placeholder_buffer("placeholder");
        let placeholder_rw = placeholder_buffer("placeholder (read-write)");
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(DeviceError::Device(format!(
                "WebGPU adapter {}: building the pipeline failed: {e}",
                adapter_info.name
            )));
        }
        Ok(WgpuDevice {
            adapter_info,
            device,
            queue,
            layout,
            apply_f32,
            apply_16,
            mark_rows,
            placeholder,
            placeholder_rw,
            row_flags: Mutex::new(None),
        })
    }

    /// The adapter in use (`name`, `backend`, `driver`, `device_type`).
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.adapter_info
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Bytes a logits buffer of `batch * vocab` elements of `dtype` needs
    /// (packed, rounded up to whole 32-bit words).
    pub fn logits_buffer_size(dtype: DType, batch: usize, vocab: usize) -> u64 {
        ((batch * vocab * dtype.size()).div_ceil(4) * 4) as u64
    }

    /// Records the masking of `args` into `encoder` (nothing runs until the
    /// encoder is submitted).
    pub fn encode_apply(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        args: &ApplyBuffers<'_>,
    ) -> Result<(), DeviceError> {
        let batch = args.batch;
        let shape = ApplyShape::validate(batch * args.vocab, args.vocab, batch * args.words, None)?;
        let num_rows = args.indices.map_or(batch, |(_, n)| n);
        if batch == 0 || num_rows == 0 {
            return Ok(());
        }
        let logits_bytes = Self::logits_buffer_size(args.dtype, batch, shape.vocab);
        let mask_bytes = (batch * shape.words * 4) as u64;
        check_size("logits", args.logits, logits_bytes)?;
        check_size("bitmask", args.bitmask, mask_bytes)?;
        if let Some((ix, n)) = args.indices {
            check_size("indices", ix, (n * 4) as u64)?;
        }
        let limits = self.device.limits();
        for (what, bytes) in [("logits", logits_bytes), ("bitmask", mask_bytes)] {
            if bytes > limits.max_storage_buffer_binding_size {
                return Err(DeviceError::Shape(format!(
                    "{what} need {bytes} bytes, over this adapter's storage binding limit of {}",
                    limits.max_storage_buffer_binding_size
                )));
            }
        }
        let to_u32 = |what: &str, n: usize| {
            u32::try_from(n)
                .map_err(|_| DeviceError::Shape(format!("{what} {n} does not fit in 32 bits")))
        };
        let params = Params {
            batch: to_u32("batch", batch)?,
            vocab: to_u32("vocab", shape.vocab)?,
            words: to_u32("bitmask row words", shape.words)?,
            num_rows: to_u32("row count", num_rows)?,
            has_indices: u32::from(args.indices.is_some()),
            neg16: match args.dtype {
                DType::F16 => u32::from(NEG_INF_F16_BITS),
                DType::Bf16 => u32::from(NEG_INF_BF16_BITS),
                DType::F32 => 0,
            },
            _pad: [0; 2],
        };
        // Invocations per row: one per logit (f32) or per 32-bit word the
        // row touches (16-bit: at most vocab/2 + 1).
        let per_row = match args.dtype {
            DType::F32 => shape.vocab,
            _ => shape.vocab / 2 + 1,
        };
        let groups_x = to_u32(
            "workgroups",
            per_row.div_ceil((APPLY_WORKGROUP * PER_INVOCATION) as usize),
        )?;
        let max_groups = limits.max_compute_workgroups_per_dimension as usize;
        if groups_x as usize > max_groups {
            return Err(DeviceError::Shape(format!(
                "vocab {} needs {groups_x} workgroups per row, over the adapter's {max_groups}",
                shape.vocab
            )));
        }
        let groups_y = num_rows.min(max_groups);
        let groups_z = num_rows.div_ceil(groups_y);
        let needs_flags =
            args.dtype != DType::F32 && shape.vocab % 2 == 1 && args.indices.is_some();

        let params_buf = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("apply params"),
                contents: bytemuck::bytes_of(&params),
                usage: wgpu::BufferUsages::UNIFORM,
            });
        let flags_buf = if needs_flags {
            let mut slot = self.row_flags.lock().unwrap_or_else(|e| e.into_inner());
            let need = (batch * 4) as u64;
            if slot.as_ref().is_none_or(|b| b.size() < need) {
                *slot = Some(self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("row flags"),
                    size: need.next_multiple_of(256),
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }));
            }
            slot.clone()
        } else {
            None
        };
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("apply_token_bitmask"),
            layout: &self.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: binding(args.logits, logits_bytes),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: binding(args.bitmask, mask_bytes),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: match args.indices {
                        Some((ix, n)) => binding(ix, (n * 4) as u64),
                        None => self.placeholder.as_entire_binding(),
                    },
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: flags_buf
                        .as_ref()
                        .map_or(self.placeholder_rw.as_entire_binding(), |b| {
                            b.as_entire_binding()
                        }),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: params_buf.as_entire_binding(),
                },
            ],
        });
        if let Some(flags) = &flags_buf {
            encoder.clear_buffer(flags, 0, None);
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("mark_rows"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.mark_rows);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(
                to_u32("workgroups", num_rows.div_ceil(MARK_WORKGROUP as usize))?,
                1,
                1,
            );
        }
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("apply_token_bitmask"),
            timestamp_writes: None,
        });
        pass.set_pipeline(match args.dtype {
            DType::F32 => &self.apply_f32,
            _ => &self.apply_16,
        });
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(groups_x, groups_y as u32, groups_z as u32);
        Ok(())
    }

    /// Records and submits the masking of `args`. Returns the submission to
    /// pass to [`Self::wait`]; later submissions on this queue see its result.
    pub fn apply_buffers(
        &self,
        args: &ApplyBuffers<'_>,
    ) -> Result<wgpu::SubmissionIndex, DeviceError> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("apply_token_bitmask"),
            });
        let encoded = self.encode_apply(&mut encoder, args);
        let index = self.queue.submit([encoder.finish()]);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(DeviceError::Device(format!("WebGPU: {e}")));
        }
        encoded.map(|()| index)
    }

    /// Blocks until `submission` (or everything submitted, with `None`) has
    /// finished on the GPU.
    pub fn wait(&self, submission: Option<wgpu::SubmissionIndex>) -> Result<(), DeviceError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: submission,
                timeout: None,
            })
            .map(|_| ())
            .map_err(|e| DeviceError::Device(format!("WebGPU: {e}")))
    }

    fn apply_host(
        &self,
        bytes: &mut [u8],
        dtype: DType,
        shape: ApplyShape,
        bitmask: &[u32],
        indices: Option<&[u32]>,
    ) -> Result<(), DeviceError> {
        let storage = wgpu::BufferUsages::STORAGE;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        // Pad to whole words: odd 16-bit element counts end mid-word.
        let padded_len = bytes.len().div_ceil(4) * 4;
        let mut padded = bytes.to_vec();
        padded.resize(padded_len, 0);
        let logits = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("logits"),
                contents: &padded,
                usage: storage | wgpu::BufferUsages::COPY_SRC,
            });
        let mask = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("bitmask"),
                contents: bytemuck::cast_slice(bitmask),
                usage: storage,
            });
        let index_buf = indices.filter(|ix| !ix.is_empty()).map(|ix| {
            self.device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("indices"),
                    contents: bytemuck::cast_slice(ix),
                    usage: storage,
                })
        });
        let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: padded_len as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("apply_token_bitmask (host)"),
            });
        let args = ApplyBuffers {
            logits: &logits,
            dtype,
            batch: shape.batch,
            vocab: shape.vocab,
            bitmask: &mask,
            words: shape.words,
            indices: match (indices, &index_buf) {
                (_, Some(b)) => Some((b, indices.map_or(0, <[u32]>::len))),
                // An empty index list masks nothing.
                (Some(_), None) => Some((&self.placeholder, 0)),
                (None, None) => None,
            },
        };
        let encoded = self.encode_apply(&mut encoder, &args);
        encoder.copy_buffer_to_buffer(&logits, 0, &readback, 0, padded_len as u64);
        let index = self.queue.submit([encoder.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        readback.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(DeviceError::Device(format!("WebGPU: {e}")));
        }
        encoded?;
        self.wait(Some(index))?;
        rx.recv()
            .map_err(|_| DeviceError::Device("WebGPU: map_async never answered".into()))?
            .map_err(|e| DeviceError::Device(format!("WebGPU: mapping the readback: {e}")))?;
        {
            let view = readback
                .get_mapped_range(..)
                .map_err(|e| DeviceError::Device(format!("WebGPU: mapped range: {e}")))?;
            bytes.copy_from_slice(&view[..bytes.len()]);
        }
        readback.unmap();
        Ok(())
    }
}

impl MaskDevice for WgpuDevice {
    fn name(&self) -> String {
        format!("wgpu:{}", self.adapter_info.name)
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
        let dtype = logits.dtype();
        let bytes: &mut [u8] = match logits {
            LogitsMut::F32(x) => bytemuck::cast_slice_mut(x),
            LogitsMut::F16(x) => bytemuck::cast_slice_mut(x),
            LogitsMut::Bf16(x) => bytemuck::cast_slice_mut(x),
        };
        self.apply_host(bytes, dtype, shape, bitmask, indices)
    }
}

fn binding(buffer: &wgpu::Buffer, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer,
        offset: 0,
        size: std::num::NonZeroU64::new(size),
    })
}

fn check_size(what: &str, buffer: &wgpu::Buffer, need: u64) -> Result<(), DeviceError> {
    if buffer.size() < need {
        return Err(DeviceError::Shape(format!(
            "{what} buffer has {} bytes, the shape needs {need}",
            buffer.size()
        )));
    }
    if !buffer.usage().contains(wgpu::BufferUsages::STORAGE) {
        return Err(DeviceError::Shape(format!(
            "{what} buffer lacks BufferUsages::STORAGE"
        )));
    }
    Ok(())
}

async fn pick_adapter(instance: &wgpu::Instance) -> Result<wgpu::Adapter, DeviceError> {
    let mut errors = Vec::new();
    for force_fallback_adapter in [false, true] {
        match instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter,
                ..Default::default()
            })
            .await
        {
            Ok(adapter) => return Ok(adapter),
            Err(e) => errors.push(e.to_string()),
        }
    }
    instance
        .enumerate_adapters(wgpu::Backends::all())
        .await
        .into_iter()
        .next()
        .ok_or_else(|| {
            DeviceError::Unavailable(format!(
                "no WebGPU adapter found (Vulkan, Metal or DX12; install e.g. Mesa's lavapipe: \
                 mesa-vulkan-drivers): {}",
                errors.join("; ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses and validates the shader with naga: shader errors surface in
    /// a plain `cargo test`, GPU or not.
    #[test]
    fn shader_parses_and_validates() {
        let module = naga::front::wgsl::parse_str(SHADER_SOURCE)
            .unwrap_or_else(|e| panic!("{}", e.emit_to_string(SHADER_SOURCE)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}", e.emit_to_string(SHADER_SOURCE)));
        let entry_points: Vec<_> = module
            .entry_points
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        for name in ["apply_f32", "apply_16", "mark_rows"] {
            assert!(entry_points.contains(&name), "missing entry point {name}");
        }
    }

    #[test]
    fn params_match_the_shader_struct() {
        // 8 u32 fields in the WGSL `Params`; a uniform needs 16-byte multiples.
        assert_eq!(std::mem::size_of::<Params>(), 32);
        let decl = format!("const PER_INVOCATION: u32 = {PER_INVOCATION}u;");
        assert!(SHADER_SOURCE.contains(&decl), "the shader lacks `{decl}`");
    }
}
