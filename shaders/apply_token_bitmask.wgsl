// apply_token_bitmask.wgsl: masks `[batch, vocab]` logits in place with a
// `[batch, words]` token bitmask (bit j%32 of word j/32 set = token j allowed;
// row r of the logits is masked by row r of the bitmask). With indices, only
// the listed rows are masked (any order, duplicates harmless; rows out of
// range are ignored). Used by crates/wgpu.
//
// WGSL has no 16-bit storage type to rely on, so logits are `array<u32>` for
// every dtype and masking only ever stores the -inf bit pattern with integer
// operations: f32 0xFF800000, f16 0xFC00, bf16 0xFF80. Allowed logits (NaN and
// infinities included) are never written, so results match the CPU reference
// bit for bit.
//
// Dispatch: workgroup (x, y, z) handles 4 * 256 consecutive 32-bit words of
// the logits of row slot `y + z * num_workgroups.y` (slot = position in
// indices, or the row itself), 4 per invocation (see PER_INVOCATION).
// Consecutive invocations touch consecutive words, so stores coalesce; the 32
// invocations sharing a bitmask word read it from the same address (one
// broadcast read per 32 logits). A logit whose bit is set is never written; a
// 16-bit one is read only when the other half of its word is masked.
//
// 16-bit logits: word q of the buffer holds logits 2q (low half) and 2q+1
// (high half). When vocab is odd, a row starts in the middle of a word and
// that word is shared with the previous row. Exactly one invocation updates
// each word, computing both halves (each with its own row's bitmask row): the
// invocation of the row holding the low half, unless that row is not masked
// in this call, in which case the row holding the high half. Whether a row is
// masked comes from `row_flags`, filled by `mark_rows` just before (needed
// only with indices and an odd vocab). So no two invocations race on a word,
// except duplicated indices, which compute the same value.

struct Params {
    batch: u32,
    vocab: u32,
    // bitmask words per row (>= ceil(vocab / 32)).
    words: u32,
    // Row slots: the number of indices, or `batch` without indices.
    num_rows: u32,
    has_indices: u32,
    // 16-bit -inf pattern (0xFC00 or 0xFF80); unused for f32.
    neg16: u32,
    _pad0: u32,
    _pad1: u32,
}

const NEG_INF_F32: u32 = 0xFF800000u;

@group(0) @binding(0) var<storage, read_write> logits: array<u32>;
@group(0) @binding(1) var<storage, read> bitmask: array<u32>;
@group(0) @binding(2) var<storage, read> indices: array<u32>;
@group(0) @binding(3) var<storage, read_write> row_flags: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

// The row of slot `slot`, or `batch` (out of range) when there is none.
fn slot_row(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    let slot = wid.y + wid.z * nwg.y;
    if (slot >= params.num_rows) {
        return params.batch;
    }
    if (params.has_indices != 0u) {
        return indices[slot];
    }
    return slot;
}

fn row_selected(row: u32) -> bool {
    if (row >= params.batch) {
        return false;
    }
    return params.has_indices == 0u || row_flags[row] != 0u;
}

// Whether logit `elem` (flat index) of row `row` is allowed.
fn allowed(row: u32, elem: u32) -> bool {
    let col = elem - row * params.vocab;
    let word = bitmask[row * params.words + (col >> 5u)];
    return ((word >> (col & 31u)) & 1u) != 0u;
}

// Sets row_flags[r] = 1 for every listed row (flags cleared beforehand).
@compute @workgroup_size(64)
fn mark_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= params.num_rows) {
        return;
    }
    let row = indices[gid.x];
    if (row < params.batch) {
        row_flags[row] = 1u;
    }
}

// Each workgroup covers PER_INVOCATION * 256 consecutive elements (f32
// logits, or 32-bit words of 16-bit logits) of one row: invocation i takes
// elements i, i + 256, ... of that span, so every step's stores coalesce.
const PER_INVOCATION: u32 = 4u;
const WORKGROUP: u32 = 256u;

@compute @workgroup_size(256)
fn apply_f32(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let row = slot_row(wid, nwg);
    if (row >= params.batch) {
        return;
    }
    let first = row * params.vocab;
    let mask_row = row * params.words;
    var col = wid.x * (WORKGROUP * PER_INVOCATION) + lid.x;
    for (var k = 0u; k < PER_INVOCATION; k++) {
        if (col < params.vocab) {
            let word = bitmask[mask_row + (col >> 5u)];
            if (((word >> (col & 31u)) & 1u) == 0u) {
                logits[first + col] = NEG_INF_F32;
            }
        }
        col += WORKGROUP;
    }
}

@compute @workgroup_size(256)
fn apply_16(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let row = slot_row(wid, nwg);
    if (row >= params.batch) {
        return;
    }
    var x = wid.x * (WORKGROUP * PER_INVOCATION) + lid.x;
    if ((params.vocab & 1u) == 0u) {
        // Even vocab: word q of the row holds logits 2q and 2q + 1 of this
        // row alone, two adjacent bits of one bitmask word.
        let half = params.vocab / 2u;
        let first = row * half;
        let mask_row = row * params.words;
        for (var k = 0u; k < PER_INVOCATION; k++) {
            if (x < half) {
                let col = 2u * x;
                let bits = (bitmask[mask_row + (col >> 5u)] >> (col & 31u)) & 3u;
                store_pair(first + x, (bits & 1u) == 0u, (bits & 2u) == 0u);
            }
            x += WORKGROUP;
        }
        return;
    }
    for (var k = 0u; k < PER_INVOCATION; k++) {
        apply_16_odd(row, x);
        x += WORKGROUP;
    }
}

// Stores -inf into the masked halves of word q (both: no read).
fn store_pair(q: u32, mask_lo: bool, mask_hi: bool) {
    let neg = params.neg16;
    if (mask_lo && mask_hi) {
        logits[q] = neg | (neg << 16u);
    } else if (mask_lo) {
        logits[q] = (logits[q] & 0xFFFF0000u) | neg;
    } else if (mask_hi) {
        logits[q] = (logits[q] & 0x0000FFFFu) | (neg << 16u);
    }
}

// Odd vocab: word x of the words touching `row` (see the header for who
// owns a word shared by two rows).
fn apply_16_odd(row: u32, x: u32) {
    let first = row * params.vocab;
    // Words holding any logit of this row: [first / 2, (first + vocab - 1) / 2].
    let q = first / 2u + x;
    if (q > (first + params.vocab - 1u) / 2u) {
        return;
    }
    let lo = 2u * q;
    let hi = lo + 1u;
    let lo_row = lo / params.vocab;
    let hi_row = hi / params.vocab;
    // The low half belongs to the previous row: that row's invocation owns
    // the word if it is masked in this call.
    if (lo_row != row && row_selected(lo_row)) {
        return;
    }
    // Masked halves. The low half is ours only when lo_row == row; a
    // previous row that is not selected stays untouched.
    let mask_lo = lo_row == row && !allowed(row, lo);
    // The high half is ours, or the next row's (odd vocab) when that row is
    // masked in this call too.
    let mask_hi = (hi_row == row || row_selected(hi_row)) && !allowed(hi_row, hi);
    store_pair(q, mask_lo, mask_hi);
}
