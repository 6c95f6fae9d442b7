#!/bin/sh
# CPython 3.13 built free-threaded (--disable-gil) from Debian trixie's source package, for the
# free-threading leg of `make test` (issue 37). Debian ships no free-threaded 3.13 for
# bookworm; trixie's source package carries the upstream tarball, which builds here with the
# development packages the project already installs.
#
#     sh tools/pythons/build-python313t.sh [--tsan] PREFIX
#
# PREFIX/bin/python3.13t is the result (Py_GIL_DISABLED=1); a PREFIX that already holds one is
# left alone. --tsan builds it with ThreadSanitizer (`make tsan`): about 70 minutes, since
# every file is instrumented, and an interpreter several times slower. apt runs with a private state and source list (PY313T_BUILD_DIR, default a
# directory under TMPDIR): the system's apt configuration is not touched. 6 to 13 minutes
# on 2 cores.
set -eu

tsan=
if [ "${1:-}" = --tsan ]; then tsan=--with-thread-sanitizer; shift; fi
prefix=${1:?usage: build-python313t.sh [--tsan] PREFIX}
say() { echo "build-python313t.sh: $*" >&2; }

if [ -x "$prefix/bin/python3.13t" ] && "$prefix/bin/python3.13t" -c \
    'import sys, sysconfig; sys.exit(0 if sysconfig.get_config_var("Py_GIL_DISABLED") else 1)'
then
    say "a free-threaded 3.13 is already in $prefix"
    exit 0
fi

work=${PY313T_BUILD_DIR:-${TMPDIR:-/tmp}/cymongoose-python313t${tsan:+-tsan}-build}
mkdir -p "$work/lists/partial" "$work/archives/partial"
echo "deb-src $(sh "$(dirname "$0")/debian-mirror.sh") trixie main" > "$work/sources.list"
apt_private() {
    apt-get -q -o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$work/lists" -o Dir::Cache::Archives="$work/archives" \
        -o Acquire::Check-Valid-Until=false "$@"
}
apt_private update >&2
cd "$work"
apt_private source --download-only python3.13 >&2
tarball=$(ls python3.13_*.orig.tar.xz | tail -n 1)
[ -n "$tarball" ] || { say "no python3.13 source tarball was downloaded"; exit 1; }
rm -rf src && mkdir src && tar -xJf "$tarball" -C src --strip-components=1
cd src
say "configuring $(basename "$tarball") --disable-gil $tsan into $prefix"
# shellcheck disable=SC2086 # $tsan is one word or none
./configure --disable-gil $tsan --prefix="$prefix" --with-ensurepip=install >configure.log 2>&1 ||
    { tail -n 20 configure.log >&2; exit 1; }
make -j"$(nproc)" >make.log 2>&1 || { tail -n 30 make.log >&2; exit 1; }
# Installed into a staging root and moved into place whole: a build killed half-way leaves
# no PREFIX whose interpreter would pass the check above.
rm -rf "$work/stage"
make install DESTDIR="$work/stage" >install.log 2>&1 || { tail -n 30 install.log >&2; exit 1; }
# The interpreter's own known, benign races (CPython keeps the list with its sources): make
# tsan combines them with the project's (tools/tsan-suppressions.txt).
if [ -n "$tsan" ]; then
    cp Tools/tsan/suppressions_free_threading.txt "$work/stage$prefix/lib/tsan-suppressions.txt"
fi
rm -rf "$prefix" && mkdir -p "$(dirname "$prefix")" && mv "$work/stage$prefix" "$prefix"
rm -rf "$work/stage"
"$prefix/bin/python3.13t" -c \
    'import sys, sysconfig; assert sysconfig.get_config_var("Py_GIL_DISABLED"), "GIL build"; print(sys.version)'
# Modules a build without their headers skips: say which, so a missing one is not a surprise.
grep -A3 "necessary bits to build these optional modules were not found" make.log >&2 || true
