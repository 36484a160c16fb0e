"""PyTorch baseline for benches/apply.rs: masked fill of logits on a CUDA GPU.

Times, with CUDA events, on the shapes of benches/apply.rs' GPU benches
(batch {1, 16, 128, 512, 4096} x vocab {32000, 128256, 151936}, f32 and
bf16):

- `fill~`: `logits.masked_fill_(~allowed, -inf)`, the expanded bool mask of
  allowed tokens precomputed (what engines without a bitmask kernel do);
- `fill`:  `logits.masked_fill_(forbidden, -inf)`, the negation precomputed
  too (the masked fill alone);
- `xgr`: with `--xgrammar-wheel`, XGrammar's own apply kernel for CUDA
  tensors (`apply_token_bitmask_inplace_triton`, the Triton kernel XGrammar
  uses on CUDA) on the packed int32 bitmask. Only that module is read out of
  the wheel: it needs torch and triton alone, so XGrammar's compiled engine
  and its other dependencies need not install. Its output is checked against
  the masked fill's on every shape.

Masks follow the bench: each 32-bit word all ones with probability 1/2,
random bits otherwise. Throughput uses the bench's byte count, logit bytes
read + written + packed bitmask bytes read, so GB/s compare directly with
`apply/cuda/...`. When one set is small, several sets (up to 64, ~256 MiB)
are rotated so the L2 cache does not serve repeated launches.

Also measures the device-to-device copy bandwidth (bytes read + written), the
ceiling a memory-bound kernel can approach.

    python3 benches/torch_masked_fill.py [--json out.jsonl] [--xgrammar-wheel xgrammar-*.whl]
"""

import argparse
import json
import math
import statistics

import torch

BATCHES = [1, 16, 128, 512, 4096]
VOCABS = [32000, 128256, 151936]
ROTATE_TARGET_BYTES = 256 << 20
MAX_SETS = 64


def effective_bytes(elem, batch, vocab):
    return 2 * batch * vocab * elem + batch * math.ceil(vocab / 32) * 4


def sets_for(nbytes):
    return max(1, min(MAX_SETS, math.ceil(ROTATE_TARGET_BYTES / nbytes)))


def allowed_mask(batch, vocab, gen):
    """(allowed as bool [batch, vocab], the same as packed int32 [batch, words])."""
    words = math.ceil(vocab / 32)
    full = torch.rand(batch, words, generator=gen, device="cuda") < 0.5
    rnd = torch.randint(0, 2**32, (batch, words), generator=gen, device="cuda", dtype=torch.int64)
    packed = torch.where(full, torch.full_like(rnd, 2**32 - 1), rnd)
    shifts = torch.arange(32, device="cuda", dtype=torch.int64)
    bits = (packed.unsqueeze(-1) >> shifts) & 1
    allowed = bits.reshape(batch, words * 32)[:, :vocab].bool().contiguous()
    del bits
    packed32 = (packed - (packed >= 2**31).long() * 2**32).to(torch.int32)
    return allowed, packed32


def load_xgrammar_apply(wheel):
    """XGrammar's apply function for CUDA tensors and the wheel's version."""
    import importlib.util
    import tempfile
    import zipfile

    name = "xgrammar/kernels/apply_token_bitmask_inplace_triton.py"
    with zipfile.ZipFile(wheel) as z:
        path = z.extract(name, tempfile.mkdtemp())
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        version = next(l.split(":", 1)[1].strip() for l in z.read(meta).decode().splitlines()
                       if l.startswith("Version:"))
    spec = importlib.util.spec_from_file_location("xgrammar_apply_triton", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.apply_token_bitmask_inplace_triton, version


def time_ms(fn, sets, reps=20, inner=None):
    """Median milliseconds per call, CUDA events around `inner` calls."""
    for i in range(3 * sets):
        fn(i % sets)
    torch.cuda.synchronize()
    if inner is None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(0)
        end.record()
        torch.cuda.synchronize()
        one = max(start.elapsed_time(end), 1e-3)
        inner = max(sets, min(2000, int(5.0 / one)))
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(inner):
            fn(i % sets)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def copy_bandwidth():
    n = 2 << 30  # 2 GiB
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = time_ms(lambda _: dst.copy_(src), 1, reps=10, inner=10)
    return 2 * n / (ms * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write one JSON record per measurement here")
    ap.add_argument("--xgrammar-wheel", help="also time XGrammar's apply kernel from this wheel")
    args = ap.parse_args()
    xgr = None
    if args.xgrammar_wheel:
        xgr, xgr_version = load_xgrammar_apply(args.xgrammar_wheel)
        print(f"xgr: XGrammar {xgr_version} apply_token_bitmask_inplace_triton")
    records = []
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, torch {torch.__version__}")
    bw = copy_bandwidth()
    print(f"device-to-device copy: {bw:.0f} GB/s (bytes read + written)")
    records.append({"op": "copy", "gbps": bw, "device": dev.name})
    gen = torch.Generator(device="cuda").manual_seed(7)
    print(f"{'shape':>16} {'dtype':>5} {'fill~ GB/s':>11} {'fill GB/s':>10} {'xgr GB/s':>9}"
          f" {'fill~ us':>9} {'fill us':>8} {'xgr us':>8} {'xgr ok':>6}")
    for dtype, name in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
        elem = torch.finfo(dtype).bits // 8
        for vocab in VOCABS:
            for batch in BATCHES:
                nbytes = effective_bytes(elem, batch, vocab)
                sets = sets_for(nbytes)
                logits = [torch.randn(batch, vocab, device="cuda", dtype=dtype, generator=gen) for _ in range(sets)]
                masks = [allowed_mask(batch, vocab, gen) for _ in range(sets)]
                allowed = [a for a, _ in masks]
                packed = [p for _, p in masks]
                forbidden = [~a for a in allowed]
                ninf = float("-inf")
                timed = [("masked_fill_not", lambda k: logits[k].masked_fill_(~allowed[k], ninf)),
                         ("masked_fill", lambda k: logits[k].masked_fill_(forbidden[k], ninf))]
                ok = "-"
                if xgr is not None:
                    timed.append(("xgrammar_triton", lambda k: xgr(logits[k], packed[k])))
                    mine, ref = logits[0].clone(), logits[0].clone()
                    xgr(mine, packed[0])
                    ref.masked_fill_(forbidden[0], ninf)
                    ok = "yes" if torch.equal(mine, ref) else "NO"
                    del mine, ref
                row = {}
                for op, fn in timed:
                    t = time_ms(fn, sets)
                    g = nbytes / (t * 1e-3) / 1e9
                    row[op] = (t, g)
                    records.append({"op": op, "dtype": name, "batch": batch, "vocab": vocab,
                                    "us": t * 1e3, "gbps": g, "bytes": nbytes})
                (t_not, g_not), (t_fill, g_fill) = row["masked_fill_not"], row["masked_fill"]
                t_x, g_x = row.get("xgrammar_triton", (math.nan, math.nan))
                shape = f"b{batch}_v{vocab}"
                print(f"{shape:>16} {name:>5} {g_not:11.0f} {g_fill:10.0f} {g_x:9.0f}"
                      f" {t_not * 1e3:9.1f} {t_fill * 1e3:8.1f} {t_x * 1e3:8.1f} {ok:>6}", flush=True)
                del logits, allowed, forbidden, packed, masks
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
