#!/usr/bin/env bash
# Kestrel against llama.cpp on the real model, side by side, interleaved,
# same thread count. From a fresh clone (root or sudo, Debian/Ubuntu):
#   bash bench/compare-llamacpp.sh [-t THREADS] [-r REPEATS] [--rounds N]
# 1. fetches the real model (scripts/fetch-model.sh: Qwen2.5-Coder-0.5B-Instruct
#    GGUF Q4_K_M, cached in .cache/model);
# 2. downloads the llama-cpp-python==0.3.36 source distribution with pip
#    (cached in .cache/llamacpp) and builds only `llama-bench` and
#    `llama-quantize` from its vendor/llama.cpp with cmake (Release,
#    GGML_NATIVE=ON, GGML_CPU_REPACK=ON, no CURL; cached in
#    .cache/llamacpp/build, reruns skip it). Nothing of llama.cpp is copied
#    into the repository;
# 3. makes Q4_0 and Q8_0 GGUFs of the model with `llama-quantize
#    --allow-requantize` (cached);
# 4. converts the same original GGUF with Kestrel (--wmode q4, q8, dual;
#    cached in .cache/vqf);
# 5. per round: llama-bench -p 512 -n 128 -r R on Q4_0, Kestrel q4, llama-bench
#    on Q8_0, Kestrel q8, Kestrel dual (`kestrel bench FILE.vqf -p 512 -n 128
#    -r R --json`, which also runs the DRAM read probe on the same threads);
# 6. prints a markdown report on stdout (also written to
#    .cache/bench/compare-TIMESTAMP.md, raw JSON beside it).
# Figures are medians of every sample of every round (tokens/s). Check the
# load lines: on a shared machine a neighbour's build halves the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2
repeats=3
rounds=1
while [ $# -gt 0 ]; do
    case "$1" in
        -t) threads="$2"; shift 2 ;;
        -r) repeats="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "compare-llamacpp: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "compare-llamacpp: $*" >&2; }

# ---- tools (apt first, pip for cmake as a fallback); idempotent
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
need=()
command -v c++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
command -v python3 >/dev/null || need+=(python3 python3-pip)
# cmake and ninja on PATH also keep pip from building them from source while
# it prepares the sdist's metadata (scikit-build-core asks for them).
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    { $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null; } ||
        log "apt-get failed; trying pip for cmake and ninja"
fi
command -v cmake >/dev/null || python3 -m pip install --quiet cmake
command -v ninja >/dev/null || python3 -m pip install --quiet ninja
command -v cargo >/dev/null || bash scripts/setup.sh >&2

# ---- 1. the model
gguf=$(bash scripts/fetch-model.sh)

# ---- 2. llama.cpp from the llama-cpp-python sdist
ver=0.3.36
lc=.cache/llamacpp
mkdir -p "$lc"
sdist="$lc/llama_cpp_python-$ver.tar.gz"
if [ ! -f "$sdist" ]; then
    log "downloading the llama-cpp-python==$ver source distribution"
    python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$ver" -d "$lc" >&2
fi
src="$lc/llama_cpp_python-$ver/vendor/llama.cpp"
if [ ! -f "$src/CMakeLists.txt" ]; then
    tar -xzf "$sdist" -C "$lc" "llama_cpp_python-$ver/vendor/llama.cpp"
fi
build="$lc/build"
bin="$build/bin"
if [ ! -x "$bin/llama-bench" ] || [ ! -x "$bin/llama-quantize" ]; then
    log "building llama-bench and llama-quantize (once; cached in $build)"
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
        -DGGML_CPU_REPACK=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
    cmake --build "$build" --config Release -j "$(nproc)" --target llama-bench llama-quantize >&2
fi

# ---- 3. Q4_0 and Q8_0 GGUFs of the same model
mkdir -p "$lc/models"
for q in Q4_0 Q8_0; do
    out="$lc/models/qwen2.5-coder-0.5b-instruct-$q.gguf"
    if [ ! -f "$out" ]; then
        log "llama-quantize $q"
        "$bin/llama-quantize" --allow-requantize "$gguf" "$out.partial" "$q" "$(nproc)" >&2
        mv "$out.partial" "$out"
    fi
done

# ---- 4. Kestrel and its conversions of the same original GGUF
cargo build --release --locked -p kestrel >&2
kestrel=./target/release/kestrel
mkdir -p .cache/vqf
for mode in q4 q8 dual; do
    vqf=".cache/vqf/qwen2.5-coder-0.5b-instruct-$mode.vqf"
    if [ ! -f "$vqf" ] || ! "$kestrel" verify "$vqf" >/dev/null 2>&1; then
        log "kestrel convert --wmode $mode"
        "$kestrel" convert "$gguf" -o "$vqf" --wmode "$mode" >&2
    fi
done

# ---- 5. interleaved runs
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=.cache/bench
mkdir -p "$out"
raw="$out/compare-$stamp.jsonl"
: > "$raw"
record() { # engine file json-text
    python3 -c 'import json,sys; print(json.dumps({"engine": sys.argv[1], "file": sys.argv[2], "data": json.loads(sys.stdin.read())}))' \
        "$1" "$2" >> "$raw"
}
up_before=$(uptime)
log "load before: $up_before"
for round in $(seq 1 "$rounds"); do
    for step in llama:Q4_0 kestrel:q4 llama:Q8_0 kestrel:q8 kestrel:dual; do
        eng=${step%%:*}; f=${step#*:}
        log "round $round/$rounds: $eng $f, $threads threads"
        if [ "$eng" = llama ]; then
            j=$("$bin/llama-bench" -m "$lc/models/qwen2.5-coder-0.5b-instruct-$f.gguf" \
                -p 512 -n 128 -r "$repeats" -t "$threads" -o json 2>/dev/null)
        else
            j=$("$kestrel" bench ".cache/vqf/qwen2.5-coder-0.5b-instruct-$f.vqf" \
                -p 512 -n 128 -r "$repeats" -t "$threads" --json)
        fi
        printf '%s' "$j" | record "$eng" "$f"
    done
done
up_after=$(uptime)
log "load after: $up_after"

# ---- 6. the report
report="$out/compare-$stamp.md"
python3 - "$raw" "$threads" "$repeats" "$rounds" "$up_before" "$up_after" \
    "$(uname -m)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
    "$(nproc)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY' | tee "$report"
import json, statistics, sys
raw, threads, repeats, rounds, up0, up1, arch, cpu, ncpu, commit = sys.argv[1:11]
runs = [json.loads(l) for l in open(raw)]
S = {}  # (engine, file, test) -> samples
dram = {}
dec = {}
for r in runs:
    e, f, d = r["engine"], r["file"], r["data"]
    if e == "llama":
        for t in d:
            test = "pp" if t["n_gen"] == 0 else "tg"
            S.setdefault((e, f, test), []).extend(t["samples_ts"])
    else:
        S.setdefault((e, f, "pp"), []).extend(d["pp"]["samples_ts"])
        S.setdefault((e, f, "tg"), []).extend(d["tg"]["samples_ts"])
        dec[f] = d["decode_bytes"]
        for p in d["dram"]:
            dram.setdefault(p["name"], []).append((p["payload_gbs"], p["raw_gbs"]))
med = lambda v: statistics.median(v) if v else float("nan")
def cell(k):
    v = S.get(k, [])
    return f"{med(v):.1f} [{min(v):.1f}-{max(v):.1f}]" if v else "-"
print(f"## Kestrel vs llama.cpp, real model, {threads} threads\n")
print(f"- machine: {arch}, {cpu}, {ncpu} CPUs; Kestrel commit {commit}; llama.cpp from llama-cpp-python 0.3.36")
print(f"- load before: `{up0.strip()}`")
print(f"- load after: `{up1.strip()}`")
print(f"- {rounds} round(s), each interleaved llama Q4_0, Kestrel q4, llama Q8_0, Kestrel q8, Kestrel dual; -r {repeats}")
print("- tok/s: median [min-max] over all samples of all rounds\n")
print("| engine | file | pp512 tok/s | tg128 tok/s | weight MB/token (decode) | decode GB/s |")
print("|---|---|---:|---:|---:|---:|")
for e, f in [("llama", "Q4_0"), ("kestrel", "q4"), ("llama", "Q8_0"), ("kestrel", "q8"), ("kestrel", "dual")]:
    name = "llama.cpp" if e == "llama" else "Kestrel"
    if e == "kestrel" and f in dec:
        mb = dec[f] / 1e6
        gbs = f"{dec[f] * med(S[(e, f, 'tg')]) / 1e9:.1f}"
        mbs = f"{mb:.1f}"
    else:
        mbs = gbs = "-"
    print(f"| {name} | {f} | {cell((e, f, 'pp'))} | {cell((e, f, 'tg'))} | {mbs} | {gbs} |")
print("\n| ratio (medians) | pp512 | tg128 |")
print("|---|---:|---:|")
for (a, b) in [("q4", "Q4_0"), ("q8", "Q8_0"), ("dual", "Q8_0"), ("dual", "Q4_0")]:
    r = lambda t: med(S.get(("kestrel", a, t), [])) / med(S.get(("llama", b, t), [])) if S.get(("llama", b, t)) else float("nan")
    print(f"| Kestrel {a} / llama.cpp {b} | {r('pp'):.2f}x | {r('tg'):.2f}x |")
if dram:
    print("\nDRAM read probe (`kestrel bench`, same threads, median of the Kestrel runs):\n")
    print("| probe | payload GB/s | raw GB/s |")
    print("|---|---:|---:|")
    for n, v in dram.items():
        print(f"| {n} | {med([x[0] for x in v]):.1f} | {med([x[1] for x in v]):.1f} |")
    best = max(med([x[0] for x in v]) for v in dram.values())
    for f in ("q4", "dual"):
        if f in dec and S.get(("kestrel", f, "tg")):
            g = dec[f] * med(S[("kestrel", f, "tg")]) / 1e9
            print(f"\nKestrel {f} decode reads {g:.1f} GB/s of weights = {100 * g / best:.0f}% of the best probe payload ({best:.1f} GB/s).", end="")
    print()
print(f"\nraw samples: {raw}")
PY
log "report: $report"
