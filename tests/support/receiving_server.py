"""A cymongoose server that receives large messages, in a process of its own so that its CPU
time can be read from /proc (the test's clients use none of it). Run as a script:

    python receiving_server.py KIND [JSON_OPTIONS]

KIND is `ws` (an HTTP listener upgrading every request to a WebSocket that answers each message
with its length, as text), `tcp` (a raw TCP listener answering with the byte count once
`expect` bytes have arrived), or `mqtt` (a broker-side MQTT listener accepting every CONNECT and
answering each PUBLISH with a PUBLISH on topic `len` of the payload's length). JSON_OPTIONS may hold
`limits` (listen() keywords) and `max_recv_size`. It prints its port, serves until SIGTERM,
then prints the MG_EV_ERROR texts it saw as one JSON line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from types import TracebackType
from typing import Any


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process `pid` has used so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ReceivingServer:
    """`with ReceivingServer("ws") as server:` this module as a child process; `server.port`,
    `server.cpu()`, and after exit `server.errors`."""

    def __init__(self, kind: str, **options: Any) -> None:
        # The environment is kept whole: under `make asan-test` the child needs the preload.
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), kind, json.dumps(options)],
            stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip():
            self.proc.kill()
            raise RuntimeError(f"the {kind} server did not start")
        self.port = int(line)
        self.errors: list[str] = []

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def __enter__(self) -> ReceivingServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        lines = out.strip().splitlines()
        if lines:
            self.errors = json.loads(lines[-1])


def _serve(kind: str, options: dict[str, Any]) -> None:
    import cymongoose as cm

    stop: list[int] = []
    errors: list[str] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    expect = int(options.get("expect", 0))

    def ws(conn: Any, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_HTTP_MSG:
            conn.ws_upgrade(data)
        elif ev == cm.MG_EV_WS_MSG:
            conn.ws_send(str(len(data.data_view)), cm.WEBSOCKET_OP_TEXT)
        elif ev == cm.MG_EV_ERROR:
            errors.append(str(data))

    def tcp(conn: Any, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_READ and conn.recv_len >= expect:
            conn.send(b"%d" % conn.recv_len)
            conn.recv_data(consume=True)
        elif ev == cm.MG_EV_ERROR:
            errors.append(str(data))

    def mqtt(conn: Any, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_MQTT_CMD and data.cmd == 1:  # CONNECT: accepted (MQTT 3.1.1)
            conn.send(b"\x20\x02\x00\x00")
        elif ev == cm.MG_EV_MQTT_CMD and data.cmd == 3:  # PUBLISH
            conn.mqtt_pub("len", str(len(data.data_view)))
        elif ev == cm.MG_EV_ERROR:
            errors.append(str(data))

    with cm.Manager() as mgr:
        if "max_recv_size" in options:
            mgr.max_recv_size = int(options["max_recv_size"])
        limits = options.get("limits", {})
        if kind == "ws":
            listener = mgr.listen("http://127.0.0.1:0", ws, **limits)
        elif kind == "tcp":
            listener = mgr.listen("tcp://127.0.0.1:0", tcp)
        else:
            listener = mgr.mqtt_listen("mqtt://127.0.0.1:0", mqtt)
        address = listener.local_addr
        assert address is not None
        print(address[1], flush=True)
        while not stop:
            mgr.poll(20)
    print(json.dumps(errors), flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
