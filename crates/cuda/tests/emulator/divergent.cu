// divergent.cu: kernels with the entry points of apply_token_bitmask.cu that
// each break a warp-synchronous rule, undefined behaviour on a GPU that the
// emulator must report (tests/kernel_emulation.rs). In each, lane 5 of
// every warp misbehaves after a first collective that all lanes reach, so
// the emulator has to catch it mid-kernel.

typedef unsigned int u32;
typedef unsigned short u16;

#define FULL_WARP 0xffffffffu

__device__ __forceinline__ bool odd_one_out() {
    return __all_sync(FULL_WARP, 1) && threadIdx.x == 5u;
}

// Each entry point breaks one of two rules, chosen by `vocab` (64: the
// first, else the second), so that two entry points carry four bugs.

// vocab 64: lane 5 returns while the other lanes wait at a collective.
// Otherwise: a mask that leaves out half the warp, although every lane takes part.
extern "C" __global__ void apply_bitmask_b32(
    u32* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words) {
    if (vocab == 64u) {
        if (odd_one_out()) return;
        logits[threadIdx.x] = __shfl_sync(FULL_WARP, threadIdx.x, 0);
    } else {
        logits[threadIdx.x] = __shfl_sync(0x0000ffffu, threadIdx.x, 0);
    }
}

// vocab 64: lane 5 reaches a different intrinsic than the others.
// Otherwise: the same intrinsic, but lane 5 calls it from another line.
extern "C" __global__ void apply_bitmask_b16(
    u16* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg16) {
    u32 v;
    if (vocab == 64u) {
        v = odd_one_out() ? (u32)__all_sync(FULL_WARP, 1) : __shfl_sync(FULL_WARP, 7u, 0);
    } else if (odd_one_out()) {
        v = __shfl_sync(FULL_WARP, 1u, 0);
    } else {
        v = __shfl_sync(FULL_WARP, 2u, 0);
    }
    logits[threadIdx.x] = (u16)v;
}

// Not exercised: present so that the driver, which launches every entry
// point by name, links.
extern "C" __global__ void apply_bitmask_b32_sectors(
    u32* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words) {
    logits[threadIdx.x] = __shfl_sync(FULL_WARP, words, 0);
}

extern "C" __global__ void apply_bitmask_b16_pairs(
    u16* logits, const u32* bitmask, const u32* indices,
    u32 num_rows, u32 batch, u32 vocab, u32 words, u32 neg16) {
    logits[threadIdx.x] = (u16)__shfl_sync(FULL_WARP, neg16, 0);
}
