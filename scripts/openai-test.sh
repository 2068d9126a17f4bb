#!/usr/bin/env bash
# `kestrel serve` against the official `openai` Python client
# (tests/openai/test_openai.py). The client is installed, pinned, into a
# venv under .cache/; if that fails (no python3-venv, no network to the
# package index) this script FAILS: it never passes without running. The
# tool-call checks run on the real model (scripts/fetch-model.sh), whose
# chat template renders tools.
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(bash scripts/python-venv.sh openai-venv openai openai 3.57.0)
cargo build -q --locked -p kestrel
bin=target/debug/kestrel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$tmp/m.vqf" --wmode dual 2>/dev/null
# The real Qwen2.5-Coder model for tool calls (the fixture's template has none).
gguf=$(bash scripts/fetch-model.sh)
"$bin" convert "$gguf" -o "$tmp/real.vqf" --wmode q4 2>/dev/null
"$python" tests/openai/test_openai.py "$bin" "$tmp/m.vqf" "$tmp/real.vqf"
