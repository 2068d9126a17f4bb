#!/usr/bin/env bash
# A follow-up turn after a long conversation in `kestrel serve`
# (bench/serve_followup.py): its time to first token against a cold prefill
# of a conversation as long. Model: $KESTREL_VQF, else as serve-common.sh.
#   bash bench/serve-followup.sh [PROMPT_WORDS=1000] [ROUNDS=3] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
words="${1:-1000}"; rounds="${2:-3}"; threads="${3:-}"
. bench/serve-common.sh
serve_model
echo "model: $vqf; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; load: $(uptime | sed 's/.*load/load/')"
log=$(mktemp)
start_serve "$log" --parallel 1 --ctx 4096 ${threads:+-t "$threads"}
pid=$serve_pid; addr=$serve_addr
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
(cd bench && timeout 900 python3 serve_followup.py "$addr" "$words" "$rounds")
echo "load after: $(uptime | sed 's/.*load/load/')"
