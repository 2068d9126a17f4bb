#!/usr/bin/env bash
# aarch64 cost of decoding a real GGUF without a board: executed instructions
# per decoded token of Kestrel's default conversion (`--wmode exact`) and of
# llama.cpp running the same Q4_K_M file, both under qemu-aarch64 -cpu
# cortex-a76, 1 thread, counted with the qemu-insncount TCG plugin.
#   bash bench/insncount-gguf.sh [--model 0.5b|1.5b|q35-2b] [--type TYPE] [INSNCOUNT_DIR]
# --type: a llama.cpp type other than the fetched Q4_K_M file (IQ4_XS,
# Q2_K, Q3_K_M, ...: bench/prepare.sh makes it from the F32 GGUF, and
# Kestrel's file is that GGUF converted with --wmode exact, `exact@TYPE`).
# q35-2b: Qwen3.5-2B's shape with random weights, every type made by
# bench/prepare.sh from its BF16 GGUF (Q4_K_M too).
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
type=Q4_K_M
while [ $# -gt 0 ]; do
    case "$1" in
    --model) model=$2; shift 2 ;;
    --type) type=$2; shift 2 ;;
    *) break ;;
    esac
done
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
if [ "$model" = q35-2b ]; then
    mode=exact@$type
    bash bench/prepare.sh "$model" "" "$type"
    gguf=.cache/llamacpp/models/$model-$type.gguf
else
    gguf=$(bash scripts/fetch-model.sh "$model")
    if [ "$type" = Q4_K_M ]; then
        mode=exact
    else
        mode=exact@$type
        bash bench/prepare.sh "$model" "f32" "F32 $type"
        gguf=.cache/llamacpp/models/$model-$type.gguf
    fi
fi
bash bench/prepare.sh "$model" "$mode" ""
vqf=.cache/vqf/$model-$mode.vqf
tl=$(echo "$type" | tr 'A-Z' 'a-z')
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
    count "$model-kestrel-$mode-tg$n" -- "$kestrel" bench "$vqf" -p 0 -n "$n" -r 1 -t 1 --no-pin --probe-rows 0
    count "$model-llama-$tl-tg$n" -- "$llama" -m "$gguf" -p 0 -n "$n" -r 1 -t 1 -o md
done

report="$out/gguf-$model-$tl-$(date -u +%Y%m%dT%H%M%SZ).md"
python3 - "$out" "$model" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(qemu-aarch64 --version | head -1)" "$mode" "$type" <<'PY' | tee "$report"
import re, sys
out, model, commit, qv, mode, ty = sys.argv[1:7]
tl = ty.lower()
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
print(f"## aarch64 instructions per decoded token, {model} {ty} (qemu-aarch64 -cpu cortex-a76, 1 thread)\n")
print(f"{qv}; Kestrel {commit} (`--wmode exact`, shipped build), llama.cpp 0.3.36 vendored (llama-bench, armv8.2-a+dotprod, static).\n")
print("| engine, file | per decoded token | sdot per token | top mnemonics per token |")
print("|---|---:|---:|---|")
res = {}
for name, tag in ((f"Kestrel, {mode} VQF", f"kestrel-{mode}"), (f"llama.cpp, {ty} GGUF", f"llama-{tl}")):
    t1, h1 = read(f"{model}-{tag}-tg1")
    t17, h17 = read(f"{model}-{tag}-tg17")
    per = (t17 - t1) / 16
    d = {k: (h17.get(k, 0) - h1.get(k, 0)) / 16 for k in h17}
    sd = sum(v for k, v in d.items() if k.startswith("sdot"))
    top = ", ".join(f"{k} {v / 1e6:.1f}M" for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:8])
    res[tag] = per
    print(f"| {name} | {per:,.0f} | {sd:,.0f} | {top} |")
print(f"\nKestrel / llama.cpp per decoded token: {res['kestrel-' + mode] / res['llama-' + tl]:.3f}")
PY
log "report: $report"
