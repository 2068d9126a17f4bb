#!/usr/bin/env bash
# The input of the tokenizer test `qwen3_matches_hf_fuzz`: 3,000 random
# strings (and 300 random id sequences) through Hugging Face `tokenizers`
# 0.23.3 with the real Qwen3 tokenizer.json, written to
# .cache/qwen3-tokenizer/fuzz.json by tests/fixtures/gen_tokenizer_extra.py
# (fixed seeds: the same file every time). `tokenizers` goes in a venv
# under .cache; a failure to fetch or install anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.cache/qwen3-tokenizer/fuzz.json
bash scripts/fetch-qwen3-tokenizer.sh >/dev/null
if [ ! -s "$out" ]; then
    python=$(bash scripts/python-venv.sh tokenizers-venv tokenizers tokenizers 0.23.3)
    "$python" tests/fixtures/gen_tokenizer_extra.py --fuzz 3000 >&2
fi
echo "tokenizer-hf-fuzz: $out ($(wc -c < "$out") bytes)"
