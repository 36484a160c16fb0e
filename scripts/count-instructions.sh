#!/usr/bin/env bash
# Instructions a `tokensieve bench maskbench` run executes, counted by
# valgrind's callgrind: a run's total repeats to about 0.01%, where wall
# times on a shared or throttled machine can differ by 10-25% between two
# builds doing the same work. Use it to compare two builds of a change on
# a folder of a few dozen MaskBench files (valgrind runs ~50x slower; two
# counts can run at once).
#
#   scripts/count-instructions.sh BINARY DIR [BACKEND_OPTION...]
#   scripts/count-instructions.sh target/release/tokensieve /tmp/tail shared_lexemes=false
#
# Prints G instructions: the whole run; masks (`fill_bitmask`, inclusive:
# how callgrind splits work between it and the rest moved by ~5% between
# two runs of one build, so compare totals); loading the tokenizer; and
# two of earley's compile stages (the piece split, `Lowering::build`; the
# JSON Schema lowering recurses on stacker's stacks, which callgrind's
# inclusive counts do not follow). Needs valgrind
# (apt: valgrind). TOKENIZER overrides the Llama 3 tokenizer path, BACKEND
# the backend (default earley).
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
bin=$1
dir=$2
shift 2
tokenizer=${TOKENIZER:-../shared/data/tokenizers/llama3/tokenizer.json}
options=()
for kv in "$@"; do
    options+=(--option "$kv")
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
    "$bin" bench maskbench --backend "${BACKEND:-earley}" "${options[@]}" \
    --compile-timeout-ms 600000 --tokenizer "$tokenizer" \
    --out "$work/run.jsonl" "$dir" >"$work/log" 2>&1 || {
    tail -20 "$work/log" >&2
    exit 1
}
grep -o '{"[a-z_]*": .*}$' "$work/log" | tail -1 || true
callgrind_annotate --inclusive=yes --threshold=100 "$work/cg.out" 2>/dev/null | awk '
    function g(s) { gsub(",", "", s); return s / 1e9 }
    /PROGRAM TOTALS/ { total = g($1) }
    /GrammarObject>::fill_bitmask \[/ && !masks { masks = g($1) }
    /HfTokenizer::from_json_str \[/ && !tok { tok = g($1) }
    /SchemaGrammar>::to_pieces_with \[/ && !sp { sp = g($1) }
    /earley::lower::Lowering::build \[/ && !pieces { pieces = g($1) }
    END {
        printf "total %.3f G  masks %.3f G  tokenizer %.3f G\n", total, masks, tok
        printf "compile stages: piece split %.3f G, earley lowering (Lowering::build) %.3f G\n", sp, pieces
    }'
