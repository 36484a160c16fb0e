// apply_token_bitmask.cu: masks `[batch, vocab]` logits in place with a
// `[batch, words]` token bitmask (bit j%32 of word j/32 set = token j allowed;
// row r of the logits is masked by row r of the bitmask). With `indices`, only
// the rows it lists are masked (any order, duplicates harmless); rows out of
// range are ignored, since a device cannot report them without a sync.
//
// Compiled at run time by NVRTC (crates/cuda). Self-contained on purpose: no
// CUDA headers, so NVRTC needs no include path.
//
// Masking stores the -inf bit pattern (f32 0xFF800000, f16 0xFC00, bf16
// 0xFF80) through integer types, and the whole-sector kernels write allowed
// logits back with the bits they read: no float arithmetic, so NaN, +-inf and
// every allowed logit stay bit-identical and every device agrees with the CPU
// reference bit for bit.
//
// Work split: one warp masks one tile of 1024 logits = 32 bitmask words.
// Lane l reads word l of the tile (one coalesced 128-byte read per 1024
// logits), and a tile whose 32 words are all ones is skipped by the whole
// warp without touching the logits. Then one of two ways (the host picks the
// entry point, `launch_plan` in crates/cuda):
//
// - logit by logit (`apply_bitmask_b32`, `apply_bitmask_b16`): in step k the
//   warp shares word k (a shuffle) and lane l stores -inf into logit 32k + l
//   if its bit is clear: one predicated 2- or 4-byte streaming store
//   (`__stcs`) per lane, each warp store covering 64 or 128 contiguous bytes;
//   logits are never read, so a warp waits only for its bitmask word. Any
//   element-aligned row start works.
// - whole sectors (`apply_bitmask_b32_sectors`, and `apply_bitmask_b16_pairs`
//   for 16-bit rows that start on a 4-byte pair): every 32-byte sector that
//   holds a forbidden logit is written whole, its allowed logits read first
//   and written back unchanged, so the memory system never merges a partly
//   written sector.
//
// Why both (an H200, ECC memory, docs/gpu.md): a partly written sector costs
// the memory system a read and a write, and costs far more where such
// sectors are a few among fully written ones. With 5% of tokens allowed at
// random (a third of the f32 sectors partly written), logit by logit ran at
// 0.6x PyTorch's masked_fill_, whole sectors at 1.26x; on masks recorded from
// real MaskBench walks, 1.36x against 2.04x (f32, 4096 x 151,936). Where many
// sectors are mixed and the rest untouched (half the words all allowed, half
// random), logit by logit was faster (2.02x against 1.53x): the whole-sector
// kernel waits on its loads. And at a few rows, a whole-sector tile waits on
// memory up to five times against once, which the GPU cannot hide: smaller
// launches stay logit by logit. Streaming stores helped logit by logit (1-6% for bf16)
// and hurt whole sectors (2-9%); benches/cuda_kernel_variants.py has every
// layout tried.

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

#define FULL_WARP 0xffffffffu
#define TILE_LOGITS 1024u

// The rows' tiles are shared out over the grid alike in every kernel below:
// blockIdx.y (and its stride) walks row slots, each warp of blockIdx.x (and
// its stride) a row's tiles; a tile whose 32 words are all ones is skipped.
// Each kernel keeps its own loops, in the form that was timed
// (benches/cuda_kernel_variants.py): small changes of form moved the sector
// kernels' registers per thread by half (a store through `row_ptr[i + j]`
// rather than `*(row_ptr + i + j)`: 94 against 64).

// Logit by logit: in step k the warp shares word k and lane l stores -inf
// into logit 32k + l if its bit is clear (streaming stores, never read).
template <typename T>
__device__ __forceinline__ void rows_by_logit(
    T* logits, const u32* __restrict__ bitmask, const u32* __restrict__ indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, T neg) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 row_words = (vocab + 31u) >> 5;
    const u32 tiles = (row_words + 31u) >> 5;
    for (u32 slot = blockIdx.y; slot < num_rows; slot += gridDim.y) {
        const u32 row = indices ? __ldg(indices + slot) : slot;
        if (row >= batch) continue;
        T* row_ptr = logits + (u64)row * vocab;
        const u32* row_mask = bitmask + (u64)row * words;
        for (u32 tile = blockIdx.x * warps + (threadIdx.x >> 5); tile < tiles;
             tile += gridDim.x * warps) {
            const u32 w = tile * 32u + lane;
            const u32 word = w < row_words ? __ldg(row_mask + w) : FULL_WARP;
            if (__all_sync(FULL_WARP, word == FULL_WARP)) continue;
#pragma unroll 8
            for (u32 k = 0; k < 32u; ++k) {
                const u32 src = __shfl_sync(FULL_WARP, word, k);
                const u32 col = tile * TILE_LOGITS + k * 32u + lane;
                if (col < vocab && !((src >> lane) & 1u)) __stcs(row_ptr + col, neg);
            }
        }
    }
}

// f32 in whole sectors, lanes as above: a 32-byte sector (8 logits, 8 lanes)
// with no forbidden logit is skipped, one with no allowed logit written with
// -inf, and a mixed one read (its allowed logits) and written whole, so the
// memory system never merges a partly written sector. Eight steps' loads are
// issued before their stores.
__device__ __forceinline__ void rows_f32_by_sector(
    u32* logits, const u32* __restrict__ bitmask, const u32* __restrict__ indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 row_words = (vocab + 31u) >> 5;
    const u32 tiles = (row_words + 31u) >> 5;
    const u32 sector_shift = lane & 24u;
    for (u32 slot = blockIdx.y; slot < num_rows; slot += gridDim.y) {
        const u32 row = indices ? __ldg(indices + slot) : slot;
        if (row >= batch) continue;
        u32* row_ptr = logits + (u64)row * vocab;
        const u32* row_mask = bitmask + (u64)row * words;
        for (u32 tile = blockIdx.x * warps + (threadIdx.x >> 5); tile < tiles;
             tile += gridDim.x * warps) {
            const u32 w = tile * 32u + lane;
            const u32 word = w < row_words ? __ldg(row_mask + w) : FULL_WARP;
            if (__all_sync(FULL_WARP, word == FULL_WARP)) continue;
#pragma unroll
            for (u32 kb = 0; kb < 32u; kb += 8u) {
                u32 v[8];
                bool store[8];
#pragma unroll
                for (u32 j = 0; j < 8u; ++j) {
                    const u32 src = __shfl_sync(FULL_WARP, word, kb + j);
                    const u32 col = tile * TILE_LOGITS + (kb + j) * 32u + lane;
                    const bool allowed = (src >> lane) & 1u;
                    const u32 sector = (src >> sector_shift) & 0xFFu;
                    const bool mixed = sector != 0u && sector != 0xFFu;
                    const bool in = col < vocab;
                    store[j] = in && (!allowed || mixed);
                    v[j] = (in && allowed && mixed) ? row_ptr[col] : 0xFF800000u;
                }
#pragma unroll
                for (u32 j = 0; j < 8u; ++j)
                    if (store[j]) *(row_ptr + tile * TILE_LOGITS + (kb + j) * 32u + lane) = v[j];
            }
        }
    }
}

// 16-bit logits in whole sectors of 4-byte pairs: lane l owns pair 32k + l of
// the tile's 512 in step k. A sector (8 pairs) holding a forbidden logit is
// written whole: pairs with an allowed logit are read first and written back
// with -inf (`neg16` per half) merged into their forbidden halves. All 16
// steps' loads are issued before their stores. Rows of vocab / 2 pairs.
__device__ __forceinline__ void rows_pairs_by_sector(
    u16* logits, const u32* __restrict__ bitmask, const u32* __restrict__ indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg16) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 row_words = (vocab + 31u) >> 5;
    const u32 tiles = (row_words + 31u) >> 5;
    for (u32 slot = blockIdx.y; slot < num_rows; slot += gridDim.y) {
        const u32 row = indices ? __ldg(indices + slot) : slot;
        if (row >= batch) continue;
        u32* row_ptr = (u32*)(logits + (u64)row * vocab);
        const u32* row_mask = bitmask + (u64)row * words;
        for (u32 tile = blockIdx.x * warps + (threadIdx.x >> 5); tile < tiles;
             tile += gridDim.x * warps) {
            const u32 w = tile * 32u + lane;
            const u32 word = w < row_words ? __ldg(row_mask + w) : FULL_WARP;
            if (__all_sync(FULL_WARP, word == FULL_WARP)) continue;
            u32 v[16], halves[16];
            bool touch[16];
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                const u32 src = __shfl_sync(FULL_WARP, word, 2 * k + (lane >> 4));
                const u32 pair = tile * 512u + k * 32u + lane;
                const bool in = 2u * pair < vocab;
                halves[k] = in ? (src >> ((2u * lane) & 31u)) & 3u : 3u;
                const u32 sector = (src >> (((lane >> 3) & 1u) * 16u)) & 0xFFFFu;
                touch[k] = in && sector != 0xFFFFu;
                const bool load = touch[k] && halves[k] != 0u;
                v[k] = load ? row_ptr[pair] : 0u;
            }
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                if (!touch[k]) continue;
                u32 merged = v[k];
                if (!(halves[k] & 1u)) merged = (merged & 0xFFFF0000u) | neg16;
                if (!(halves[k] & 2u)) merged = (merged & 0x0000FFFFu) | (neg16 << 16);
                *(row_ptr + tile * 512u + k * 32u + lane) = merged;
            }
        }
    }
}

// Entry points. Pointers are kernel parameters (not integers) so that the
// compiler knows they are global memory and emits global (not generic) loads
// and stores. `indices` may be null (every row, num_rows == batch).

// f32, logit by logit.
extern "C" __global__ void apply_bitmask_b32(
    u32* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words) {
    rows_by_logit<u32>(logits, bitmask, indices, num_rows, batch, vocab, words, 0xFF800000u);
}

// f32, whole sectors.
extern "C" __global__ void apply_bitmask_b32_sectors(
    u32* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words) {
    rows_f32_by_sector(logits, bitmask, indices, num_rows, batch, vocab, words);
}

// f16 or bf16 (-inf pattern `neg16`), logit by logit: any element-aligned rows.
extern "C" __global__ void apply_bitmask_b16(
    u16* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg16) {
    rows_by_logit<u16>(logits, bitmask, indices, num_rows, batch, vocab, words, (u16)neg16);
}

// f16 or bf16, whole sectors of 4-byte pairs: `vocab` even and the logits
// 4-byte aligned (the host checks both).
extern "C" __global__ void apply_bitmask_b16_pairs(
    u16* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg16) {
    rows_pairs_by_sector(logits, bitmask, indices, num_rows, batch, vocab, words, neg16);
}
