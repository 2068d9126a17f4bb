#!/usr/bin/env bash
# llama.cpp cross-built for aarch64 as in ../shared/ANCHORS.md, to count its
# executed instructions under qemu (bench/insncount.sh): static, non-PIE,
# GGML_NATIVE=OFF, GGML_CPU_ARM_ARCH=armv8.2-a+dotprod (an RK3588's A76:
# dotprod, no i8mm), OpenMP off, repacked CPU kernels on (the default).
# Builds only llama-bench (`-t 1 -p 0 -n N`: a one-token warm-up, then N
# decoded tokens; no sampling). Uses the source
# that bench/llamacpp.sh unpacks; installs the cross compiler if missing
# (root or sudo, Debian/Ubuntu). Prints the binary's path on stdout; cached
# in .cache/llamacpp/build-aarch64, reruns skip the build.
#   bin=$(bash bench/llamacpp-aarch64.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "llamacpp-aarch64: $*" >&2; }
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if ! command -v aarch64-linux-gnu-g++ >/dev/null; then
    log "installing g++-aarch64-linux-gnu"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq g++-aarch64-linux-gnu >/dev/null
fi
ver=0.3.36
src=.cache/llamacpp/llama_cpp_python-$ver/vendor/llama.cpp
[ -f "$src/CMakeLists.txt" ] || bash bench/llamacpp.sh >/dev/null
build=.cache/llamacpp/build-aarch64
bin=$build/bin/llama-bench
if [ ! -x "$bin" ]; then
    log "cross-building llama-bench for aarch64 (once; cached in $build)"
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
        -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ \
        -DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod -DGGML_OPENMP=OFF \
        -DGGML_CPU_REPACK=ON -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=OFF \
        -DCMAKE_EXE_LINKER_FLAGS="-static -no-pie" -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON >&2
    cmake --build "$build" --config Release -j "$(nproc)" --target llama-bench >&2
fi
echo "$bin"
