#!/usr/bin/env bash
# aarch64 cost without a board: executed instructions of Kestrel on the real
# model under qemu-aarch64 -cpu cortex-a76, 1 thread, counted with the
# qemu-insncount TCG plugin, and llvm-mca cycle estimates of the GEMV inner
# loops.
#   bash bench/insncount.sh [INSNCOUNT_DIR]
# INSNCOUNT_DIR (or the environment variable QEMU_INSNCOUNT_DIR) is a
# directory holding the plugin source `insncount.c` (the qemu-insncount tool;
# it is not part of this repository, as its source carries no licence). The
# default is ../shared/tools/qemu-insncount next to the clone, where the
# development machines keep it. The plugin is built into .cache/insncount/.
#
# Method (as for the llama.cpp anchor figures):
# * the static aarch64 musl binary, release code with symbols kept
#   (`--profile size-report`: the shipped build, not stripped; non-PIE);
# * the q4 (and q8) VQF converted from the real GGUF (scripts/fetch-model.sh);
# * per decoded token = (count with 17 generated - count with 1) / 16, from
#   `kestrel run FILE --raw -p PROMPT -n N --temp 0 -t 1 --no-pin`;
# * per prefill token = (64-token prompt - 8-token prompt) / 56, from
#   `kestrel bench FILE -p P -n 0 -r 1 --probe-rows 0` (a warm-up and one
#   timed pass, so the difference is divided by 2 x 56);
# * per 32 weights in a kernel = instructions in the kernel's symbol per
#   token / (sdot count x 16 / 32): every by-element sdot is 16 multiply-adds
#   of one weight byte-pair lane set, so sdot x 16 = weights x activation rows.
# Output: a markdown report on stdout (also .cache/insncount/report-*.md).
# INSNCOUNT_REUSE=1 reuses the counts of a previous run (.cache/insncount/
# *.txt) and only redoes llvm-mca and the report.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=${1:-${QEMU_INSNCOUNT_DIR:-$root/../shared/tools/qemu-insncount}}
if [ ! -f "$dir/insncount.c" ]; then
    echo "insncount: no insncount.c in $dir (pass the qemu-insncount directory as the argument or in QEMU_INSNCOUNT_DIR)" >&2
    exit 2
fi
log() { echo "insncount: $*" >&2; }

bash scripts/setup.sh >&2
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if ! command -v llvm-mca >/dev/null; then
    { $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        $sudo_cmd apt-get install -y -qq llvm >/dev/null; } || log "llvm-mca unavailable: no cycle estimates"
fi

out=.cache/insncount
mkdir -p "$out"
lib="$out/libinsncount.so"
if [ ! -f "$lib" ] || [ "$dir/insncount.c" -nt "$lib" ]; then
    gcc -shared -fPIC -O2 -fvisibility=hidden -o "$lib" "$dir/insncount.c"
fi

gguf=$(bash scripts/fetch-model.sh)
cargo build --release --locked -p kestrel >&2
mkdir -p .cache/vqf
for mode in q4 q8; do
    vqf=".cache/vqf/qwen2.5-coder-0.5b-instruct-$mode.vqf"
    if [ ! -f "$vqf" ] || ! ./target/release/kestrel verify "$vqf" >/dev/null 2>&1; then
        ./target/release/kestrel convert "$gguf" -o "$vqf" --wmode "$mode" >&2
    fi
done
target=aarch64-unknown-linux-musl
cargo build --profile size-report --locked --target "$target" -p kestrel >&2
bin="target/$target/size-report/kestrel"

# [lo, hi) of the first text symbol whose name contains $1.
range() {
    local line
    line=$(aarch64-linux-gnu-nm -S -C "$bin" | grep -F "$1" | grep -E ' [tT] ' | head -1)
    [ -n "$line" ] || { log "symbol $1 not found"; exit 1; }
    local a=$((0x$(echo "$line" | awk '{print $1}'))) s=$((0x$(echo "$line" | awk '{print $2}')))
    printf 'lo=0x%x,hi=0x%x' "$a" $((a + s))
}
# count SYMBOL TAG -- kestrel args: runs under qemu, keeps the plugin's lines in $out/TAG.txt
count() {
    local sym=$1 tag=$2
    shift 3
    local t0=$SECONDS
    if [ -n "${INSNCOUNT_REUSE:-}" ] && [ -s "$out/$tag.txt" ]; then
        log "$tag: reusing $out/$tag.txt (INSNCOUNT_REUSE)"
        return
    fi
    qemu-aarch64 -cpu cortex-a76 -d plugin -plugin "$lib,$(range "$sym"),mnem=1" "$bin" "$@" \
        2> "$out/$tag.err" > "$out/$tag.out"
    grep insncount "$out/$tag.err" > "$out/$tag.txt"
    log "$tag: $(head -1 "$out/$tag.txt") ($((SECONDS - t0)) s)"
}

q4=.cache/vqf/qwen2.5-coder-0.5b-instruct-q4.vqf
q8=.cache/vqf/qwen2.5-coder-0.5b-instruct-q8.vqf
prompt='def quicksort(arr):'
run=(run --raw -p "$prompt" --temp 0 -t 1 --no-pin)
for f in q4 q8; do
    file=$q4; [ "$f" = q8 ] && file=$q8
    sym=gemv_q4x4_groups; [ "$f" = q8 ] && sym=gemv_q8x8_groups
    count "$sym" "$f-decode-1" -- "${run[0]}" "$file" "${run[@]:1}" -n 1
    count "$sym" "$f-decode-17" -- "${run[0]}" "$file" "${run[@]:1}" -n 17
    grep -q "decode 17 tok" "$out/$f-decode-17.err" || { log "$f: fewer than 17 tokens generated"; exit 1; }
    gsym=gemm_q4x4_tile4; [ "$f" = q8 ] && gsym=gemm_q8x8_tile4
    for p in 8 64; do
        count "$gsym" "$f-prefill-$p" -- bench "$file" -p "$p" -n 0 -r 1 -t 1 --no-pin --probe-rows 0 --json
    done
done

# llvm-mca on the innermost loop of each GEMV (from the binary's disassembly:
# the backward branch with the nearest target).
mca() {
    local sym=$1 dis
    dis=$(aarch64-linux-gnu-objdump -d --no-show-raw-insn "$bin" |
        awk -v s="$sym" '/^[0-9a-f]+ <.*>:$/ {p = index($0, s) > 0} p' | grep -E '^ +[0-9a-f]+:')
    python3 - "$dis" <<'PY'
import re, sys
lines = [l for l in sys.argv[1].splitlines()]
ins = []
for l in lines:
    m = re.match(r'\s*([0-9a-f]+):\s+(\S.*)$', l)
    if m:
        ins.append((int(m.group(1), 16), m.group(2).split('//')[0].split('<')[0].strip()))
best = None
for a, t in ins:
    m = re.match(r'b\.\w+\s+([0-9a-f]+)', t)
    if m and int(m.group(1), 16) < a:
        tgt = int(m.group(1), 16)
        if best is None or a - tgt < best[1] - best[0]:
            best = (tgt, a)
body = [t for a, t in ins if best and best[0] <= a <= best[1]]
if body:
    # llvm-mca wants a label, not an address, as the branch target.
    body[-1] = body[-1].split()[0] + " loop"
    print("loop:")
print("\n".join(body))
PY
}
have_mca=0
command -v llvm-mca >/dev/null && have_mca=1
for sym in gemv_q4x4_groups gemv_q8x8_groups; do
    mca "$sym" > "$out/$sym.s"
    if [ $have_mca = 1 ]; then
        llvm-mca -mtriple=aarch64 -mcpu=cortex-a76 -mattr=+dotprod -iterations=1000 \
            "$out/$sym.s" > "$out/$sym.mca.txt" 2>&1 || log "llvm-mca failed on $sym"
    fi
done

report="$out/report-$(date -u +%Y%m%dT%H%M%SZ).md"
python3 - "$out" "$have_mca" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "$(qemu-aarch64 --version | head -1)" <<'PY' | tee "$report"
import re, sys
out, have_mca, commit, qv = sys.argv[1:5]
def read(tag):
    total = inr = None
    hist = {}
    for l in open(f"{out}/{tag}.txt"):
        m = re.search(r"total=(\d+) in_range=(\d+)", l)
        if m:
            total, inr = int(m.group(1)), int(m.group(2))
            continue
        m = re.match(r"insncount:\s+(\S+)\s+(\d+)", l)
        if m:
            hist[m.group(1)] = int(m.group(2))
    return total, inr, hist
def sdots(h):
    return sum(v for k, v in h.items() if k.startswith("sdot"))
print(f"## aarch64 executed instructions (qemu-aarch64 -cpu cortex-a76, 1 thread), Kestrel {commit}\n")
print(f"{qv}; real model Qwen2.5-Coder-0.5B-Instruct, VQF converted from the Q4_K_M GGUF.\n")
print("| file | per decoded token | of which GEMV | GEMV instr per 32 weights | sdot per decoded token | per prefill token | of which GEMM | GEMM instr per 32 weights |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
res = {}
notes = []
for f in ("q4", "q8"):
    t1, g1, h1 = read(f"{f}-decode-1")
    t17, g17, h17 = read(f"{f}-decode-17")
    tok = (t17 - t1) / 16
    gemv = (g17 - g1) / 16
    sd = (sdots(h17) - sdots(h1)) / 16
    per32 = gemv / (sd * 16 / 32) if sd else float("nan")
    p8, G8, H8 = read(f"{f}-prefill-8")
    p64, G64, H64 = read(f"{f}-prefill-64")
    ptok = (p64 - p8) / (2 * 56)
    gemm = (G64 - G8) / (2 * 56)
    gsd = (sdots(H64) - sdots(H8)) / (2 * 56)
    gper32 = gemm / (gsd * 16 / 32) if gsd else float("nan")
    res[f] = (tok, gemv, per32)
    print(f"| {f} | {tok:,.0f} | {gemv:,.0f} ({100 * gemv / tok:.1f}%) | {per32:.2f} | {sd:,.0f} | {ptok:,.0f} | {gemm:,.0f} ({100 * gemm / ptok:.1f}%) | {gper32:.2f} |")
    notes.append(f"- {f}: outside the GEMV {tok - gemv:,.0f} per decoded token, outside the GEMM {ptok - gemm:,.0f} per prefill token; "
                 f"GEMV histogram per decoded token: " + ", ".join(
        f"{k} {(h17.get(k, 0) - h1.get(k, 0)) / 16:,.0f}" for k in sorted(h17, key=lambda k: -h17[k])[:12]))
print()
print("\n".join(notes))
print()
if have_mca == "1":
    for sym, weights in (("gemv_q4x4_groups", 4 * 32), ("gemv_q8x8_groups", 8 * 32)):
        try:
            txt = open(f"{out}/{sym}.mca.txt").read()
        except OSError:
            continue
        it = re.search(r"Iterations:\s+(\d+)", txt)
        cyc = re.search(r"Total Cycles:\s+(\d+)", txt)
        n = re.search(r"Instructions:\s+(\d+)", txt)
        if it and cyc and n:
            i, c, k = int(it.group(1)), int(cyc.group(1)), int(n.group(1))
            per_iter = c / i
            print(f"- llvm-mca -mcpu=cortex-a76, `{sym}` inner loop: {k // i} instructions, {per_iter:.2f} cycles per iteration "
                  f"({weights} weights) = {per_iter * 32 / weights:.2f} cycles per 32 weights, "
                  f"{(k / i) * 32 / weights:.2f} instructions per 32 weights in the loop")
print("\nllama.cpp (ANCHORS, same model, Q4_0 file, same method): 132,882,371 per decoded token; "
      "q4_0 GEMV 8.57 and q8_0 GEMV 6.59 instructions per 32 weights; 48,329,194 per prefill token; "
      "Q8_0 file 110,512,870 per decoded token.")
t = res["q4"][0]
print(f"Kestrel q4 / llama.cpp Q4_0 per decoded token: {t / 132882371:.3f}; Kestrel q8 / llama.cpp Q8_0: {res['q8'][0] / 110512870:.3f}")
PY
log "report: $report"
