#!/usr/bin/env bash
# Builds the shipped binary (static aarch64 musl, release profile), prints its
# size against the budget, a breakdown by crate and the largest symbols, and
# appends the figure to size-report/history.csv (one line per commit).
# Fails when the binary is over the hard budget.
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-unknown-linux-musl
budget=1048576
goal=819200

cargo build --release --locked --target "$target" -p kestrel
cargo build --profile size-report --locked --target "$target" -p kestrel
bin="target/$target/release/kestrel"
syms="target/$target/size-report/kestrel"

python3 size-report/report.py --bin "$bin" --symbols "$syms" \
    --budget "$budget" --goal "$goal" --history size-report/history.csv
