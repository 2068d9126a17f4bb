#!/usr/bin/env bash
# The firmware host (tests/firmware-host): kestrel-core and kestrel-kernels in
# a no_std, no-libc aarch64 program that embeds a VQF.
#
#   bash scripts/firmware-host.sh build   converts the dense fixture with the
#       std kestrel (host build), builds the firmware host around it
#       (aarch64-unknown-none, release) and prints the binary's path last
#   bash scripts/firmware-host.sh test    also lints it (fmt, clippy), runs it
#       under qemu-aarch64 -cpu cortex-a76 and fails unless its output (text
#       and token ids) equals `kestrel run ... --temp 0 --ids` on the same file
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
set +e
a=$(qemu-aarch64 -cpu cortex-a76 "$bin")
rc=$?
set -e
[ "$rc" -eq 0 ] || { echo "firmware host failed (exit $rc): $a"; exit 1; }
b=$(cargo run -q --locked -p kestrel -- run "$vqf" -p "$prompt" -n "$n" --temp 0 --ids -t 2 2>/dev/null)
if [ "$a" != "$b" ]; then
    printf 'firmware host differs from kestrel run:\n--- firmware host\n%s\n--- kestrel run\n%s\n' "$a" "$b"
    exit 1
fi
printf '%s\n' "$a"
echo "firmware host ($(stat -c %s "$bin") bytes, $(stat -c %s "$vqf") of them the model): same text and token ids as kestrel run"
