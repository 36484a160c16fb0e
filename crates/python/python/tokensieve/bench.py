"""MaskBench through Python: tokensieve beside llguidance, outlines-core and XGrammar (when installed), same tokens, same process.

    python -m tokensieve.bench --tokenizer PATH/tokenizer.json [--sample N] FILE_OR_DIR...

For each MaskBench file (a JSON Schema plus valid and invalid instances), in
one worker process: every engine compiles the schema (TTFM, from the schema
text to a matcher that can compute its first mask), then walks every instance
token by token (the text `json.dumps(data, ensure_ascii=False)`, tokens from
the tokenizer's own encoding without special tokens, the same list for every
engine): start the clock, compute the full mask, check the token's bit, accept
it, stop the clock (TBM). That is the protocol of ../shared/bench/CONTRACT.md.
A compile that runs past --timeout seconds kills the worker; that engine is
recorded as timed out on that file and the worker restarts on the next one.

Then, for tokensieve only, batch fills: matchers of the sampled schemas, each
at its own position inside a valid instance, filled `B` rows per call with
`fill_next_token_bitmask_batch` (GIL released, rows in parallel) against the
same rows filled one call per row; every round all matchers step one token
further (untimed), so no mask is a repeat. Reported as rows per second (and
CPU time per row); --batch-only runs these alone, --batch-cold with fresh
compiles (masks that need parser work), --batch-threads with that many
threads per batch, --batch-spin-us with pool threads that stay awake that
long after a batch (0: they sleep at once, as between the steps of a model
slower than the spin).

With --rust-cli PATH (the `tokensieve` binary), `tokensieve bench maskbench`
runs on the same files and its TTFM/TBM are shown in the same table, so the
cost Python adds per token can be read off directly.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import select
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

import tokensieve as ts

ENGINES = ["tokensieve", "llguidance", "outlines", "xgrammar"]


# ------------------------------------------------------------------ files


def split_of(path: str) -> str:
    base = os.path.basename(path)
    if "---" in base:
        return base.split("---", 1)[0]
    return re.sub(r"_\d+$", "", re.sub(r"\.json$", "", base))


def collect(paths: List[str]) -> List[str]:
    out: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            out += [os.path.join(p, f) for f in sorted(os.listdir(p)) if f.endswith(".json")]
        else:
            out.append(p)
    return out


def sample(files: List[str], n: int, seed: int) -> List[str]:
    """n files, proportional per split, chosen by a seeded RNG (reproducible)."""
    if n <= 0 or n >= len(files):
        return files
    rng = random.Random(seed)
    groups: Dict[str, List[str]] = {}
    for f in sorted(files):
        groups.setdefault(split_of(f), []).append(f)
    chosen: List[str] = []
    quotas = {g: max(1, round(n * len(fs) / len(files))) for g, fs in groups.items()}
    for g, fs in groups.items():
        chosen += rng.sample(fs, min(len(fs), quotas[g]))
    rng.shuffle(chosen)
    return sorted(chosen[:n])


# --------------------------------------------------------------- engines


class Tokensieve:
    name = "tokensieve"

    def __init__(self, info: ts.TokenizerInfo, backend: str):
        self.info = info
        # No cache: every schema is compiled from scratch, as the peers do.
        self.compiler = ts.Compiler(info, backend, cache_size=0)
        self.bitmask = ts.allocate_token_bitmask(1, info.vocab_size, kind="numpy")
        self.words = memoryview(self.bitmask.view("uint32")).cast("B").cast("I")
        self.grammar = None

    def version(self) -> str:
        return ts.__version__

    def compile(self, schema: str) -> None:
        # MaskBench defaults: any whitespace, extra properties unless forbidden.
        self.grammar = self.compiler.compile_json_schema(schema, strict=False)
        self.m = self.grammar.matcher()

    def begin(self) -> Callable[[int], bool]:
        m = self.m = self.grammar.matcher()
        fill, accept, bm, w = m.fill_next_token_bitmask, m.accept_token, self.bitmask, self.words

        def step(t: int) -> bool:
            fill(bm)
            if (w[t >> 5] >> (t & 31)) & 1:
                if accept(t):
                    return True
                raise RuntimeError("token in the mask but refused")
            return False

        return step

    def end_ok(self) -> bool:
        return self.m.is_accepting()


class Llguidance:
    name = "llguidance"

    def __init__(self, info: ts.TokenizerInfo, tokenizer_json: str):
        import llguidance
        import numpy as np

        self.llg = llguidance
        self.tok = llguidance.LLTokenizer(tokenizer_json, eos_token=info.stop_token_ids)
        self.mask = np.zeros((info.vocab_size + 31) // 32, np.uint32)
        self.ptr, self.nbytes = self.mask.ctypes.data, self.mask.nbytes
        self.words = memoryview(self.mask)
        self.eos = info.stop_token_ids

    def version(self) -> str:
        from importlib.metadata import version

        return version("llguidance")

    def compile(self, schema: str) -> None:
        m = self.llg.LLMatcher(self.tok, '{"grammars":[{"json_schema":' + schema + "}]}", log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        self.m0 = m

    def begin(self):
        m = self.m = self.m0.deep_copy()
        compute, consume, ptr, nb, w = m.unsafe_compute_mask_ptr, m.consume_token, self.ptr, self.nbytes, self.words

        def step(t: int) -> bool:
            compute(ptr, nb)
            if (w[t >> 5] >> (t & 31)) & 1:
                if consume(t):
                    return True
                raise RuntimeError(str(m.get_error()))
            return False

        return step

    def end_ok(self) -> bool:
        self.m.unsafe_compute_mask_ptr(self.ptr, self.nbytes)
        return any((self.words[e >> 5] >> (e & 31)) & 1 for e in self.eos)


class Outlines:
    name = "outlines"

    def __init__(self, info: ts.TokenizerInfo):
        import numpy as np
        import outlines_core as oc
        from outlines_core.json_schema import build_regex_from_schema

        self.oc, self.build = oc, build_regex_from_schema
        hidden = set(info.special_token_ids) | set(info.stop_token_ids)
        by_bytes: Dict[bytes, List[int]] = {}
        for i in range(info.tokenizer_size):
            b = info.token_bytes(i)
            if i not in hidden and b:
                by_bytes.setdefault(b, []).append(i)
        self.vocab = oc.Vocabulary(info.stop_token_ids[0], by_bytes)
        self.mask = np.zeros((info.vocab_size + 31) // 32, np.uint32)
        self.ptr, self.n = self.mask.ctypes.data, self.mask.size
        self.words = memoryview(self.mask)

    def version(self) -> str:
        from importlib.metadata import version

        return version("outlines_core")

    def compile(self, schema: str) -> None:
        self.index = self.oc.Index(self.build(schema), self.vocab)

    def begin(self):
        g = self.g = self.oc.Guide(self.index)
        write, adv, ptr, n, w = g.write_mask_into, g.advance, self.ptr, self.n, self.words

        def step(t: int) -> bool:
            write(ptr, n, 4)
            if (w[t >> 5] >> (t & 31)) & 1:
                adv(t, False)
                return True
            return False

        return step

    def end_ok(self) -> bool:
        return bool(self.g.is_finished())


class Xgrammar:
    name = "xgrammar"

    def __init__(self, info: ts.TokenizerInfo, tokenizer_json: str):
        import xgrammar as xgr

        self.xgr = xgr
        meta = xgr.TokenizerInfo._detect_metadata_from_hf(tokenizer_json)
        vocab = json.loads(tokenizer_json)
        strings = [""] * info.vocab_size
        for s, i in vocab["model"]["vocab"].items():
            strings[i] = s
        for a in vocab.get("added_tokens", []):
            strings[a["id"]] = a["content"]
        self.info = xgr.TokenizerInfo(
            strings, vocab_type=meta["vocab_type"], vocab_size=info.vocab_size,
            stop_token_ids=info.stop_token_ids, add_prefix_space=meta["add_prefix_space"],
        )
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
        self.words = memoryview(self.bitmask.numpy().reshape(-1).view("uint32"))

    def version(self) -> str:
        from importlib.metadata import version

        return version("xgrammar")

    def compile(self, schema: str) -> None:
        self.cg = self.compiler.compile_json_schema(schema, any_whitespace=True, strict_mode=False)

    def begin(self):
        m = self.m = self.xgr.GrammarMatcher(self.cg)
        fill, accept, bm, w = m.fill_next_token_bitmask, m.accept_token, self.bitmask, self.words

        def step(t: int) -> bool:
            fill(bm)
            if (w[t >> 5] >> (t & 31)) & 1:
                if accept(t):
                    return True
                raise RuntimeError("token in the mask but refused")
            return False

        return step

    def end_ok(self) -> bool:
        return self.m.is_completed()


def make_engine(name: str, info: ts.TokenizerInfo, tokenizer_json: str, backend: str):
    if name == "tokensieve":
        return Tokensieve(info, backend)
    if name == "llguidance":
        return Llguidance(info, tokenizer_json)
    if name == "outlines":
        return Outlines(info)
    if name == "xgrammar":
        return Xgrammar(info, tokenizer_json)
    raise ValueError(f"unknown engine {name}")


def installed(name: str) -> bool:
    import importlib.util

    module = {"tokensieve": "tokensieve", "llguidance": "llguidance",
              "outlines": "outlines_core", "xgrammar": "xgrammar"}[name]
    return importlib.util.find_spec(module) is not None


# ------------------------------------------------------------------ worker


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def run_file(eng, schema: str, tests: List[dict]) -> dict:
    pc = time.perf_counter_ns
    rec: Dict[str, Any] = {"compile_us": None, "compile_error": None, "tests": []}
    gc.collect()
    gc.disable()
    try:
        t0 = pc()
        try:
            eng.compile(schema)
        except Exception as e:  # noqa: BLE001 - any engine failure is a compile error
            rec["compile_us"] = (pc() - t0) // 1000
            rec["compile_error"] = f"{type(e).__name__}: {e}"[:500]
            return rec
        rec["compile_us"] = (pc() - t0) // 1000
        for test in tests:
            step = eng.begin()
            mask_ns: List[int] = []
            accepted, end_ok = True, None
            try:
                for t in test["tokens"]:
                    a = pc()
                    ok = step(t)
                    mask_ns.append(pc() - a)
                    if not ok:
                        accepted = False
                        break
            except Exception:  # noqa: BLE001
                accepted = False
            if accepted:
                end_ok = bool(eng.end_ok())
            rec["tests"].append({"valid": test["valid"], "accepted": accepted, "end_ok": end_ok, "mask_ns": mask_ns})
    finally:
        gc.enable()
    return rec


def worker(args) -> None:
    info = ts.TokenizerInfo.from_tokenizer_json(args.tokenizer)
    text = open(args.tokenizer, encoding="utf-8").read()
    engines = [make_engine(n, info, text, args.backend) for n in args.engines.split(",")]
    skip = set(args.skip)
    emit({"event": "ready", "versions": {e.name: e.version() for e in engines}})
    for path in args.files:
        doc = json.load(open(path, encoding="utf-8"))
        schema = json.dumps(doc["schema"], ensure_ascii=False)
        tests = []
        for t in doc.get("tests", []):
            try:
                tokens = info.encode(json.dumps(t["data"], ensure_ascii=False))
            except ValueError:
                continue
            tests.append({"valid": t["valid"], "tokens": tokens})
        for eng in engines:
            if f"{path}|{eng.name}" in skip:
                continue
            emit({"event": "start", "file": path, "engine": eng.name})
            rec = run_file(eng, schema, tests)
            rec.update({"file": path, "engine": eng.name})
            emit(rec)
    emit({"event": "done"})


def drive(args, files: List[str], engines: List[str]) -> List[dict]:
    """Runs the worker, restarting it past any compile that exceeds the timeout."""
    records: List[dict] = []
    done: set = set()  # "file|engine" recorded (or timed out)
    while True:
        remaining = [f for f in files if any(f"{f}|{e}" not in done for e in engines)]
        if not remaining:
            break
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"files": remaining, "skip": sorted(done)}, f)
            spec = f.name
        cmd = [sys.executable, "-m", "tokensieve.bench", "--worker", spec, "--tokenizer", args.tokenizer,
               "--backend", args.backend, "--engines", ",".join(engines)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
        current: Optional[dict] = None
        started = time.monotonic()
        try:
            while True:
                ready, _, _ = select.select([proc.stdout], [], [], 1.0)
                if not ready:
                    if current and time.monotonic() - started > args.timeout:
                        records.append({"file": current["file"], "engine": current["engine"], "timeout": True,
                                        "compile_us": None, "compile_error": "timeout", "tests": []})
                        done.add(f"{current['file']}|{current['engine']}")
                        print(f"bench: {current['engine']} timed out on {os.path.basename(current['file'])}",
                              file=sys.stderr)
                        break
                    if proc.poll() is not None:
                        raise RuntimeError(f"bench worker exited with {proc.returncode}")
                    continue
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"bench worker exited with {proc.wait()}")
                ev = json.loads(line)
                if ev.get("event") == "ready":
                    args.versions = ev["versions"]
                elif ev.get("event") == "start":
                    current, started = ev, time.monotonic()
                elif ev.get("event") == "done":
                    break
                else:
                    records.append(ev)
                    done.add(f"{ev['file']}|{ev['engine']}")
                    current = None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.unlink(spec)
    return records


# ----------------------------------------------------------------- figures


def pct(xs: List[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))
    return xs[k]


def summarize(records: List[dict], engine: str) -> Dict[str, Any]:
    rs = [r for r in records if r["engine"] == engine]
    compiled = [r for r in rs if r["compile_error"] is None]
    ttfm = [r["compile_us"] for r in compiled]
    tbm = [ns / 1000 for r in compiled for t in r["tests"] for ns in t["mask_ns"]]

    def passes(r):
        if r["compile_error"] is not None:
            return False
        return all((t["accepted"] and t["end_ok"]) == t["valid"] for t in r["tests"])

    return {
        "files": len(rs), "compiled": len(compiled), "passing": sum(passes(r) for r in rs),
        "timeouts": sum(1 for r in rs if r.get("timeout")),
        "invalid_accepted": sum(1 for r in compiled for t in r["tests"] if not t["valid"] and t["accepted"] and t["end_ok"]),
        "ttfm_p50_us": pct(ttfm, 50), "ttfm_p99_us": pct(ttfm, 99),
        "tbm_p50_us": pct(tbm, 50), "tbm_p99_us": pct(tbm, 99), "tbm_max_us": max(tbm) if tbm else float("nan"),
        "tokens": len(tbm),
    }


def rust_cli(args, files: List[str]) -> Optional[Dict[str, Any]]:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rust.jsonl")
        cmd = [args.rust_cli, "bench", "maskbench", "--backend", args.backend, "--tokenizer", args.tokenizer,
               "--out", out] + files
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(out):
            print(f"bench: {' '.join(cmd[:4])} failed: {r.stderr[-500:]}", file=sys.stderr)
            return None
        recs = [json.loads(line) for line in open(out)]
    for rec in recs:
        rec["engine"] = "rust"
        for t in rec["tests"]:
            t.setdefault("end_ok", None)
    return summarize(recs, "rust")


def batch_figures(args, files: List[str]) -> List[Dict[str, Any]]:
    """Rows/s of batch fills against the same rows one call each (tokensieve).

    Each repeat runs the two ways back to back (in alternating order), so both
    see the same load on a shared machine; the speed-up is the median of the
    repeats' ratios, the rows/s the best of each. CPU µs per row is the
    process's CPU time (every thread) over the timed calls: what the rows
    cost whatever share of the cores the machine gave. `--batch-cold`: every
    run compiles the schemas afresh (a new Compiler, so new caches), so each
    mask needs parser work rather than a cached row."""
    info = ts.TokenizerInfo.from_tokenizer_json(args.tokenizer)

    def new_compiler() -> ts.Compiler:
        return ts.Compiler(info, args.backend, cache_size=0, threads=args.batch_threads,
                           spin_us=args.batch_spin_us)

    compiler = new_compiler()
    rng = random.Random(args.seed)
    rounds = args.batch_rounds
    # (schema, tokens, start) for positions with `rounds` tokens left.
    pool = []
    grammars: Dict[str, Any] = {}
    for path in files:
        doc = json.load(open(path, encoding="utf-8"))
        schema = json.dumps(doc["schema"], ensure_ascii=False)
        try:
            g = compiler.compile_json_schema(schema, strict=False)
        except ts.GrammarError:
            continue
        grammars[schema] = g
        for t in doc.get("tests", []):
            if not t["valid"]:
                continue
            try:
                toks = info.encode(json.dumps(t["data"], ensure_ascii=False))
            except ValueError:
                continue
            if len(toks) > rounds:
                m = g.matcher()
                if m.validate_tokens(toks) == len(toks):
                    pool.append((schema, toks, rng.randrange(0, len(toks) - rounds)))
    if not pool:
        return []
    out = []
    for B in args.batch_sizes:
        picks = [pool[rng.randrange(len(pool))] for _ in range(B)]
        bm = ts.allocate_token_bitmask(B, info.vocab_size, kind="numpy")

        def positioned():
            if args.batch_cold:
                c = new_compiler()
                gs = {sc: c.compile_json_schema(sc, strict=False) for sc in {p[0] for p in picks}}
            else:
                gs = grammars
            ms = []
            for schema, toks, s in picks:
                m = gs[schema].matcher()
                m.accept_tokens(toks[:s])
                ms.append(m)
            return ms

        def run(batched: bool) -> tuple:
            ms = positioned()
            wall = cpu = 0
            for r in range(rounds):
                c0 = time.process_time_ns()
                a = time.perf_counter_ns()
                if batched:
                    ts.fill_next_token_bitmask_batch(ms, bm)
                else:
                    for i, m in enumerate(ms):
                        m.fill_next_token_bitmask(bm, i)
                wall += time.perf_counter_ns() - a
                cpu += time.process_time_ns() - c0
                for m, (_, toks, s) in zip(ms, picks):
                    m.accept_token(toks[s + r])
            rows = B * rounds
            return rows / (wall / 1e9), cpu / 1e3 / rows

        run(True)  # warm
        seq, par, ratios = [], [], []
        for k in range(args.batch_repeats):
            if k % 2:
                p, q = run(True), run(False)
            else:
                q, p = run(False), run(True)
            seq.append(q)
            par.append(p)
            ratios.append(p[0] / q[0])
        out.append({
            "batch": B,
            "one_by_one_rows_s": max(x[0] for x in seq),
            "batched_rows_s": max(x[0] for x in par),
            "speedup": sorted(ratios)[len(ratios) // 2],
            "one_by_one_cpu_us_row": min(x[1] for x in seq),
            "batched_cpu_us_row": min(x[1] for x in par),
            "load": os.getloadavg()[0],
        })
    return out


def print_batch(args, files: List[str]) -> None:
    b = batch_figures(args, files)
    print(table(b, [
        ("batch", lambda r: str(r["batch"])),
        ("one call per row, rows/s", lambda r: f"{r['one_by_one_rows_s']:,.0f}"),
        ("fill_next_token_bitmask_batch, rows/s", lambda r: f"{r['batched_rows_s']:,.0f}"),
        ("speed-up (median)", lambda r: f"{r['speedup']:.2f}x"),
        ("CPU µs/row, one by one", lambda r: f"{r['one_by_one_cpu_us_row']:.2f}"),
        ("CPU µs/row, batch", lambda r: f"{r['batched_cpu_us_row']:.2f}"),
        ("load", lambda r: f"{r['load']:.1f}"),
    ]))


def table(rows: List[Dict[str, Any]], cols: List[tuple]) -> str:
    head = "| " + " | ".join(c[0] for c in cols) + " |"
    sep = "|" + "|".join("---" for _ in cols) + "|"
    lines = [head, sep]
    for r in rows:
        lines.append("| " + " | ".join(c[1](r) for c in cols) + " |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tokensieve.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json")
    ap.add_argument("--backend", default=ts.DEFAULT_BACKEND,
                    help=f"tokensieve backend (default {ts.DEFAULT_BACKEND})")
    ap.add_argument("--engines", default=None, help="comma list (default: every installed one of "
                    + ", ".join(ENGINES) + ")")
    ap.add_argument("--sample", type=int, default=0, help="files to sample (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per compile before the engine is skipped")
    ap.add_argument("--batch-sizes", default="1,16,128", help="comma list; empty: no batch fills")
    ap.add_argument("--batch-rounds", type=int, default=8, help="tokens each matcher steps through")
    ap.add_argument("--batch-repeats", type=int, default=3,
                    help="paired runs per figure (best rows/s, median speed-up)")
    ap.add_argument("--batch-threads", type=int, default=None,
                    help="threads of a batch fill, the caller included (default: one per core)")
    ap.add_argument("--batch-spin-us", type=int, default=None,
                    help="µs pool threads stay awake after a batch (default: the Compiler's)")
    ap.add_argument("--batch-cold", action="store_true",
                    help="compile afresh for every batch run (every mask needs parser work)")
    ap.add_argument("--batch-only", action="store_true",
                    help="only the batch fills (no MaskBench walk)")
    ap.add_argument("--rust-cli", default=None, help="the tokensieve binary, to add its own figures")
    ap.add_argument("--out", default=None, help="write every record (JSON lines) here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args(argv)

    if args.worker:
        spec = json.load(open(args.worker))
        args.files, args.skip = spec["files"], spec["skip"]
        worker(args)
        return 0

    files = sample(collect(args.paths), args.sample, args.seed)
    if not files:
        ap.error("no MaskBench files given")
    engines = args.engines.split(",") if args.engines else [e for e in ENGINES if installed(e)]
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    if args.batch_only:
        print_batch(args, files)
        return 0
    print(f"bench: {len(files)} files, engines {', '.join(engines)}", file=sys.stderr)
    args.versions = {}
    records = drive(args, files, engines)
    if args.out:
        with open(args.out, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    rows = [{"engine": f"{e} {args.versions.get(e, '')}".strip() + (f" ({args.backend})" if e == "tokensieve" else ""),
             **summarize(records, e)} for e in engines]
    if args.rust_cli:
        r = rust_cli(args, files)
        if r:
            rows.append({"engine": f"tokensieve Rust CLI ({args.backend})", **r})
    f1 = lambda k: (lambda r: f"{r[k]:.1f}")  # noqa: E731
    print(table(rows, [
        ("engine", lambda r: r["engine"]),
        ("files passing", lambda r: f"{r['passing']}/{r['files']}"),
        ("compile errors", lambda r: str(r["files"] - r["compiled"])),
        ("invalid accepted", lambda r: str(r["invalid_accepted"])),
        ("TTFM p50 µs", f1("ttfm_p50_us")), ("TTFM p99 µs", f1("ttfm_p99_us")),
        ("TBM p50 µs", f1("tbm_p50_us")), ("TBM p99 µs", f1("tbm_p99_us")), ("TBM max µs", f1("tbm_max_us")),
        ("tokens", lambda r: str(r["tokens"])),
    ]))
    if "tokensieve" in engines and args.batch_sizes:
        print()
        print_batch(args, files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
