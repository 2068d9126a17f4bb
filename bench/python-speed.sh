#!/usr/bin/env bash
# The Python package (python/, installed with `pip install ./python` into a
# fresh venv: the hosted library, this CPU's kernels, the built-in pool)
# against `kestrel run FILE -p PROMPT --temp 0 -n 64` (its default threads:
# the big cores, as the pool's) on the real 0.5B model: the same text, and
# the decode rate of each (Python: the seconds of `Session.generate(64)`
# after the prompt's feed; kestrel run: its summary line), alternated per
# round; medians and the median of the rounds' ratios.
#   bash bench/python-speed.sh [ROUNDS] [MODE]   (7 rounds, source)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}; mode=${2:-source}
f=$PWD/.cache/vqf/0.5b-$mode.vqf
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
cargo build -q --locked --release -p kestrel
python3 -m venv "$venv"
"$venv/bin/pip" install -q ./python
prompt="Write a Python function that checks whether a number is prime."
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(nproc) CPUs; $(uptime | sed 's/.*load average/load average/')"
"$venv/bin/python" - "$f" "$prompt" "$rounds" "$PWD/target/release/kestrel" <<'PY'
import re, statistics, subprocess, sys, time
import kestrel
f, prompt, rounds, binary = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
model = kestrel.Model(f)
k, p = [], []
for r in range(rounds):
    run = subprocess.run([binary, "run", f, "-p", prompt, "-n", "64", "--temp", "0"], capture_output=True, text=True, check=True)
    n, secs = re.search(r"decode (\d+) tok in ([\d.]+) s", run.stderr).groups()
    k.append(int(n) / float(secs))
    with model.session(temperature=0) as s:
        s.feed(s.chat_turn(prompt))
        t0 = time.perf_counter()
        text, count, _ = s.generate(64)
        p.append(count / (time.perf_counter() - t0))
        kernels = s.kernels
    assert text + "\n" == run.stdout, "the package's text differs from kestrel run's"
    print(f"round {r + 1}: kestrel run {k[-1]:.2f} tok/s, the package {p[-1]:.2f} tok/s ({kernels})")
ratio = statistics.median(b / a for a, b in zip(k, p))
print(f"decode tok/s, medians of {rounds} rounds: kestrel run {statistics.median(k):.2f}, the package {statistics.median(p):.2f}; "
      f"package / kestrel run (median of the rounds' ratios) {ratio:.3f}")
PY
