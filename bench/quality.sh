#!/usr/bin/env bash
# What quantization costs, measured with `kestrel perplexity` and, side by
# side, llama-perplexity: every file is compared with the exact f32
# computation of the same GGUF source on two real texts that ship on a
# Debian machine with Python: prose (the GPL-3 text of base-files,
# /usr/share/common-licenses/GPL-3) and code (CPython's textwrap.py).
#   bash bench/quality.sh [--model 0.5b|1.5b] [--ctx 512] [--chunks 4] [-t 2]
#        [--modes "source q8 dual q4 f16"] [--llama "Q8_0 Q4_0 Q4_K_M"]
# (a mode source@TYPE or exact@TYPE is llama.cpp's TYPE file converted with
# --wmode source or exact:
# bench/prepare.sh)
# bench/prepare.sh makes the files (Kestrel `convert --wmode`, f32 included;
# llama-quantize, F32 included; Q4_K_M is the source file itself). Kestrel:
# the f32 file saves the reference (--kl-base), each mode is compared with
# it (--kl); a two-copy file (dual, source, mix*) twice: with its Q8 prefill copy
# (what a prompt sees) and with every position through its decode copy
# (--prefill-q8 false: what generated tokens see). llama.cpp: llama-perplexity
# --kl-divergence-base on F32, then --kl-divergence per type (-c CTX
# --chunks N -b CTX). Prints each run's summary lines; benchmarks, not tests.
set -euo pipefail
cd "$(dirname "$0")/.."
model=0.5b; ctx=512; chunks=4; threads=2
modes="source q8 dual q4 f16"; types="Q8_0 Q4_0 Q4_K_M"
while [ $# -gt 0 ]; do
    case "$1" in
        --model) model="$2"; shift 2 ;;
        --ctx) ctx="$2"; shift 2 ;;
        --chunks) chunks="$2"; shift 2 ;;
        -t) threads="$2"; shift 2 ;;
        --modes) modes="$2"; shift 2 ;;
        --llama) types="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "quality: unknown argument $1" >&2; exit 2 ;;
    esac
done
bash bench/prepare.sh "$model" "f32 $modes" "F32 $types"
bin=$(bash bench/llamacpp.sh)
k=./target/release/kestrel
vqf() { echo ".cache/vqf/$model-$1.vqf"; }
gguf() { echo ".cache/llamacpp/models/$model-$1.gguf"; }
prose=/usr/share/common-licenses/GPL-3
code=$(python3 -c 'import textwrap; print(textwrap.__file__)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "model: $model; cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); commit $(git rev-parse --short HEAD); uptime: $(uptime)"
for text in "$prose" "$code"; do
    name=$(basename "$text")
    common=(-f "$text" --ctx "$ctx" --chunks "$chunks" -t "$threads")
    base="$tmp/base-$name.bin"
    echo "== $name: Kestrel f32 (reference)"
    "$k" perplexity "$(vqf f32)" "${common[@]}" --kl-base "$base" 2>/dev/null
    for mode in $modes; do
        runs=("$mode")
        case "$mode" in dual|source*|mix*) runs+=("$mode --prefill-q8 false") ;; esac
        for run in "${runs[@]}"; do
            set -- $run
            echo "== $name: Kestrel $run"
            "$k" perplexity "$(vqf "$1")" "${common[@]}" --kl "$base" "${@:2}" 2>/dev/null
        done
    done
    lbase="$tmp/llama-base-$name.bin"
    lcommon=(-f "$text" -c "$ctx" --chunks "$chunks" -b "$ctx" -t "$threads")
    echo "== $name: llama.cpp F32 (reference)"
    "$bin/llama-perplexity" -m "$(gguf F32)" "${lcommon[@]}" --kl-divergence-base "$lbase" 2>&1 |
        grep -E '^Final estimate' || true
    for t in $types; do
        echo "== $name: llama.cpp $t"
        "$bin/llama-perplexity" -m "$(gguf "$t")" "${lcommon[@]}" --kl-divergence-base "$lbase" --kl-divergence 2>&1 |
            grep -E '^(Mean PPL\(Q\)|Mean PPL\(base\)|Mean +KLD|99\.0% +KLD|Same top p)' || true
    done
    rm -f "$base" "$lbase"
done
