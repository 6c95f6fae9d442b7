#!/bin/sh
# Build the pinned OpenSSL release into a prefix, for the release wheels
# ([tool.cibuildwheel] in pyproject.toml runs this as before-all):
#
#     sh tools/packaging/build-openssl.sh PREFIX
#
# The wheels carry OpenSSL inside the extension module: we build it static (no-shared), so
# CMake links libssl.a and libcrypto.a into _mongoose*.so (OPENSSL_USE_STATIC_LIBS=TRUE)
# and a user needs no OpenSSL of a particular version on their machine; auditwheel and
# delocate then have no OpenSSL shared library to graft in beside the module. Every object is
# compiled with -fPIC, as a static library must be to link into a shared module.
#
# The tarball's sha256 is checked before anything is unpacked. A prefix that already holds
# this version's libraries and headers is left as it is (cibuildwheel may run before-all
# more than once on one machine); one holding another version stops the script.
#
# Environment: MACOSX_DEPLOYMENT_TARGET is honoured on macOS (the compiler reads it; set it
# the same for the wheel build, see [tool.cibuildwheel.macos]); OPENSSL_BUILD_DIR is where
# the tarball is kept and unpacked (default: a directory under ${TMPDIR:-/tmp}).
set -eu

# OpenSSL 3.5 is a long-term support release (supported until April 2030).
OPENSSL_VERSION=3.5.7
OPENSSL_SHA256=a8c0d28a529ca480f9f36cf5792e2cd21984552a3c8e4aa11a24aa31aeac98e8
OPENSSL_URL="https://github.com/openssl/openssl/releases/download/openssl-${OPENSSL_VERSION}/openssl-${OPENSSL_VERSION}.tar.gz"

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
case "$1" in
    /*) prefix=$1 ;;
    *) prefix=$(pwd)/$1 ;;
esac

say() { echo "build-openssl.sh: $*" >&2; }

if [ -f "$prefix/lib/libssl.a" ] && [ -f "$prefix/lib/libcrypto.a" ] \
        && [ -f "$prefix/include/openssl/opensslv.h" ]; then
    if grep -q "^# *define OPENSSL_VERSION_TEXT \"OpenSSL ${OPENSSL_VERSION} " \
            "$prefix/include/openssl/opensslv.h"; then
        say "OpenSSL ${OPENSSL_VERSION} is already in $prefix; nothing to do"
        exit 0
    fi
    say "$prefix holds another OpenSSL than ${OPENSSL_VERSION}; remove it first"
    exit 1
fi

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1  # macOS
    fi
}

work=${OPENSSL_BUILD_DIR:-${TMPDIR:-/tmp}/cymongoose-openssl-build}
tarball="$work/openssl-${OPENSSL_VERSION}.tar.gz"
mkdir -p "$work"
if [ ! -f "$tarball" ]; then
    say "downloading $OPENSSL_URL"
    curl -fsSL --retry 3 -o "$tarball.part" "$OPENSSL_URL"
    mv "$tarball.part" "$tarball"
fi
got=$(sha256_of "$tarball")
if [ "$got" != "$OPENSSL_SHA256" ]; then
    say "sha256 mismatch for $tarball: expected $OPENSSL_SHA256, got $got"
    rm -f "$tarball"
    exit 1
fi

src="$work/openssl-${OPENSSL_VERSION}"
rm -rf "$src"
tar -xzf "$tarball" -C "$work"

jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)

# no-shared: static libraries only (see the top). no-dso: OpenSSL never loads a provider or
# engine module from a directory at run time; with the library inside the wheel, that
# directory would be this build's prefix, a path on the build machine. no-tests: not built.
# --libdir=lib: lib/, not lib64/, on every platform. --openssldir=/etc/ssl: where OpenSSL
# looks for openssl.cnf on the user's machine: a system directory only root can write to,
# never a build path (cymongoose loads certificates only from the files it is given).
# Configure picks the target (linux-x86_64, linux-aarch64, darwin64-arm64-cc, ...) itself.
cd "$src"
perl ./Configure \
    --prefix="$prefix" \
    --libdir=lib \
    --openssldir=/etc/ssl \
    no-shared no-dso no-tests \
    -fPIC
make -j"$jobs"
# install_sw: the libraries, headers and pkg-config files (install_ssldirs would write to
# /etc/ssl, and the docs are not needed).
make install_sw
# The wheel carries OpenSSL's licence beside ours (CMakeLists.txt installs it from here).
cp LICENSE.txt "$prefix/LICENSE.txt"
say "OpenSSL ${OPENSSL_VERSION} installed in $prefix"
