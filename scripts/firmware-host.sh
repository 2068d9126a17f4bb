#!/usr/bin/env bash
# The firmware host (tests/firmware-host): kestrel-core and kestrel-kernels in
# a no_std, no-libc aarch64 program that embeds a VQF.
#
#   bash scripts/firmware-host.sh build   converts the dense fixture with the
#       std kestrel (host build), builds the firmware host around it
#       (aarch64-unknown-none, release) and prints the binary's path last
#   bash scripts/firmware-host.sh test    also lints it (fmt, clippy), runs it
#       under qemu-aarch64 -cpu cortex-a76 (dotprod kernels) and fails unless
#       its output (text and token ids) equals `kestrel run ... --temp 0 --ids`
#       on the same file; then the same for a build without +dotprod (scalar
#       kernels) under -cpu cortex-a53
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-test}
crate=tests/firmware-host
out=target/firmware-host
mkdir -p "$out"
vqf=$root/$out/dev_qwen3_dense_tied.vqf

cargo run -q --locked -p kestrel -- convert tests/fixtures/dev_qwen3_dense_tied/hf \
    -o "$vqf" --wmode dual >/dev/null 2>&1
# Cargo picks up the crate's .cargo/config.toml (target, +dotprod, link script)
# only from inside its directory.
(cd "$crate" && KESTREL_FW_VQF="$vqf" cargo build -q --locked --release)
bin=$root/$crate/target/aarch64-unknown-none/release/kestrel-firmware-host
if [ "$mode" = build ]; then
    echo "$bin"
    exit 0
fi

(cd "$crate" && cargo fmt -- --check && KESTREL_FW_VQF="$vqf" cargo clippy -q --locked --release -- -D warnings)
prompt=$(sed -n 's/^pub const PROMPT: &str = "\(.*\)";$/\1/p' "$crate/src/main.rs")
n=$(sed -n 's/^pub const N_PREDICT: usize = \([0-9]*\);$/\1/p' "$crate/src/main.rs")
[ -n "$prompt" ] && [ -n "$n" ] || { echo "cannot read PROMPT / N_PREDICT from $crate/src/main.rs"; exit 1; }
b=$(cargo run -q --locked -p kestrel -- run "$vqf" -p "$prompt" -n "$n" --temp 0 --ids -t 2 2>/dev/null)

# check NAME BINARY CPU KERNELS: runs BINARY under qemu with CPU, fails unless
# it exits 0, used KERNELS and printed exactly what `kestrel run` printed.
check() {
    local err=$root/$out/stderr.txt a rc
    set +e
    a=$(qemu-aarch64 -cpu "$3" "$2" 2>"$err")
    rc=$?
    set -e
    cat "$err"
    [ "$rc" -eq 0 ] || { echo "firmware host ($1) failed: exit $rc"; exit 1; }
    grep -q " $4 kernels," "$err" || { echo "firmware host ($1): expected $4 kernels"; exit 1; }
    if [ "$a" != "$b" ]; then
        printf 'firmware host (%s) differs from kestrel run:\n--- firmware host\n%s\n--- kestrel run\n%s\n' "$1" "$a" "$b"
        exit 1
    fi
    printf '%s\n' "$a"
    echo "firmware host ($1, $3, $(stat -c %s "$2") bytes, $(stat -c %s "$vqf") of them the model): same text and token ids as kestrel run"
}
check dotprod "$bin" cortex-a76 aarch64-dotprod

# The same program built without +dotprod takes the scalar kernels and runs
# on a core without dotprod. RUSTFLAGS replaces the crate's rustflags, so the
# link script is named again.
scalar=$root/$out/scalar
(cd "$crate" && KESTREL_FW_VQF="$vqf" CARGO_TARGET_DIR="$scalar" RUSTFLAGS="-C link-arg=-Tlink.ld" \
    cargo build -q --locked --release)
check scalar "$scalar/aarch64-unknown-none/release/kestrel-firmware-host" cortex-a53 scalar
