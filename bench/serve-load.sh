#!/usr/bin/env bash
# Load test of `kestrel serve` on loopback: for K = 1, 2, 4 starts the
# server with --parallel K and fires REQUESTS streaming chat requests, K at
# a time (temperature 0, MAX_TOKENS each), then prints one markdown row per K
# (bench/serve_load.py). Model: $KESTREL_VQF, else the real model converted
# as scripts/demo.sh does, else the tiny fixture. Bounded: each K has a
# 10-minute timeout.
#   bash bench/serve-load.sh [REQUESTS=8] [MAX_TOKENS=64] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-8}"; max_tokens="${2:-64}"; threads="${3:-}"
. bench/serve-common.sh
serve_model
echo "model: $vqf; $(nproc) CPUs; load: $(uptime | sed 's/.*load/load/')"
echo "| K | requests | wall s | requests/s | TTFT ms median / p90 | decode tok/s per stream | aggregate decode tok/s |"
echo "|---|---|---|---|---|---|---|"
for k in 1 2 4; do
    log=$(mktemp)
    start_serve "$log" --parallel "$k" --ctx 1024 ${threads:+-t "$threads"}
    pid=$serve_pid; addr=$serve_addr
    timeout 600 python3 bench/serve_load.py "$addr" "$n" "$k" "$max_tokens" || echo "| $k | FAILED or timed out |"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -f "$log"
done
echo "load after: $(uptime | sed 's/.*load/load/')"
