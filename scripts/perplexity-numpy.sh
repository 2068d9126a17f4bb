#!/usr/bin/env bash
# `kestrel perplexity` against an independent numpy computation on the dense
# fixture (f32 base, dual file compared), with prefill through the Q8 copy
# and then through the decode copy. numpy is installed in a venv under
# .cache; a failure to install it fails the check.
set -euo pipefail
cd "$(dirname "$0")/.."
NUMPY_VERSION=1.26.4
venv=.cache/numpy-venv
if ! "$venv/bin/python" -c "import numpy, sys; sys.exit(numpy.__version__ != '$NUMPY_VERSION')" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" || { echo "perplexity check: FAILED: cannot create a venv"; exit 1; }
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "numpy==$NUMPY_VERSION" \
        || { echo "perplexity check: FAILED: cannot install numpy $NUMPY_VERSION"; exit 1; }
fi
cargo build -q --locked -p kestrel
bin=target/debug/kestrel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$tmp/f32.vqf" --wmode f32 2>/dev/null
"$bin" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$tmp/dual.vqf" --wmode dual 2>/dev/null
check() { "$venv/bin/python" tests/perplexity/check_numpy.py "$bin" "$tmp/f32.vqf" "$tmp/dual.vqf" README.md 64 3 "$tmp" "$@"; }
check
check --prefill-q8 false
