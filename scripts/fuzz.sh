#!/usr/bin/env bash
# Runs one fuzz target under libFuzzer (cargo +nightly fuzz), with its seeds,
# regression inputs and dictionary from crates/fuzz.
#
#   scripts/fuzz.sh TARGET [SECONDS]     (default 600 seconds; 0 = no limit)
#   scripts/fuzz.sh --list
#
# TARGET: gbnf regex json_schema tokenizer_json tiktoken gguf matcher.
# The growing corpus lives in fuzz/corpus/TARGET (not committed); crashes
# and slow inputs in fuzz/artifacts/TARGET. json_schema also reads the
# MaskBench dev schemas when ../shared/data/maskbench-dev is there.
#
# Environment:
#   FUZZ_TIMEOUT   seconds one input may take before libFuzzer calls it a
#                  hang (default 10)
#   FUZZ_SLOW      seconds from which the slowest input so far is saved as
#                  fuzz/artifacts/TARGET/slow-unit-* (default 2: a compile
#                  should end within about a second)
#   FUZZ_SANITIZER cargo fuzz --sanitizer (default none: the code under test
#                  is safe Rust, and AddressSanitizer halves the speed)
#   FUZZ_JOBS      libFuzzer -fork jobs (default 1: the machine is shared).
#                  Fork mode keeps fuzzing past a hang or an out-of-memory
#                  input (each is saved as an artifact); a crash stops it.
#   FUZZ_ARGS      more libFuzzer flags (e.g. "-max_len=8192")
#   FUZZ_MASKBENCH 0 to leave the MaskBench schemas out of json_schema's
#                  seeds (libFuzzer first runs every seed: the 2,272 dev
#                  schemas take about 20 minutes on a busy 2-core machine)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
targets=(gbnf regex json_schema tokenizer_json tiktoken gguf matcher)

usage() {
    echo "usage: scripts/fuzz.sh TARGET [SECONDS]   (TARGET: ${targets[*]})" >&2
    exit 2
}

[[ $# -ge 1 ]] || usage
if [[ $1 == --list ]]; then
    printf '%s\n' "${targets[@]}"
    exit 0
fi
target=$1
seconds=${2:-600}
[[ " ${targets[*]} " == *" $target "* ]] || {
    echo "unknown target '$target'" >&2
    usage
}
[[ $seconds =~ ^[0-9]+$ ]] || usage

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: the nightly toolchain is missing (libFuzzer needs it):" >&2
    echo "  rustup toolchain install nightly" >&2
    echo "The same target bodies run on stable in: cargo test -p tokensieve-fuzz" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is missing:" >&2
    echo "  cargo install cargo-fuzz" >&2
    echo "The same target bodies run on stable in: cargo test -p tokensieve-fuzz" >&2
    exit 1
fi

fuzz_dir="$root/fuzz"
crate="$root/crates/fuzz"
corpus="$fuzz_dir/corpus/$target"
artifacts="$fuzz_dir/artifacts/$target"
mkdir -p "$corpus" "$artifacts"

# Seed folders: read, never written (new inputs go to $corpus).
inputs=("$corpus")
for dir in "$crate/seeds/$target" "$crate/regressions/$target"; do
    [[ -d $dir ]] && inputs+=("$dir")
done
if [[ $target == json_schema ]]; then
    maskbench="$root/../shared/data/maskbench-dev"
    extracted="$fuzz_dir/corpus/json_schema_maskbench"
    [[ ${FUZZ_MASKBENCH:-1} == 0 ]] && maskbench=/nonexistent
    if [[ -d $maskbench && ! -d $extracted ]]; then
        if command -v python3 >/dev/null; then
            # The `schema` member of each MaskBench file, as the input.
            python3 - "$maskbench" "$extracted" <<'EOF'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for name in sorted(os.listdir(src)):
    try:
        schema = json.load(open(os.path.join(src, name)))["schema"]
    except (ValueError, KeyError, OSError):
        continue
    with open(os.path.join(dst, name), "w") as f:
        json.dump(schema, f)
EOF
        else
            echo "fuzz.sh: python3 not found: MaskBench schemas not added to the seeds" >&2
        fi
    fi
    [[ -d $maskbench && -d $extracted ]] && inputs+=("$extracted")
fi

flags=(
    "-timeout=${FUZZ_TIMEOUT:-10}"
    "-report_slow_units=${FUZZ_SLOW:-2}"
    "-rss_limit_mb=4096"
    "-print_final_stats=1"
    "-artifact_prefix=$artifacts/"
)
[[ $seconds -gt 0 ]] && flags+=("-max_total_time=$seconds")
[[ -f $crate/dicts/$target.dict ]] && flags+=("-dict=$crate/dicts/$target.dict")
flags+=("-fork=${FUZZ_JOBS:-1}" "-ignore_timeouts=1" "-ignore_ooms=1")
# shellcheck disable=SC2206
[[ -n ${FUZZ_ARGS:-} ]] && flags+=($FUZZ_ARGS)

cd "$root"
exec cargo +nightly fuzz run --fuzz-dir "$fuzz_dir" \
    --sanitizer "${FUZZ_SANITIZER:-none}" --codegen-units 16 \
    "$target" "${inputs[@]}" -- "${flags[@]}"
