#!/usr/bin/env bash
# Load test of `kestrel serve` on loopback: for K = 1, 2, 4 starts the
# server with --parallel K and fires REQUESTS streaming chat requests, K at
# a time (temperature 0, MAX_TOKENS each), then prints one markdown row per K
# (bench/serve_load.py). Model: $KESTREL_VQF, else the real model converted
# as scripts/demo.sh does, else the tiny fixture. Bounded: each K has a
# 10-minute timeout. With ROUNDS=R (default 1) the three K run R times in
# turn, so a host whose speed drifts weighs on every K alike, and a last
# line gives each K's median aggregate and K = 2 and K = 4 against K = 1
# (ratios of the medians, and the median of each round's ratio).
# SERVE_ARGS adds flags to every server (e.g. "--lookup").
#   [ROUNDS=R] [SERVE_ARGS=...] bash bench/serve-load.sh [REQUESTS=8] [MAX_TOKENS=64] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-8}"; max_tokens="${2:-64}"; threads="${3:-}"; rounds="${ROUNDS:-1}"
. bench/serve-common.sh
serve_model
echo "model: $vqf; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; load: $(uptime | sed 's/.*load/load/')"
echo "| K | requests | wall s | requests/s | TTFT ms median / p90 | decode tok/s per stream | aggregate decode tok/s |"
echo "|---|---|---|---|---|---|---|"
rows=$(mktemp)
for r in $(seq "$rounds"); do
    for k in 1 2 4; do
        log=$(mktemp)
        start_serve "$log" --parallel "$k" --ctx 1024 ${threads:+-t "$threads"} ${SERVE_ARGS:-}
        pid=$serve_pid; addr=$serve_addr
        row=$(timeout 600 python3 bench/serve_load.py "$addr" "$n" "$k" "$max_tokens") || row="| $k | FAILED or timed out |"
        echo "$row"
        echo "$r $row" >> "$rows"
        kill "$pid"; wait "$pid" 2>/dev/null || true
        rm -f "$log"
    done
done
if [ "$rounds" -gt 1 ]; then
    python3 - "$rows" <<'PY'
import statistics, sys
agg = {}
for line in open(sys.argv[1]):
    r, _, rest = line.partition(" ")
    cells = [c.strip() for c in rest.strip().strip("|").split("|")]
    try:
        agg.setdefault(int(cells[0]), {})[int(r)] = float(cells[-1])
    except (ValueError, IndexError):
        pass  # a failed run: left out
med = {k: statistics.median(v.values()) for k, v in agg.items()}
parts = [f"K = {k} {med[k]:.2f}" for k in sorted(med)]
for k in (2, 4):
    if k in agg and 1 in agg:
        per = [agg[k][r] / agg[1][r] for r in agg[k] if r in agg[1]]
        parts.append(f"K = {k} / K = 1 {med[k] / med[1]:.2f}x (per round {', '.join(f'{x:.2f}' for x in per)}; median {statistics.median(per):.2f}x)")
rounds = len({r for v in agg.values() for r in v})
print(f"medians of {rounds} rounds, aggregate decode tok/s: " + "; ".join(parts))
PY
fi
rm -f "$rows"
echo "load after: $(uptime | sed 's/.*load/load/')"
