#!/usr/bin/env bash
# Prepares the serving plug-in tests: the SGLang and vLLM release wheels (no dependencies) and the small packages the tests read, for one Python environment.
#
#   scripts/python-serving-peers.sh [PYTHON]    # PYTHON defaults to $PYTHON, then python3
#
# The wheels go to $TOKENSIEVE_PEER_CACHE (default target/serving-peers), where
# crates/python/tests/serving_peers.py looks first (it downloads them itself
# when they are missing). The vLLM wheel is about 340 MB. Without the package
# registry, the tests that need a wheel are skipped, each with its reason.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:-${PYTHON:-python3}}
cache=${TOKENSIEVE_PEER_CACHE:-$root/target/serving-peers}
mkdir -p "$cache"

# The releases tokensieve.sglang and tokensieve.vllm were tested with
# (tokensieve/_plugins.py; a test checks that the three places agree).
peers=(sglang==0.5.23 vllm==0.33.0)

# tokenizers: a real Hugging Face tokenizer object for the vLLM backend;
# pydantic: the library vLLM's config classes are built on.
if ! "$python" -m pip install -q --disable-pip-version-check tokenizers 'pydantic>=2.12'; then
    echo "python-serving-peers: could not install tokenizers and pydantic; the tests that need them are skipped" >&2
fi

for spec in "${peers[@]}"; do
    name=${spec%%==*}
    version=${spec##*==}
    if compgen -G "$cache/$name-$version-*.whl" >/dev/null; then
        continue
    fi
    if ! "$python" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: -d "$cache" "$spec"; then
        echo "python-serving-peers: could not download $spec; its tests are skipped" >&2
    fi
done
ls -l "$cache"/*.whl 2>/dev/null || true
