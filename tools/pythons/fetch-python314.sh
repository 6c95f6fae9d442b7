#!/bin/sh
# CPython 3.14 from Debian sid in a minimal root (debootstrap), for the 3.14 leg of `make test`
# (issue 37). bookworm has no 3.14, and sid's interpreter needs sid's C library, so it runs
# inside that root: the tests reach it with chroot and the clone bind-mounted (see the Makefile
# leg that uses it).
#
#     sh tools/pythons/fetch-python314.sh ROOT
#
# ROOT/usr/bin/python3.14 is the result; a ROOT that already holds one is left alone. Needs
# root and debootstrap (tools/debian-packages.txt). About 5 minutes and 300 MB.
set -eu

root=${1:?usage: fetch-python314.sh ROOT}
say() { echo "fetch-python314.sh: $*" >&2; }

if [ -x "$root/usr/bin/python3.14" ]; then
    say "python3.14 is already in $root"
    exit 0
fi
command -v debootstrap >/dev/null || { say "debootstrap not found (apt-get install debootstrap)"; exit 1; }
partial="$root.partial"
rm -rf "$partial"
debootstrap --variant=minbase --include=python3.14,python3.14-venv,ca-certificates \
    sid "$partial" http://deb.debian.org/debian >"$partial.log" 2>&1 ||
    { tail -n 20 "$partial.log" >&2; exit 1; }
# pip inside the root uses the host's configuration (its index) and CA bundle.
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
    if [ -f "$f" ]; then mkdir -p "$partial$(dirname "$f")" && cp "$f" "$partial$f"; fi
done
rm -rf "$root" && mv "$partial" "$root" && rm -f "$partial.log"
chroot "$root" /usr/bin/python3.14 -c 'import sys; print(sys.version)'
