#!/usr/bin/env bash
# Installs what Kestrel's build and tests need on a fresh Debian machine, and
# nothing when it is already there. Safe to rerun.
#   - the pinned Rust toolchain with its targets (rust-toolchain.toml)
#   - qemu-user (runs the aarch64 tests), the aarch64 cross linker and libc
#   - gcc, g++, libc headers and binutils (the C ABI's hosts and header checks)
#   - a nightly toolchain for cargo-fuzz (scripts/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v aarch64-linux-gnu-nm >/dev/null || need+=(binutils-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ] || need+=(libc6-dev-arm64-cross)
command -v python3 >/dev/null || need+=(python3)
# The Python package's test (scripts/capi.sh) installs it into a venv.
python3 -m venv --help >/dev/null 2>&1 || need+=(python3-venv)
# The C ABI's checks (scripts/capi.sh): the host C and C++ compilers with
# libc headers, and nm for the exported symbols.
command -v gcc >/dev/null || need+=(gcc)
command -v g++ >/dev/null || need+=(g++)
[ -e /usr/include/stdio.h ] || need+=(libc6-dev)
command -v nm >/dev/null || need+=(binutils)
# scripts/install-capi.sh's pkg-config file, checked by scripts/capi.sh.
command -v pkg-config >/dev/null || need+=(pkg-config)
# The load-balancer test (scripts/lb-test.sh) puts replicas behind HAProxy.
command -v haproxy >/dev/null || need+=(haproxy)
if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
fi

# rustup reads rust-toolchain.toml: the pinned version, components, targets.
rustup toolchain install >/dev/null 2>&1 || rustup toolchain install
# Each target checked on its own (a toolchain found installed, e.g. as a
# link to another, may lack some of them).
installed=$(rustup target list --installed)
for t in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu aarch64-unknown-linux-musl \
    aarch64-unknown-none thumbv7em-none-eabihf; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done
# The shipped build rebuilds std from source (scripts/build-shipped.sh).
rustup component list --installed | grep -q '^rust-src' || rustup component add rust-src
# cargo-fuzz (scripts/fuzz.sh) needs a nightly toolchain beside the pinned one.
cargo +nightly --version >/dev/null 2>&1 || rustup toolchain install nightly --profile minimal
echo "setup: ready ($(rustc --version), $(qemu-aarch64 --version | head -1))"
