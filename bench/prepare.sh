#!/usr/bin/env bash
# The files the side-by-side benchmarks compare, made once and cached:
#   bash bench/prepare.sh MODEL "MODES" "LLAMA_TYPES"
# MODEL is 0.5b or 1.5b (scripts/fetch-model.sh fetches the Q4_K_M GGUF);
# each Kestrel mode (q4 q8 dual f16 f32) is `kestrel convert --wmode MODE`
# of that file, in .cache/vqf/MODEL-MODE.vqf; each llama.cpp type (Q4_0
# Q8_0 F32 ...) is `llama-quantize --allow-requantize` of the same file, in
# .cache/llamacpp/models/MODEL-TYPE.gguf, and Q4_K_M is the file itself.
# Prints nothing on stdout; the paths follow from the names.
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1; modes=$2; types=$3
log() { echo "prepare: $*" >&2; }
gguf=$(bash scripts/fetch-model.sh "$model")
bin=$(bash bench/llamacpp.sh)
cargo build -q --release --locked -p kestrel >&2
kestrel=./target/release/kestrel
mkdir -p .cache/vqf .cache/llamacpp/models
for mode in $modes; do
    vqf=".cache/vqf/$model-$mode.vqf"
    if [ ! -f "$vqf" ] || ! "$kestrel" verify "$vqf" >/dev/null 2>&1; then
        log "kestrel convert $model --wmode $mode"
        "$kestrel" convert "$gguf" -o "$vqf" --wmode "$mode" >&2
    fi
done
for t in $types; do
    out=".cache/llamacpp/models/$model-$t.gguf"
    if [ "$t" = Q4_K_M ]; then
        ln -sf "$(realpath "$gguf")" "$out"
    elif [ ! -f "$out" ]; then
        log "llama-quantize $model $t"
        "$bin/llama-quantize" --allow-requantize "$gguf" "$out.partial" "$t" "$(nproc)" >&2
        mv "$out.partial" "$out"
    fi
done
