#!/usr/bin/env bash
# A long prompt admitted into `kestrel serve` beside running streams
# (bench/serve_admission.py): its time to first token against its prefill
# alone, and the streams' longest gap between tokens while it is admitted
# against one prefill chunk plus one decode step. Model: $KESTREL_VQF, else
# the real model converted as scripts/demo.sh does, else the fixture.
#   bash bench/serve-admission.sh [PROMPT_WORDS=1200] [STREAMS=2] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
words="${1:-1200}"; streams="${2:-2}"; threads="${3:-}"
. bench/serve-common.sh
serve_model
echo "model: $vqf; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; load: $(uptime | sed 's/.*load/load/')"
log=$(mktemp)
start_serve "$log" --parallel $((streams + 1)) --ctx 4096 ${threads:+-t "$threads"}
pid=$serve_pid; addr=$serve_addr
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
timeout 900 python3 bench/serve_admission.py "$addr" "$words" "$streams"
echo "load after: $(uptime | sed 's/.*load/load/')"
