"""tokensieve's CUDA apply through its Python wheel, beside PyTorch's and XGrammar's, from Python.

What a serving loop pays per call to mask a batch of GPU logits with a packed int32
bitmask already on the GPU: wall-clock microseconds per call (perf_counter over
back-to-back calls, the GPU synchronised after the last), so host costs count, and
GPU time per call between CUDA events.

- `tokensieve`: `tokensieve.apply_token_bitmask_inplace` (a wheel built with
  `--features cuda`), which queues the kernel on torch's current stream and
  does not wait for it, as the others do;
- `torch_fill`: `logits.masked_fill_(forbidden, -inf)`, the bool mask precomputed;
- `torch_unpack`: the bool mask unpacked from the bitmask by torch ops in each call,
  then the masked fill (an engine holding a bitmask and no kernel for it);
- `xgrammar`: with --xgrammar-wheel, XGrammar's Triton apply kernel (what its
  `apply_token_bitmask_inplace` uses on CUDA), read out of the wheel.

Every output is checked equal to `torch_fill`'s. Masks: benches/apply.rs'
structure (half the words all ones, half random), or rows recorded from real
walks (--real FILE.bin.xz, examples/record_masks.rs) at their vocabulary.

    python3 benches/python_cuda_apply.py [--real benches/fixtures/masks/masks-llama3.bin.xz] [--xgrammar-wheel W] [--json F]
"""

import argparse
import lzma
import json
import math
import statistics
import time

import numpy as np
import torch

import tokensieve as ts
from torch_masked_fill import load_xgrammar_apply  # benches/, beside this script


def structured(rows, vocab, gen):
    words = math.ceil(vocab / 32)
    full = torch.rand(rows, words, generator=gen) < 0.5
    rnd = torch.randint(-(2**31), 2**31, (rows, words), generator=gen, dtype=torch.int64).to(torch.int32)
    return torch.where(full, torch.full_like(rnd, -1), rnd)


def recorded(path, rows, seed):
    with lzma.open(path) as f:
        data = f.read()
    assert data[:8] == b"TSMASKS1"
    vocab, words, n = np.frombuffer(data[8:20], dtype="<u4")
    body = np.frombuffer(data[20:], dtype="<u4").reshape(n, words)
    pick = np.random.default_rng(seed).integers(0, n, rows)
    return int(vocab), torch.from_numpy(body[pick].view(np.int32).copy())


def forbidden_of(bitmask, vocab):
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1
    return (bits.reshape(bitmask.shape[0], -1)[:, :vocab] == 0).contiguous()


def per_call(fn, reps=7, calls=200):
    """(median wall us per call, median GPU us per call) over `reps` runs of `calls` calls."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    walls, gpus = [], []
    for _ in range(reps):
        a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        a.record()
        for _ in range(calls):
            fn()
        e.record()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t) / calls * 1e6)
        gpus.append(a.elapsed_time(e) / calls * 1e3)
    return statistics.median(walls), statistics.median(gpus)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", action="append", default=[], help="recorded masks (.bin.xz)")
    ap.add_argument("--xgrammar-wheel")
    ap.add_argument("--json")
    args = ap.parse_args()
    if not ts._CUDA_FEATURE:
        raise SystemExit("this tokensieve wheel was built without --features cuda")
    xgr = load_xgrammar_apply(args.xgrammar_wheel)[0] if args.xgrammar_wheel else None
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}")
    gen = torch.Generator().manual_seed(7)
    masks = [("structured", 128_256, None)] + [(p.rsplit("/", 1)[-1], None, p) for p in args.real]
    recs = []
    print(f"{'mask':>24} {'dtype':>5} {'batch':>5}  wall us per call (GPU us per call)")
    for label, vocab, path in masks:
        for dtype, dname in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            for batch in (1, 16, 128):
                if path:
                    vocab, bm = recorded(path, batch, batch)
                else:
                    bm = structured(batch, vocab, gen)
                bm = bm.cuda()
                logits = torch.randn(batch, vocab, device="cuda", dtype=dtype)
                forbidden = forbidden_of(bm, vocab)
                ref = logits.clone().masked_fill_(forbidden, float("-inf"))
                ops = {
                    "tokensieve": lambda: ts.apply_token_bitmask_inplace(logits, bm),
                    "torch_fill": lambda: logits.masked_fill_(forbidden, float("-inf")),
                    "torch_unpack": lambda: logits.masked_fill_(forbidden_of(bm, vocab), float("-inf")),
                }
                if xgr is not None:
                    ops["xgrammar"] = lambda: xgr(logits, bm)
                cells = []
                for op, fn in ops.items():
                    keep = logits.clone()
                    fn()
                    ok = torch.equal(logits, ref)
                    logits.copy_(keep)
                    wall, gpu = per_call(fn)
                    cells.append(f"{op}={wall:.1f} ({gpu:.1f})" + ("" if ok else " MISMATCH"))
                    recs.append({"op": op, "mask": label, "dtype": dname, "batch": batch, "vocab": vocab,
                                 "wall_us": wall, "gpu_us": gpu, "ok": ok})
                print(f"{label:>24} {dname:>5} {batch:>5}  " + "  ".join(cells), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
