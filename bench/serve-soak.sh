#!/usr/bin/env bash
# Soak test of `kestrel serve` on loopback (docs/reliability.md): --parallel 4
# for SECONDS (default 600) under a mix of streaming and non-streaming
# requests, clients that disconnect mid-stream, malformed and oversized
# requests and a slow client, with a fixed-seed answer checked against
# `kestrel run` throughout, 100 idle connections against a real request,
# and the server's anonymous memory at the start and the end
# (bench/serve_soak.py says what fails). Model: $KESTREL_VQF, else the real
# model converted as scripts/demo.sh does, else the tiny fixture.
#   bash bench/serve-soak.sh [SECONDS=600] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"; threads="${2:-}"
. bench/serve-common.sh
serve_model
max_body=1048576
prompt="Name three uses of a linked list."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The check's answer, as `kestrel run` gives it (same sampler settings and
# seed as the soak's check request; its default top-k/top-p/min-p).
"$bin" run "$vqf" -p "$prompt" -n 24 --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --seed 7 \
    --ctx 1024 ${threads:+-t "$threads"} 2>/dev/null > "$work/check.txt"
echo "model: $vqf; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs"
echo "load before: $(uptime | sed 's/.*load/load/')"
echo "check answer (kestrel run): $(head -c 200 "$work/check.txt" | tr '\n' ' ')"
start_serve "$work/serve.log" --parallel 4 --ctx 1024 --max-body "$max_body" ${threads:+-t "$threads"}
pid=$serve_pid; addr=$serve_addr
status=0
timeout $((${seconds%.*} + 600)) python3 bench/serve_soak.py "$addr" "$pid" "$seconds" "$max_body" \
    "$prompt" "$work/check.txt" || status=$?
if ! kill -0 "$pid" 2>/dev/null; then
    echo "FAILED: the server is gone"; tail -5 "$work/serve.log"; status=1
fi
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
echo "load after: $(uptime | sed 's/.*load/load/')"
[ "$status" -eq 0 ] || echo "soak FAILED (exit $status)"
exit "$status"
