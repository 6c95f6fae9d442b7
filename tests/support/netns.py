"""Hosts of the test's own, for what crosses a network: each a Linux network namespace
(`ip netns`), joined by veth pairs with private addresses. Traffic stays between those
namespaces; nothing reaches the machine's own interfaces. Needs root.

Namespace names carry this process's id, so parallel test processes never meet; interface
names live inside the namespaces. Namespaces left by a test process that died (killed by a
timeout, say) are removed by the next one that starts, with the processes still in them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from types import TracebackType

__all__ = ["Network", "can_make_namespaces"]

_IP = shutil.which("ip") or "/usr/sbin/ip"
_PREFIX = "cymtest"


def can_make_namespaces() -> str | None:
    """None when this process may make namespaces, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not os.path.exists(_IP):
        return "no `ip` command (Debian's iproute2)"
    return None


def _ip(*args: str, check: bool = True) -> str:
    done = subprocess.run([_IP, *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(name: str) -> None:
    """Kill what still runs in namespace `name`, then delete it."""
    for pid in _ip("netns", "pids", name, check=False).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _ip("netns", "del", name, check=False)


def _remove_stale() -> None:
    """Namespaces of test processes that are gone."""
    for line in _ip("netns", "list", check=False).splitlines():
        found = re.match(rf"({_PREFIX}(\d+)-\S+)", line)
        if found and not _pid_alive(int(found.group(2))):
            _remove(found.group(1))


class Network:
    """`with Network() as net:` hosts made by `host(name)`, joined by `link()`; every
    namespace (and whatever runs in it) is removed on exit, whether the test passed or
    not."""

    def __init__(self) -> None:
        self._names: list[str] = []

    def __enter__(self) -> Network:
        _remove_stale()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def host(self, name: str) -> str:
        """A new namespace with its loopback up; its full name."""
        full = f"{_PREFIX}{os.getpid()}-{name}"
        _ip("netns", "add", full)
        self._names.append(full)
        _ip("-n", full, "link", "set", "lo", "up")
        return full

    def link(self, a: str, a_address: str, b: str, b_address: str) -> None:
        """A veth pair between namespaces `a` and `b` with these /24 addresses; each end is
        named after the namespace at its other end."""
        a_end, b_end = b.rsplit("-", 1)[1], a.rsplit("-", 1)[1]
        _ip("link", "add", "name", a_end, "netns", a, "type", "veth", "peer", "name", b_end,
            "netns", b)
        for ns, end, address in ((a, a_end, a_address), (b, b_end, b_address)):
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", end)
            _ip("-n", ns, "link", "set", end, "up")

    @staticmethod
    def run_in(ns: str, argv: list[str]) -> list[str]:
        """`argv` as a command that runs in namespace `ns` (exec'd: the same process)."""
        return [_IP, "netns", "exec", ns, *argv]

    def close(self) -> None:
        while self._names:
            _remove(self._names.pop())
