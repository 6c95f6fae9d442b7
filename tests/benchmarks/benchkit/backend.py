"""The proxy phase's backend: the Mongoose in C hello server (servers/c_mongoose_hello.c) with
--stats-port, which also answers GET /100k and counts the connections accepted on its main
port. Each proxy gets a backend of its own, so every count is that proxy's alone."""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from pathlib import Path

from . import contenders as ck

SOURCE = ck.SERVERS_DIR / "c_mongoose_hello.c"
BIG_PATH = "/100k"
# What the C server fills its 100 KiB answer with: 'a' + i % 26.
BIG_BODY = bytes(ord("a") + i % 26 for i in range(100 * 1024))
BIG_TYPE = "application/octet-stream"


@dataclass(frozen=True)
class Stats:
    accepted: int  # connections accepted on the main port since start
    open: int  # open now
    peak: int  # most open at once since the previous read
    requests: int  # requests answered since start


def build() -> Path:
    """The binary, compiled like the C ceiling (same source, flags and Mongoose); ck.Skip if
    it cannot be."""
    c = ck.Contender(name="proxy-backend", label="", kind="hello", file=SOURCE, command=[],
                     env="system", build="mongoose-c")
    exe, _info = ck.build_mongoose_c(c)
    return exe


@dataclass
class Backend:
    running: ck.Running
    stats_port: int

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.running.port}"

    def stats(self) -> Stats:
        # The stats listener is bound just after the main one that start() waited for.
        deadline = time.monotonic() + 2
        while True:
            conn = http.client.HTTPConnection("127.0.0.1", self.stats_port, timeout=5)
            try:
                conn.request("GET", "/")
                data = json.loads(conn.getresponse().read())
                return Stats(data["accepted"], data["open"], data["peak"], data["requests"])
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
            finally:
                conn.close()


def start(exe: Path, proxy: str, *, cpu: int | None, run_dir: Path) -> Backend:
    stats_port = ck.free_port()
    c = ck.Contender(name=f"{proxy}.backend", label="", kind="hello", file=SOURCE,
                     command=["{exe}", "--port", "{port}", "--stats-port", "{stats_port}"],
                     env="system", startup_timeout=10)
    c.exe = exe
    running = ck.start(c, cpu=cpu, static_dir=run_dir, run_dir=run_dir,
                       values={"stats_port": str(stats_port)})
    return Backend(running, stats_port)
