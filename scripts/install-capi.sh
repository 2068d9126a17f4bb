#!/usr/bin/env bash
# Builds Kestrel's C library for this machine and installs it under PREFIX
# (default /usr/local):
#   PREFIX/include/kestrel.h
#   PREFIX/lib/libkestrel.a              the static library
#   PREFIX/lib/libkestrel.so.N           the shared one, SONAME libkestrel.so.N
#                                        (N: KESTREL_ABI_VERSION, the ABI's major number)
#   PREFIX/lib/libkestrel.so -> libkestrel.so.N
#   PREFIX/lib/pkgconfig/kestrel.pc      for `pkg-config --cflags --libs kestrel`
# Both libraries are the hosted build (feature hosted: std linked;
# kestrel_config_init states the CPU's features as detected and threads 0,
# the built-in pool on the big cores: a host runs at `kestrel run`'s speed
# with no code of its own) and read every file `kestrel convert` writes
# (features gguf-rows and codebook). A program then builds with
#   cc app.c $(pkg-config --cflags --libs kestrel)
# (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix pkg-config does not
# search; at run time the shared library is found through the loader's
# path: LD_LIBRARY_PATH=PREFIX/lib, or ldconfig for a system prefix; or
# link the static one: `pkg-config --static --cflags --libs kestrel` with
# -l:libkestrel.a, std's system libraries in Libs.private).
#   bash scripts/install-capi.sh [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(realpath -m "${1:-/usr/local}")
target=$(rustc -vV | sed -n 's/^host: //p')
abi=$(sed -n 's/^#define KESTREL_ABI_VERSION \([0-9]*\)$/\1/p' include/kestrel.h)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$abi" ] && [ -n "$version" ] || { echo "install-capi: cannot read the ABI or the version"; exit 1; }
soname=libkestrel.so.$abi
built=target/$target/release
# One build of both libraries; rustc prints the system libraries std needs
# when the static one is linked (kept beside the build: a build cargo finds
# fresh prints nothing).
native=$built/kestrel-capi-native-static-libs.txt
log=$(cargo rustc --locked -p kestrel-capi --release --features "hosted gguf-rows codebook" \
    --target "$target" --crate-type staticlib,cdylib -- -C "link-arg=-Wl,-soname,$soname" \
    --print native-static-libs 2>&1) || { echo "$log"; exit 1; }
if grep -q 'native-static-libs: ' <<<"$log"; then
    sed -n 's/.*native-static-libs: //p' <<<"$log" | tail -1 >"$native"
fi
private=$(cat "$native")
install -d "$prefix/include" "$prefix/lib/pkgconfig"
install -m 644 include/kestrel.h "$prefix/include/kestrel.h"
install -m 644 "$built/libkestrel_capi.a" "$prefix/lib/libkestrel.a"
install -m 755 "$built/libkestrel_capi.so" "$prefix/lib/$soname"
ln -sfn "$soname" "$prefix/lib/libkestrel.so"
cat >"$prefix/lib/pkgconfig/kestrel.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: kestrel
Description: Kestrel's C ABI: Qwen inference in memory the caller gives
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lkestrel
Libs.private: $private
PC
echo "install-capi: $prefix/include/kestrel.h, $prefix/lib/libkestrel.a, $prefix/lib/$soname (and libkestrel.so), $prefix/lib/pkgconfig/kestrel.pc"
