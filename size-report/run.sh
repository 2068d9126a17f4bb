#!/usr/bin/env bash
# Builds the shipped binary (static aarch64 musl, release profile), prints its
# size against the budget, a breakdown by crate and the largest symbols, and
# appends the figure to size-report/history.csv (one line per commit).
# Fails when the binary is over the hard budget. A second line: the firmware
# host (tests/firmware-host, core + kernels alone without std), printed and
# kept in size-report/history-firmware.csv, with no budget.
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-unknown-linux-musl
budget=1000000
goal=900000

# The shipped build: std rebuilt with the release profile, no backtrace
# symbolizer (scripts/build-shipped.sh); `size-report` keeps the symbols.
bin=$(bash scripts/build-shipped.sh "$target" release | tail -1)
syms=$(bash scripts/build-shipped.sh "$target" size-report | tail -1)

# libunwind stays out (feature shipped, shell/src/no_unwinder.rs): a new
# reference to an unwinder function would link its 50 KB back silently.
if nm "$syms" | grep -q -E ' (__unw_step|unw_step|_Unwind_RaiseException)$'; then
    echo "size-report: libunwind is linked into the shipped binary (see shell/src/no_unwinder.rs)" >&2
    exit 1
fi

# printf stays out (shell/src/no_printf.rs): musl's pthread_setname_np was its
# one caller; a new caller would link its 14 KB back silently.
if nm "$syms" | grep -q -E ' (vfprintf|printf_core|fmt_fp)$'; then
    echo "size-report: musl's printf is linked into the shipped binary (see shell/src/no_printf.rs)" >&2
    exit 1
fi

fw=$(bash scripts/firmware-host.sh build | tail -1)

python3 size-report/report.py --bin "$bin" --symbols "$syms" \
    --budget "$budget" --goal "$goal" --history size-report/history.csv \
    --fw-bin "$fw" --fw-model target/firmware-host/dev_qwen3_dense_tied.vqf \
    --fw-history size-report/history-firmware.csv
