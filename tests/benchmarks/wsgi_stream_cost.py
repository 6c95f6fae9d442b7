"""Instructions per request of the WSGI server's response paths, under callgrind: a list
hello (run_batch's own path), an iterable whose one item is the whole body (Flask's and
Django's responses: finish_app()), a small generator (a streamed response), and a 64 MiB
generator read by a fast client (the streamed path with its waits, or parks, for the client).
Issue 35, item 3 changed the last three; this checks they did not get slower.

    python tests/benchmarks/wsgi_stream_cost.py [--requests 4000] [--big 10]
        [--kinds hello,whole,stream,big]

Run it with each build's interpreter (e.g. a pristine checkout's .venv/bin/python, then this
one's) and compare the Ir per request it prints (one JSON object). The server runs
`WSGIServer(threads=8)` under `valgrind --tool=callgrind --instr-atstart=no`; instrumentation
is on only while the counted requests run, after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = '''\
import sys
from cymongoose.wsgi import WSGIServer

BIG = 64 << 20
PIECE = b"b" * 65536


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/hello":
        start_response("200 OK", [("Content-Length", "5")])
        return [b"hello"]
    if path == "/whole":
        start_response("200 OK", [("Content-Length", "5")])
        return iter([b"hello"])
    if path == "/stream":
        start_response("200 OK", [])
        return (piece for piece in (b"he", b"llo"))
    start_response("200 OK", [("Content-Length", str(BIG))])
    return (PIECE for _ in range(BIG // len(PIECE)))


server = WSGIServer(app, threads=8)
server.listen("http://127.0.0.1:" + sys.argv[1])
server.run()
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _requests(port: int, path: str, count: int) -> None:
    """`count` requests on one keep-alive connection, each answer read to its end."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        request = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        buf = bytearray()
        for _ in range(count):
            sock.sendall(request)
            while b"\r\n\r\n" not in buf:
                buf += sock.recv(1 << 20)
            head, _, rest = bytes(buf).partition(b"\r\n\r\n")
            m = re.search(rb"(?i)content-length: *(\d+)", head)
            if m:
                length = int(m.group(1))
                buf = bytearray(rest)
                while len(buf) < length:
                    buf += sock.recv(1 << 20)
                del buf[:length]
            else:  # chunked: to the last chunk
                buf = bytearray(rest)
                while b"0\r\n\r\n" not in buf:
                    buf += sock.recv(65536)
                buf = buf[buf.index(b"0\r\n\r\n") + 5:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--big", type=int, default=10, help="64 MiB responses to count")
    ap.add_argument("--kinds", default="hello,whole,stream,big")
    args = ap.parse_args()
    counts = {"hello": args.requests, "whole": args.requests, "stream": args.requests,
              "big": args.big}
    out: dict[str, object] = {"python": sys.executable}
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "server.py").write_text(SERVER)
        for kind in args.kinds.split(","):
            port = _free_port()
            dump = Path(tmp, f"{kind}.callgrind")
            proc = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
                 f"--callgrind-out-file={dump}", sys.executable, "server.py", str(port)],
                cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            try:
                end = time.monotonic() + 300
                while True:
                    try:
                        _requests(port, "/hello", 1)
                        break
                    except OSError as exc:
                        if time.monotonic() > end or proc.poll() is not None:
                            raise SystemExit("the server did not start") from exc
                        time.sleep(0.5)
                path = "/" + kind
                _requests(port, path, max(1, counts[kind] // 10))  # warm-up
                subprocess.run(["callgrind_control", "--instr=on", str(proc.pid)], check=True,
                               capture_output=True)
                _requests(port, path, counts[kind])
                subprocess.run(["callgrind_control", f"--dump={kind}", str(proc.pid)],
                               check=True, capture_output=True)
            finally:
                proc.terminate()
                proc.wait(60)
            text = "".join(p.read_text(errors="replace") for p in Path(tmp).glob(
                f"{kind}.callgrind*"))
            total = sum(int(m) for m in re.findall(r"^(?:summary|totals):\s+(\d+)", text,
                                                   re.MULTILINE))
            out[f"{kind}_ir_per_request"] = total // counts[kind]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
