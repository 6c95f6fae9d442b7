#!/bin/sh
# Build the pinned zlib and zstd releases (issue 39: gzip and zstd response bodies, WebSocket
# permessage-deflate) as static, position-independent libraries into one prefix, for the
# wheels (make dist through tools/packaging/dist.py, and [tool.cibuildwheel]):
#
#     sh tools/packaging/build-compression.sh PREFIX
#
# PREFIX then holds lib/libz.a, lib/libzstd.a, include/{zlib.h,zconf.h,zstd.h,
# zstd_errors.h,zdict.h} and the two licences (zlib-LICENSE.txt, zstd-LICENSE.txt), which
# CMakeLists.txt installs into the wheel beside ours. Development builds link the system's
# shared libraries (zlib1g-dev, libzstd-dev); the wheels carry these inside the module, their
# symbols hidden as OpenSSL's are, so a user needs no zlib or libzstd of a particular version
# and cannot have another module's copy stand in for ours.
#
# Why not the system's libz.a and libzstd.a: a static library must be compiled with -fPIC to
# go into a shared module, which distributions do not promise (Debian 12's happen to be), and
# building ours gives every wheel (make dist's, manylinux, musllinux, macOS) the same versions.
#
# The sources are Debian's orig tarballs of the releases (trixie's), fetched over plain HTTP
# from Debian's pool as build-nghttp2.sh fetches nghttp2's, and checked against the sha256s
# below before anything is unpacked. Debian repacks both (+dfsg: files it does not
# redistribute, none of them in the libraries). Only the libraries are built: zlib's
# configure --static and `make libz.a`, zstd's `make -C lib libzstd.a` (single-threaded, the
# static library's default; the module creates no zstd worker threads). About 60 C files,
# some 20 seconds on one core.
#
# Each library is handled on its own: one already in the prefix at its pinned version is left
# as it is; one at another version stops the script.
#
# Portable sh and tools (Linux, Alpine's busybox, macOS): no GNU-only flags. Needs curl, a C
# compiler, make, and xz or a tar that reads .tar.xz itself (bsdtar on macOS, busybox).
# macOS runs only in the hosted CI (.github/workflows/wheels.yml).
#
# Environment: CC and MACOSX_DEPLOYMENT_TARGET are honoured (set the latter the same for the
# wheel build, as [tool.cibuildwheel.macos] does); COMPRESSION_BUILD_DIR is where the tarballs
# are kept and built (default: PREFIX.build beside the prefix, so builds into two prefixes at
# once never share a directory, and make's build/ keeps the tarballs).
set -eu

ZLIB_VERSION=1.3.1
ZLIB_SHA256=60dd315c07f616887caa029408308a018ace66e3d142726a97db164b3b8f69fb
# Debian names its repack of 1.3.1 "1.3.dfsg+really1.3.1" (it had shipped 1.3 first).
ZLIB_URL="http://deb.debian.org/debian/pool/main/z/zlib/zlib_1.3.dfsg+really${ZLIB_VERSION}.orig.tar.gz"
ZSTD_VERSION=1.5.7
ZSTD_SHA256=0c092ef267edce57ba7f3f2645c861f72eaf5e76273c6c3632869423464b90a5
ZSTD_URL="http://deb.debian.org/debian/pool/main/libz/libzstd/libzstd_${ZSTD_VERSION}+dfsg.orig.tar.xz"

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
case "$1" in
    /*) prefix=$1 ;;
    *) prefix=$(pwd)/$1 ;;
esac

say() { echo "build-compression.sh: $*" >&2; }

# make test builds wheels in two legs at once (test-installed-wheel, py313t-build), both
# into build/compression: the second waits here for the first, then finds both built.
# (macOS has no flock; nothing there builds two at once.)
mkdir -p "$prefix"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$prefix.lock"
    flock 9
fi

# Prints "ok", "absent" or "other" for the library whose archive is $1, whose version is
# $3 and whose installed version the command in $2 prints from the prefix's headers. An
# archive without its header is an interrupted build: absent, built again.
state() {
    if [ ! -f "$prefix/lib/$1" ] || [ -z "$($2)" ]; then
        echo absent
    elif [ "$($2)" = "$3" ]; then
        echo ok
    else
        echo other
    fi
}
zlib_installed() {
    # zlib.h: #define ZLIB_VERSION "1.3.1"
    [ -f "$prefix/include/zlib.h" ] || return 0
    sed -n 's/^#define ZLIB_VERSION "\([^"]*\)".*/\1/p' "$prefix/include/zlib.h"
}
zstd_installed() {
    # zstd.h: ZSTD_VERSION_MAJOR, _MINOR and _RELEASE, in that order.
    [ -f "$prefix/include/zstd.h" ] || return 0
    awk '/^#define ZSTD_VERSION_(MAJOR|MINOR|RELEASE)[ \t]/ { v = v s $3; s = "." }
         END { print v }' "$prefix/include/zstd.h"
}

zlib_state=$(state libz.a zlib_installed "$ZLIB_VERSION")
zstd_state=$(state libzstd.a zstd_installed "$ZSTD_VERSION")
if [ "$zlib_state" = other ]; then
    say "$prefix holds another zlib than ${ZLIB_VERSION}; remove it or choose another prefix"
    exit 1
fi
if [ "$zstd_state" = other ]; then
    say "$prefix holds another libzstd than ${ZSTD_VERSION}; remove it or choose another prefix"
    exit 1
fi
if [ "$zlib_state" = ok ] && [ "$zstd_state" = ok ]; then
    say "zlib ${ZLIB_VERSION} and libzstd ${ZSTD_VERSION} are already in $prefix"
    exit 0
fi

work=${COMPRESSION_BUILD_DIR:-$prefix.build}
mkdir -p "$work" "$prefix/lib" "$prefix/include"
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
make=${MAKE:-make}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1  # macOS
    fi
}

# Fetches $1 into the file $3 unless it is there, and checks its sha256 against $2.
fetch() {
    if [ ! -f "$3" ]; then
        say "fetching $1"
        curl -fsSL --retry 3 -o "$3.part" "$1"
        mv "$3.part" "$3"
    fi
    actual=$(sha256_of "$3")
    if [ "$actual" != "$2" ]; then
        say "sha256 mismatch for $3: $actual, expected $2"
        rm -f "$3"
        exit 1
    fi
}

if [ "$zlib_state" = absent ]; then
    tarball="$work/zlib-${ZLIB_VERSION}.orig.tar.gz"
    fetch "$ZLIB_URL" "$ZLIB_SHA256" "$tarball"
    src="$work/zlib-${ZLIB_VERSION}"
    rm -rf "$src"
    gzip -dc "$tarball" | (cd "$work" && tar -xf -)
    # configure edits zconf.h for this platform, so the installed one is the built tree's.
    (cd "$src" && CFLAGS="-O2 -fPIC" ./configure --static >&2 \
        && "$make" -j"$jobs" libz.a >&2)
    cp "$src/libz.a" "$prefix/lib/libz.a"
    cp "$src/zconf.h" "$prefix/include/zconf.h"
    cp "$src/LICENSE" "$prefix/zlib-LICENSE.txt"
    # The header last: the version read from it marks a finished install.
    cp "$src/zlib.h" "$prefix/include/zlib.h"
    say "zlib ${ZLIB_VERSION} installed in $prefix"
fi

if [ "$zstd_state" = absent ]; then
    tarball="$work/libzstd-${ZSTD_VERSION}.orig.tar.xz"
    fetch "$ZSTD_URL" "$ZSTD_SHA256" "$tarball"
    src="$work/zstd-${ZSTD_VERSION}"
    rm -rf "$src"
    if command -v xz >/dev/null 2>&1; then
        xz -dc "$tarball" | (cd "$work" && tar -xf -)
    else
        tar -xf "$tarball" -C "$work"  # bsdtar (macOS) and busybox read xz themselves
    fi
    # CFLAGS on the command line replaces the Makefile's own (its -O3 is kept here); the
    # include paths and defines it needs are in CPPFLAGS, which stay. ZSTD_TRACE=0: zstd's
    # tracing hooks are weak undefined symbols otherwise, left in the module's dynamic table
    # for any library in the process that defines them to be called from our compressor.
    "$make" -C "$src/lib" -j"$jobs" libzstd.a CFLAGS="-O3 -fPIC -DZSTD_TRACE=0" >&2
    cp "$src/lib/libzstd.a" "$prefix/lib/libzstd.a"
    cp "$src/lib/zstd_errors.h" "$src/lib/zdict.h" "$prefix/include/"
    # zstd is BSD or GPLv2, the recipient's choice: the wheel carries the BSD text.
    cp "$src/LICENSE" "$prefix/zstd-LICENSE.txt"
    cp "$src/lib/zstd.h" "$prefix/include/zstd.h"
    say "libzstd ${ZSTD_VERSION} installed in $prefix"
fi
