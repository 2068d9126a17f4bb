#!/usr/bin/env bash
# The files the side-by-side benchmarks compare, made once and cached:
#   bash bench/prepare.sh MODEL "MODES" "LLAMA_TYPES"
# MODEL is 0.5b or 1.5b (scripts/fetch-model.sh fetches the Q4_K_M GGUF),
# or moeN: N layers of Qwen3-30B-A3B's shape with random weights
# (bench/moe_gguf.py writes the F16 GGUF; every type is quantized from it),
# or q35-2b: Qwen3.5-2B's text model with random weights
# (bench/qwen35_checkpoint.py writes the Hugging Face checkpoint,
# llama.cpp's convert_hf_to_gguf.py the BF16 GGUF, in a venv with torch and
# transformers; every type is quantized from it);
# each Kestrel mode (q4 q8 dual f16 f32) is `kestrel convert --wmode MODE`
# of that file, in .cache/vqf/MODEL-MODE.vqf (`source@TYPE`, `exact@TYPE`: `--wmode
# source` or `exact` of llama.cpp's TYPE file below; `fit@TYPE`: `--fit` of
# the F32 file at that file's size); each llama.cpp type (Q4_0
# Q8_0 F32 ...) is `llama-quantize --allow-requantize` of the same file, in
# .cache/llamacpp/models/MODEL-TYPE.gguf, and Q4_K_M is the file itself
# (IQ*, Q2_K*, Q3_K_* are made from the F32 one instead).
# Prints nothing on stdout; the paths follow from the names.
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1; modes=$2; types=$3
log() { echo "prepare: $*" >&2; }
bin=$(bash bench/llamacpp.sh)
mkdir -p .cache/vqf .cache/llamacpp/models
case "$model" in
moe[0-9]*)
    # moeN: a random-weight GGUF of Qwen3-30B-A3B's layer shape with N
    # layers (bench/moe_gguf.py, F16, the 0.5B's tokenizer); every type is
    # made from it.
    gguf=.cache/llamacpp/models/$model-F16.gguf
    if [ ! -f "$gguf" ]; then
        py=.cache/gguf-venv/bin/python
        if ! "$py" -c "import gguf, numpy" 2>/dev/null; then
            python3 -m venv .cache/gguf-venv >&2
            "$py" -m pip install --quiet --disable-pip-version-check gguf==0.19.0 numpy >&2
        fi
        log "bench/moe_gguf.py --layers ${model#moe}"
        "$py" bench/moe_gguf.py --layers "${model#moe}" \
            --tokenizer-from "$(bash scripts/fetch-model.sh 0.5b)" -o "$gguf.partial" >&2
        mv "$gguf.partial" "$gguf"
    fi
    ;;
q35-2b)
    gguf=.cache/llamacpp/models/$model-BF16.gguf
    if [ ! -f "$gguf" ]; then
        py=.cache/convert-venv/bin/python
        if ! "$py" -c "import torch, transformers, numpy, sentencepiece" 2>/dev/null; then
            python3 -m venv .cache/convert-venv >&2
            "$py" -m pip install --quiet --disable-pip-version-check torch transformers==5.25.0 numpy sentencepiece >&2
        fi
        log "bench/qwen35_checkpoint.py"
        "$py" bench/qwen35_checkpoint.py --tokenizer-from tests/fixtures/dev_qwen35_dense/hf_bf16 -o .cache/q35/hf >&2
        # llama.cpp's converter, unmodified but for its pre-tokenizer check
        # (the fixture's tiny tokenizer is unknown to it: "qwen35", as
        # tests/fixtures/gen_qwen35_gguf.py answers).
        src=$(ls -d .cache/llamacpp/llama_cpp_python-*/vendor/llama.cpp | head -1)
        "$py" - "$src" .cache/q35/hf "$gguf.partial" >&2 <<'PY'
import sys
src, hf, out = sys.argv[1:4]
sys.path[:0] = [src, f"{src}/gguf-py"]
import conversion.base as base
orig = base.TextModel.get_vocab_base_pre
def pre(self, tokenizer):
    try:
        return orig(self, tokenizer)
    except NotImplementedError:
        return "qwen35"
base.TextModel.get_vocab_base_pre = pre
import convert_hf_to_gguf
sys.argv = ["convert_hf_to_gguf.py", hf, "--outfile", out, "--outtype", "bf16", "--no-mtp"]
convert_hf_to_gguf.main()
PY
        mv "$gguf.partial" "$gguf"
    fi
    ;;
*) gguf=$(bash scripts/fetch-model.sh "$model") ;;
esac
cargo build -q --release --locked -p kestrel >&2
kestrel=./target/release/kestrel
convert() { # mode vqf source
    if [ ! -f "$2" ] || ! "$kestrel" verify "$2" >/dev/null 2>&1; then
        log "kestrel convert $(basename "$3") --wmode $1"
        "$kestrel" convert "$3" -o "$2" --wmode "$1" >&2
    fi
}
later=()
for mode in $modes; do
    case "$mode" in
    source@*|exact@*|fit@*) later+=("$mode") ;;
    *) convert "$mode" ".cache/vqf/$model-$mode.vqf" "$gguf" ;;
    esac
done
# The sub-4-bit and i-quant types are made from the F32 requantization (as
# their users make them from a full-precision model), the others from the
# Q4_K_M file as before.
# IQ3_XXS: llama-quantize requires an importance matrix for it, and its
# recipe puts q and k in IQ2_S, which Kestrel does not decode yet; so here
# IQ3_XXS is llama.cpp's recipe with its imatrix (bench/calibration.sh's:
# llama-imatrix on the F32 GGUF, the Apache-2.0 licence and argparse.py, 8
# chunks of 512) and q and k in IQ3_XXS too.
quantize() { # type output source
    log "llama-quantize $model $1 (from $(basename "$3"))"
    local extra=()
    # llama-quantize requires an importance matrix for these types.
    case "$1" in IQ3_XXS | IQ2_XXS | IQ2_XS | IQ2_S | IQ2_M | IQ1_*) need_imatrix=1 ;; *) need_imatrix=0 ;; esac
    if [ "$need_imatrix" = 1 ]; then
        local im=.cache/imatrix/$model-llama.imatrix
        if [ ! -f "$im" ]; then
            mkdir -p .cache/imatrix
            cat /usr/share/common-licenses/Apache-2.0 "$(python3 -c 'import argparse; print(argparse.__file__)')" \
                > .cache/imatrix/calibration.txt
            "$bin/llama-imatrix" -m "$3" -f .cache/imatrix/calibration.txt -c 512 --chunks 8 \
                -t "$(nproc)" -o "$im.partial" >&2
            mv "$im.partial" "$im"
        fi
        extra=(--imatrix "$im")
        [ "$1" = IQ3_XXS ] && extra+=(--tensor-type attn_q=iq3_xxs --tensor-type attn_k=iq3_xxs)
    fi
    "$bin/llama-quantize" --allow-requantize "${extra[@]}" "$3" "$2.partial" "$1" "$(nproc)" >&2
    mv "$2.partial" "$2"
}
f32=".cache/llamacpp/models/$model-F32.gguf"
for t in $types; do
    out=".cache/llamacpp/models/$model-$t.gguf"
    if [ "$t" = Q4_K_M ] && [ "${model#moe}" = "$model" ] && [ "$model" != q35-2b ]; then
        ln -sf "$(realpath "$gguf")" "$out"
    elif [ ! -f "$out" ]; then
        case "$model:$t" in
        moe*:F16 | q35-2b:BF16) ;;
        moe*:* | q35-2b:*) quantize "$t" "$out" "$gguf" ;;
        *:IQ* | *:Q2_K* | *:Q3_K_*)
            [ -f "$f32" ] || quantize F32 "$f32" "$gguf"
            quantize "$t" "$out" "$f32"
            ;;
        *) quantize "$t" "$out" "$gguf" ;;
        esac
    fi
done
# source@TYPE, exact@TYPE: llama.cpp's TYPE file converted with --wmode
# source or exact (its own blocks decode). fit@TYPE: Kestrel's own file of
# the F32 GGUF with `--fit` the size of llama.cpp's TYPE file, reading at
# most the bytes per decoded token llama.cpp reads from it (`--fit-decode`,
# bench/gguf_decode_bytes.py), with its imatrix where llama.cpp's file used
# one: IQ3_XXS.
for mode in "${later[@]}"; do
    typed=".cache/llamacpp/models/$model-${mode#*@}.gguf"
    case "$mode" in
    fit@*)
        out=".cache/vqf/$model-$mode.vqf"
        if [ ! -f "$out" ] || ! "$kestrel" verify "$out" >/dev/null 2>&1; then
            extra=(--fit-decode "$(python3 bench/gguf_decode_bytes.py "$typed")")
            [ "${mode#*@}" = IQ3_XXS ] && extra+=(--imatrix ".cache/imatrix/$model-llama.imatrix")
            log "kestrel convert $(basename "$f32") --fit $(stat -c %s "$typed") ${extra[*]}"
            "$kestrel" convert "$f32" -o "$out" --fit "$(stat -c %s "$typed")" "${extra[@]}" >&2
        fi
        ;;
    *) convert "${mode%@*}" ".cache/vqf/$model-$mode.vqf" "$typed" ;;
    esac
done
