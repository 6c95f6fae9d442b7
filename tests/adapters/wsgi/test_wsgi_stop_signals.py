"""A stop signal always stops the WSGI server, whenever it comes in a request's life and
whichever thread of the process the kernel hands it to.

The server's main thread takes turns at the loop with the app threads and may be waiting on
their lock when SIGTERM comes; a signal the kernel delivered to another thread used to leave
that wait uninterrupted, and the server ran on (seen once in ~130 stops). Here one process
serves many times over, and each life ends with SIGINT or SIGTERM sent at another point: to
the process or to one chosen thread (tgkill), before any request, while an app runs, right
after a response, with a keep-alive connection left open. Every life must end promptly, and
a request in flight must get its whole answer.

The chosen thread is one that does not block the signal, the only kind the kernel hands a
process's signal to: a thread that blocks it (ThreadSanitizer's background thread blocks all)
would keep it pending, unseen by any handler, whatever the server does.
"""

from __future__ import annotations

import ctypes
import http.client
import os
import platform
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

LIVES = 50

SERVER = '''
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's view of a hang
from cymongoose.wsgi import WSGIServer

def app(environ, start_response):
    if environ["PATH_INFO"] == "/slow":
        print("in-app", flush=True)
        time.sleep(0.05)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]

for life in range(int(sys.argv[1])):
    server = WSGIServer(app, threads=4, graceful_timeout=10)
    port = server.listen("http://127.0.0.1:0").local_addr[1]
    server.on_ready = lambda: print("ready", port, flush=True)
    server.run()
    print("stopped", life, flush=True)
'''

# tgkill(2) by number: Python has no call that signals one thread of another process.
_TGKILL = {"x86_64": 234, "aarch64": 131}.get(platform.machine())


def _tgkill(pid: int, tid: int, signum: int) -> bool:
    assert _TGKILL is not None
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(_TGKILL, pid, tid, signum) == 0


class _Lines:
    """The server's stdout, a line at a time, each wait bounded (a reader thread: select()
    on the pipe cannot see lines already in the file object's buffer)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._queue: queue.Queue[str] = queue.Queue()
        out = proc.stdout
        threading.Thread(target=lambda: [self._queue.put(ln.strip()) for ln in out],
                         daemon=True).start()

    def next(self, timeout: float, what: str = "") -> str:
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{what}: no line from the server within {timeout} s") \
                from None


def _get(port: int, path: str, conn: http.client.HTTPConnection | None = None) -> bytes:
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    body = c.getresponse().read()
    if conn is None:
        c.close()
    return body


def _blocks(pid: int, tid: int, signum: int) -> bool:
    """Whether thread `tid` of `pid` blocks `signum` (its SigBlk mask; a thread that is gone
    counts as blocking)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as status:
            for line in status:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except OSError:
        pass
    return True


def _stop(pid: int, life: int, signum: int) -> str:
    """Sends `signum` to the process, or to one of its threads other than the main one that
    does not block it."""
    others = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")
                    if int(t) != pid and not _blocks(pid, int(t), signum))
    if life % 2 and others and _TGKILL is not None:
        tid = others[(life // 2) % len(others)]
        if _tgkill(pid, tid, signum):
            return f"thread {tid}"
    os.kill(pid, signum)
    return "process"


@pytest.mark.skipif(_TGKILL is None, reason="tgkill's number is known for x86_64/aarch64")
def test_every_stop_signal_stops_the_server(tmp_path: Path) -> None:
    (tmp_path / "lives.py").write_text(SERVER)
    # The child loads the extension: it keeps this environment (under `make asan-test`, the
    # AddressSanitizer preload that build needs), unlike support.subprocess_env's children.
    proc = subprocess.Popen([sys.executable, "lives.py", str(LIVES)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = _Lines(proc)
    try:
        for life in range(LIVES):
            word, port_text = lines.next(20, f"life {life}").split()
            assert word == "ready", word
            port = int(port_text)
            signum = signal.SIGTERM if life % 3 else signal.SIGINT
            phase = (life // 2) % 5
            answers: list[bytes] = []
            slow: threading.Thread | None = None
            keep = None
            if phase == 1:  # right after a response
                answers.append(_get(port, "/"))
            elif phase == 2:  # while an app runs: it must still be answered
                slow = threading.Thread(target=lambda a=answers, p=port: a.append(_get(p, "/slow")))
                slow.start()
                assert lines.next(15) == "in-app"
            elif phase == 4:  # after a response that stalled the loop's owner: the main
                # thread handed the loop to another and now waits for a turn
                answers.append(_get(port, "/slow"))
                assert lines.next(15) == "in-app"
            elif phase == 3:  # a keep-alive connection stays open, idle
                keep = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                answers.append(_get(port, "/", keep))
            where = _stop(proc.pid, life, signum)
            try:
                assert lines.next(15) == f"stopped {life}", where
            except AssertionError:
                raise AssertionError(f"life {life}: {signum.name} to the {where} in phase "
                                     f"{phase} did not stop the server") from None
            if slow is not None:
                slow.join(10)
            if keep is not None:
                keep.close()
            assert answers == ([] if phase == 0 else [b"ok"]), (life, phase, answers)
        assert proc.wait(20) == 0
    except AssertionError as exc:
        if proc.poll() is None:  # where each thread is, for the report
            proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
            proc.kill()
        proc.wait()
        assert proc.stderr is not None
        raise AssertionError(f"{exc}; exit status {proc.returncode}; stderr:\n"
                             f"{proc.stderr.read()}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stderr is not None
        err = proc.stderr.read()
    assert "Traceback" not in err, err
