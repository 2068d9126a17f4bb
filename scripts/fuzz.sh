#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 20), seeded from the
# test fixtures. Needs a nightly toolchain and cargo-fuzz (installed if
# missing). Crashes stop the run with a non-zero exit; reproduce with
# `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-...`.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
if ! cargo +nightly --version >/dev/null 2>&1; then
    # Under CI (scripts/test.sh sets KESTREL_REQUIRE_ASSETS) a missing tool
    # is a failure; scripts/setup.sh installs the nightly toolchain.
    if [ -n "${KESTREL_REQUIRE_ASSETS:-}" ]; then
        echo "fuzz: FAILED: no nightly toolchain on this machine (cargo fuzz needs one; scripts/setup.sh installs it)"
        exit 1
    fi
    echo "fuzz: SKIPPED: no nightly toolchain on this machine (cargo fuzz needs one; scripts/setup.sh installs it)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    (cd /tmp && cargo +nightly install cargo-fuzz --locked --quiet)
fi
seed() { mkdir -p "fuzz/corpus/$1"; cp "${@:2}" "fuzz/corpus/$1/" 2>/dev/null || true; }
# The kept inputs of earlier campaigns (replayed by tests/tests/regressions.rs).
for d in tests/vectors/fuzz/*/; do
    t=$(basename "$d")
    mkdir -p "fuzz/corpus/$t"
    cp "$d"* "fuzz/corpus/$t/" 2>/dev/null || true
done
seed gguf tests/fixtures/dev_qwen2_dense/gguf/model-q4_0.gguf tests/vectors/gguf/*.gguf
seed safetensors tests/fixtures/dev_qwen3_dense_tied/hf/model.safetensors
seed json tests/fixtures/dev_qwen3_dense_tied/hf/config.json tests/fixtures/dev_qwen3_dense_tied/hf/tokenizer_config.json
seed image tests/fixtures/dev_qwen3_vl/ref/image_a.png tests/fixtures/dev_qwen3_vl/ref/image_b.png \
    tests/vectors/image/*.png tests/vectors/image/*.jpg
mkdir -p fuzz/corpus/http fuzz/corpus/serve_api
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAuthorization: Bearer k\r\nContent-Length: 42' >fuzz/corpus/http/post
printf 'GET /v1/models?x=1 HTTP/1.0\r\nExpect: 100-continue\r\nTransfer-Encoding: identity' >fuzz/corpus/http/get
printf '%s' '{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi \u00e9"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}],"max_tokens":5,"temperature":0.7,"top_p":0.9,"seed":-3,"stop":["\n\n","x"],"stream":true,"stream_options":{"include_usage":true},"n":1}' >fuzz/corpus/serve_api/chat
printf '%s' '{"prompt":["Once upon"],"max_completion_tokens":9,"top_k":40,"min_p":0.05,"repeat_penalty":1.1}' >fuzz/corpus/serve_api/completion
printf '%s' '{"prompt":[1,2,3]}' >fuzz/corpus/serve_api/ids
for d in tests/fixtures/dev_*/hf; do
    # one file name per fixture, so seeds from different fixtures do not overwrite each other
    for f in "$d"/config*.json "$d"/generation_config.json; do
        [ -f "$f" ] || continue
        mkdir -p fuzz/corpus/config
        cp "$f" "fuzz/corpus/config/$(basename "$(dirname "$d")")-$(basename "$f")"
    done
done
# A 3 KB tokenizer.json (the fixture's 256 byte tokens, 12 merges, 4 added
# tokens: fuzz/seeds/) for the reader; reference strings as text. Inputs are
# capped at 8 KB for this target: every byte is encoded and decoded several
# times under the sanitizer, and larger inputs ran at ~1 execution/s.
seed tokenizer fuzz/seeds/tokenizer-small.json tests/fixtures/tiny_tokenizer/tokenizer_ref.json \
    tests/fixtures/qwen3_tokenizer_ref.json
mkdir -p fuzz/corpus/vqf
if [ ! -f fuzz/corpus/vqf/seed.vqf ]; then
    cargo run -q --locked -p kestrel -- convert tests/fixtures/dev_qwen2_dense/gguf/model-q4_0.gguf \
        -o fuzz/corpus/vqf/seed.vqf --wmode q4 2>/dev/null
fi
if [ ! -f fuzz/corpus/vqf/seed-vl.vqf ]; then
    cargo run -q --locked -p kestrel -- convert tests/fixtures/dev_qwen3_vl/hf \
        -o fuzz/corpus/vqf/seed-vl.vqf --wmode q8 2>/dev/null
fi
if [ ! -f fuzz/corpus/vqf/seed-moe.vqf ]; then
    cargo run -q --locked -p kestrel -- convert tests/fixtures/dev_qwen3_moe/hf \
        -o fuzz/corpus/vqf/seed-moe.vqf --wmode dual 2>/dev/null
fi
# The layouts that keep GGUF blocks (source mode): IQ4_NLx4, Q3_Kx8,
# IQ4_XSx8, Q2_Kx8, IQ3_XXSx8, IQ3_Sx8, IQ2_XXSx8, IQ2_XSx8, IQ2_Sx8 and the K-quant mix (Q4_Kx4,
# Q5_Kx4, Q6_Kx8).
for g in dev_qwen2_dense/gguf/model-iq4_nl dev_qwen2_kquant/gguf/model-q3_k_m \
    dev_qwen2_kquant/gguf/model-iq4_xs dev_qwen2_kquant/gguf/model-q2_k \
    dev_qwen2_kquant/gguf/model-iq3_xxs dev_qwen2_kquant/gguf/model-iq3_s \
    dev_qwen2_kquant/gguf/model-iq2_xxs dev_qwen2_kquant/gguf/model-iq2_xs \
    dev_qwen2_kquant/gguf/model-iq2_s \
    dev_qwen2_kquant/gguf/model-kquant-mix; do
    out="fuzz/corpus/vqf/seed-source-$(basename "$g").vqf"
    [ -f "$out" ] || cargo run -q --locked -p kestrel -- convert "tests/fixtures/$g.gguf" \
        -o "$out" --wmode source 2>/dev/null
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The C ABI's open starts from the whole valid models (it gets past the parser
# to a chat turn and a few tokens).
seed capi_open fuzz/corpus/vqf/seed.vqf fuzz/corpus/vqf/seed-moe.vqf
for t in ${KESTREL_FUZZ_TARGETS:-vqf safetensors gguf json config tokenizer image http serve_api capi_open schema}; do
    echo "fuzz: $t for ${secs}s"
    max_len=1048576
    [ "$t" = tokenizer ] && max_len=8192
    if ! (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -max_len="$max_len") >"$log" 2>&1; then
        tail -40 "$log"
        echo "fuzz: $t FOUND A CRASH (see fuzz/artifacts/$t/)"
        exit 1
    fi
    grep -E "Done [0-9]+ runs" "$log" || tail -3 "$log"
done
