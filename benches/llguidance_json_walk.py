#!/usr/bin/env python3
"""llguidance on the walk of `tokensieve bench maskbench --json`.

What it measures
----------------
llguidance (PyPI `llguidance`, measured with 1.9.1) walking the *valid*
instances of MaskBench files under a grammar that accepts any JSON value,
exactly the walk `tokensieve bench maskbench --json` / `--grammar json.gbnf`
does, so that `tokensieve bench report` can put both side by side:

* for every MaskBench file (`*.json` with `"tests": [{"valid", "data"}]`),
  only the valid tests; text = `json.dumps(data, ensure_ascii=False)`
  (`", "` and `": "` separators, keys in document order, non-ASCII as UTF-8);
  tokens = the tokenizer's encoding of it with no special tokens added and
  special-token spellings inside the text encoded as plain text (as
  tokensieve's encoder does);
* compile (TTFM, `compile_us`): per file, a fresh `LLMatcher` from the
  grammar text (wall time of the constructor, i.e. grammar text -> a matcher
  ready for its first mask; the tokenizer is built once, before any file);
* per test, a fresh matcher (`deep_copy()` of the file's compiled one,
  untimed); per token (TBM, `mask_ns`): compute the full bitmask into a
  preallocated buffer (`unsafe_compute_mask_ptr`), check the token's bit,
  `consume_token` it if set; a clear bit rejects the test; after the last
  token, `end_ok` = a stop token's bit is set in the next mask (untimed);
* one thread, one process, GC off while a file runs (as peerbench's worker).

The timed step is a Python loop around llguidance's C ABI calls, the call
pattern of `shared/bench/peerbench/engines.py` (`LlgEngine`); it carries the
Python floor (timer + calls + bit check), which `--floor` measures on its own
(same loop, no llguidance calls; engine name `python-floor`).

Grammar (`--grammar`, default `schema-true`): llguidance's builtin JSON, with
its default options (flexible whitespace `[ \\t\\n\\r]+` between tokens, no
whitespace before/after the top-level value, default parser limits):

* `schema-true`:  {"grammars":[{"json_schema": true}]}   -- JSON Schema `true`,
  any JSON value (default: unambiguous, and the cheapest to compile)
* `schema-empty`: {"grammars":[{"json_schema": {}}]}     -- same language in
  llguidance (any value, not only objects)
* `lark`:         Lark `start: %json {}`                  -- same language, via
  the Lark front end

Output: one JSON line per file in the record format of
`shared/bench/CONTRACT.md` section 3 (`id`, `split`, `engine`, `version`,
`compile_us`, `compile_error`, `tests: [{valid, accepted, tokens, reason,
end_ok, mask_ns}]`, `timeout`, `timeout_s`, `crash`, `oom`), which
`tokensieve bench report` (and peerbench's `report.py`) read. No time limits
are enforced; an exception while compiling or walking is recorded as a
compile error / `crash` and the run goes on.

Run (from the repository root)
------------------------------
    python3 -m venv /tmp/llgvenv && /tmp/llgvenv/bin/pip install llguidance==1.9.1 tokenizers numpy
    /tmp/llgvenv/bin/python benches/llguidance_json_walk.py \\
        --tokenizer ../shared/data/tokenizers/llama3/tokenizer.json \\
        --out /tmp/llg.jsonl ../shared/data/maskbench-dev
    target/release/tokensieve bench report /tmp/llg.jsonl /tmp/e-gbnf.jsonl

Options: `--every N` (every N-th file of the sorted list), `--limit N`,
`--grammar {schema-true,schema-empty,lark}`, `--floor`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import time
import traceback
from importlib.metadata import version as pkg_version

import numpy as np

GRAMMARS = {
    "schema-true": '{"grammars":[{"json_schema":true}]}',
    "schema-empty": '{"grammars":[{"json_schema":{}}]}',
    "lark": None,  # built from `start: %json {}` at start-up (untimed)
}

# Stop tokens by name, as tokensieve's HfTokenizer finds them (any present
# added token among these is a stop token).
KNOWN_STOP_TOKENS = [
    "</s>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>",
    "<|im_end|>", "<|end|>", "<eos>", "<end_of_turn>",
]


def split_of(file_id: str) -> str:
    """MaskBench split: 'Github_easy---o1.json' -> 'Github_easy';
    'BFCL_simple_12.json' -> 'BFCL_simple' (as tokensieve and peerbench)."""
    base = os.path.basename(file_id)
    if "---" in base:
        return base.split("---", 1)[0]
    base = re.sub(r"\.json$", "", base)
    return re.sub(r"_\d+$", "", base)


def collect_files(inputs):
    files = []
    for a in inputs:
        if os.path.isdir(a):
            files.extend(os.path.join(a, f) for f in sorted(os.listdir(a)) if f.endswith(".json"))
        else:
            files.append(a)
    return sorted(files, key=os.path.basename)


def err_str(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) <= 2000 else s[:2000] + "..."


def load_tokenizers(path):
    """The Hugging Face tokenizer (special-token spellings in text encoded
    as text, as tokensieve's encoder does), llguidance's tokenizer of the
    same file, and the stop tokens it names."""
    import llguidance
    from tokenizers import Tokenizer

    with open(path, encoding="utf-8") as f:
        tok_json = f.read()
    hf = Tokenizer.from_str(tok_json)
    hf.encode_special_tokens = True
    vocab = hf.get_vocab(with_added_tokens=True)
    added = {a["content"] for a in json.loads(tok_json).get("added_tokens", [])}
    stops = [vocab[s] for s in KNOWN_STOP_TOKENS if s in vocab and s in added]
    if not stops:
        sys.exit("no stop token found in the tokenizer")
    # LLTokenizer takes the tokenizer.json text itself (as peerbench does);
    # llguidance.hf.from_tokenizer would need transformers for the same thing.
    return hf, llguidance.LLTokenizer(tok_json, eos_token=stops), stops


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="HF tokenizer.json (Llama 3)")
    ap.add_argument("--out", required=True, help="output JSONL")
    ap.add_argument("--grammar", default="schema-true", choices=sorted(GRAMMARS))
    ap.add_argument("--every", type=int, default=1, help="take every N-th file")
    ap.add_argument("--limit", type=int, default=None, help="at most N files")
    ap.add_argument("--floor", action="store_true",
                    help="measure the Python floor only (no llguidance calls in the timed step)")
    ap.add_argument("inputs", nargs="+", help="MaskBench files or directories")
    args = ap.parse_args()

    import llguidance

    hf, lltok, stops = load_tokenizers(args.tokenizer)
    grammar = GRAMMARS[args.grammar]
    if grammar is None:
        grammar = llguidance.LLMatcher.grammar_from_lark("start: %json {}")

    nwords = (lltok.vocab_size + 31) // 32
    mask = np.zeros(nwords, dtype=np.uint32)
    mv = memoryview(mask)
    ptr, nbytes = mask.ctypes.data, mask.nbytes
    if args.floor:
        mask[:] = 0xFFFFFFFF

    engine = "python-floor" if args.floor else "llguidance"
    version = pkg_version("llguidance")
    pc = time.perf_counter_ns
    LLMatcher = llguidance.LLMatcher

    files = collect_files(args.inputs)[:: max(1, args.every)]
    if args.limit is not None:
        files = files[: args.limit]
    print(f"{engine} {version}, grammar {args.grammar}: {grammar}; stop tokens {stops}; "
          f"{len(files)} files", file=sys.stderr)

    t_start = time.monotonic()
    n_tokens = 0
    buckets: dict = {}
    with open(args.out, "w", encoding="utf-8") as out:
        for k, path in enumerate(files):
            fid = os.path.basename(path)
            rec = {"id": fid, "split": split_of(fid), "engine": engine, "version": version,
                   "compile_us": None, "compile_error": None, "tests": [],
                   "timeout": None, "timeout_s": None, "crash": None, "oom": False}
            try:
                with open(path, encoding="utf-8") as f:
                    mb = json.load(f)
                # Tokenizing is not timed.
                walks = [hf.encode(json.dumps(t["data"], ensure_ascii=False),
                                   add_special_tokens=False).ids
                         for t in mb["tests"] if t["valid"]]
            except Exception as e:  # noqa: BLE001
                rec["crash"] = "reading/tokenizing: " + err_str(e)
                walks = None
            if walks is not None:
                gc.collect()
                gc.disable()
                try:
                    run_file(rec, walks, args.floor, LLMatcher, lltok, grammar,
                             mv, ptr, nbytes, stops, pc)
                except Exception as e:  # noqa: BLE001
                    rec["crash"] = err_str(e) + "\n" + traceback.format_exc(limit=3)
                finally:
                    gc.enable()
            out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
            out.flush()
            n_tokens += sum(len(t["mask_ns"]) for t in rec["tests"])
            status = ("crash" if rec["crash"] else "compile_error" if rec["compile_error"]
                      else "pass" if all(t["accepted"] and t["end_ok"] for t in rec["tests"])
                      else "fail")
            buckets[status] = buckets.get(status, 0) + 1
            if (k + 1) % 100 == 0 or k + 1 == len(files):
                print(f"[{k + 1}/{len(files)}] {time.monotonic() - t_start:.0f}s "
                      f"{n_tokens} tokens {buckets}", file=sys.stderr, flush=True)
    print(f"done: {len(files)} records -> {args.out} in {time.monotonic() - t_start:.1f}s; "
          f"{buckets}", file=sys.stderr)
    return 0


def run_file(rec, walks, floor, LLMatcher, lltok, grammar, mv, ptr, nbytes, stops, pc):
    t0 = pc()
    if floor:
        m0 = None
    else:
        m0 = LLMatcher(lltok, grammar, log_level=0)
    t1 = pc()
    rec["compile_us"] = (t1 - t0) // 1000
    if m0 is not None and m0.is_error():
        rec["compile_error"] = m0.get_error()
        return
    for ids in walks:
        mask_ns = []
        append = mask_ns.append
        accepted, reason, end_ok = True, None, None
        if floor:
            for i, t in enumerate(ids):
                a = pc()
                ok = (mv[t >> 5] >> (t & 31)) & 1
                b = pc()
                append(b - a)
            end_ok = True
        else:
            m = m0.deep_copy()
            compute = m.unsafe_compute_mask_ptr
            consume = m.consume_token
            for i, t in enumerate(ids):
                # Timed: full mask, bit check, commit (peerbench's LlgEngine.step).
                a = pc()
                compute(ptr, nbytes)
                if (mv[t >> 5] >> (t & 31)) & 1:
                    ok = consume(t)
                    b = pc()
                    append(b - a)
                    if not ok:
                        accepted = False
                        reason = f"engine error at token {i}: consume_token failed: {m.get_error()}"
                        break
                else:
                    b = pc()
                    append(b - a)
                    accepted = False
                    reason = f"token {i} (id {t}) not in mask"
                    if m.is_error():
                        reason = f"engine error at token {i}: {m.get_error()}"
                    break
            if accepted:
                compute(ptr, nbytes)
                end_ok = any((mv[s >> 5] >> (s & 31)) & 1 for s in stops)
        rec["tests"].append({"valid": True, "accepted": accepted, "tokens": len(mask_ns),
                             "reason": reason, "end_ok": end_ok, "mask_ns": mask_ns})


if __name__ == "__main__":
    sys.exit(main())
