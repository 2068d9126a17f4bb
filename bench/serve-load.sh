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
cargo build -q --release --locked -p kestrel
bin=./target/release/kestrel
vqf="${KESTREL_VQF:-}"
if [ -z "$vqf" ]; then
    if gguf=$(bash scripts/fetch-model.sh 2>/dev/null); then
        vqf=.cache/vqf/qwen2.5-coder-0.5b-instruct-dual.vqf
        mkdir -p .cache/vqf
        [ -f "$vqf" ] || "$bin" convert "$gguf" -o "$vqf" --wmode dual
    else
        vqf=$(mktemp -d)/fixture.vqf
        "$bin" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$vqf" --wmode dual 2>/dev/null
        echo "(real model unavailable: the fixture model)"
    fi
fi
echo "model: $vqf; $(nproc) CPUs; load: $(uptime | sed 's/.*load/load/')"
echo "| K | requests | wall s | requests/s | TTFT ms median / p90 | decode tok/s per stream | aggregate decode tok/s |"
echo "|---|---|---|---|---|---|---|"
for k in 1 2 4; do
    log=$(mktemp)
    "$bin" serve "$vqf" --port 0 --parallel "$k" --ctx 1024 ${threads:+-t "$threads"} 2>"$log" &
    pid=$!
    addr=""
    for _ in $(seq 600); do
        addr=$(grep -o 'listening on http://[^ ]*' "$log" | sed 's|.*http://||' || true)
        [ -n "$addr" ] && break
        kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
        sleep 0.1
    done
    timeout 600 python3 bench/serve_load.py "$addr" "$n" "$k" "$max_tokens" || echo "| $k | FAILED or timed out |"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -f "$log"
done
echo "load after: $(uptime | sed 's/.*load/load/')"
