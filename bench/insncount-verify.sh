#!/usr/bin/env bash
# aarch64 cost of speculative decoding's verify step, without a board:
# executed instructions under qemu-aarch64 -cpu cortex-a76, 1 thread (the
# qemu-insncount plugin, as bench/insncount.sh), of a step of R rows of one
# sequence through the decode copy against R one-row decode steps, per file
# (so per layout: `source` holds Q4_K/Q5_0/Q6_K/Q8_0, `q4` Q4_0x4, `q8`
# Q8_0x8).
#   bash bench/insncount-verify.sh [ROWS] [FILE...]
# Default ROWS 5 (a token and 4 drafts); default files: the real 0.5B's
# source, q4 and q8 VQFs in .cache/vqf (converted when missing).
# Method: `kestrel bench FILE -p 0 -n N -r 1 -t 1 --no-pin --probe-rows 0`
# decodes a warm-up token and N tokens one row a step; with
# `--verify-rows R` it then also runs a warm-up verify step and N / R verify
# steps of R rows (positions 0 .. N). Per one-row step = (count at N = 20 -
# count at N = 4) / 16; per verify step = (count with --verify-rows R -
# count without, both at N = 20) / (1 + 20 / R). The verify step's positions
# run to 20 like the one-row steps', so attention costs alike.
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-5}
shift || true
dir=${QEMU_INSNCOUNT_DIR:-$(pwd)/../shared/tools/qemu-insncount}
[ -f "$dir/insncount.c" ] || { echo "insncount-verify: no insncount.c in $dir" >&2; exit 2; }
bash scripts/setup.sh >&2
out=.cache/insncount
mkdir -p "$out" .cache/vqf
lib="$out/libinsncount.so"
if [ ! -f "$lib" ] || [ "$dir/insncount.c" -nt "$lib" ]; then
    gcc -shared -fPIC -O2 -fvisibility=hidden -o "$lib" "$dir/insncount.c"
fi
cargo build --release --locked -p kestrel >&2
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    gguf=$(bash scripts/fetch-model.sh)
    for mode in source q4 q8; do
        f=.cache/vqf/0.5b-$mode.vqf
        [ -f "$f" ] || ./target/release/kestrel convert "$gguf" -o "$f" --wmode "$mode" >&2
        files+=("$f")
    done
fi
target=aarch64-unknown-linux-musl
cargo build --profile size-report --locked --target "$target" -p kestrel >&2
bin="target/$target/size-report/kestrel"
total() {
    qemu-aarch64 -cpu cortex-a76 -d plugin -plugin "$lib" "$bin" bench "$@" \
        -p 0 -r 1 -t 1 --no-pin --probe-rows 0 --json 2>&1 >/dev/null |
        sed -n 's/.*insncount: total=\([0-9]*\).*/\1/p'
}
n=20
steps=$((1 + n / rows))
echo "| file | per one-row step | per verify step of $rows rows | verify / ($rows x one-row) |"
echo "|---|---:|---:|---:|"
for f in "${files[@]}"; do
    a4=$(total "$f" -n 4)
    a20=$(total "$f" -n $n)
    b20=$(total "$f" -n $n --verify-rows "$rows")
    python3 - "$f" "$a4" "$a20" "$b20" "$steps" "$rows" <<'PY'
import sys
f, a4, a20, b20, steps, rows = sys.argv[1], *map(int, sys.argv[2:])
one = (a20 - a4) / 16
verify = (b20 - a20) / steps
print(f"| {f} | {one/1e6:,.2f} M | {verify/1e6:,.2f} M | {verify/(rows*one):.3f} |")
PY
done
