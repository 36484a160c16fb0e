// apply_token_bitmask.cu: masks `[batch, vocab]` logits in place with a
// `[batch, words]` token bitmask (bit j%32 of word j/32 set = token j allowed;
// row r of the logits is masked by row r of the bitmask). With `indices`, only
// the rows it lists are masked (any order, duplicates harmless); rows out of
// range are ignored, since a device cannot report them without a sync.
//
// Compiled at run time by NVRTC (crates/cuda). Self-contained on purpose: no
// CUDA headers, so NVRTC needs no include path.
//
// Masking only ever stores the -inf bit pattern (f32 0xFF800000, f16 0xFC00,
// bf16 0xFF80) through integer types: no float arithmetic, so NaN, +-inf and
// every allowed logit stay bit-identical and every device agrees with the CPU
// reference bit for bit.
//
// Work split: one warp masks one tile of 1024 logits = 32 bitmask words.
// Lane l reads word l of the tile (one coalesced 128-byte read per 1024
// logits), and a tile whose 32 words are all ones is skipped by the whole
// warp without touching the logits. Otherwise, in step k the warp shares
// word k (a shuffle) and lane l stores -inf into logit 32k + l if its bit is
// clear: one predicated 2- or 4-byte store per lane, so each store
// instruction of the warp covers 64 or 128 contiguous bytes, and logits are
// never read. A warp waits only for its bitmask word; the memory system
// merges the partial lines. Stores are streaming (`__stcs`, evict first):
// the kernel never reads them back. Any element-aligned row start works.
//
// Measured on an H200 (README "Devices"): this layout ran 1.6x (f32) and 3x
// (bf16) faster than lanes owning 16-byte vectors with the same per-logit
// stores, and 2.4x (f32) faster than reading mixed vectors to write them whole.
// Streaming stores ran 1-6% (mostly 2-3%) faster than plain ones for bf16 at
// batch >= 128 (f32 within 2%); lanes owning bf16 pairs (4-byte stores, mixed
// pairs or whole sectors read by the kernel) ran 0.82-0.91x
// (benches/cuda_kernel_variants.py).

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

#define FULL_WARP 0xffffffffu
#define TILE_LOGITS 1024u

// The rows' tiles, shared out over the grid: blockIdx.y (and its stride)
// walks row slots, each warp of blockIdx.x (and its stride) a row's tiles.
template <typename T>
__device__ __forceinline__ void apply_rows(
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
            const u32 word = w < row_words ? __ldg(row_mask + w) : 0xffffffffu;
            if (__all_sync(FULL_WARP, word == 0xffffffffu)) continue;
#pragma unroll 8
            for (u32 k = 0; k < 32u; ++k) {
                const u32 src = __shfl_sync(FULL_WARP, word, k);
                const u32 col = tile * TILE_LOGITS + k * 32u + lane;
                if (col < vocab && !((src >> lane) & 1u)) __stcs(row_ptr + col, neg);
            }
        }
    }
}

// Entry points. Pointers are kernel parameters (not integers) so that the
// compiler knows they are global memory and emits global (not generic) loads
// and stores. `indices` may be null (every row, num_rows == batch).
extern "C" __global__ void apply_bitmask_b32(
    u32* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words) {
    apply_rows<u32>(logits, bitmask, indices, num_rows, batch, vocab, words, 0xFF800000u);
}

extern "C" __global__ void apply_bitmask_b16(
    u16* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg16) {
    apply_rows<u16>(logits, bitmask, indices, num_rows, batch, vocab, words, (u16)neg16);
}
