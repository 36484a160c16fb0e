"""Variants of the CUDA apply kernel, timed on one GPU without host launch costs.

    python3 benches/cuda_kernel_variants.py                        # every variant, every shape
    VAR_ONLY=committed VAR_BATCHES=128,512,4096 python3 benches/cuda_kernel_variants.py

Needs CuPy (NVRTC) and a CUDA GPU; run from the repository root. Writes one
JSON record per measurement to $OUT/variants.jsonl ($OUT defaults to /tmp).

`committed` is kernels/apply_token_bitmask.cu as it is; the others are the
layouts tried on an H200 (docs/gpu.md, "Kernel layouts measured"), kept so the
choice can be rerun on another card:
- `t1`: lane l stores logit 32k + l in step k, plain stores;
- `t1cs`: the same with streaming stores (`st.global.cs`, what `__stcs` emits):
  the kernel before whole sectors, and still the 16-bit kernel for rows that
  do not start on a 4-byte pair;
- `t2`, `t4`: a warp masks 2 or 4 consecutive tiles of 1,024 logits;
- `*_b256`, `*_b512`: blocks of 256 or 512 threads instead of 128;
- `pair0`, `pair1` (bf16, even vocabularies): a lane owns two logits and stores 4 bytes; `pair0`
  reads only pairs of one allowed and one forbidden logit, `pair1` reads and
  writes every 32-byte sector holding a forbidden logit whole;
- `rmw1` (f32): `pair1`'s whole-sector read and write for f32;
- `u8_thN` (f32), `u16_thN` (bf16): units of one 32-byte sector in the
  `t1` layout: a unit with no forbidden logit skipped, one with no
  allowed logit written whole (no read), a mixed one with at least N
  forbidden logits read (its allowed logits) and written whole, one with
  fewer only its forbidden logits stored; `*cs_*` with streaming stores;
  `u32_thN`: the same rule over a warp store's 32 logits.

Masks (VAR_MASKS, comma-separated; default `structured`): `structured` is
benches/apply.rs' (each 32-bit word all ones with probability 1/2, random
bits otherwise); `iidP` allows each token independently with probability P;
`real` replays rows recorded from real walks (examples/record_masks.rs,
benches/fixtures/masks/ or VAR_REAL_DIR) at their model's vocabulary
(Llama 3 128,256, Qwen2.5 151,936), `realsparse` and `realdense` only those
with under or at least half the tokens allowed. The byte count (logits read + written +
bitmask read) is the same for every mask, so GB/s compare with
`apply/cuda/...` and with benches/torch_masked_fill.py; `bound` is the time
to move only the bytes the mask forces at the measured copy rate (each
32-byte sector holding a forbidden logit written, read too if it also holds
an allowed one, and the bitmask read). Input sets are rotated (up to ~256
MiB) so the L2 cache does not serve repeated launches. Each variant is first
checked bit for bit against a reference on the first set (batch <= 512).
Timing: a CUDA graph of back-to-back launches, replayed between events,
median of 15 replays: the kernel's own rate, without the host's launch cost
that criterion's wall clock includes at small shapes. `plain=` is the
committed kernel launched from Python, back to back, between events. With
VAR_PEERS=1, PyTorch's `masked_fill_` (the forbidden mask precomputed) and,
with VAR_XGRAMMAR_WHEEL=xgrammar-*.whl, XGrammar's Triton apply kernel run
on the same buffers in CUDA graphs too, checked the same way; each line
then gives microseconds per launch and PyTorch's time over each.

Environment: VAR_ONLY (comma-separated variant names), VAR_BATCHES,
VAR_VOCABS, VAR_DTYPES (f32,bf16), VAR_MASKS, VAR_REAL_DIR, VAR_PEERS,
VAR_XGRAMMAR_WHEEL.
"""
import json
import math
import os
import statistics

import cupy as cp
import numpy as np

OUT = os.environ.get("OUT", "/tmp")
SRC_COMMITTED = open("kernels/apply_token_bitmask.cu").read()

VARIANTS_SRC = r"""
typedef unsigned int u32; typedef unsigned short u16; typedef unsigned long long u64;
#define FULL 0xffffffffu
template <typename T, bool CS> __device__ __forceinline__ void st(T* p, T v);
template <> __device__ __forceinline__ void st<u32, false>(u32* p, u32 v) { *p = v; }
template <> __device__ __forceinline__ void st<u16, false>(u16* p, u16 v) { *p = v; }
template <> __device__ __forceinline__ void st<u32, true>(u32* p, u32 v) {
    asm volatile("st.global.cs.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory"); }
template <> __device__ __forceinline__ void st<u16, true>(u16* p, u16 v) {
    asm volatile("st.global.cs.u16 [%0], %1;" :: "l"(p), "h"(v) : "memory"); }

template <typename T, int TPW, bool CS>
__device__ __forceinline__ void apply_rows(T* logits, const u32* __restrict__ bitmask,
                                           u32 batch, u32 vocab, u32 words, T neg) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 row_words = (vocab + 31u) >> 5;
    const u32 tiles = (row_words + 31u) >> 5;
    const u32 groups = (tiles + TPW - 1) / TPW;
    for (u32 row = blockIdx.y; row < batch; row += gridDim.y) {
        T* row_ptr = logits + (u64)row * vocab;
        const u32* row_mask = bitmask + (u64)row * words;
        for (u32 g = blockIdx.x * warps + (threadIdx.x >> 5); g < groups; g += gridDim.x * warps) {
            u32 wd[TPW];
#pragma unroll
            for (int t = 0; t < TPW; ++t) {
                const u32 w = (g * TPW + t) * 32u + lane;
                wd[t] = w < row_words ? __ldg(row_mask + w) : FULL;
            }
#pragma unroll
            for (int t = 0; t < TPW; ++t) {
                const u32 word = wd[t];
                if (__all_sync(FULL, word == FULL)) continue;
                const u32 base = (g * TPW + t) * 1024u;
#pragma unroll 8
                for (u32 k = 0; k < 32u; ++k) {
                    const u32 src = __shfl_sync(FULL, word, k);
                    const u32 col = base + k * 32u + lane;
                    if (col < vocab && !((src >> lane) & 1u)) st<T, CS>(row_ptr + col, neg);
                }
            }
        }
    }
}
#define ENTRY(name, T, TPW, CS) extern "C" __global__ void name(T* l, const u32* m, u32 batch, \
    u32 vocab, u32 words, u32 neg) { apply_rows<T, TPW, CS>(l, m, batch, vocab, words, (T)neg); }
ENTRY(b32_t1, u32, 1, false)
ENTRY(b32_t2, u32, 2, false)
ENTRY(b32_t1cs, u32, 1, true)
ENTRY(b16_t1, u16, 1, false)
ENTRY(b16_t2, u16, 2, false)
ENTRY(b16_t4, u16, 4, false)
ENTRY(b16_t1cs, u16, 1, true)
ENTRY(b16_t2cs, u16, 2, true)
// Pairs of 16-bit logits (even vocab only): lane owns pair 32k + lane of a
// 512-pair tile. MODE 0: store pairs not both allowed, load only mixed pairs.
// MODE 1: every 32-byte sector holding a forbidden logit is read and written
// whole (full-sector writes; the read the L2 would do is the kernel's).
template <int MODE, bool CS>
__device__ __forceinline__ void b16_pairs(u16* logits, const u32* __restrict__ bitmask,
                                          u32 batch, u32 vocab, u32 words) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 row_words = (vocab + 31u) >> 5;
    const u32 tiles = (row_words + 31u) >> 5;
    for (u32 row = blockIdx.y; row < batch; row += gridDim.y) {
        u32* row_ptr = (u32*)(logits + (u64)row * vocab);
        const u32* row_mask = bitmask + (u64)row * words;
        for (u32 tile = blockIdx.x * warps + (threadIdx.x >> 5); tile < tiles; tile += gridDim.x * warps) {
            const u32 w = tile * 32u + lane;
            const u32 word = w < row_words ? __ldg(row_mask + w) : FULL;
            if (__all_sync(FULL, word == FULL)) continue;
            u32 v[16], pb[16];
            bool touch[16];
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                const u32 src = __shfl_sync(FULL, word, 2 * k + (lane >> 4));
                const u32 pcol = tile * 512u + k * 32u + lane;
                const bool in = 2u * pcol < vocab;
                pb[k] = in ? (src >> ((2u * lane) & 31u)) & 3u : 3u;
                bool ld;
                if (MODE == 0) {
                    touch[k] = pb[k] != 3u;
                    ld = pb[k] == 1u || pb[k] == 2u;
                } else {
                    const u32 sec = (src >> (((lane >> 3) & 1u) * 16u)) & 0xFFFFu;
                    touch[k] = in && sec != 0xFFFFu;
                    ld = touch[k] && pb[k] != 0u;
                }
                v[k] = ld ? row_ptr[pcol] : 0u;
            }
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                if (!touch[k]) continue;
                u32 nv = v[k];
                if (!(pb[k] & 1u)) nv = (nv & 0xFFFF0000u) | 0xFF80u;
                if (!(pb[k] & 2u)) nv = (nv & 0x0000FFFFu) | 0xFF800000u;
                st<u32, CS>(row_ptr + tile * 512u + k * 32u + lane, nv);
            }
        }
    }
}
// f32, MODE 1 only: sectors (8 lanes) holding a forbidden logit read and written whole.
__device__ __forceinline__ void b32_rmw(u32* logits, const u32* __restrict__ bitmask,
                                        u32 batch, u32 vocab, u32 words) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 row_words = (vocab + 31u) >> 5;
    const u32 tiles = (row_words + 31u) >> 5;
    for (u32 row = blockIdx.y; row < batch; row += gridDim.y) {
        u32* row_ptr = logits + (u64)row * vocab;
        const u32* row_mask = bitmask + (u64)row * words;
        for (u32 tile = blockIdx.x * warps + (threadIdx.x >> 5); tile < tiles; tile += gridDim.x * warps) {
            const u32 w = tile * 32u + lane;
            const u32 word = w < row_words ? __ldg(row_mask + w) : FULL;
            if (__all_sync(FULL, word == FULL)) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                u32 v[16], bit[16];
                bool touch[16];
#pragma unroll
                for (int k = 0; k < 16; ++k) {
                    const u32 src = __shfl_sync(FULL, word, 16 * h + k);
                    const u32 col = tile * 1024u + (16u * h + k) * 32u + lane;
                    const bool in = col < vocab;
                    bit[k] = (src >> lane) & 1u;
                    touch[k] = in && ((src >> (lane & 24u)) & 0xFFu) != 0xFFu;
                    v[k] = touch[k] && bit[k] ? row_ptr[col] : 0u;
                }
#pragma unroll
                for (int k = 0; k < 16; ++k) {
                    if (!touch[k]) continue;
                    const u32 col = tile * 1024u + (16u * h + k) * 32u + lane;
                    row_ptr[col] = bit[k] ? v[k] : 0xFF800000u;
                }
            }
        }
    }
}
#define PENTRY(name, MODE, CS) extern "C" __global__ void name(u16* l, const u32* m, u32 batch, \
    u32 vocab, u32 words, u32 neg) { b16_pairs<MODE, CS>(l, m, batch, vocab, words); }
PENTRY(b16_pair0, 0, false)
PENTRY(b16_pair1, 1, false)
PENTRY(b16_pair1cs, 1, true)
extern "C" __global__ void b32_rmw1(u32* l, const u32* m, u32 batch, u32 vocab, u32 words, u32 neg) {
    b32_rmw(l, m, batch, vocab, words); }
// Units of S logits (S = 8 f32 or 16 bf16: one 32-byte sector; S = 32: a warp
// store's span), lane l on logit 32k + l: a unit with no
// forbidden logit is skipped, one with no allowed logit written whole with -inf
// (no read), a mixed one with at least TH forbidden logits has its allowed
// logits read and is written whole (the memory system then never merges a
// partial sector), one with fewer has only its forbidden logits stored.
// TH = S + 1 is `t1`'s behaviour.
template <typename T, u32 S, bool CS>
__device__ __forceinline__ void apply_units(T* logits, const u32* __restrict__ bitmask, u32 batch,
                                            u32 vocab, u32 words, T neg, u32 th) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 row_words = (vocab + 31u) >> 5;
    const u32 tiles = (row_words + 31u) >> 5;
    const u32 umask = S == 32u ? FULL : ((1u << S) - 1u);
    const u32 ushift = lane & (32u - S);
    for (u32 row = blockIdx.y; row < batch; row += gridDim.y) {
        T* row_ptr = logits + (u64)row * vocab;
        const u32* row_mask = bitmask + (u64)row * words;
        for (u32 tile = blockIdx.x * warps + (threadIdx.x >> 5); tile < tiles; tile += gridDim.x * warps) {
            const u32 w = tile * 32u + lane;
            const u32 word = w < row_words ? __ldg(row_mask + w) : FULL;
            if (__all_sync(FULL, word == FULL)) continue;
#pragma unroll
            for (u32 kb = 0; kb < 32u; kb += 8u) {
                T v[8];
                bool s[8];
#pragma unroll
                for (u32 j = 0; j < 8u; ++j) {
                    const u32 src = __shfl_sync(FULL, word, kb + j);
                    const u32 col = tile * 1024u + (kb + j) * 32u + lane;
                    const bool bit = (src >> lane) & 1u;
                    const u32 unit = (src >> ushift) & umask;
                    const bool whole = unit != 0u && S - __popc(unit) >= th;
                    const bool in = col < vocab;
                    s[j] = in && (!bit || whole);
                    v[j] = (in && bit && whole) ? row_ptr[col] : neg;
                }
#pragma unroll
                for (u32 j = 0; j < 8u; ++j)
                    if (s[j]) st<T, CS>(row_ptr + tile * 1024u + (kb + j) * 32u + lane, v[j]);
            }
        }
    }
}
#define UENTRY(name, T, S, CS) extern "C" __global__ void name(T* l, const u32* m, u32 batch, \
    u32 vocab, u32 words, u32 neg, u32 th) { apply_units<T, S, CS>(l, m, batch, vocab, words, (T)neg, th); }
UENTRY(b32_u8, u32, 8u, false)
UENTRY(b32_u8cs, u32, 8u, true)
UENTRY(b32_u32, u32, 32u, false)
UENTRY(b16_u16, u16, 16u, false)
UENTRY(b16_u16cs, u16, 16u, true)
UENTRY(b16_u32, u16, 32u, false)
"""

BATCHES = [int(b) for b in os.environ.get("VAR_BATCHES", "1,16,128,512,4096").split(",")]
VOCABS = [int(v) for v in os.environ.get("VAR_VOCABS", "32000,128256,151936").split(",")]
MASKS = os.environ.get("VAR_MASKS", "structured").split(",")
REAL_DIR = os.environ.get("VAR_REAL_DIR", "benches/fixtures/masks")
# Recorded masks (examples/record_masks.rs) replayed at their model's vocabulary.
REAL = {128256: "llama3", 151936: "qwen2.5"}
PEERS = os.environ.get("VAR_PEERS", "") == "1"
XGR_WHEEL = os.environ.get("VAR_XGRAMMAR_WHEEL")
NEG = {"f32": 0xFF800000, "bf16": 0xFF80}


def eff_bytes(elem, b, v):
    return 2 * b * v * elem + b * math.ceil(v / 32) * 4


def sets_for(n):
    return max(1, min(64, math.ceil((256 << 20) / n)))


def rand_u32(shape):
    lo = cp.random.randint(0, 1 << 16, shape, dtype=cp.int32).astype(cp.uint32)
    hi = cp.random.randint(0, 1 << 16, shape, dtype=cp.int32).astype(cp.uint32)
    return (hi << 16) | lo


def pack_bits(allowed):
    """[b, v] bool -> [b, ceil(v/32)] uint32, bit t%32 of word t/32."""
    b, v = allowed.shape
    w = math.ceil(v / 32)
    padded = cp.zeros((b, w * 32), dtype=cp.uint32)
    padded[:, :v] = allowed
    return (padded.reshape(b, w, 32) << cp.arange(32, dtype=cp.uint32)).sum(axis=2, dtype=cp.uint32)


_real_rows = {}


def real_rows(v):
    """The recorded rows for vocabulary v, padded to ceil(v/32) words (padding forbidden)."""
    if v not in _real_rows:
        import lzma
        with lzma.open(os.path.join(REAL_DIR, f"masks-{REAL[v]}.bin.xz")) as f:
            data = f.read()
        assert data[:8] == b"TSMASKS1", "not a recorded-masks file"
        tv, words, rows = np.frombuffer(data[8:20], dtype="<u4")
        body = np.frombuffer(data[20:], dtype="<u4").reshape(rows, words)
        w = math.ceil(v / 32)
        out = np.zeros((rows, w), dtype=np.uint32)
        out[:, :words] = body
        _real_rows[v] = cp.asarray(out)
        _real_dense[v] = np.unpackbits(out.view(np.uint8), axis=1).sum(axis=1) >= v / 2
    return _real_rows[v]


_real_dense = {}


def make_mask(kind, b, v, set_index=0):
    w = math.ceil(v / 32)
    if kind == "structured":  # benches/apply.rs: half the words all ones, half random bits
        full = cp.random.rand(b, w) < 0.5
        return cp.where(full, cp.uint32(0xFFFFFFFF), rand_u32((b, w))).astype(cp.uint32)
    if kind.startswith("iid"):  # each token allowed independently with probability p
        return pack_bits(cp.random.rand(b, v) < float(kind[3:]))
    if kind in ("real", "realsparse", "realdense"):  # b recorded rows, a different shuffle per set
        rows = real_rows(v)
        if kind != "real":  # only rows with under / at least half the tokens allowed
            dense = _real_dense[v]
            rows = rows[cp.asarray(np.flatnonzero(~dense if kind == "realsparse" else dense))]
        order = np.random.default_rng(set_index).integers(0, rows.shape[0], b)
        return rows[cp.asarray(order)].copy()
    raise ValueError(f"VAR_MASKS: unknown mask kind {kind!r}")


def sector_bytes(mask, dt, v):
    """Bytes a kernel must move at least: each 32-byte sector of logits with a
    forbidden logit written, read too if it also holds an allowed one, and the
    bitmask read (ragged vocabulary tails counted as whole sectors)."""
    per = 8 if dt == "f32" else 16
    m = mask.astype(cp.uint64)
    total = 0
    for sh in range(0, 32, per):
        unit = (m >> sh) & ((1 << per) - 1)
        full = int((unit == ((1 << per) - 1)).sum())
        none = int((unit == 0).sum())
        mixed = unit.size - full - none
        total += 32 * none + 64 * mixed
    return total + mask.size * 4


def make_logits(dt, b, v):
    if dt == "f32":
        x = rand_u32((b, v))
        return ((x & cp.uint32(0x807FFFFF)) | cp.uint32(0x3C000000)).astype(cp.uint32)
    x = cp.random.randint(1, 0x7F00, (b, v), dtype=cp.int32).astype(cp.uint16)
    return x


def reference(logits, mask, dt, v):
    b = logits.shape[0]
    bits = (mask[:, :, None] >> cp.arange(32, dtype=cp.uint32)) & cp.uint32(1)
    bits = bits.reshape(b, -1)[:, :v]
    ref = logits.copy()
    ref[bits == 0] = NEG[dt]
    return ref


mod_c = cp.RawModule(code=SRC_COMMITTED, options=("-std=c++14",), backend="nvrtc")
mod_v = cp.RawModule(code=VARIANTS_SRC, options=("-std=c++14",), backend="nvrtc", name_expressions=None)


def committed(dt, b, v):
    """The committed kernel's entry point for `b` rows of `v` logits of dtype
    `dt`, as `launch_plan` picks it (CuPy's buffers are 4-byte aligned)."""
    sectors = b * math.ceil(v / 1024) >= 4096  # SECTOR_MIN_TILES
    if dt == "f32":
        return mod_c.get_function("apply_bitmask_b32_sectors" if sectors else "apply_bitmask_b32")
    pairs = sectors and v % 2 == 0
    return mod_c.get_function("apply_bitmask_b16_pairs" if pairs else "apply_bitmask_b16")


# (name, dtype, kernel getter, tiles per warp, block threads, signature, grid.y cap):
# signature True = the committed kernel's, False = the variants', ("th", N) = a
# unit variant with threshold N.
VARIANTS = []
ONLY = os.environ.get("VAR_ONLY")
for dt, pre in [("f32", "b32"), ("bf16", "b16")]:
    VARIANTS.append(("committed", dt, lambda b, v, dt=dt: committed(dt, b, v), 1, 128, True, 65535))
    VARIANTS.append(("t1", dt, lambda pre=pre: mod_v.get_function(pre + "_t1"), 1, 128, False, 65535))
    VARIANTS.append(("t2", dt, lambda pre=pre: mod_v.get_function(pre + "_t2"), 2, 128, False, 65535))
    VARIANTS.append(("t1cs", dt, lambda pre=pre: mod_v.get_function(pre + "_t1cs"), 1, 128, False, 65535))
    VARIANTS.append(("t1_b256", dt, lambda pre=pre: mod_v.get_function(pre + "_t1"), 1, 256, False, 65535))
    VARIANTS.append(("t1_b512", dt, lambda pre=pre: mod_v.get_function(pre + "_t1"), 1, 512, False, 65535))
    if dt == "bf16":
        VARIANTS.append(("t4", dt, lambda: mod_v.get_function("b16_t4"), 4, 128, False, 65535))
        VARIANTS.append(("t2cs", dt, lambda: mod_v.get_function("b16_t2cs"), 2, 128, False, 65535))
        VARIANTS.append(("t2_b256", dt, lambda: mod_v.get_function("b16_t2"), 2, 256, False, 65535))
        VARIANTS.append(("pair0", dt, lambda: mod_v.get_function("b16_pair0"), 1, 128, False, 65535))
        VARIANTS.append(("pair1", dt, lambda: mod_v.get_function("b16_pair1"), 1, 128, False, 65535))
        VARIANTS.append(("pair1cs", dt, lambda: mod_v.get_function("b16_pair1cs"), 1, 128, False, 65535))
    else:
        VARIANTS.append(("rmw1", dt, lambda: mod_v.get_function("b32_rmw1"), 1, 128, False, 65535))
    sec = 8 if dt == "f32" else 16
    for fn, ths in [(f"{pre}_u{sec}", (1, sec // 4, sec // 2)), (f"{pre}_u{sec}cs", (1,)), (f"{pre}_u32", (1, 8))]:
        for th in ths:
            tag = fn[len(pre) + 1:]
            VARIANTS.append((f"{tag}_th{th}", dt, lambda fn=fn: mod_v.get_function(fn), 1, 128, ("th", th), 65535))
if ONLY:
    VARIANTS = [v for v in VARIANTS if v[0] in ONLY.split(",")]


def launcher(var, logits, mask, b, v):
    name, dt, get, tpw, threads, sig, ycap = var
    f = get(b, v) if name == "committed" else get()
    w = math.ceil(v / 32)
    tiles = math.ceil(w / 32)
    groups = math.ceil(tiles / tpw)
    grid = (math.ceil(groups / (threads // 32)), min(b, ycap), 1)
    if sig is True:
        if dt == "f32":
            args = lambda L, M: (L, M, np.uint64(0), np.uint32(b), np.uint32(b), np.uint32(v), np.uint32(w))
        else:
            args = lambda L, M: (L, M, np.uint64(0), np.uint32(b), np.uint32(b), np.uint32(v), np.uint32(w),
                                 np.uint32(NEG[dt]))
    elif sig is False:
        args = lambda L, M: (L, M, np.uint32(b), np.uint32(v), np.uint32(w), np.uint32(NEG[dt]))
    else:
        args = lambda L, M: (L, M, np.uint32(b), np.uint32(v), np.uint32(w), np.uint32(NEG[dt]),
                             np.uint32(sig[1]))
    return lambda k: f(grid, (threads, 1, 1), args(logits[k], mask[k]))


def time_graph(fn, sets, per_launch_ms):
    inner = max(sets, min(400, int(4.0 / max(per_launch_ms, 1e-4))))
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for i in range(2 * sets):
            fn(i % sets)
        s.synchronize()
        s.begin_capture()
        for i in range(inner):
            fn(i % sets)
        g = s.end_capture()
        g.launch(s)
        s.synchronize()
        times = []
        for _ in range(15):
            a, e = cp.cuda.Event(), cp.cuda.Event()
            a.record(s)
            g.launch(s)
            e.record(s)
            e.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, e) / inner)
    return statistics.median(times)


def time_plain(fn, sets):
    for i in range(2 * sets):
        fn(i % sets)
    cp.cuda.Device().synchronize()
    a, e = cp.cuda.Event(), cp.cuda.Event()
    a.record(); fn(0); e.record(); e.synchronize()
    one = max(cp.cuda.get_elapsed_time(a, e), 1e-3)
    inner = max(sets, min(2000, int(5.0 / one)))
    times = []
    for _ in range(15):
        a, e = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for i in range(inner):
            fn(i % sets)
        e.record(); e.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, e) / inner)
    return statistics.median(times), one


def copy_gbps():
    """Device-to-device copy of 2 GiB, bytes read + written per second: the
    rate a kernel moving bytes can approach."""
    n = 2 << 30
    src, dst = cp.empty(n, dtype=cp.uint8), cp.empty(n, dtype=cp.uint8)
    cp.copyto(dst, src)
    a, e = cp.cuda.Event(), cp.cuda.Event()
    a.record()
    for _ in range(10):
        cp.copyto(dst, src)
    e.record(); e.synchronize()
    ms = cp.cuda.get_elapsed_time(a, e) / 10
    del src, dst
    cp.get_default_memory_pool().free_all_blocks()
    return 2 * n / (ms * 1e-3) / 1e9


def torch_peers(dt, logits, masks, v):
    """(name, fn(k)) for PyTorch's masked_fill_ (forbidden mask precomputed)
    and, with VAR_XGRAMMAR_WHEEL, XGrammar's Triton apply kernel, on the same
    buffers (zero-copy through DLPack)."""
    import torch
    peers = []
    tdt = torch.float32 if dt == "f32" else torch.bfloat16
    tl = [torch.from_dlpack(x.view(cp.float32) if dt == "f32" else x.view(cp.int16)).view(tdt) for x in logits]
    tm = [torch.from_dlpack(m.view(cp.int32)) for m in masks]
    shifts = torch.arange(32, device="cuda", dtype=torch.int32)
    forb = [(((m.unsqueeze(-1) >> shifts) & 1).reshape(m.shape[0], -1)[:, :v] == 0).contiguous() for m in tm]
    ninf = float("-inf")
    peers.append(("torch_fill", lambda k: tl[k].masked_fill_(forb[k], ninf)))
    if XGR_WHEEL:
        global _xgr
        if "_xgr" not in globals():
            from torch_masked_fill import load_xgrammar_apply  # benches/, beside this script
            _xgr, _ = load_xgrammar_apply(XGR_WHEEL)
        peers.append(("xgrammar", lambda k: _xgr(tl[k], tm[k])))
    return peers


def time_torch_graph(fn, sets, per_launch_ms):
    import torch
    inner = max(sets, min(400, int(4.0 / max(per_launch_ms, 1e-4))))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(2 * sets):
            fn(i % sets)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(inner):
            fn(i % sets)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(15):
        a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(a.elapsed_time(e) / inner)
    return statistics.median(times)


def main():
    cp.random.seed(7)
    props = cp.cuda.runtime.getDeviceProperties(0)
    print("device", props["name"].decode(), "SMs", props["multiProcessorCount"], flush=True)
    bw = copy_gbps()
    print(f"copy {bw:.0f} GB/s (read + written)", flush=True)
    recs = [{"op": "copy", "gbps": bw}]
    for dt in os.environ.get("VAR_DTYPES", "f32,bf16").split(","):
        elem = 4 if dt == "f32" else 2
        for v in VOCABS:
            for b in BATCHES:
                for kind in MASKS:
                    if kind.startswith("real") and v not in REAL:
                        continue
                    nb = eff_bytes(elem, b, v)
                    sets = sets_for(nb)
                    logits = [make_logits(dt, b, v) for _ in range(sets)]
                    masks = [make_mask(kind, b, v, i) for i in range(sets)]
                    allowed = float(sum(int(cp.unpackbits(m.view(cp.uint8)).sum()) for m in masks[:1])) / (b * v)
                    bound_us = sector_bytes(masks[0], dt, v) / bw / 1e3
                    ref = reference(logits[0], masks[0], dt, v) if b <= 512 else None
                    row = {}
                    per_launch = None
                    runs = [(var[0], var) for var in VARIANTS if var[1] == dt]
                    if PEERS:
                        try:
                            runs += [(name, fn) for name, fn in torch_peers(dt, logits, masks, v)]
                        except Exception as ex:
                            row["peers"] = (float("nan"), "ERR " + str(ex)[:120])
                    for name, var in runs:
                        try:
                            peer = callable(var)
                            fn = var if peer else launcher(var, logits, masks, b, v)
                            ok = "-"
                            if ref is not None:
                                keep = logits[0].copy()
                                if peer:
                                    var(0)
                                    cp.cuda.Device().synchronize()
                                    ok = "ok" if bool(cp.array_equal(logits[0], ref)) else "MISMATCH"
                                    logits[0][...] = keep
                                else:
                                    tl = [keep.copy()]
                                    launcher(var, tl, masks, b, v)(0)
                                    cp.cuda.Device().synchronize()
                                    ok = "ok" if bool(cp.array_equal(tl[0], ref)) else "MISMATCH"
                            plain = None
                            if name == "committed":
                                plain, one = time_plain(fn, sets)
                                per_launch = plain
                            t = (time_torch_graph if peer else time_graph)(fn, sets, per_launch or 0.5)
                            g = nb / (t * 1e-3) / 1e9
                            row[name] = (t * 1e3, ok)
                            rec = {"var": name, "dtype": dt, "batch": b, "vocab": v, "mask": kind,
                                   "allowed": allowed, "us": t * 1e3, "gbps": g, "bound_us": bound_us, "ok": ok}
                            if plain:
                                rec["plain_us"] = plain * 1e3
                                rec["plain_gbps"] = nb / (plain * 1e-3) / 1e9
                            recs.append(rec)
                        except Exception as ex:  # one variant's failure does not stop the rest
                            row[name] = (float("nan"), "ERR " + str(ex)[:120])
                    base = row.get("torch_fill", (float("nan"), ""))[0]
                    cells = " ".join(f"{k}={t:.1f}" + (f"({base / t:.2f}x)" if PEERS and base == base else "")
                                     + ("" if ok in ("ok", "-") else "!" + ok) for k, (t, ok) in row.items())
                    print(f"{dt} b{b}_v{v} {kind} allowed={allowed:.3f} bound={bound_us:.1f}us {cells}", flush=True)
                    del logits, masks, ref
                    cp.get_default_memory_pool().free_all_blocks()
    with open(os.path.join(OUT, "variants.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
