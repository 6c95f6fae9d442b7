#!/bin/sh
# CPython 3.14 from Debian sid in a minimal root made by debootstrap, for the 3.14 leg of
# `make test` (issue 37). bookworm has no 3.14, and sid's interpreter needs sid's C library, so
# it runs inside that root: tools/pythons/in-root.sh enters it with the clone mounted at the
# same path. The root also holds what the suites talk to (curl, openssl, nginx, HAProxy,
# mosquitto, nghttp2's clients) and what builds the extension (gcc, the Python, OpenSSL and
# nghttp2 headers), all from sid, so nothing of the host's is mixed with sid's libraries.
#
#     sh tools/pythons/fetch-python314.sh ROOT
#
# ROOT/usr/bin/python3.14 is the result; a ROOT that already holds one is left alone. Needs
# root and debootstrap (tools/debian-packages.txt). About 5 minutes and 500 MB.
set -eu

root=${1:?usage: fetch-python314.sh ROOT}
say() { echo "fetch-python314.sh: $*" >&2; }
packages=python3.14,python3.14-venv,python3.14-dev,ca-certificates,gcc,libc6-dev,pkg-config
packages=$packages,libssl-dev,libnghttp2-dev,curl,openssl,nginx,haproxy,mosquitto
packages=$packages,nghttp2-client,netcat-openbsd,procps
# Added after roots were first made (issue 39: the extension links zlib and libzstd): a root
# made before gets them installed into it once, below.
added="zlib1g-dev libzstd-dev"
packages=$packages,$(echo "$added" | tr ' ' ',')

if [ -x "$root/usr/bin/python3.14" ]; then
    missing=""
    for pkg in $added; do
        chroot "$root" dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null \
            | grep -q "install ok installed" || missing="$missing $pkg"
    done
    if [ -n "$missing" ]; then
        say "installing$missing into $root"
        # The root's sid lists may be a snapshot whose Release file has expired.
        sh "$(dirname "$0")/in-root.sh" "$root" /tmp apt-get update -qq \
            -o Acquire::Check-Valid-Until=false >/dev/null
        # shellcheck disable=SC2086 # one word per package
        sh "$(dirname "$0")/in-root.sh" "$root" /tmp env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi
    say "python3.14 is already in $root"
    exit 0
fi
command -v debootstrap >/dev/null || { say "debootstrap not found (apt-get install debootstrap)"; exit 1; }
mirror=$(sh "$(dirname "$0")/debian-mirror.sh")
# Made beside ROOT and moved into place whole: a run killed half-way leaves no ROOT that
# would pass the check above.
partial="$root.partial"
rm -rf "$partial" && mkdir -p "$(dirname "$root")"
say "debootstrap sid into $partial ($mirror)"
debootstrap --variant=minbase --include="$packages" sid "$partial" "$mirror" \
    >"$partial.log" 2>&1 || { tail -n 20 "$partial.log" >&2; exit 1; }
# pip inside the root uses the host's configuration (its index) and CA bundle.
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
    if [ -f "$f" ]; then mkdir -p "$partial$(dirname "$f")" && cp "$f" "$partial$f"; fi
done
# The suites' nginx and HAProxy are started by the tests with their own configurations;
# the packages' own services never run in the root (no init there).
rm -rf "$root" && mv "$partial" "$root" && rm -f "$partial.log"
chroot "$root" /usr/bin/python3.14 -c 'import sys; print(sys.version)'
