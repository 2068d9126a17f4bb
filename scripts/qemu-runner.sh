#!/usr/bin/env bash
# Cargo runner for aarch64 targets: runs the binary under qemu user mode.
# KESTREL_QEMU_CPU selects the CPU model (cortex-a76: dotprod; cortex-a53: none).
set -euo pipefail
cpu="${KESTREL_QEMU_CPU:-cortex-a76}"
exec qemu-aarch64 -cpu "$cpu" -L /usr/aarch64-linux-gnu "$@"
