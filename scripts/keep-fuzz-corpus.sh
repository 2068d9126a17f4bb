#!/usr/bin/env bash
# Copies each target's minimised fuzz corpus (fuzz/corpus/TARGET, after
# `cargo +nightly fuzz cmin TARGET`) into tests/vectors/fuzz/TARGET, the
# inputs tests/tests/regressions.rs replays: files of at most 64 KB,
# smallest first, up to 300 KB per target (vqf: up to 450 KB, so that one
# mutated whole model file, 419 KB for the dense q4 seed, is among them).
# Keeps files already there (crashers).
#   bash scripts/keep-fuzz-corpus.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(capi_open config gguf http image json safetensors serve_api tokenizer vqf)
for t in "${targets[@]}"; do
    src="fuzz/corpus/$t"
    dst="tests/vectors/fuzz/$t"
    [ -d "$src" ] || { echo "keep: no $src (run scripts/fuzz.sh and cargo fuzz cmin first)"; exit 1; }
    mkdir -p "$dst"
    total=0 max_file=65536 cap=307200
    [ "$t" = vqf ] && max_file=460800 cap=460800
    while read -r size f; do
        [ $((total + size)) -le $cap ] || break
        cp "$f" "$dst/$(basename "$f")"
        total=$((total + size))
    done < <(find "$src" -maxdepth 1 -type f -size -$((max_file + 1))c -printf '%s %p\n' | sort -n)
    echo "keep: $t: $(ls "$dst" | wc -l) files, $(du -sk "$dst" | cut -f1) KB"
done
