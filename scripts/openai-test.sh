#!/usr/bin/env bash
# `kestrel serve` against the official `openai` Python client
# (tests/openai/test_openai.py). The client is installed, pinned, into a
# venv under .cache/; if that fails (no python3-venv, no network to the
# package index) this script FAILS: it never passes without running.
set -euo pipefail
cd "$(dirname "$0")/.."
OPENAI_VERSION=3.57.0
venv=.cache/openai-venv
if ! "$venv/bin/python" -c "import openai, sys; sys.exit(openai.__version__ != '$OPENAI_VERSION')" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" || { echo "openai test: FAILED: cannot create a venv (apt-get install python3-venv)"; exit 1; }
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "openai==$OPENAI_VERSION" \
        || { echo "openai test: FAILED: cannot install openai==$OPENAI_VERSION from the package index"; exit 1; }
fi
cargo build -q --locked -p kestrel
bin=target/debug/kestrel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$tmp/m.vqf" --wmode dual 2>/dev/null
timeout 120 "$venv/bin/python" tests/openai/test_openai.py "$bin" "$tmp/m.vqf"
