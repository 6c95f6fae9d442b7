"""Debian's nginx (tools/debian-packages.txt) as a test peer: one worker, its files and temp
directories in the test's folder, in the foreground, given only its `http { ... }` body."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .cli_run import port_open
from .waiting import wait_for

_MAIN = """
{user}
worker_processes 1;
error_log stderr warn;
pid {tmp}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
{http}
}}
"""


def start_nginx(tmp: Path, http: str, port: int, env: dict[str, str],
                timeout: float = 10.0) -> subprocess.Popen[str]:
    """nginx with `http` as its http block's body, once it accepts on `port`; AssertionError
    with its stderr if it does not within `timeout`."""
    conf = tmp / "nginx.conf"
    conf.write_text(_MAIN.format(user="user root;" if os.geteuid() == 0 else "", tmp=tmp,
                                 http=http))
    proc = subprocess.Popen(
        [shutil.which("nginx") or "/usr/sbin/nginx", "-p", str(tmp), "-c", str(conf), "-g",
         "daemon off;"], env=env, stderr=subprocess.PIPE, text=True)
    def listening() -> bool:
        if proc.poll() is not None:
            raise AssertionError("nginx exited")
        return port_open(port)

    try:
        wait_for(listening, timeout, f"nginx to listen on {port}", interval=0.05)
    except AssertionError:
        proc.kill()
        raise AssertionError(f"nginx did not listen on {port}: {proc.communicate()[1]}") from None
    return proc


def stop_nginx(proc: subprocess.Popen[str] | None) -> None:
    if proc is not None:
        proc.terminate()
        proc.wait(10)


def nginx_static(port: int, root: Path, url: str = "/", extra: str = "") -> str:
    """An http block body: nginx serving `root` under `url` with its defaults (no autoindex,
    symlinks followed), for comparing static-file answers with ours; `extra`: directives
    for that location (`gzip_static on;`)."""
    prefix = url.rstrip("/") + "/"
    return (f"    access_log off;\n    server {{\n        listen 127.0.0.1:{port};\n"
            f"        location {prefix} {{ alias {root}/; {extra} }}\n    }}\n")
