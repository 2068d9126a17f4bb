#!/usr/bin/env bash
# `kestrel perplexity` against an independent numpy computation on the dense
# fixture (f32 base, dual file compared), with prefill through the Q8 copy
# and then through the decode copy. numpy is installed in a venv under
# .cache; a failure to install it fails the check.
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(bash scripts/python-venv.sh numpy-venv numpy numpy 1.26.4)
cargo build -q --locked -p kestrel
bin=target/debug/kestrel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$tmp/f32.vqf" --wmode f32 2>/dev/null
"$bin" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$tmp/dual.vqf" --wmode dual 2>/dev/null
check() { "$python" tests/perplexity/check_numpy.py "$bin" "$tmp/f32.vqf" "$tmp/dual.vqf" README.md 64 3 "$tmp" "$@"; }
check
check --prefill-q8 false
