"""No GIL ping-pong: a CPU-busy Python thread must not collapse serving throughput."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from support.backend import needs_epoll

from cymongoose import MG_EV_HTTP_MSG, Connection, Manager

pytestmark = [pytest.mark.timeout(60), pytest.mark.no_asan]

# A client in its own process (so it does not compete for our GIL): 8 keep-alive connections
# issuing requests back to back for a fixed time; prints how many got a 200.
CLIENT = textwrap.dedent("""
    import socket, sys, time, selectors
    port, seconds = int(sys.argv[1]), float(sys.argv[2])
    req = b"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
    sel = selectors.DefaultSelector()
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        s.send(req)
        sel.register(s, selectors.EVENT_READ, bytearray())
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for key, _ in sel.select(0.1):
            buf = key.data
            buf.extend(key.fileobj.recv(65536))
            while b"\\r\\n\\r\\nok" in buf:
                i = buf.index(b"\\r\\n\\r\\nok") + 6
                del buf[:i]
                done += 1
                key.fileobj.send(req)
    print(done)
""")


def _served_in(seconds: float, busy: bool) -> int:
    def handler(conn: Connection, ev: int, data: Any) -> None:
        if ev == MG_EV_HTTP_MSG:
            conn.reply(200, b"ok")

    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1  # pure-Python CPU work: wants the GIL all the time

    with Manager(handler) as mgr:
        port = mgr.listen("http://127.0.0.1:0").local_addr[1]
        spinner = threading.Thread(target=spin)
        if busy:
            spinner.start()
        client = subprocess.Popen([sys.executable, "-c", CLIENT, str(port), str(seconds)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            while client.poll() is None:
                mgr.poll(50)
            out, _ = client.communicate(timeout=10)
        finally:
            stop.set()
            if busy:
                spinner.join()
    return int(out)


@needs_epoll("poll() keeps the GIL across an iteration only when a zero-timeout epoll_wait() "
             "on Mongoose's set finds work; without that probe every wait gives the GIL "
             "to the busy thread")
def test_busy_python_thread_keeps_throughput_within_an_order_of_magnitude() -> None:
    # The busy thread and the server share one GIL, so about half the quiet rate is the
    # ideal; 0.2.5 fell below 1/1000. On a shared 2-core machine one sample can land in a
    # burst of outside load, so a low first ratio is measured once more.
    ratios = []
    for _attempt in range(2):
        quiet = _served_in(2.0, busy=False)
        loaded = _served_in(2.0, busy=True)
        ratios.append(loaded / max(quiet, 1))
        print(f"served in 2 s: quiet={quiet} with a busy thread={loaded} "
              f"ratio={ratios[-1]:.2f}")
        assert quiet > 1000
        if ratios[-1] >= 0.1:
            break
    assert max(ratios) >= 0.1, ratios
