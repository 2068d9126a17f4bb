#!/usr/bin/env bash
# The main job, end to end, on a fresh machine: set up, build, fetch the real
# model (Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M, sha256-checked, cached in
# .cache/model/), convert it once to VQF (cached in .cache/vqf/), and answer
# a prompt. Rerunning skips what is already there.
#   bash scripts/demo.sh ["your prompt"]
set -euo pipefail
cd "$(dirname "$0")/.."
prompt="${1:-Write a Python function that checks whether a number is prime.}"
bash scripts/setup.sh
cargo build --release --locked -p kestrel
gguf=$(bash scripts/fetch-model.sh)
vqf=.cache/vqf/qwen2.5-coder-0.5b-instruct.vqf
mkdir -p .cache/vqf
if [ ! -f "$vqf" ] || ! ./target/release/kestrel verify "$vqf" >/dev/null 2>&1; then
    # The default for a quantized GGUF: its own blocks, at its size.
    ./target/release/kestrel convert "$gguf" -o "$vqf"
fi
# A whole answer: it ends at the model's end of turn (384 tokens for the
# default prompt), well before the 1024-token bound.
./target/release/kestrel run "$vqf" -p "$prompt" -n 1024 --temp 0
