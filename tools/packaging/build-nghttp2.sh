#!/bin/sh
# Build the pinned libnghttp2 (HTTP/2, issue 36) as a static, position-independent library
# into a prefix, for the wheels (make dist, and [tool.cibuildwheel] once the release wheels
# need it):
#
#     sh tools/packaging/build-nghttp2.sh PREFIX
#
# Why not Debian's libnghttp2.a: it is compiled without -fPIC, so it cannot be linked into a
# shared module ("relocation R_X86_64_PC32 ... recompile with -fPIC"). Development builds
# link the system's libnghttp2.so (libnghttp2-dev); the wheels carry this one inside the
# module, its symbols hidden as OpenSSL's are (CMakeLists.txt), so a user needs no
# libnghttp2 of a particular version.
#
# The sources are Debian's orig tarball of the release (trixie's), fetched over plain HTTP
# from Debian's pool, which serves this machine and CI alike, and checked against the sha256
# below before anything is unpacked. Only the library is built (ENABLE_LIB_ONLY): about 30
# C files, ten seconds. A prefix that already holds this version is left as it is; one
# holding another version stops the script.
#
# Environment: NGHTTP2_BUILD_DIR is where the tarball is kept and built (default: a
# directory under ${TMPDIR:-/tmp}).
set -eu

NGHTTP2_VERSION=1.64.0
NGHTTP2_SHA256=b452dc69a1fcbc9375389b8b154175d8b7b125cdd713fc426774c2b79a1ebd77
NGHTTP2_URL="http://deb.debian.org/debian/pool/main/n/nghttp2/nghttp2_${NGHTTP2_VERSION}.orig.tar.gz"

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
case "$1" in
    /*) prefix=$1 ;;
    *) prefix=$(pwd)/$1 ;;
esac

say() { echo "build-nghttp2.sh: $*" >&2; }

# make test builds wheels in two legs at once (test-installed-wheel, py313t-build), both
# into build/nghttp2: the second waits here for the first, then finds the library built.
if command -v flock >/dev/null 2>&1; then
    mkdir -p "$(dirname "$prefix")"
    exec 9>"$prefix.lock"
    flock 9
fi

header="$prefix/include/nghttp2/nghttp2ver.h"
if [ -f "$prefix/lib/libnghttp2.a" ] && [ -f "$header" ]; then
    if grep -q "^#define NGHTTP2_VERSION \"${NGHTTP2_VERSION}\"" "$header"; then
        say "libnghttp2 ${NGHTTP2_VERSION} is already in $prefix"
        exit 0
    fi
    say "$prefix holds another libnghttp2 version; remove it or choose another prefix"
    exit 1
fi

work=${NGHTTP2_BUILD_DIR:-${TMPDIR:-/tmp}/cymongoose-nghttp2-build}
mkdir -p "$work"
tarball="$work/nghttp2_${NGHTTP2_VERSION}.orig.tar.gz"
if [ ! -f "$tarball" ]; then
    say "fetching $NGHTTP2_URL"
    curl -fsSL --retry 3 -o "$tarball.part" "$NGHTTP2_URL"
    mv "$tarball.part" "$tarball"
fi
if command -v sha256sum >/dev/null 2>&1; then
    actual=$(sha256sum "$tarball" | cut -d' ' -f1)
else
    actual=$(shasum -a 256 "$tarball" | cut -d' ' -f1)  # macOS
fi
if [ "$actual" != "$NGHTTP2_SHA256" ]; then
    say "sha256 mismatch for $tarball: $actual, expected $NGHTTP2_SHA256"
    rm -f "$tarball"
    exit 1
fi

src="$work/nghttp2-${NGHTTP2_VERSION}"
rm -rf "$src" "$work/build"
tar -xzf "$tarball" -C "$work"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DENABLE_LIB_ONLY=ON -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON -DBUILD_TESTING=OFF \
    -DENABLE_DOC=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >&2
cmake --build "$work/build" --parallel >&2
cmake --install "$work/build" >&2
# Its licence travels with the wheels that link it (tools/packaging/dist.py).
cp "$src/COPYING" "$prefix/nghttp2-LICENSE.txt"
say "libnghttp2 ${NGHTTP2_VERSION} installed in $prefix"
