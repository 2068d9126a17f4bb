#!/usr/bin/env bash
# The C ABI's speed on this x86_64 machine: `kestrel run` against the C host
# (tests/c-host/main.c, hosted build, pulling tokens with kestrel_next /
# kestrel_piece) on the real 0.5B model, greedy, the same prompt and tokens.
#   bash bench/capi-speed.sh [ROUNDS] [N] [MODE]   (defaults: 5 rounds,
#   128 tokens, .cache/vqf/0.5b-source.vqf)
# Each round runs, alternated: kestrel run -t 1, the C host serial (no
# parallel callback), kestrel run -t 2, the C host with 2 threads (its
# pthread pool behind the parallel-for callback). Both are release builds
# (the shipped profile); both report prefill and decode times (kestrel's
# summary line; the C host's stderr line, in microseconds). Prints the
# medians and the ratios C host / kestrel run of tokens per second.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}; n=${2:-128}; mode=${3:-source}
f=.cache/vqf/0.5b-$mode.vqf
out=.cache/capi-speed
mkdir -p "$out"
cargo build -q --locked --release -p kestrel
bash scripts/capi.sh build >/dev/null
gcc -std=c11 -O2 -Iinclude tests/c-host/main.c target/capi/libkestrel-x86_64-linux.a -lpthread -o "$out/c-host"
kestrel=target/release/kestrel
prompt="$(for _ in 1 2 3 4 5 6; do printf '%s ' "Explain, step by step and with examples in Python, how a hash map handles collisions, how it grows when it fills up, and what that costs."; done)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(nproc) CPUs; flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'avx2|fma|f16c|avx512vl|avx512_vnni|avx_vnni' | sort -u | xargs); $(uptime | sed 's/.*load average/load average/')"
: >"$out/samples.txt"
for r in $(seq "$rounds"); do
    for t in 1 2; do
        "$kestrel" run "$f" -p "$prompt" -n "$n" --temp 0 -t "$t" --ids >"$out/run.out" 2>"$out/run.err"
        "$out/c-host" "$f" "$prompt" "$n" "$t" >"$out/c.out" 2>"$out/c.err"
        cmp -s "$out/run.out" "$out/c.out" || { echo "round $r -t $t: different output"; exit 1; }
        python3 - "$t" "$out" >>"$out/samples.txt" <<'PY'
import re, sys
t, d = sys.argv[1], sys.argv[2]
k = open(f"{d}/run.err").read()
c = open(f"{d}/c.err").read()
kp = re.search(r"prefill (\d+) tok in ([\d.]+) s", k); kd = re.search(r"decode (\d+) tok in ([\d.]+) s", k)
cp = re.search(r"prefill (\d+) tok in (\d+) us, decode (\d+) tok in (\d+) us", c)
print(t, int(kp[1]) / float(kp[2]), int(kd[1]) / float(kd[2]),
      int(cp[1]) / (int(cp[2]) / 1e6), int(cp[3]) / (int(cp[4]) / 1e6))
PY
    done
    echo "round $r: $(tail -2 "$out/samples.txt" | tr '\n' ' ')"
done
python3 - "$out/samples.txt" "$n" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"| threads | kestrel run prefill | C host prefill | ratio | kestrel run decode | C host decode | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for t in ("1", "2"):
    r = [[float(x) for x in row[1:]] for row in rows if row[0] == t]
    kp, kd, cp, cd = (st.median(col) for col in zip(*r))
    ratios_p = st.median(b / a for a, _, b, _ in r); ratios_d = st.median(b / a for _, a, _, b in r)
    print(f"| {t} | {kp:.1f} tok/s | {cp:.1f} tok/s | {ratios_p:.3f} | {kd:.2f} tok/s | {cd:.2f} tok/s | {ratios_d:.3f} |")
print(f"({len(rows) // 2} rounds; ratio: median of the per-round C host / kestrel run; decode of {sys.argv[2]} tokens)")
PY
