#!/usr/bin/env bash
# Builds the tokensieve wheel (maturin) into a fresh virtual environment under
# target/ and runs the Python test suite (crates/python/tests) with pytest.
#
#   scripts/python-test.sh [pytest args...]
#
# Environment:
#   PYTHON                  interpreter to build the venv from (default python3, >= 3.11)
#   TOKENSIEVE_PY_PROFILE   cargo profile of the wheel: dev (default) or release
#   TOKENSIEVE_PY_VENV      the venv (default target/py-venv; recreated on every run)
#
# numpy, pytest and maturin come from the package registry; llguidance,
# outlines-core and tokenizers too when it is reachable (their tests are
# skipped, with the reason printed, when they are not installed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
PROFILE="${TOKENSIEVE_PY_PROFILE:-dev}"
VENV="${TOKENSIEVE_PY_VENV:-$ROOT/target/py-venv}"
case "$PROFILE" in
  dev) PROFILE_DIR=debug ;;
  *) PROFILE_DIR="$PROFILE" ;;
esac

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "python-test: $PYTHON is older than 3.11; set PYTHON to a CPython >= 3.11" >&2
  exit 1
fi

echo "python-test: fresh virtual environment at $VENV" >&2
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip install --quiet --disable-pip-version-check)

"${PIP[@]}" "maturin>=1.9.4,<2" numpy pytest
if ! "${PIP[@]}" "llguidance==1.9.1" "outlines-core==0.2.14" tokenizers; then
  echo "python-test: llguidance / outlines-core / tokenizers not installed (registry not reachable?); their tests will be skipped" >&2
fi

WHEELS="$ROOT/target/py-wheels"
rm -rf "$WHEELS"
echo "python-test: building the wheel (profile $PROFILE)" >&2
"$VENV/bin/maturin" build --profile "$PROFILE" --manifest-path crates/python/Cargo.toml \
  --interpreter "$VPY" --out "$WHEELS"
"${PIP[@]}" --force-reinstall --no-deps "$WHEELS"/tokensieve-*.whl

# The Rust side of the conformance comparison, in the wheel's profile (it
# shares the wheel's build artifacts).
cargo build --quiet --profile "$PROFILE" -p tokensieve-python --example conformance_masks
export TOKENSIEVE_CONFORMANCE_HELPER="$ROOT/target/$PROFILE_DIR/examples/conformance_masks"

# The serving plug-ins' tests: the SGLang and vLLM release wheels (no
# dependencies) and the small packages their tests read.
bash "$ROOT/scripts/python-serving-peers.sh" "$VPY"

cd crates/python
exec "$VPY" -m pytest tests -rs -p no:cacheprovider "$@"
