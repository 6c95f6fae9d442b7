#!/bin/sh
# Runs a command inside a root made by fetch-python314.sh, in DIR (a directory of the host,
# the clone), which is mounted at the same path inside it: paths in the clone mean the same
# thing on both sides.
#
#     sh tools/pythons/in-root.sh ROOT DIR COMMAND [ARG...]
#
# The mounts live in a mount namespace of their own (unshare) and vanish with the command:
# nothing is left mounted on the host, whatever ends it. The network is the host's (the tests
# use 127.0.0.1; pip reaches the package index), and so are /proc, /dev, /sys, /tmp and the
# name-resolution files. Needs root.
set -eu
[ $# -ge 3 ] || { echo "usage: in-root.sh ROOT DIR COMMAND [ARG...]" >&2; exit 2; }
root=$(cd "$1" && pwd)
dir=$(cd "$2" && pwd)
shift 2
[ -x "$root/usr/bin/python3.14" ] || { echo "in-root.sh: no root in $root" >&2; exit 1; }
# The host's pip settings that name a path of the host which the root does not have (a
# wheel directory, a constraints file) would only make pip warn at every package.
for var in PIP_FIND_LINKS PIP_CONSTRAINT PIP_CERT PIP_CONFIG_FILE; do
    eval "value=\${$var:-}"
    case $value in
        /*) [ -e "$root$value" ] || unset "$var" ;;
    esac
done
exec unshare --mount --propagation private -- sh -eu -c '
root=$1 dir=$2
shift 2
mkdir -p "$root$dir"
for d in /dev /proc /sys /tmp; do mount --rbind "$d" "$root$d"; done
for f in /etc/resolv.conf /etc/hosts; do
    [ -f "$f" ] && touch "$root$f" && mount --bind "$f" "$root$f"
done
mount --bind "$dir" "$root$dir"
exec chroot "$root" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$dir" "$@"
' in-root "$root" "$dir" "$@"
