#!/usr/bin/env bash
# Kestrel's C ABI (capi/, include/kestrel.h), built and proven.
#
#   bash scripts/capi.sh build   the libraries, into target/capi/:
#       libkestrel-aarch64-none.a   static, aarch64-unknown-none (no_std: firmware, RTOS)
#       libkestrel-x86_64-linux.a   static, x86_64-unknown-linux-gnu
#       libkestrel-x86_64-linux.so  shared, x86_64-unknown-linux-gnu (Python's ctypes)
#       libkestrel-thumbv7em-none.a static, thumbv7em-none-eabihf (Cortex-M4F/M7; built only)
#   Cargo cannot choose a crate type per target, so the manifest builds an
#   rlib and each library is asked for here with `cargo rustc --crate-type`
#   and the `panic-handler` feature (the no_std libraries' own handler).
#
#   bash scripts/capi.sh test    also (fails on any difference):
#       - the header: compiles as C11 and as C++17 with -Wall -Wextra -Werror
#         -pedantic, and declares exactly the functions the static libraries
#         export (nm), and the libraries export nothing else named kestrel_;
#       - tests/c-host freestanding (aarch64, -ffreestanding -nostdlib, no
#         libc) with the dense fixture embedded, under qemu -cpu cortex-a76
#         (dotprod) and cortex-a53 (scalar): prints exactly what `kestrel run
#         FILE -p PROMPT -n N --temp 0 --ids` prints; its ELF without the
#         model at most 250,000 bytes; without the feature gguf-rows it
#         refuses, by name, a file whose embedding is the GGUF's blocks,
#         and without the feature codebook a file of the IQ3 layouts;
#       - tests/c-host built for Linux x86_64 with libc on the real 0.5B
#         model's `source` file, serial and with a pthread pool behind the
#         parallel-for callback: the same as `kestrel run`;
#       - examples/python/run.py (ctypes, the shared library) on the same
#         file: the same as `kestrel run`;
#       - the C example of docs/embedding.md, compiled as written and run on
#         the dense fixture: the same text as `kestrel run`;
#       - scripts/install-capi.sh into a temporary prefix (the shared
#         library's SONAME libkestrel.so.1), the same example built with
#         `pkg-config --cflags --libs kestrel` against it (the hosted build:
#         detected kernels, the built-in pool): the same text, on the dense
#         fixture and on the real 0.5B model;
#       - the Python package (python/): `pip install ./python` into a fresh
#         venv (its in-tree backend builds the hosted library), then its
#         tests (python/tests) on the real 0.5B model against `kestrel run`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-test}
out=$root/target/capi
mkdir -p "$out"

lib() { # lib TARGET CRATE-TYPES [FEATURE]
    cargo rustc -q --locked -p kestrel-capi --release --features "panic-handler ${3:-}" \
        --target "$1" --crate-type "$2"
}
# The hosted libraries read every file `kestrel convert` writes (feature
# gguf-rows: an embedding kept in the GGUF's blocks; codebook: the IQ3
# layouts); the no_std ones leave ggml's dequantizers and the codebook
# kernels out and refuse such files by name.
lib aarch64-unknown-none staticlib
cp target/aarch64-unknown-none/release/libkestrel_capi.a "$out/libkestrel-aarch64-none.a"
lib x86_64-unknown-linux-gnu staticlib,cdylib "gguf-rows codebook"
cp target/x86_64-unknown-linux-gnu/release/libkestrel_capi.a "$out/libkestrel-x86_64-linux.a"
cp target/x86_64-unknown-linux-gnu/release/libkestrel_capi.so "$out/libkestrel-x86_64-linux.so"
# A Cortex-M target too (the library's size on a 32-bit MCU; not run).
lib thumbv7em-none-eabihf staticlib
cp target/thumbv7em-none-eabihf/release/libkestrel_capi.a "$out/libkestrel-thumbv7em-none.a"
for f in "$out"/libkestrel-*; do echo "$(basename "$f"): $(stat -c %s "$f") bytes"; done
if [ "$mode" = build ]; then exit 0; fi

echo "== the header"
gcc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c include/kestrel.h
g++ -std=c++17 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c++ include/kestrel.h
# Declarations start a line with their return type (comments do not).
declared=$(grep -E '^[a-z].*[ *]kestrel_[a-z0-9_]+\(' include/kestrel.h | grep -oE 'kestrel_[a-z0-9_]+\(' | tr -d '(' | sort)
[ -n "$declared" ] || { echo "no functions found in include/kestrel.h"; exit 1; }
for a in "$out/libkestrel-aarch64-none.a" "$out/libkestrel-x86_64-linux.a"; do
    exported=$(nm -g --defined-only "$a" 2>/dev/null | awk '$2 == "T" && $3 ~ /^kestrel_/ {print $3}' | sort -u)
    if [ "$declared" != "$exported" ]; then
        echo "include/kestrel.h and $(basename "$a") differ (< header, > library):"
        diff <(echo "$declared") <(echo "$exported") || true
        exit 1
    fi
done
echo "include/kestrel.h: C11 and C++17 clean; declares the $(echo "$declared" | wc -l) functions both static libraries export"

# The dense fixture, as the firmware host embeds it.
vqf=$out/dev_qwen3_dense_tied.vqf
cargo run -q --locked -p kestrel -- convert tests/fixtures/dev_qwen3_dense_tied/hf \
    -o "$vqf" --wmode dual >/dev/null 2>&1
prompt=$(sed -n 's/^#define PROMPT "\(.*\)"$/\1/p' tests/c-host/main.c)
n=$(sed -n 's/^#define N_PREDICT \([0-9]*\)$/\1/p' tests/c-host/main.c)
[ -n "$prompt" ] && [ -n "$n" ] || { echo "cannot read PROMPT / N_PREDICT from tests/c-host/main.c"; exit 1; }

# same NAME EXPECTED COMMAND...: fails unless COMMAND exits 0 and prints EXPECTED.
same() {
    local name=$1 want=$2 got rc
    shift 2
    set +e
    got=$("$@" 2>"$out/stderr.txt")
    rc=$?
    set -e
    cat "$out/stderr.txt"
    [ "$rc" -eq 0 ] || { echo "$name failed: exit $rc"; exit 1; }
    if [ "$got" != "$want" ]; then
        printf '%s differs from kestrel run:\n--- %s\n%s\n--- kestrel run\n%s\n' "$name" "$name" "$got" "$want"
        exit 1
    fi
    printf '%s\n' "$got"
    echo "$name: same text and token ids as kestrel run"
}

echo "== the freestanding C host (aarch64, no libc) under qemu"
host=$out/c-host-aarch64
aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -ffreestanding -nostdlib -static \
    -fno-pie -no-pie -fno-asynchronous-unwind-tables -Iinclude -DKESTREL_FREESTANDING \
    -DKESTREL_MODEL_PATH="$vqf" tests/c-host/main.c "$out/libkestrel-aarch64-none.a" \
    -Wl,--gc-sections -Wl,--build-id=none -Wl,-T,tests/firmware-host/link.ld -s -o "$host"
code=$(($(stat -c %s "$host") - $(stat -c %s "$vqf")))
echo "c-host-aarch64: $(stat -c %s "$host") bytes, $code without the model"
[ "$code" -le 250000 ] || { echo "the freestanding C host is over its 250,000 bytes without the model"; exit 1; }
want=$(cargo run -q --locked -p kestrel -- run "$vqf" -p "$prompt" -n "$n" --temp 0 --ids -t 1 2>/dev/null)
same "c-host (cortex-a76)" "$want" qemu-aarch64 -cpu cortex-a76 "$host"
grep -q "aarch64-dotprod kernels" "$out/stderr.txt" || { echo "c-host under cortex-a76: expected the dotprod kernels"; exit 1; }
same "c-host (cortex-a53)" "$want" qemu-aarch64 -cpu cortex-a53 "$host"
grep -q "scalar kernels" "$out/stderr.txt" || { echo "c-host under cortex-a53: expected the scalar kernels"; exit 1; }

# Without the feature gguf-rows, a file whose embedding is the GGUF's blocks
# (the default conversion of a quantized GGUF) is refused by name.
rows_vqf=$out/kquant-exact.vqf
cargo run -q --locked -p kestrel -- convert tests/fixtures/dev_qwen2_kquant/gguf/model-kquant-mix.gguf \
    -o "$rows_vqf" --wmode exact >/dev/null 2>&1
aarch64-linux-gnu-gcc -std=c11 -O2 -ffreestanding -nostdlib -static -fno-pie -no-pie \
    -fno-asynchronous-unwind-tables -Iinclude -DKESTREL_FREESTANDING -DKESTREL_MODEL_PATH="$rows_vqf" \
    tests/c-host/main.c "$out/libkestrel-aarch64-none.a" -Wl,--gc-sections -Wl,--build-id=none \
    -Wl,-T,tests/firmware-host/link.ld -s -o "$out/c-host-rows"
if qemu-aarch64 -cpu cortex-a76 "$out/c-host-rows" >/dev/null 2>"$out/stderr.txt"; then
    echo "c-host without gguf-rows ran a file whose embedding is GGUF blocks"; exit 1
fi
grep -q "gguf-rows" "$out/stderr.txt" || { cat "$out/stderr.txt"; echo "c-host: expected the refusal naming gguf-rows"; exit 1; }
echo "c-host without gguf-rows: refuses an EMB_BLOCKS file by name"

# Without the feature codebook, a file of the IQ3 layouts is refused by name.
cb_vqf=$out/iq3s-exact.vqf
cargo run -q --locked -p kestrel -- convert tests/fixtures/dev_qwen2_kquant/gguf/model-iq3_s.gguf \
    -o "$cb_vqf" --wmode exact >/dev/null 2>&1
aarch64-linux-gnu-gcc -std=c11 -O2 -ffreestanding -nostdlib -static -fno-pie -no-pie \
    -fno-asynchronous-unwind-tables -Iinclude -DKESTREL_FREESTANDING -DKESTREL_MODEL_PATH="$cb_vqf" \
    tests/c-host/main.c "$out/libkestrel-aarch64-none.a" -Wl,--gc-sections -Wl,--build-id=none \
    -Wl,-T,tests/firmware-host/link.ld -s -o "$out/c-host-codebook"
if qemu-aarch64 -cpu cortex-a76 "$out/c-host-codebook" >/dev/null 2>"$out/stderr.txt"; then
    echo "c-host without codebook ran a file of an IQ3 layout"; exit 1
fi
grep -q "codebook" "$out/stderr.txt" || { cat "$out/stderr.txt"; echo "c-host: expected the refusal naming codebook"; exit 1; }
echo "c-host without codebook: refuses an IQ3_Sx8 file by name"

echo "== the Linux C host and the Python example on the real model (0.5B, source file)"
gguf=$(bash scripts/fetch-model.sh)
real=$root/.cache/vqf/0.5b-source.vqf
if [ ! -s "$real" ] || [ "$real" -ot "$gguf" ]; then
    mkdir -p "$(dirname "$real")"
    cargo run -q --locked -p kestrel -- convert "$gguf" -o "$real.tmp" --wmode source >/dev/null 2>&1
    mv "$real.tmp" "$real"
fi
linux=$out/c-host-linux
gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -Iinclude tests/c-host/main.c \
    "$out/libkestrel-x86_64-linux.a" -lpthread -o "$linux"
real_prompt="Write a Python function that checks whether a number is prime."
want=$(cargo run -q --locked -p kestrel -- run "$real" -p "$real_prompt" -n 24 --temp 0 --ids -t 2 2>/dev/null)
same "c-host-linux (serial)" "$want" "$linux" "$real" "$real_prompt" 24 1
same "c-host-linux (2 threads)" "$want" "$linux" "$real" "$real_prompt" 24 2
same "examples/python/run.py" "$want" python3 examples/python/run.py \
    "$out/libkestrel-x86_64-linux.so" "$real" "$real_prompt" 24

echo "== the example of docs/embedding.md, as written"
example=$out/embedding-example
awk '/^```c$/ {on = 1; next} /^```$/ {on = 0} on' docs/embedding.md >"$example.c"
[ "$(wc -l <"$example.c")" -ge 20 ] || { echo "no C example found in docs/embedding.md"; exit 1; }
echo "docs/embedding.md's example: $(wc -l <"$example.c") lines"
gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -Iinclude "$example.c" "$out/libkestrel-x86_64-linux.a" -o "$example"
# The example states no CPU features: the scalar kernels, as KESTREL_KERNELS=scalar.
want=$(KESTREL_KERNELS=scalar cargo run -q --locked -p kestrel -- run "$vqf" -p "$prompt" -n 64 --temp 0 -t 1 2>/dev/null)
same "docs/embedding.md's example" "$want" "$example" "$vqf" "$prompt"

echo "== installed with scripts/install-capi.sh, the example built with pkg-config"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
bash scripts/install-capi.sh "$prefix"
soname=$(readelf -d "$prefix/lib/libkestrel.so.1" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libkestrel.so.1 ] || { echo "libkestrel.so.1's SONAME is '$soname'"; exit 1; }
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs kestrel)
gcc -std=c11 -O2 -Wall -Wextra -Werror -pedantic "$example.c" $flags -o "$example-pc"
LD_LIBRARY_PATH=$prefix/lib ldd "$example-pc" | grep -q "libkestrel.so.1 => $prefix/lib/libkestrel.so.1" ||
    { echo "the example does not load the installed libkestrel.so.1"; exit 1; }
LD_LIBRARY_PATH=$prefix/lib same "the example against the installed library (pkg-config)" "$want" "$example-pc" "$vqf" "$prompt"
# And on the real model: the hosted library's kernels and built-in pool,
# the text of `kestrel run FILE -p PROMPT --temp 0 -n 64`.
want=$(cargo run -q --locked --release -p kestrel -- run "$real" -p "$real_prompt" -n 64 --temp 0 2>/dev/null)
LD_LIBRARY_PATH=$prefix/lib same "the installed example on the real model" "$want" "$example-pc" "$real" "$real_prompt"

echo "== the Python package: pip install ./python into a fresh venv, its tests on the real model"
venv=$(mktemp -d)
trap 'rm -rf "$prefix" "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install -q ./python
KESTREL_TEST_MODEL=$real KESTREL_BIN=$root/target/release/kestrel \
    "$venv/bin/python" -m unittest discover -s python/tests -v
