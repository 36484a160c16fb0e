#!/usr/bin/env bash
# Every test of the project: the Rust workspace (`cargo test --workspace
# --all-features`), then the Python package (scripts/python-test.sh, which
# builds the wheel into a fresh virtual environment). Tests that cannot run
# here (no GPU, no ../shared data, no model) say so as they skip; the run
# ends with one line counting those skips by reason.
set -uo pipefail
cd "$(dirname "$0")/.."

skips="$(mktemp "${TMPDIR:-/tmp}/tokensieve-skips.XXXXXX")"
trap 'rm -f "$skips"' EXIT
export TOKENSIEVE_SKIP_LOG="$skips"

status=0
cargo test --workspace --all-features || status=$?
if [ "$status" -eq 0 ] && [ -x scripts/python-test.sh ]; then
    scripts/python-test.sh || status=$?
fi

# One line: how many skips, and why (the reason without the test's name,
# most frequent first).
python3 - "$skips" "$status" <<'PY'
import collections, sys
lines = [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
reasons = collections.Counter()
for line in lines:
    # "skipped: <test>: <reason>"
    parts = line.split(": ", 2)
    reasons[parts[2] if len(parts) == 3 else line] += 1
verdict = "passed" if sys.argv[2] == "0" else "FAILED"
if reasons:
    why = "; ".join(f"{n}x {r}" for r, n in reasons.most_common())
    print(f"tokensieve tests {verdict}; {len(lines)} skipped: {why}")
else:
    print(f"tokensieve tests {verdict}; nothing skipped")
PY
exit "$status"
