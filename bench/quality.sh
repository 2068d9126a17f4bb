#!/usr/bin/env bash
# What quantization costs, measured with `kestrel perplexity`: for a GGUF
# source, every weight mode is converted (cached under DIR), the f32 file
# is the reference (--kl-base), and each other mode is compared with it on
# two real texts that ship on a Debian machine with Python: prose (the
# GPL-3 text of base-files, /usr/share/common-licenses/GPL-3) and code
# (CPython's textwrap.py). A dual file is measured twice: with its Q8
# prefill copy (what a prompt sees) and with every position through its
# decode copy (--prefill-q8 false: what generated tokens see).
#   bash bench/quality.sh MODEL.gguf DIR [CTX] [CHUNKS] [THREADS]
# Prints one line per (text, mode); benchmarks, not tests.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1; dir=$2; ctx=${3:-512}; chunks=${4:-4}; threads=${5:-2}
mkdir -p "$dir"
cargo build -q --locked --release -p kestrel
k=target/release/kestrel
prose=/usr/share/common-licenses/GPL-3
code=$(python3 -c 'import textwrap; print(textwrap.__file__)')
for mode in f32 q8 dual q4; do
    [ -s "$dir/$mode.vqf" ] || "$k" convert "$src" -o "$dir/$mode.vqf" --wmode "$mode" 2>/dev/null
done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); uptime: $(uptime)"
for text in "$prose" "$code"; do
    name=$(basename "$text")
    common=(-f "$text" --ctx "$ctx" --chunks "$chunks" -t "$threads")
    base="$dir/base-$name.bin"
    echo "== $name: f32 (reference)"
    "$k" perplexity "$dir/f32.vqf" "${common[@]}" --kl-base "$base" 2>/dev/null
    for run in "q8" "dual" "dual --prefill-q8 false" "q4"; do
        set -- $run
        echo "== $name: $run"
        "$k" perplexity "$dir/$1.vqf" "${common[@]}" --kl "$base" "${@:2}" 2>/dev/null
    done
    rm -f "$base"
done
