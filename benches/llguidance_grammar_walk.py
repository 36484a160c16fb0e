#!/usr/bin/env python3
"""llguidance on the walk of `tokensieve bench grammars`.

What it measures
----------------
llguidance (PyPI `llguidance`, measured with 1.9.1) walking the texts of a
grammar corpus (`NAME.gbnf` with its valid texts in `NAME/*.txt`, as
`tokensieve bench grammars` reads it), each grammar through llguidance's
own GBNF converter (`llguidance.gbnf_to_lark`, untimed), so that
`tokensieve bench report` can put both side by side:

* compile (TTFM, `compile_us`): per grammar, a fresh `LLMatcher` from the
  converted grammar (the tokenizer is built once, before any grammar);
* per text, a fresh matcher (`deep_copy()` of the grammar's compiled one,
  untimed); per token (TBM, `mask_ns`): compute the full bitmask, check the
  token's bit, `consume_token` it if set (the walk of
  `benches/llguidance_json_walk.py`, whose functions this script uses);
* tokens: the tokenizer's encoding of the text with no special tokens added
  (as tokensieve's encoder does);
* one thread, one process, GC off while a grammar runs.

Run (from the repository root)
------------------------------
    python3 -m venv /tmp/llgvenv && /tmp/llgvenv/bin/pip install llguidance==1.9.1 tokenizers numpy
    /tmp/llgvenv/bin/python benches/llguidance_grammar_walk.py \\
        --tokenizer ../shared/data/tokenizers/llama3/tokenizer.json \\
        --out /tmp/llg-code.jsonl benches/fixtures/grammars
    target/release/tokensieve bench report /tmp/llg-code.jsonl /tmp/earley-code.jsonl
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import traceback
import time
from importlib.metadata import version as pkg_version

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llguidance_json_walk import err_str, load_tokenizers, run_file  # noqa: E402


def corpora(inputs):
    """(name, grammar path, sorted text paths) of every grammar named."""
    grammars = []
    for a in inputs:
        if os.path.isdir(a):
            grammars.extend(os.path.join(a, f) for f in sorted(os.listdir(a)) if f.endswith(".gbnf"))
        else:
            grammars.append(a)
    out = []
    for g in grammars:
        name = os.path.basename(g)[: -len(".gbnf")]
        folder = os.path.join(os.path.dirname(g), name)
        texts = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".txt"))
        if not texts:
            sys.exit(f"no *.txt texts in {folder}")
        out.append((name, g, texts))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="HF tokenizer.json")
    ap.add_argument("--out", required=True, help="output JSONL")
    ap.add_argument("inputs", nargs="+", help="corpus folders or .gbnf files")
    args = ap.parse_args()

    import llguidance
    from llguidance.gbnf_to_lark import gbnf_to_lark

    hf, lltok, stops = load_tokenizers(args.tokenizer)
    nwords = (lltok.vocab_size + 31) // 32
    mask = np.zeros(nwords, dtype=np.uint32)
    mv = memoryview(mask)
    version = pkg_version("llguidance")
    pc = time.perf_counter_ns

    with open(args.out, "w", encoding="utf-8") as out:
        for name, path, texts in corpora(args.inputs):
            rec = {"id": f"{name}.gbnf", "split": name, "engine": "llguidance", "version": version,
                   "compile_us": None, "compile_error": None, "tests": [],
                   "timeout": None, "timeout_s": None, "crash": None, "oom": False}
            try:
                with open(path, encoding="utf-8") as f:
                    lark = gbnf_to_lark(f.read())
                grammar = llguidance.LLMatcher.grammar_from_lark(lark)
                walks = []
                for t in texts:
                    with open(t, encoding="utf-8") as f:
                        walks.append(hf.encode(f.read(), add_special_tokens=False).ids)
            except Exception as e:  # noqa: BLE001
                rec["compile_error"] = "converting or reading: " + err_str(e)
                walks = None
            if walks is not None:
                gc.collect()
                gc.disable()
                try:
                    run_file(rec, walks, False, llguidance.LLMatcher, lltok, grammar,
                             mv, mask.ctypes.data, mask.nbytes, stops, pc)
                except Exception as e:  # noqa: BLE001
                    rec["crash"] = err_str(e) + "\n" + traceback.format_exc(limit=3)
                finally:
                    gc.enable()
            out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
            out.flush()
            ok = sum(1 for t in rec["tests"] if t["accepted"] and t["end_ok"])
            print(f"{name}: compile {rec['compile_us']} us, {ok}/{len(texts)} texts accepted"
                  f"{'; ' + str(rec['compile_error'] or rec['crash'])[:200] if rec['compile_error'] or rec['crash'] else ''}",
                  file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
