#!/usr/bin/env bash
# aarch64 cost of decoding a real GGUF without a board: executed instructions
# per decoded token of Kestrel's default conversion (`--wmode source`) and of
# llama.cpp running the same Q4_K_M file, both under qemu-aarch64 -cpu
# cortex-a76, 1 thread, counted with the qemu-insncount TCG plugin.
#   bash bench/insncount-gguf.sh [--model 0.5b|1.5b] [INSNCOUNT_DIR]
# INSNCOUNT_DIR (or QEMU_INSNCOUNT_DIR) holds the plugin source `insncount.c`
# (default ../shared/tools/qemu-insncount; see bench/insncount.sh).
#
# Method, the same for both engines: each engine's own benchmark decodes N
# tokens from an empty context after a one-token warm-up, with no prompt and
# no sampling (`kestrel bench FILE -p 0 -n N -r 1 -t 1 --no-pin
# --probe-rows 0`; llama.cpp `llama-bench -m GGUF -p 0 -n N -r 1 -t 1`,
# cross-built static for armv8.2-a+dotprod by bench/llamacpp-aarch64.sh);
# per decoded token = (whole-program count at N = 17 - count at N = 1) / 16.
# Kestrel runs its shipped build (aarch64 musl, `--profile size-report`).
# Output: a markdown report on stdout (also .cache/insncount/gguf-*.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
model=0.5b
if [ "${1:-}" = --model ]; then model=$2; shift 2; fi
dir=${1:-${QEMU_INSNCOUNT_DIR:-$root/../shared/tools/qemu-insncount}}
[ -f "$dir/insncount.c" ] || { echo "insncount-gguf: no insncount.c in $dir" >&2; exit 2; }
log() { echo "insncount-gguf: $*" >&2; }

bash scripts/setup.sh >&2
out=.cache/insncount
mkdir -p "$out"
lib="$out/libinsncount.so"
if [ ! -f "$lib" ] || [ "$dir/insncount.c" -nt "$lib" ]; then
    gcc -shared -fPIC -O2 -fvisibility=hidden -o "$lib" "$dir/insncount.c"
fi
llama=$(bash bench/llamacpp-aarch64.sh)
gguf=$(bash scripts/fetch-model.sh "$model")
bash bench/prepare.sh "$model" "source" ""
vqf=.cache/vqf/$model-source.vqf
target=aarch64-unknown-linux-musl
cargo build --profile size-report --locked --target "$target" -p kestrel >&2
kestrel="target/$target/size-report/kestrel"

# count TAG -- command: whole-program count under qemu, kept in $out/TAG.txt
count() {
    local tag=$1 t0=$SECONDS
    shift 2
    qemu-aarch64 -cpu cortex-a76 -d plugin -plugin "$lib,mnem=1" "$@" \
        2> "$out/$tag.err" > "$out/$tag.out"
    grep insncount "$out/$tag.err" > "$out/$tag.txt"
    log "$tag: $(head -1 "$out/$tag.txt") ($((SECONDS - t0)) s)"
}
for n in 1 17; do
    count "$model-kestrel-source-tg$n" -- "$kestrel" bench "$vqf" -p 0 -n "$n" -r 1 -t 1 --no-pin --probe-rows 0
    count "$model-llama-q4_k_m-tg$n" -- "$llama" -m "$gguf" -p 0 -n "$n" -r 1 -t 1 -o md
done

report="$out/gguf-$model-$(date -u +%Y%m%dT%H%M%SZ).md"
python3 - "$out" "$model" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(qemu-aarch64 --version | head -1)" <<'PY' | tee "$report"
import re, sys
out, model, commit, qv = sys.argv[1:5]
def read(tag):
    total, hist = None, {}
    for l in open(f"{out}/{tag}.txt"):
        m = re.search(r"total=(\d+)", l)
        if m:
            total = int(m.group(1))
            continue
        m = re.match(r"insncount:\s+(\S+)\s+(\d+)", l)
        if m:
            hist[m.group(1)] = int(m.group(2))
    return total, hist
print(f"## aarch64 instructions per decoded token, {model} Q4_K_M (qemu-aarch64 -cpu cortex-a76, 1 thread)\n")
print(f"{qv}; Kestrel {commit} (`--wmode source`, shipped build), llama.cpp 0.3.36 vendored (llama-bench, armv8.2-a+dotprod, static).\n")
print("| engine, file | per decoded token | sdot per token | top mnemonics per token |")
print("|---|---:|---:|---|")
res = {}
for name, tag in (("Kestrel, source VQF", "kestrel-source"), ("llama.cpp, Q4_K_M GGUF", "llama-q4_k_m")):
    t1, h1 = read(f"{model}-{tag}-tg1")
    t17, h17 = read(f"{model}-{tag}-tg17")
    per = (t17 - t1) / 16
    d = {k: (h17.get(k, 0) - h1.get(k, 0)) / 16 for k in h17}
    sd = sum(v for k, v in d.items() if k.startswith("sdot"))
    top = ", ".join(f"{k} {v / 1e6:.1f}M" for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:8])
    res[tag] = per
    print(f"| {name} | {per:,.0f} | {sd:,.0f} | {top} |")
print(f"\nKestrel / llama.cpp per decoded token: {res['kestrel-source'] / res['llama-q4_k_m']:.3f} (issue 16's target <= 0.9)")
PY
log "report: $report"
