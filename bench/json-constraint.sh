#!/usr/bin/env bash
# What structured output costs per decoded token: `kestrel serve` on a real
# model, chat answers plain, with a JSON schema and with json_object, greedy
# and sampled (temperature 0.9), 3 prompts x ROUNDS rounds; the server logs
# every answer's median sampling step (KESTREL_LOG_SAMPLING=1), and this
# prints the median of those medians per case next to the decode step of
# `kestrel bench` (tg128) on the same file, and checks that every JSON
# answer that stopped parses.
#   bash bench/json-constraint.sh [MODEL.vqf] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-.cache/vqf/0.5b-q4.vqf}
rounds=${2:-2}
cargo build -q --release -p kestrel
bin=target/release/kestrel
log=$(mktemp)
port=$((20000 + RANDOM % 20000))
KESTREL_LOG_SAMPLING=1 "$bin" serve "$model" --port "$port" -t 2 2> "$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 50); do grep -q listening "$log" && break; sleep 0.2; done
python3 - "$port" "$rounds" <<'PY'
import json, sys, urllib.request
port, rounds = sys.argv[1], int(sys.argv[2])
person = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"},
    "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "level": {"enum": ["junior", "senior"]}}, "required": ["name", "age", "languages", "level"],
    "additionalProperties": False}
modes = [("plain", None), ("schema", {"type": "json_schema", "json_schema": {"name": "p", "schema": person}}),
         ("object", {"type": "json_object"})]
prompts = ["Describe a fictional Python developer.", "Describe a fictional Rust developer.",
           "Describe a fictional data scientist."]
for r in range(rounds):
    for temp in [0, 0.9]:
        for name, rf in modes:
            for p in prompts:
                b = {"model": "m", "messages": [{"role": "user", "content": p}], "max_tokens": 120,
                     "temperature": temp, "seed": r + 1}
                if rf:
                    b["response_format"] = rf
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                             data=json.dumps(b).encode(),
                                             headers={"Content-Type": "application/json"})
                c = json.load(urllib.request.urlopen(req))["choices"][0]
                if rf and c["finish_reason"] == "stop":
                    json.loads(c["message"]["content"])
                print(f"{r} {temp} {name}", flush=True)
PY
sleep 0.5
kill $pid; wait $pid 2>/dev/null || true
tg=$("$bin" bench "$model" -p 16 -n 128 -r 3 -t 2 2>&1 | awk '/^tg/ {print $2}')
python3 - "$log" "$rounds" "$tg" <<'PY'
import re, statistics, sys
lines = [l for l in open(sys.argv[1]) if "sampling step median" in l]
rounds, tg = int(sys.argv[2]), float(sys.argv[3])
step_ms = 1000 / tg
cases, i = {}, 0
for r in range(rounds):
    for temp in [0, 0.9]:
        for name in ["plain", "schema", "object"]:
            for _ in range(3):
                l = lines[i]; i += 1
                med = float(re.search(r"median ([0-9.]+) ms", l).group(1))
                m = re.search(r"(\d+) steps(?:, (\d+) with the whole mask)?", l)
                cases.setdefault((temp, name), []).append((med, int(m.group(1)), int(m.group(2) or 0)))
print(f"decode step (tg128, 2 threads): {step_ms:.2f} ms")
print("| temperature | answer | sampling step, median of medians (ms) | over plain (ms) | share of a decode step | steps | whole-mask steps |")
print("|---|---|---:|---:|---:|---:|---:|")
for temp in [0, 0.9]:
    base = statistics.median(x[0] for x in cases[(temp, "plain")])
    for name in ["plain", "schema", "object"]:
        v = cases[(temp, name)]
        med = statistics.median(x[0] for x in v)
        extra = med - base
        print(f"| {temp} | {name} | {med:.3f} | {extra:+.3f} | {100 * extra / step_ms:.1f}% | "
              f"{sum(x[1] for x in v)} | {sum(x[2] for x in v)} |")
PY
