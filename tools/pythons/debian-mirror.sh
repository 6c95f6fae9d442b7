#!/bin/sh
# Prints the Debian archive this machine's apt already uses (its first main archive URI, not
# the security one), so the interpreter scripts fetch other suites from the same place and no
# address is written in the project. CYMONGOOSE_DEBIAN_MIRROR overrides it.
set -eu
if [ -n "${CYMONGOOSE_DEBIAN_MIRROR:-}" ]; then
    echo "$CYMONGOOSE_DEBIAN_MIRROR"
    exit 0
fi
{
    # deb822 files: "URIs: <uri> [<uri>...]"; one-line files: "deb [options] <uri> <suite> ...".
    sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n'
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p'
} | grep -v -e '-security' -e '^$' | grep '/debian/\?$' | head -n 1 | grep . ||
    { echo "debian-mirror.sh: no Debian archive in apt's sources (set CYMONGOOSE_DEBIAN_MIRROR)" >&2; exit 1; }
