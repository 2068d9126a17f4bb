#!/usr/bin/env bash
# The C ABI's cost on aarch64, exactly: executed instructions per decoded
# token of `kestrel run` and of the C host (tests/c-host/main.c, hosted
# build, pulling tokens with kestrel_next/kestrel_piece) on the real 0.5B
# model under qemu-aarch64 -cpu cortex-a76 (dotprod kernels), 1 thread,
# counted with the qemu-insncount TCG plugin (bench/insncount.sh says where
# its source lives).
#   bash bench/insncount-capi.sh [MODE...]   (default: source; the files
#   .cache/vqf/0.5b-MODE.vqf)
# Both programs are release builds for aarch64-unknown-linux-gnu (the C
# host linked statically against the capi static library of that target).
# Per decoded token = (count with -n 17 - count with -n 1) / 16, the same
# chat-formatted prompt, --temp 0; kestrel run with -t 1 --no-pin, the C
# host serial (no parallel callback). Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
modes=${*:-source}
dir=${QEMU_INSNCOUNT_DIR:-$(pwd)/../shared/tools/qemu-insncount}
out=.cache/insncount-capi
mkdir -p "$out"
lib="$out/libinsncount.so"
[ -f "$lib" ] || gcc -shared -fPIC -O2 -fvisibility=hidden -o "$lib" "$dir/insncount.c"
t=aarch64-unknown-linux-gnu
cargo build -q --locked --release -p kestrel --target $t
cargo rustc -q --locked -p kestrel-capi --release --features panic-handler --target $t --crate-type staticlib
aarch64-linux-gnu-gcc -std=c11 -O2 -static -Iinclude tests/c-host/main.c \
    target/$t/release/libkestrel_capi.a -lpthread -o "$out/c-host"
kestrel=target/$t/release/kestrel
prompt="Write a Python function that checks whether a number is prime."
count() { # TAG PROGRAM ARGS...: the plugin's total
    local tag=$1; shift
    qemu-aarch64 -cpu cortex-a76 -L /usr/aarch64-linux-gnu -d plugin -plugin "$lib" "$@" \
        2> "$out/$tag.err" > "$out/$tag.out"
    grep -o 'total=[0-9]*' "$out/$tag.err" | head -1 | cut -d= -f2
}
echo "| file | kestrel run | C host | C host / kestrel run |"
echo "|---|---:|---:|---:|"
for m in $modes; do
    f=.cache/vqf/0.5b-$m.vqf
    r1=$(count "$m-run-1" "$kestrel" run "$f" -p "$prompt" -n 1 --temp 0 -t 1 --no-pin --ids)
    r17=$(count "$m-run-17" "$kestrel" run "$f" -p "$prompt" -n 17 --temp 0 -t 1 --no-pin --ids)
    c1=$(count "$m-c-1" "$out/c-host" "$f" "$prompt" 1)
    c17=$(count "$m-c-17" "$out/c-host" "$f" "$prompt" 17)
    cmp -s <(tail -1 "$out/$m-run-17.out") <(tail -1 "$out/$m-c-17.out") ||
        { echo "the C host's tokens differ from kestrel run's ($m)" >&2; exit 1; }
    python3 -c "a,b=($r17-$r1)/16,($c17-$c1)/16; print(f'| \`$m\` | {a/1e6:.3f} M | {b/1e6:.3f} M | {b/a:.5f} |')"
done
