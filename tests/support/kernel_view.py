"""What the kernel says a thread or a process is doing, read from /proc: for a test that
must wait until another thread blocks in epoll (or poll) or a process watches files, where the code
under test announces neither."""

from __future__ import annotations

import os
import platform

# epoll_wait, epoll_pwait and epoll_pwait2 by machine (aarch64 has no plain epoll_wait), and
# poll and ppoll (Mongoose's poll() backend, make test-poll; aarch64 has only ppoll).
_WAIT_SYSCALLS = {"x86_64": {232, 281, 441, 7, 271}, "aarch64": {22, 441, 73}}


def in_socket_wait(tid: int) -> bool:
    """Whether this process's thread `tid` (threading.Thread.native_id) is blocked in an
    epoll or poll wait."""
    try:
        with open(f"/proc/self/task/{tid}/syscall") as f:
            number = f.read().split()[0]
    except (OSError, IndexError):
        return False
    if number.isdigit() and platform.machine() in _WAIT_SYSCALLS:
        return int(number) in _WAIT_SYSCALLS[platform.machine()]
    try:
        with open(f"/proc/self/task/{tid}/wchan") as f:
            return "poll" in f.read()  # ep_poll, do_sys_poll
    except OSError:
        return False


def inotify_watches(pid: int) -> int:
    """How many inotify watches process `pid` holds (over all its inotify descriptors)."""
    count = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return 0
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                count += sum(line.startswith("inotify wd:") for line in f)
        except OSError:
            continue  # closed meanwhile
    return count
