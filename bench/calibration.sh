#!/usr/bin/env bash
# Calibration side by side (issue 17): an importance matrix from the same
# calibration text for both engines, and the decode copies they weigh,
# scored against the exact f32 computation on texts disjoint from it.
#   bash bench/calibration.sh [--model 0.5b|1.5b] [--chunks 8]
# The calibration text: the Apache-2.0 licence (prose, from base-files)
# followed by CPython's argparse.py (code), its first `--chunks` chunks of
# 512 tokens; the evaluation texts (bench/quality.sh) are the GPL-3 and
# textwrap.py. Makes, cached under .cache:
#   imatrix/MODEL-kestrel.imatrix  `kestrel imatrix` on the `source` file
#                                  (its Q8 prefill copy computes)
#   imatrix/MODEL-llama.imatrix    llama-imatrix on the F32 GGUF
#   llamacpp/models/MODEL-Q4_0-imatrix.gguf  llama-quantize --imatrix (llama's) Q4_0
#   vqf/MODEL-mix.vqf              kestrel convert --wmode mix (--quantizer search)
#   vqf/MODEL-mix-imatrix.vqf      ... --imatrix (Kestrel's)
# then runs bench/quality.sh on them (Kestrel mix files through their decode
# copy: --prefill-q8 false), beside llama.cpp's Q4_0 with and without its
# imatrix. Benchmarks, not tests.
set -euo pipefail
cd "$(dirname "$0")/.."
model=0.5b; chunks=8
while [ $# -gt 0 ]; do
    case "$1" in
        --model) model="$2"; shift 2 ;;
        --chunks) chunks="$2"; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "calibration: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "calibration: $*" >&2; }
bash bench/prepare.sh "$model" "source" "F32 Q4_0"
gguf=$(bash scripts/fetch-model.sh "$model")
bin=$(bash bench/llamacpp.sh)
k=./target/release/kestrel
mkdir -p .cache/imatrix
calib=.cache/imatrix/calibration.txt
argparse=$(python3 -c 'import argparse; print(argparse.__file__)')
cat /usr/share/common-licenses/Apache-2.0 "$argparse" > "$calib"
kim=".cache/imatrix/$model-kestrel.imatrix"
lim=".cache/imatrix/$model-llama.imatrix"
if [ ! -f "$kim" ]; then
    log "kestrel imatrix $model"
    "$k" imatrix ".cache/vqf/$model-source.vqf" -f "$calib" --ctx 512 --chunks "$chunks" -t "$(nproc)" -o "$kim" >&2
fi
if [ ! -f "$lim" ]; then
    log "llama-imatrix $model"
    "$bin/llama-imatrix" -m ".cache/llamacpp/models/$model-F32.gguf" -f "$calib" -c 512 \
        --chunks "$chunks" -t "$(nproc)" -o "$lim" >/dev/null 2>&1
fi
lq=".cache/llamacpp/models/$model-Q4_0-imatrix.gguf"
if [ ! -f "$lq" ]; then
    log "llama-quantize --imatrix $model Q4_0"
    "$bin/llama-quantize" --imatrix "$lim" ".cache/llamacpp/models/$model-F32.gguf" \
        "$lq.partial" Q4_0 "$(nproc)" >/dev/null 2>&1
    mv "$lq.partial" "$lq"
fi
for v in mix mix-imatrix; do
    out=".cache/vqf/$model-$v.vqf"
    if [ ! -f "$out" ] || ! "$k" verify "$out" >/dev/null 2>&1; then
        log "kestrel convert $model --wmode mix ($v)"
        extra=(--quantizer search)
        [ "$v" = mix-imatrix ] && extra=(--imatrix "$kim")
        "$k" convert "$gguf" -o "$out" --wmode mix "${extra[@]}" >&2
    fi
done
bash bench/quality.sh --model "$model" --modes "mix mix-imatrix" --llama "Q4_0 Q4_0-imatrix"
