#!/usr/bin/env bash
# Builds the shipped `kestrel` binary: static, for TARGET (default
# aarch64-unknown-linux-musl), with the standard library rebuilt from source
# under the project's release profile (opt-level z, fat LTO) and without
# std's backtrace symbolizer, a panic ending the process at once.
#
#   bash scripts/build-shipped.sh [TARGET] [PROFILE]     (PROFILE: release | size-report)
#
# `-Z build-std` is unstable: RUSTC_BOOTSTRAP=1 enables it on the pinned
# stable toolchain (rust-toolchain.toml, which also installs rust-src), so the
# build is as reproducible as any other. It saves ~200 KB (docs/size.md).
# Output: target/shipped/TARGET/PROFILE/kestrel (its own target dir, so the
# ordinary builds and their caches are untouched).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-aarch64-unknown-linux-musl}"
profile="${2:-release}"
# A panic is a bug (bad input is an error, never a panic): in this binary it
# ends the process at once (`panic = "immediate-abort"`, std built with it:
# the shell reports a trap, SIGTRAP on aarch64), without formatting a
# message; the same input in a debug build (`cargo run`) prints the message
# with its file and line. The panic machinery, the messages and their
# formatting at every panic site cost 42 KB (docs/size.md, 2026-12-07
# night: it paid for reading Qwen3.5 GGUF files). Locations are not
# recorded either (`-Z location-detail=none`, for what remains).
# No unwind tables: the release profile aborts on panic and std is built
# without the backtrace symbolizer, so nothing reads .eh_frame (90 KB).
# Feature `shipped`: with no tables to read, libunwind is not linked
# either (shell/src/no_unwinder.rs; about 40 KB).
# No `Debug` output (`-Z fmt-debug=none`: `{:?}` writes nothing, derived
# `Debug` impls are empty): what a user reads is written with `Display`
# (strings quoted by `error::quoted`, lists by `error::listed`), which
# tests/tests/module_order.rs checks for every non-test source line (7.6 KB,
# docs/size.md).
# Identical code folding (`--icf=all`, rust-lld): functions whose machine
# code is the same (monomorphized copies, trivial closures) share one body;
# Rust does not promise distinct addresses to distinct functions (5.9 KB,
# docs/size.md).
RUSTFLAGS="${RUSTFLAGS:-} -C force-unwind-tables=no -Z location-detail=none -Z fmt-debug=none --cfg kestrel_shipped -C link-arg=--icf=all" RUSTC_BOOTSTRAP=1 cargo build --locked --profile "$profile" --target "$target" -p kestrel \
    --config "profile.$profile.package.kestrel-core.opt-level=\"z\"" \
    --config "profile.$profile.panic=\"immediate-abort\"" -Z panic-immediate-abort \
    --features shipped \
    -Z build-std=std,panic_abort -Z build-std-features= \
    --target-dir target/shipped
# The release binary without section headers (scripts/strip-sections.py:
# 1.5 KB); `size-report` keeps them, and its symbols.
if [ "$profile" = release ]; then
    python3 scripts/strip-sections.py "target/shipped/$target/$profile/kestrel"
fi
echo "target/shipped/$target/$profile/kestrel"
