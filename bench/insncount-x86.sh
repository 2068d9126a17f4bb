#!/usr/bin/env bash
# x86_64 cost, exactly: executed instructions of two Kestrel binaries on the
# real 0.5B under qemu-x86_64 -cpu max (TCG: AVX2/FMA/F16C, no AVX-512, so
# the x86_64-avx2 kernels), 1 thread, counted with the qemu-insncount TCG
# plugin (see bench/insncount.sh for where its source lives).
#   bash bench/insncount-x86.sh BIN_A BIN_B [MODE...]
# MODE: the VQF files .cache/vqf/0.5b-MODE.vqf (default: source q4 small
# exact). Per decoded token = (count with -n 17 - count with -n 1) / 16 of
# `kestrel run FILE --raw -p 'def quicksort(arr):' --temp 0 -t 1 --no-pin`;
# per prefill token = (count of `kestrel bench FILE -p 64 -n 0 -r 1 -t 1
# --probe-rows 0` - the same with -p 8) / (2 x 56). Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1; b=$2; shift 2
modes=${*:-source q4 small exact}
dir=${QEMU_INSNCOUNT_DIR:-$(pwd)/../shared/tools/qemu-insncount}
out=.cache/insncount-x86
mkdir -p "$out"
lib="$out/libinsncount.so"
[ -f "$lib" ] || gcc -shared -fPIC -O2 -fvisibility=hidden -o "$lib" "$dir/insncount.c"
count() { # TAG BIN ARGS...: the plugin's total
    local tag=$1 bin=$2; shift 2
    qemu-x86_64 -cpu max -d plugin -plugin "$lib" "$bin" "$@" 2> "$out/$tag.err" > "$out/$tag.out"
    grep -o 'total=[0-9]*' "$out/$tag.err" | head -1 | cut -d= -f2
}
echo "| file | decode A | decode B | B/A | prefill A | prefill B | B/A |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for m in $modes; do
    f=.cache/vqf/0.5b-$m.vqf
    declare -A d p
    for t in a b; do
        bin=$a; [ $t = b ] && bin=$b
        run=(run "$f" --raw -p 'def quicksort(arr):' --temp 0 -t 1 --no-pin)
        c1=$(count "$m-$t-n1" "$bin" "${run[@]}" -n 1)
        c17=$(count "$m-$t-n17" "$bin" "${run[@]}" -n 17)
        d[$t]=$(( (c17 - c1) / 16 ))
        p8=$(count "$m-$t-p8" "$bin" bench "$f" -p 8 -n 0 -r 1 -t 1 --probe-rows 0)
        p64=$(count "$m-$t-p64" "$bin" bench "$f" -p 64 -n 0 -r 1 -t 1 --probe-rows 0)
        p[$t]=$(( (p64 - p8) / 112 ))
    done
    python3 -c "a,b,c,e=${d[a]},${d[b]},${p[a]},${p[b]}; print(f'| \`$m\` | {a/1e6:.2f} M | {b/1e6:.2f} M | {b/a:.4f} | {c/1e6:.2f} M | {e/1e6:.2f} M | {e/c:.4f} |')"
done
