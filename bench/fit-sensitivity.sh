#!/usr/bin/env bash
# How much each class of matrices' error costs, for `convert --fit`'s class
# weights: for each class, a file with that class in TYPE (default q2_k)
# and every other matrix in q8_0 (`--tensor-type CLASS=TYPE`), scored as
# mean KL against the exact f32 computation (`kestrel perplexity --kl`),
# beside the class's summed relative error the plan measured. The
# sensitivity of a class is its KL over that error (the KL of the all-q8_0
# file subtracted first).
#   bash bench/fit-sensitivity.sh [--model 1.5b] [--chunks 1] [--type q2_k] [--classes "..."]
# The texts are not the ones bench/quality.sh scores on (held out): prose
# the Apache-2.0 text of base-files, code CPython's argparse.py (the
# calibration text of bench/calibration.sh's imatrix). Needs
# bench/prepare.sh's F32 GGUF and f32 VQF of the model; a benchmark, not a
# test.
set -euo pipefail
cd "$(dirname "$0")/.."
model=1.5b; chunks=1; type=q2_k
classes="token_embd output attn_q attn_k attn_v attn_output ffn_gate_up ffn_down"
while [ $# -gt 0 ]; do
    case "$1" in
        --model) model="$2"; shift 2 ;;
        --chunks) chunks="$2"; shift 2 ;;
        --type) type="$2"; shift 2 ;;
        --classes) classes="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "fit-sensitivity: unknown argument $1" >&2; exit 2 ;;
    esac
done
bash bench/prepare.sh "$model" "f32" "F32"
k=${KESTREL:-./target/release/kestrel}
f32gguf=.cache/llamacpp/models/$model-F32.gguf
prose=/usr/share/common-licenses/Apache-2.0
code=$(python3 -c 'import argparse; print(argparse.__file__)')
mkdir -p .cache/kl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "model: $model; cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); commit $(git rev-parse --short HEAD); uptime: $(uptime)"
for t in prose code; do
    base=.cache/kl/$model-held-$t-c$chunks.bin
    f=$prose; [ $t = code ] && f=$code
    [ -f "$base" ] || "$k" perplexity ".cache/vqf/$model-f32.vqf" -f "$f" --ctx 512 --chunks "$chunks" -t 2 --kl-base "$base" >/dev/null 2>&1
done
kl() { # vqf -> "prose code"
    local out=()
    for t in prose code; do
        local f=$prose; [ $t = code ] && f=$code
        out+=("$("$k" perplexity "$1" -f "$f" --ctx 512 --chunks "$chunks" -t 2 --kl ".cache/kl/$model-held-$t-c$chunks.bin" 2>/dev/null |
            sed -n 's/^KL mean = \([0-9.e-]*\).*/\1/p')")
    done
    echo "${out[*]}"
}
"$k" convert "$f32gguf" -o "$tmp/q8.vqf" --tensor-type output=q8_0 >/dev/null 2>&1
read -r p0 c0 <<<"$(kl "$tmp/q8.vqf")"
echo "all q8_0: KL prose $p0 code $c0"
rm -f "$tmp/q8.vqf"
for class in $classes; do
    "$k" convert "$f32gguf" -o "$tmp/c.vqf" --tensor-type "$class=$type" 2>"$tmp/log" >/dev/null
    e=$(sed -n "s/^\[fit\] class $class *$type .*error sum \([0-9.e+-]*\).*/\1/p" "$tmp/log")
    read -r p c <<<"$(kl "$tmp/c.vqf")"
    rm -f "$tmp/c.vqf"
    python3 - "$class" "$e" "$p" "$c" "$p0" "$c0" <<'PY'
import sys
cls, e, p, c, p0, c0 = sys.argv[1], *map(float, sys.argv[2:])
print(f"{cls:<12} error sum {e:.4e}  KL prose {p:.6f} code {c:.6f}  sensitivity (KL - q8 KL) / error: prose {(p - p0) / e:.4f} code {(c - c0) / e:.4f}")
PY
done
