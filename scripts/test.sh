#!/usr/bin/env bash
# Kestrel's whole test suite, from a fresh clone: sets up what is missing,
# then runs formatting and lint checks, every test on x86_64, every test on
# aarch64 under qemu twice (cortex-a76: dotprod kernels; cortex-a53: the
# fallback), the bare-metal builds, the firmware host (a no_std program
# run under qemu, compared with `kestrel run`), the C ABI (scripts/capi.sh:
# C and Python hosts compared with `kestrel run`), and the size report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Under CI a missing asset (the real model) fails its test instead of
# skipping it.
if [ -n "${CI:-}" ]; then export KESTREL_REQUIRE_ASSETS=1; fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
step() { printf '\n==== %s\n' "$*"; }
run_tests() { "$@" 2>&1 | tee -a "$log"; }

step "format"
cargo fmt --all -- --check

step "clippy (x86_64 and aarch64)"
cargo clippy --locked --all-targets -- -D warnings
cargo clippy --locked --all-targets --target aarch64-unknown-linux-gnu -- -D warnings
# The shipped build's feature (shell/src/no_unwinder.rs), linted on its target.
cargo clippy --locked -p kestrel --features shipped --bins --target aarch64-unknown-linux-musl -- -D warnings

step "shell completions: generated from the same definitions (kestrel::cli::command), not in the shipped binary"
cargo clippy --locked -p kestrel --features completions --all-targets -- -D warnings
tmp=$(mktemp -d)
cargo run -q --locked -p kestrel --features completions --bin kestrel-completions -- "$tmp"
for f in kestrel.bash _kestrel kestrel.fish; do
    [ -s "$tmp/$f" ] || { echo "completion script $f is missing or empty"; exit 1; }
    grep -q -- "prefill-q8" "$tmp/$f" || { echo "completion script $f lacks --prefill-q8"; exit 1; }
    echo "completion script $f: $(wc -c < "$tmp/$f") bytes"
done
rm -rf "$tmp"

step "real model (cached in .cache/model; the real-model test skips loudly without it)"
bash scripts/fetch-model.sh >/dev/null || echo "*** real model could not be fetched: its test will SKIP ***"
bash scripts/fetch-qwen3-tokenizer.sh >/dev/null || echo "*** Qwen3 tokenizer could not be fetched: its tests will SKIP ***"
bash scripts/tokenizer-hf-fuzz.sh || echo "*** no HF tokenizer fuzz strings: qwen3_matches_hf_fuzz will SKIP ***"

step "tests on x86_64"
# A CPU with AVX2, FMA and F16C must take the AVX2 kernels (kernels.rs asserts it),
x86_kernels=scalar
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
    x86_kernels=x86_64-avx2
    # ... and with AVX512-VNNI and AVX512-VL, its VNNI GEMM tiles; else with
    # AVX-VNNI, those.
    if grep -qw avx512_vnni /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
        x86_kernels=x86_64-avx512vnni
    elif grep -qw avx_vnni /proc/cpuinfo; then
        x86_kernels=x86_64-avxvnni
    fi
fi
# A CPU with both VNNI forms runs the AVX-VNNI (VEX) tiles natively too:
# kernel_sets_run_and_skipped_are_named then fails unless they ran.
x86_avx_vnni=""
if [ "$x86_kernels" = x86_64-avx512vnni ] && grep -qw avx_vnni /proc/cpuinfo; then
    x86_avx_vnni=1
fi
KESTREL_EXPECT_AVX_VNNI=$x86_avx_vnni KESTREL_EXPECT_KERNELS=$x86_kernels \
    run_tests cargo test --locked --workspace

if [ "$x86_kernels" = x86_64-avx512vnni ] && ! grep -qw avx_vnni /proc/cpuinfo; then
    step "the AVX-VNNI tiles on this AVX512-VNNI CPU: their code built with the EVEX encoding of vpdpbusd"
    # No AVX-VNNI here (nor in qemu's emulation), so the kernel tests run
    # again in a build whose AVX-VNNI tiles use the EVEX form of the same
    # instruction (x86_64::dpbusd_vex); the test fails unless they ran.
    RUSTFLAGS="--cfg kestrel_avx_vnni_as_evex" CARGO_TARGET_DIR=target/avx-vnni-as-evex \
        KESTREL_EXPECT_KERNELS=$x86_kernels run_tests cargo test --locked -p kestrel-kernels
fi

step "kestrel serve against the official openai Python client (fails if it cannot be installed)"
bash scripts/openai-test.sh

step "three kestrel serve replicas behind HAProxy: sticky sessions, a replica killed mid-run"
bash scripts/lb-test.sh

step "kestrel perplexity against numpy (fails if numpy cannot be installed)"
bash scripts/perplexity-numpy.sh

step "kernel and forward tests on x86_64 with the scalar kernels forced"
KESTREL_KERNELS=scalar KESTREL_EXPECT_KERNELS=scalar \
    run_tests cargo test --locked -p kestrel-tests --test kernels --test forward

step "tests on aarch64 under qemu -cpu cortex-a76 (dotprod kernels expected)"
KESTREL_QEMU_CPU=cortex-a76 KESTREL_EXPECT_KERNELS=aarch64-dotprod \
    run_tests cargo test --locked --workspace --target aarch64-unknown-linux-gnu
KESTREL_QEMU_CPU=cortex-a76 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- cpu

step "the real model under qemu -cpu cortex-a76: the q4 file's greedy tokens and logits equal x86_64's bit for bit"
tmp=$(mktemp -d)
gguf=$(bash scripts/fetch-model.sh)
cargo run -q --locked -p kestrel -- convert "$gguf" -o "$tmp/q4.vqf" --wmode q4 2>/dev/null
# "def fib(n):", then 3 greedy tokens: 7 rows of 151,936 logits each.
real_logits=(logits "$tmp/q4.vqf" --tokens 750,15801,1445,1648 --greedy 3 -t 2)
cargo run -q --locked -p kestrel -- "${real_logits[@]}" --out "$tmp/x86.f32" 2>/dev/null
KESTREL_QEMU_CPU=cortex-a76 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- \
    "${real_logits[@]}" --out "$tmp/arm.f32" 2>/dev/null
a=$(sha256sum "$tmp/x86.f32" | cut -c1-16); b=$(sha256sum "$tmp/arm.f32" | cut -c1-16)
if [ "$a" != "$b" ]; then echo "DIFFER: real model q4 logits: x86_64 $a, aarch64 $b"; exit 1; fi
echo "identical: real model q4, 4 prompt tokens + 3 greedy: logits sha256 $a... ($(wc -c < "$tmp/x86.f32") bytes)"
rm -rf "$tmp"

step "tests on aarch64 under qemu -cpu cortex-a53 (no dotprod: fallback expected)"
KESTREL_QEMU_CPU=cortex-a53 KESTREL_EXPECT_KERNELS=scalar \
    run_tests cargo test --locked --workspace --target aarch64-unknown-linux-gnu
KESTREL_QEMU_CPU=cortex-a53 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- cpu

step "conversion is bit-identical on x86_64 and aarch64 (qemu)"
tmp=$(mktemp -d)
for src in tests/fixtures/dev_qwen2_dense/gguf/model-q4_0.gguf tests/fixtures/dev_qwen2_kquant/gguf/model-kquant-mix.gguf \
    tests/fixtures/dev_qwen2_dense/gguf/model-iq4_nl.gguf tests/fixtures/dev_qwen2_kquant/gguf/model-q3_k_m.gguf \
    tests/fixtures/dev_qwen2_kquant/gguf/model-iq4_xs.gguf tests/fixtures/dev_qwen2_kquant/gguf/model-q2_k.gguf \
    tests/fixtures/dev_qwen2_kquant/gguf/model-iq3_xxs.gguf tests/fixtures/dev_qwen2_kquant/gguf/model-iq3_s.gguf \
    tests/fixtures/dev_qwen2_kquant/gguf/model-iq2_xxs.gguf tests/fixtures/dev_qwen2_kquant/gguf/model-iq2_xs.gguf \
    tests/fixtures/dev_qwen2_kquant/gguf/model-iq2_s.gguf tests/fixtures/dev_qwen35_moe/gguf/model-q8_0.gguf \
    tests/fixtures/dev_qwen3_dense_tied/hf tests/fixtures/dev_qwen3_moe/hf; do
    modes="dual mix q8 f32"
    case "$src" in *.gguf) modes="$modes source" ;; esac
    for mode in $modes; do
        cargo run -q --locked -p kestrel -- convert "$src" -o "$tmp/x86.vqf" --wmode "$mode" 2>/dev/null
        KESTREL_QEMU_CPU=cortex-a76 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- \
            convert "$src" -o "$tmp/arm.vqf" --wmode "$mode" 2>/dev/null
        a=$(sha256sum "$tmp/x86.vqf" | cut -c1-16); b=$(sha256sum "$tmp/arm.vqf" | cut -c1-16)
        if [ "$a" != "$b" ]; then echo "DIFFER: $src $mode: x86_64 $a, aarch64 $b"; exit 1; fi
        echo "identical: $src --wmode $mode: sha256 $a..."
    done
done
# --bpw: Kestrel's own quantizers and the plan (k-quants and IQ4_XS on the
# k-quant model, Q4_0/Q8_0 on the MoE model's narrow rows).
for src in tests/fixtures/dev_qwen2_kquant/gguf/model-kquant-mix.gguf tests/fixtures/dev_qwen3_moe/gguf/model-f32.gguf; do
    cargo run -q --locked -p kestrel -- convert "$src" -o "$tmp/x86.vqf" --bpw 4.5 2>/dev/null
    KESTREL_QEMU_CPU=cortex-a76 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- \
        convert "$src" -o "$tmp/arm.vqf" --bpw 4.5 2>/dev/null
    a=$(sha256sum "$tmp/x86.vqf" | cut -c1-16); b=$(sha256sum "$tmp/arm.vqf" | cut -c1-16)
    if [ "$a" != "$b" ]; then echo "DIFFER: $src --bpw 4.5: x86_64 $a, aarch64 $b"; exit 1; fi
    echo "identical: $src --bpw 4.5: sha256 $a..."
done
rm -rf "$tmp"

step "fuzzing: every parser target for a short run (docs/reliability.md)"
bash scripts/fuzz.sh "${KESTREL_FUZZ_SECONDS:-15}"

step "no_std builds: kestrel-core and kestrel-kernels for bare-metal targets"
for t in aarch64-unknown-none thumbv7em-none-eabihf; do
    cargo build --locked -p kestrel-core -p kestrel-kernels --target "$t"
    echo "built for $t"
done

step "firmware host: core + kernels with no std under qemu -cpu cortex-a76, same tokens as kestrel run"
bash scripts/firmware-host.sh test

step "the C ABI: header checks, the freestanding C host under qemu a76/a53, the Linux C host and the Python example on the real model, all as kestrel run"
bash scripts/capi.sh test

step "size report"
bash size-report/run.sh

step "the shipped binary (std rebuilt, scripts/build-shipped.sh) runs and agrees with the test build"
shipped=target/shipped/aarch64-unknown-linux-musl/release/kestrel
tmp=$(mktemp -d)
qemu-aarch64 -cpu cortex-a76 "$shipped" cpu
qemu-aarch64 -cpu cortex-a76 "$shipped" convert tests/fixtures/dev_qwen3_dense_tied/hf -o "$tmp/s.vqf" 2>/dev/null
a=$(qemu-aarch64 -cpu cortex-a76 "$shipped" run "$tmp/s.vqf" -p "The capital of France" -n 12 --temp 0 -t 2 2>/dev/null)
b=$(KESTREL_QEMU_CPU=cortex-a76 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- \
    run "$tmp/s.vqf" -p "The capital of France" -n 12 --temp 0 -t 2 2>/dev/null)
if [ "$a" != "$b" ]; then echo "shipped binary differs: [$a] vs [$b]"; exit 1; fi
# Qwen3.5 (Gated DeltaNet layers, gated attention) in the shipped binary too,
# from its Hugging Face folder and from llama.cpp's Q8_0 GGUF.
for src in tests/fixtures/dev_qwen35_dense/hf_bf16 tests/fixtures/dev_qwen35_dense/gguf/model-q8_0.gguf; do
    qemu-aarch64 -cpu cortex-a76 "$shipped" convert "$src" -o "$tmp/q35.vqf" 2>/dev/null
    a=$(qemu-aarch64 -cpu cortex-a76 "$shipped" run "$tmp/q35.vqf" -p "The capital of France" -n 12 --temp 0 -t 2 2>/dev/null)
    b=$(KESTREL_QEMU_CPU=cortex-a76 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- \
        run "$tmp/q35.vqf" -p "The capital of France" -n 12 --temp 0 -t 2 2>/dev/null)
    if [ -z "$a" ] || [ "$a" != "$b" ]; then echo "shipped binary differs on Qwen3.5 ($src): [$a] vs [$b]"; exit 1; fi
done
# Qwen3.5 with an image: the folder's vision tower, and llama.cpp's GGUF
# with its mmproj.
q35=tests/fixtures/dev_qwen35_dense
qemu-aarch64 -cpu cortex-a76 "$shipped" convert $q35/hf_bf16 -o "$tmp/q35-hf.vqf" 2>/dev/null
qemu-aarch64 -cpu cortex-a76 "$shipped" convert $q35/gguf/model-q8_0.gguf --mmproj $q35/gguf/mmproj-bf16.gguf \
    --image-min-tokens 4 -o "$tmp/q35-gguf.vqf" 2>/dev/null
for f in q35-hf q35-gguf; do
    a=$(qemu-aarch64 -cpu cortex-a76 "$shipped" run "$tmp/$f.vqf" --image $q35/image/test_image_64x64.png \
        -p "Describe this image." -n 12 --temp 0 -t 2 --ids 2>/dev/null)
    b=$(KESTREL_QEMU_CPU=cortex-a76 cargo run -q --locked --target aarch64-unknown-linux-gnu -p kestrel -- \
        run "$tmp/$f.vqf" --image $q35/image/test_image_64x64.png -p "Describe this image." -n 12 --temp 0 -t 2 --ids 2>/dev/null)
    if [ -z "$a" ] || [ "$a" != "$b" ]; then echo "shipped binary differs on a Qwen3.5 image ($f): [$a] vs [$b]"; exit 1; fi
done
if qemu-aarch64 "$shipped" run "$tmp/missing.vqf" -p x 2>/dev/null; then echo "missing file accepted"; exit 1; fi
echo "shipped binary: same text as the test build; errors exit non-zero"
rm -rf "$tmp"

step "summary"
passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
