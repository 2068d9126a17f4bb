#!/usr/bin/env bash
# The example of docs/embedding.md, built as written against the installed
# hosted library (scripts/install-capi.sh, `pkg-config --cflags --libs
# kestrel`: this CPU's kernels, the built-in pool), against `kestrel run FILE
# -p PROMPT --temp 0 -n 64` (its default threads: the big cores, as the
# pool's) on the real 0.5B model: the same text, and the decode rate of each.
#   bash bench/capi-example-speed.sh [ROUNDS] [MODE]   (5 rounds, source)
# The example prints no timings: a copy of it with a clock read before and
# after its kestrel_generate call (nothing else changed) gives the seconds
# of its 64 tokens; kestrel run's own summary line gives its decode time.
# Alternated per round; prints the medians and the median of the rounds'
# ratios of tokens per second, and the whole processes' times (the
# example reads the model into memory and validates it twice: its fixed
# cost is larger).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}; mode=${2:-source}
f=.cache/vqf/0.5b-$mode.vqf
out=.cache/capi-example-speed
prefix=$out/prefix
mkdir -p "$out"
cargo build -q --locked --release -p kestrel
bash scripts/install-capi.sh "$prefix" >/dev/null
awk '/^```c$/ {on = 1; next} /^```$/ {on = 0} on' docs/embedding.md >"$out/example.c"
python3 - "$out/example.c" "$out/timed.c" <<'PY'
import sys
s = open(sys.argv[1]).read()
call = "if (st == KESTREL_OK) st = kestrel_generate(e, 64, print_text, stdout, NULL);"
assert call in s, "the example no longer generates 64 tokens this way"
s = "#define _POSIX_C_SOURCE 200809L\n#include <time.h>\n" + s.replace(call,
    "struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);\n    " + call +
    "\n    clock_gettime(CLOCK_MONOTONIC, &t1);\n    fprintf(stderr, \"generate %.6f s\\n\", "
    "(double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);")
open(sys.argv[2], "w").write(s)
PY
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs kestrel)
gcc -std=c11 -O2 "$out/example.c" $flags -o "$out/example"
gcc -std=c11 -O2 "$out/timed.c" $flags -o "$out/timed"
export LD_LIBRARY_PATH=$prefix/lib
kestrel=target/release/kestrel
prompt="Write a Python function that checks whether a number is prime."
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(nproc) CPUs; flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'avx2|fma|f16c|avx512vl|avx512_vnni|avx_vnni' | sort -u | xargs); $(uptime | sed 's/.*load average/load average/')"
secs() { # seconds the command takes (its stdout kept in last.out)
    local t0 t1
    t0=$(date +%s%N); "$@" >"$out/last.out" 2>/dev/null; t1=$(date +%s%N)
    python3 -c "print(($t1 - $t0) / 1e9)"
}
: >"$out/samples.txt"
for r in $(seq "$rounds"); do
    t0=$(date +%s%N); "$kestrel" run "$f" -p "$prompt" -n 64 --temp 0 >"$out/k.out" 2>"$out/k.err"; t1=$(date +%s%N)
    "$out/timed" "$f" "$prompt" >"$out/e.out" 2>"$out/e.err"; t2=$(date +%s%N)
    "$out/example" "$f" "$prompt" >"$out/plain.out"
    cmp -s "$out/k.out" "$out/e.out" && cmp -s "$out/k.out" "$out/plain.out" ||
        { echo "round $r: the example's text differs from kestrel run's"; exit 1; }
    kd=$(grep -o 'decode [0-9]* tok in [0-9.]* s' "$out/k.err")
    ed=$(grep -o 'generate [0-9.]* s' "$out/e.err")
    echo "$kd | $ed | $t0 $t1 $t2" >>"$out/samples.txt"
    echo "round $r: kestrel run $kd; the example: $ed"
done
python3 - "$out/samples.txt" <<'PY'
import re, statistics, sys
k, e, kw, ew = [], [], [], []
for l in open(sys.argv[1]):
    n, ks = re.search(r"decode (\d+) tok in ([\d.]+) s", l).groups()
    es = float(re.search(r"generate ([\d.]+) s", l)[1])
    t0, t1, t2 = map(int, l.split("|")[2].split())
    k.append(int(n) / float(ks)); e.append(64 / es); kw.append((t1 - t0) / 1e9); ew.append((t2 - t1) / 1e9)
ratio = [b / a for a, b in zip(k, e)]
print(f"decode tok/s, medians of {len(k)} rounds: kestrel run {statistics.median(k):.2f}, the example {statistics.median(e):.2f}; "
      f"example / kestrel run (median of the rounds' ratios) {statistics.median(ratio):.3f}")
print(f"whole processes, medians: kestrel run {statistics.median(kw):.3f} s, the example {statistics.median(ew):.3f} s")
PY
