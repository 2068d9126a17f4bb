#!/usr/bin/env bash
# llama.cpp, the anchor, built as its users build it: prints the directory of
# its binaries on stdout. Downloads the llama-cpp-python==0.3.36 source
# distribution with pip (cached in .cache/llamacpp), unpacks its
# vendor/llama.cpp and builds llama-bench, llama-quantize, llama-perplexity,
# llama-imatrix, and the speculative-decoding examples llama-lookup and
# llama-speculative with cmake (Release; the defaults, spelled out: native
# ISA, repacked CPU kernels, OpenMP; no CURL; cached in .cache/llamacpp/build,
# reruns skip it). Installs what is missing (root or sudo, Debian/Ubuntu).
# Nothing of llama.cpp is copied into the repository.
#   bin=$(bash bench/llamacpp.sh)
#   bin=$(LLAMACPP_ISA=avx2 bash bench/llamacpp.sh)   # AVX2 only (build-avx2)
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "llamacpp: $*" >&2; }

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
command -v cmake >/dev/null || python3 -m pip install --quiet cmake >&2
command -v ninja >/dev/null || python3 -m pip install --quiet ninja >&2

ver=0.3.36
lc=.cache/llamacpp
mkdir -p "$lc"
sdist="$lc/llama_cpp_python-$ver.tar.gz"
if [ ! -f "$sdist" ]; then
    log "downloading the llama-cpp-python==$ver source distribution"
    python3 -m pip download --quiet --no-deps "llama-cpp-python==$ver" -d "$lc" >&2
fi
src="$lc/llama_cpp_python-$ver/vendor/llama.cpp"
if [ ! -f "$src/CMakeLists.txt" ]; then
    tar -xzf "$sdist" -C "$lc" "llama_cpp_python-$ver/vendor/llama.cpp"
fi
# LLAMACPP_ISA=avx2: a second build without the native ISA (GGML_NATIVE=OFF,
# AVX2/FMA/F16C on, no AVX-512), for comparisons limited to AVX2.
isa_flags=(-DGGML_NATIVE=ON)
build="$lc/build"
if [ "${LLAMACPP_ISA:-native}" = avx2 ]; then
    isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
    build="$lc/build-avx2"
fi
bin="$build/bin"
targets=(llama-bench llama-quantize llama-perplexity llama-imatrix llama-lookup llama-speculative)
for t in "${targets[@]}"; do
    if [ ! -x "$bin/$t" ]; then
        log "building ${targets[*]} (once; cached in $build)"
        cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" \
            -DGGML_CPU_REPACK=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF >&2
        cmake --build "$build" --config Release -j "$(nproc)" --target "${targets[@]}" >&2
        break
    fi
done
echo "$bin"
