#!/usr/bin/env bash
# Three `kestrel serve` replicas on loopback behind HAProxy (the
# distribution's package, installed by scripts/setup.sh): sticky sessions by
# X-Session-Id or the request's `user` field, prefix reuse through the
# proxy, and a replica killed mid-run (tests/lb/lb_test.py). Uses the real
# 0.5B model (scripts/fetch-model.sh), converted to q4, so that streams are
# still running when the replica dies. Fails if haproxy or the model is
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v haproxy >/dev/null || { echo "lb-test: haproxy is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
gguf=$(bash scripts/fetch-model.sh)
cargo build -q --locked -p kestrel
bin=target/debug/kestrel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert "$gguf" -o "$tmp/q4.vqf" --wmode q4 2>/dev/null
python3 tests/lb/lb_test.py "$bin" "$tmp/q4.vqf" 3
