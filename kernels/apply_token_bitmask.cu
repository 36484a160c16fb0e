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
// warp without touching the logits. Otherwise the warp walks the tile
// in 16-byte vectors: in step k lane l owns vector k*32+l, so each store
// instruction of the warp covers 512 contiguous bytes. A vector whose bits are
// all set is left alone, one whose bits are all clear is overwritten without
// being read, and only mixed vectors are read, merged bitwise and written.
// All loads of a tile are issued before its stores, to keep bytes in flight.
//
// The vector kernels need every row start 16-byte aligned (vocab a multiple of
// 4 for f32, of 8 for 16-bit, and a 16-byte aligned base): the host checks
// and otherwise launches the scalar kernels, which store one logit per lane
// (still coalesced, still one word read per 32 logits) and never read logits.

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

#define FULL_WARP 0xffffffffu
#define TILE_LOGITS 1024u

// Per 32-bit lane of a 16-byte vector: the bits of that lane that hold
// allowed logits. 4-byte logits: one logit per lane; 2-byte: two, the lower
// address in the low half (little endian).
template <int ELEM_BYTES>
__device__ __forceinline__ u32 keep_bits(u32 bits, int lane32) {
    if (ELEM_BYTES == 4) {
        return ((bits >> lane32) & 1u) ? 0xffffffffu : 0u;
    } else {
        const u32 lo = ((bits >> (2 * lane32)) & 1u) ? 0x0000ffffu : 0u;
        const u32 hi = ((bits >> (2 * lane32 + 1)) & 1u) ? 0xffff0000u : 0u;
        return lo | hi;
    }
}

template <int ELEM_BYTES>
__device__ __forceinline__ u32 merge(u32 x, u32 bits, int lane32, u32 neg) {
    const u32 keep = keep_bits<ELEM_BYTES>(bits, lane32);
    return (x & keep) | (neg & ~keep);
}

// `neg`: the -inf pattern filling a 32-bit lane (f32: 0xFF800000; 16-bit: the
// pattern twice).
template <int ELEM_BYTES>
__device__ __forceinline__ void apply_vector(
    unsigned char* __restrict__ logits, const u32* __restrict__ bitmask, const u32* __restrict__ indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg) {
    constexpr u32 EPV = 16 / ELEM_BYTES;         // logits per 16-byte vector
    constexpr u32 STEPS = TILE_LOGITS / (32 * EPV);
    constexpr u32 VMASK = (1u << EPV) - 1u;
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 row_words = (vocab + 31u) >> 5;
    const u32 tiles = (row_words + 31u) >> 5;
    const u32 row_vecs = vocab / EPV;
    const uint4 all_neg = make_uint4(neg, neg, neg, neg);

    for (u32 slot = blockIdx.y; slot < num_rows; slot += gridDim.y) {
        const u32 row = indices ? __ldg(indices + slot) : slot;
        if (row >= batch) continue;
        uint4* row_vec = reinterpret_cast<uint4*>(logits + (u64)row * vocab * ELEM_BYTES);
        const u32* row_mask = bitmask + (u64)row * words;
        for (u32 tile = blockIdx.x * warps + (threadIdx.x >> 5); tile < tiles;
             tile += gridDim.x * warps) {
            const u32 w = tile * 32u + lane;
            const u32 word = w < row_words ? __ldg(row_mask + w) : 0xffffffffu;
            if (__all_sync(FULL_WARP, word == 0xffffffffu)) continue;

            uint4 v[STEPS];
            u32 bits[STEPS];
#pragma unroll
            for (u32 k = 0; k < STEPS; ++k) {
                const u32 vi = k * 32u + lane;
                const u32 src = __shfl_sync(FULL_WARP, word, (vi * EPV) >> 5);
                const u32 gv = tile * (TILE_LOGITS / EPV) + vi;
                bits[k] = gv < row_vecs ? (src >> ((vi * EPV) & 31u)) & VMASK : VMASK;
                if (bits[k] != 0u && bits[k] != VMASK) v[k] = row_vec[gv];
            }
#pragma unroll
            for (u32 k = 0; k < STEPS; ++k) {
                if (bits[k] == VMASK) continue;
                const u32 gv = tile * (TILE_LOGITS / EPV) + k * 32u + lane;
                if (bits[k] == 0u) {
                    row_vec[gv] = all_neg;
                } else {
                    uint4 o;
                    o.x = merge<ELEM_BYTES>(v[k].x, bits[k], 0, neg);
                    o.y = merge<ELEM_BYTES>(v[k].y, bits[k], 1, neg);
                    o.z = merge<ELEM_BYTES>(v[k].z, bits[k], 2, neg);
                    o.w = merge<ELEM_BYTES>(v[k].w, bits[k], 3, neg);
                    row_vec[gv] = o;
                }
            }
        }
    }
}

template <typename T>
__device__ __forceinline__ void apply_scalar(
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
                if (col < vocab && !((src >> lane) & 1u)) row_ptr[col] = neg;
            }
        }
    }
}

// Entry points. Pointers are kernel parameters (not integers) so that the
// compiler knows they are global memory and emits global (not generic) loads
// and stores. `indices` may be null (every row, num_rows == batch).
extern "C" __global__ void apply_bitmask_vec_b32(
    unsigned char* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words) {
    apply_vector<4>(logits, bitmask, indices, num_rows, batch, vocab, words, 0xFF800000u);
}

extern "C" __global__ void apply_bitmask_vec_b16(
    unsigned char* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg16) {
    apply_vector<2>(logits, bitmask, indices, num_rows, batch, vocab, words,
                    neg16 | (neg16 << 16));
}

extern "C" __global__ void apply_bitmask_scalar_b32(
    u32* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words) {
    apply_scalar<u32>(logits, bitmask, indices, num_rows, batch,
                      vocab, words, 0xFF800000u);
}

extern "C" __global__ void apply_bitmask_scalar_b16(
    u16* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg16) {
    apply_scalar<u16>(logits, bitmask, indices, num_rows, batch,
                      vocab, words, (u16)neg16);
}
