#!/usr/bin/env bash
# Kestrel against llama.cpp on a real model, side by side, interleaved,
# same thread count. From a fresh clone (root or sudo, Debian/Ubuntu):
#   bash bench/compare-llamacpp.sh [--model 0.5b|1.5b|moeN|q35-2b] [-t THREADS] [-r REPEATS]
#        [--rounds N] [--modes "q4 q8 dual"] [--llama "Q4_0 Q8_0"]
#        [-p "512 2048"]
# 1. bench/prepare.sh: fetches the model (scripts/fetch-model.sh, the
#    Q4_K_M GGUF), builds llama.cpp (bench/llamacpp.sh: the
#    llama-cpp-python==0.3.36 sdist, cmake defaults), makes the llama.cpp
#    types with `llama-quantize --allow-requantize` (Q4_K_M: the file
#    itself) and converts the same file with `kestrel convert --wmode` per
#    Kestrel mode; all cached;
# 2. per round, interleaved: for each llama.cpp type `llama-bench -p
#    512,2048 -n 128 -r R -t T -o json`, then each Kestrel mode (`source@TYPE`:
#    llama.cpp's TYPE file itself with --wmode source) `kestrel
#    bench FILE.vqf -p 512 -n 128 -r R -t T --json` (which also runs the
#    DRAM read probe) and `-p 2048 -n 0 --probe-rows 0` for each further
#    prompt size;
# 3. prints a markdown report on stdout (also written to
#    .cache/bench/compare-TIMESTAMP.md, raw JSON beside it), with the
#    weight bytes each engine reads per decoded token (Kestrel's
#    decode_bytes; for llama.cpp bench/gguf_decode_bytes.py: every tensor
#    but the embedding, plus one embedding row).
# Figures are medians of every sample of every round (tokens/s). Check the
# load lines: on a shared machine a neighbour's build halves the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

model=0.5b
threads=2
repeats=3
rounds=1
prompts="512 2048"
modes="q4 q8 dual"
types="Q4_0 Q8_0"
while [ $# -gt 0 ]; do
    case "$1" in
        --model) model="$2"; shift 2 ;;
        -t) threads="$2"; shift 2 ;;
        -r) repeats="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --modes) modes="$2"; shift 2 ;;
        -p) prompts="$2"; shift 2 ;;
        --llama) types="$2"; shift 2 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "compare-llamacpp: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "compare-llamacpp: $*" >&2; }
command -v cargo >/dev/null || bash scripts/setup.sh >&2
bash bench/prepare.sh "$model" "$modes" "$types"
bin=$(bash bench/llamacpp.sh)
kestrel=./target/release/kestrel

# ---- 5. interleaved runs
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=.cache/bench
mkdir -p "$out"
raw="$out/compare-$stamp.jsonl"
: > "$raw"
record() { # engine file prompt json-text
    python3 -c 'import json,sys; print(json.dumps({"engine": sys.argv[1], "file": sys.argv[2], "prompt": int(sys.argv[3]), "data": json.loads(sys.stdin.read())}))' \
        "$1" "$2" "$3" >> "$raw"
}
read -ra ps <<< "$prompts"
up_before=$(uptime)
log "load before: $up_before"
for round in $(seq 1 "$rounds"); do
    # Alternate the engines: llama.cpp's first type, Kestrel's first mode, ...
    read -ra ts <<< "$types"; read -ra ms <<< "$modes"
    steps=()
    for i in $(seq 0 $(( (${#ts[@]} > ${#ms[@]} ? ${#ts[@]} : ${#ms[@]}) - 1 ))); do
        [ "$i" -lt "${#ts[@]}" ] && steps+=("llama:${ts[$i]}")
        [ "$i" -lt "${#ms[@]}" ] && steps+=("kestrel:${ms[$i]}")
    done
    for step in "${steps[@]}"; do
        eng=${step%%:*}; f=${step#*:}
        log "round $round/$rounds: $eng $f, $threads threads"
        if [ "$eng" = llama ]; then
            j=$("$bin/llama-bench" -m ".cache/llamacpp/models/$model-$f.gguf" \
                -p "$(IFS=,; echo "${ps[*]}")" -n 128 -r "$repeats" -t "$threads" -o json 2>/dev/null)
            printf '%s' "$j" | record "$eng" "$f" 0
        else
            # Decode (tg128) and the DRAM probe once, with the first prompt
            # size.
            more=(-n 128)
            for p in "${ps[@]}"; do
                j=$("$kestrel" bench ".cache/vqf/$model-$f.vqf" \
                    -p "$p" -r "$repeats" -t "$threads" --json "${more[@]}")
                printf '%s' "$j" | record "$eng" "$f" "$p"
                more=(-n 0 --probe-rows 0)
            done
        fi
    done
done
up_after=$(uptime)
log "load after: $up_after"

# ---- 6. the report
report="$out/compare-$stamp.md"
llama_bytes=""
for t in $types; do
    llama_bytes+="$t=$(python3 bench/gguf_decode_bytes.py ".cache/llamacpp/models/$model-$t.gguf") "
done
python3 - "$raw" "$threads" "$repeats" "$rounds" "$up_before" "$up_after" \
    "$(uname -m)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
    "$(nproc)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$model" "$llama_bytes" \
    "$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni|asimddp|i8mm)$' | tr '\n' ' ')" \
    "$prompts" <<'PY' | tee "$report"
import json, statistics, sys
raw, threads, repeats, rounds, up0, up1, arch, cpu, ncpu, commit, model, lbytes, cpuflags, prompts = sys.argv[1:15]
prompts = [int(p) for p in prompts.split()]
lbytes = dict(kv.split("=") for kv in lbytes.split())
runs = [json.loads(l) for l in open(raw)]
S = {}  # (engine, file, test) -> samples
dram = {}
dec = {}
for r in runs:
    e, f, d = r["engine"], r["file"], r["data"]
    if e == "llama":
        for t in d:
            test = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else "tg"
            S.setdefault((e, f, test), []).extend(t["samples_ts"])
    else:
        S.setdefault((e, f, f"pp{r['prompt']}"), []).extend(d["pp"]["samples_ts"])
        dec[f] = d["decode_bytes"]
        if not (d.get("tg") and d["tg"].get("samples_ts")):
            continue  # a further prompt size: no decode, no DRAM probe
        S.setdefault((e, f, "tg"), []).extend(d["tg"]["samples_ts"])
        for p in d["dram"]:
            dram.setdefault(p["name"], []).append((p["payload_gbs"], p["raw_gbs"]))
med = lambda v: statistics.median(v) if v else float("nan")
def cell(k):
    v = S.get(k, [])
    return f"{med(v):.1f} [{min(v):.1f}-{max(v):.1f}]" if v else "-"
order = []
for r in runs:
    if (r["engine"], r["file"]) not in order:
        order.append((r["engine"], r["file"]))
name = (f"Qwen3-30B-A3B's layer shape, {model[3:]} layers, random weights (bench/moe_gguf.py)"
        if model.startswith("moe") else
        "Qwen3.5-2B's shape, random weights (bench/qwen35_checkpoint.py, llama.cpp's converter)"
        if model == "q35-2b" else f"Qwen2.5-Coder-{model.upper()}-Instruct")
print(f"## Kestrel vs llama.cpp, {name}, {threads} threads\n")
print(f"- machine: {arch}, {cpu}, {ncpu} CPUs, flags: {cpuflags.strip()}; Kestrel commit {commit}; llama.cpp from llama-cpp-python 0.3.36")
print(f"- load before: `{up0.strip()}`")
print(f"- load after: `{up1.strip()}`")
print(f"- {rounds} round(s), each interleaved " + ", ".join(("llama.cpp " if e == "llama" else "Kestrel ") + f for e, f in order) + f"; -r {repeats}")
print("- tok/s: median [min-max] over all samples of all rounds\n")
pps = [f"pp{p}" for p in prompts]
print("| engine | file | " + " | ".join(f"{t} tok/s" for t in pps) + " | tg128 tok/s | weight MB/token (decode) | decode GB/s |")
print("|---|---|" + "---:|" * (len(pps) + 3))
for e, f in order:
    name = "llama.cpp" if e == "llama" else "Kestrel"
    b = dec.get(f) if e == "kestrel" else int(lbytes[f]) if f in lbytes else None
    if b:
        gbs = f"{b * med(S[(e, f, 'tg')]) / 1e9:.1f}"
        mbs = f"{b / 1e6:.1f}"
    else:
        mbs = gbs = "-"
    print(f"| {name} | {f} | " + " | ".join(cell((e, f, t)) for t in pps) + f" | {cell((e, f, 'tg'))} | {mbs} | {gbs} |")
print("\n| ratio (medians) | " + " | ".join(pps) + " | tg128 |")
print("|---|" + "---:|" * (len(pps) + 1))
same_file = [(f, f.split("@", 1)[1]) for (e, f) in order if f.startswith(("source@", "exact@"))]
pairs = [(a, b) for (a, b) in same_file + [("q4", "Q4_0"), ("q8", "Q8_0"), ("dual", "Q4_0"), ("dual", "Q4_K_M"), ("q4", "Q4_K_M"), ("source", "Q4_K_M"), ("exact", "Q4_K_M"), ("f16", "F16"), ("f32", "F32")]
         if ("kestrel", a) in order and ("llama", b) in order]
for (a, b) in pairs:
    r = lambda t: med(S.get(("kestrel", a, t), [])) / med(S.get(("llama", b, t), [])) if S.get(("llama", b, t)) else float("nan")
    print(f"| Kestrel {a} / llama.cpp {b} | " + " | ".join(f"{r(t):.2f}x" for t in pps) + f" | {r('tg'):.2f}x |")
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
