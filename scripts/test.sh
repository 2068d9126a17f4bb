#!/usr/bin/env bash
# Kestrel's whole test suite, from a fresh clone: sets up what is missing,
# then runs formatting and lint checks, every test on x86_64, every test on
# aarch64 under qemu twice (cortex-a76: dotprod kernels; cortex-a53: the
# fallback), the bare-metal builds, and the size report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
step() { printf '\n==== %s\n' "$*"; }
run_tests() { "$@" 2>&1 | tee -a "$log"; }

step "format"
cargo fmt --all -- --check

step "clippy (x86_64 and aarch64)"
cargo clippy --locked --all-targets -- -D warnings
cargo clippy --locked --all-targets --target aarch64-unknown-linux-gnu -- -D warnings

step "tests on x86_64"
run_tests cargo test --locked --workspace

step "tests on aarch64 under qemu -cpu cortex-a76 (dotprod kernels expected)"
KESTREL_QEMU_CPU=cortex-a76 KESTREL_EXPECT_KERNELS=aarch64-dotprod \
    run_tests cargo test --locked --workspace --target aarch64-unknown-linux-gnu
KESTREL_QEMU_CPU=cortex-a76 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- cpu

step "tests on aarch64 under qemu -cpu cortex-a53 (no dotprod: fallback expected)"
KESTREL_QEMU_CPU=cortex-a53 KESTREL_EXPECT_KERNELS=scalar \
    run_tests cargo test --locked --workspace --target aarch64-unknown-linux-gnu
KESTREL_QEMU_CPU=cortex-a53 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- cpu

step "no_std builds: kestrel-core and kestrel-kernels for bare-metal targets"
for t in aarch64-unknown-none thumbv7em-none-eabihf; do
    cargo build --locked -p kestrel-core -p kestrel-kernels --target "$t"
    echo "built for $t"
done

step "size report"
bash size-report/run.sh

step "summary"
passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
