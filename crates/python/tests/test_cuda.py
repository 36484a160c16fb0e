"""apply_token_bitmask_inplace on CUDA tensors: a wheel built with the `cuda` feature masks
torch's GPU logits through tokensieve's CUDA device, bit for bit as torch's own masked fill;
a wheel built without it says so. Needs torch; the GPU tests need a CUDA device too."""

from __future__ import annotations

import numpy as np
import pytest

import tokensieve as ts

torch = pytest.importorskip("torch", reason="torch is not installed")

HAS_GPU = torch.cuda.is_available()
gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
cuda_wheel = pytest.mark.skipif(not ts._CUDA_FEATURE, reason="wheel built without the cuda feature")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def random_bitmask(rows: int, vocab: int, p: float, gen: torch.Generator) -> torch.Tensor:
    """[rows, ceil(vocab/32)] int32 on the CPU, each token allowed with probability p."""
    words = (vocab + 31) // 32
    allowed = torch.rand(rows, words * 32, generator=gen) < p
    allowed[:, vocab:] = False
    packed = np.packbits(allowed.numpy(), axis=1, bitorder="little")
    return torch.from_numpy(packed.view(np.int32).copy())


def forbidden_of(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    bits = np.unpackbits(bitmask.cpu().numpy().view(np.uint8), axis=1, bitorder="little")
    return torch.from_numpy(bits[:, :vocab] == 0)


def logits_with_specials(rows: int, vocab: int, dtype, gen: torch.Generator) -> torch.Tensor:
    """Random logits with NaN and +-inf planted: the device must leave their bits alone."""
    x = torch.randn(rows, vocab, generator=gen).to(dtype)
    flat = x.view(-1)
    n = flat.numel()
    for value, step in ((float("nan"), 97), (float("inf"), 89), (float("-inf"), 83)):
        flat[torch.arange(0, n, step)] = value
    return x


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.cpu().view(BITS[a.dtype]), b.cpu().view(BITS[b.dtype]))


@pytest.mark.skipif(ts._CUDA_FEATURE, reason="the wheel has the cuda feature")
@gpu
def test_cuda_logits_need_the_cuda_wheel():
    logits = torch.zeros(1, 64, device="cuda")
    with pytest.raises(RuntimeError, match="without the `cuda` feature"):
        ts.apply_token_bitmask_inplace(logits, torch.full((1, 2), -1, dtype=torch.int32))


@gpu
@cuda_wheel
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("vocab", [1, 31, 32_001, 128_256, 151_936])
def test_cuda_apply_matches_torch_masked_fill(dtype, vocab):
    gen = torch.Generator().manual_seed(vocab)
    for rows, p in ((1, 0.5), (5, 0.001), (128, 0.05), (16, 0.95)):
        bitmask = random_bitmask(rows, vocab, p, gen)
        bitmask[0] = -1  # one row with every token allowed
        if rows > 2:
            bitmask[1] = 0  # and one with none
        logits = logits_with_specials(rows, vocab, dtype, gen)
        ref = logits.clone().masked_fill_(forbidden_of(bitmask, vocab), float("-inf"))
        got = logits.cuda()
        ts.apply_token_bitmask_inplace(got, bitmask.cuda())
        assert same_bits(got, ref), f"rows {rows}, p {p}"
        # A CPU bitmask is copied to the logits' GPU by the wrapper.
        got = logits.cuda()
        ts.apply_token_bitmask_inplace(got, bitmask)
        assert same_bits(got, ref), f"rows {rows}, p {p}, CPU bitmask"


@gpu
@cuda_wheel
def test_cuda_apply_rows_named_by_indices():
    gen = torch.Generator().manual_seed(3)
    vocab = 50_000
    bitmask = random_bitmask(4, vocab, 0.3, gen)
    logits = logits_with_specials(4, vocab, torch.float32, gen)
    forbidden = forbidden_of(bitmask, vocab)
    ref = logits.clone()
    for r in (2, 0):
        ref[r].masked_fill_(forbidden[r], float("-inf"))
    got = logits.cuda()
    ts.apply_token_bitmask_inplace(got, bitmask.cuda(), indices=[2, 0, 2])
    assert same_bits(got, ref)


@gpu
@cuda_wheel
def test_cuda_apply_masks_of_a_real_matcher(llama3):
    """A batch filled on the CPU by matchers, applied on the GPU: the argmax of every row
    is a token its matcher accepts."""
    compiler = ts.Compiler(llama3)
    matchers = [
        compiler.compile_regex("[0-9]{3}-[a-z]+").matcher(),
        compiler.compile_json_schema('{"type": "object", "properties": {"a": {"type": "integer"}}}').matcher(),
        compiler.compile_choice(["yes", "no", "maybe"]).matcher(),
    ]
    V = llama3.vocab_size
    bitmask = ts.allocate_token_bitmask(len(matchers), V)
    gen = torch.Generator(device="cuda").manual_seed(5)
    for _ in range(6):
        ts.fill_next_token_bitmask_batch(matchers, bitmask)
        logits = torch.randn(len(matchers), V, device="cuda", generator=gen, dtype=torch.bfloat16)
        ref = logits.cpu().masked_fill_(forbidden_of(bitmask, V), float("-inf"))
        ts.apply_token_bitmask_inplace(logits, bitmask)
        assert same_bits(logits, ref)
        for m, token in zip(matchers, logits.argmax(dim=1).tolist()):
            if not m.is_terminated():
                assert m.accept_token(token), token


@gpu
@cuda_wheel
def test_cuda_apply_bad_inputs_raise_one_clear_error():
    vocab = 1000
    bitmask = torch.full((2, (vocab + 31) // 32), -1, dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="requires grad"):
        ts.apply_token_bitmask_inplace(torch.zeros(2, vocab, device="cuda", requires_grad=True), bitmask)
    with pytest.raises(ValueError, match="contiguous"):
        ts.apply_token_bitmask_inplace(torch.zeros(vocab, 2, device="cuda").t(), bitmask)
    with pytest.raises(ValueError, match="bitmask"):
        ts.apply_token_bitmask_inplace(torch.zeros(2, vocab, device="cuda"), bitmask[:, :5])
    with pytest.raises(ValueError):
        ts.apply_token_bitmask_inplace(torch.zeros(2, vocab, device="cuda", dtype=torch.int32), bitmask)
    with pytest.raises(ValueError, match="int32"):
        ts.apply_token_bitmask_inplace(
            torch.zeros(2, vocab, device="cuda"), bitmask.to(torch.int64)
        )


@gpu
@cuda_wheel
def test_cuda_apply_is_ordered_on_the_current_stream():
    """The kernel is queued on torch's current stream, not waited for: work queued on a side
    stream before it (writing the logits) and after it (reading them) sees the right order."""
    gen = torch.Generator().manual_seed(11)
    vocab = 128_256
    bitmask = random_bitmask(64, vocab, 0.05, gen)
    logits = torch.randn(64, vocab, generator=gen)
    ref = logits.clone().masked_fill_(forbidden_of(bitmask, vocab), float("-inf"))
    side = torch.cuda.Stream()
    got = torch.empty(64, vocab, device="cuda")
    dev_mask = bitmask.cuda()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(3):  # queue enough work that the kernel would overtake it if unordered
            got.copy_(logits.cuda(non_blocking=True))
        ts.apply_token_bitmask_inplace(got, dev_mask)
        out = got.clone()
    side.synchronize()
    assert same_bits(out, ref)
