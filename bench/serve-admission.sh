#!/usr/bin/env bash
# A long prompt admitted into `kestrel serve` beside running streams
# (bench/serve_admission.py): its time to first token against its prefill
# alone, and the streams' longest gap between tokens while it is admitted
# against one prefill chunk plus one decode step. Model: $KESTREL_VQF, else
# the real model converted as scripts/demo.sh does.
#   bash bench/serve-admission.sh [PROMPT_WORDS=1200] [STREAMS=2] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
words="${1:-1200}"; streams="${2:-2}"; threads="${3:-}"
cargo build -q --release --locked -p kestrel
bin=./target/release/kestrel
vqf="${KESTREL_VQF:-}"
if [ -z "$vqf" ]; then
    gguf=$(bash scripts/fetch-model.sh)
    vqf=.cache/vqf/qwen2.5-coder-0.5b-instruct-dual.vqf
    mkdir -p .cache/vqf
    [ -f "$vqf" ] || "$bin" convert "$gguf" -o "$vqf" --wmode dual
fi
echo "model: $vqf; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; load: $(uptime | sed 's/.*load/load/')"
log=$(mktemp)
"$bin" serve "$vqf" --port 0 --parallel $((streams + 1)) --ctx 4096 ${threads:+-t "$threads"} 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
addr=""
for _ in $(seq 600); do
    addr=$(grep -o 'listening on http://[^ ]*' "$log" | sed 's|.*http://||' || true)
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
timeout 900 python3 bench/serve_admission.py "$addr" "$words" "$streams"
echo "load after: $(uptime | sed 's/.*load/load/')"
