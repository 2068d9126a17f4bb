#!/usr/bin/env bash
# The main job, end to end. For now: set up, build the release binary, show
# the kernel set this CPU gets, and run the kernel bench on synthetic weights.
# (It becomes: fetch the real model, convert it, generate text.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release --locked -p kestrel
./target/release/kestrel cpu
./target/release/kestrel bench --rows 4096 --cols 4096 --repeats 7
