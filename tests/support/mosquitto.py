"""A private Mosquitto broker on a free loopback port, for the MQTT tests and examples."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .ports import free_port
from .subprocess_env import child_env
from .waiting import wait_for


@dataclass(frozen=True)
class Broker:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"


def mosquitto_path() -> str | None:
    return shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else None)


@contextmanager
def run_mosquitto(timeout: float = 10.0) -> Iterator[Broker]:
    """Start `mosquitto -c <conf>` listening on 127.0.0.1 only; stop it on exit.

    The queue limits are raised so a burst of 10,000 QoS 1/2 messages to one slow
    subscriber is queued, not dropped (Mosquitto's default max_queued_messages is 1000).
    """
    exe = mosquitto_path()
    if exe is None:
        raise RuntimeError("mosquitto is not installed (apt-get install -y mosquitto)")
    with tempfile.TemporaryDirectory(prefix="cym-mosquitto-") as tmp:
        for _attempt in range(3):  # the port may be taken between free_port() and bind
            port = free_port()
            conf = os.path.join(tmp, "mosquitto.conf")
            with open(conf, "w") as f:
                f.write(
                    f"listener {port} 127.0.0.1\n"
                    "allow_anonymous true\n"
                    "persistence false\n"
                    "max_queued_messages 0\n"
                    "max_queued_bytes 0\n"
                    "max_inflight_messages 100\n"
                    "log_dest stderr\n"
                    "log_type error\n"
                    "log_type warning\n"
                )
            log = open(os.path.join(tmp, "mosquitto.log"), "w+b")
            proc = subprocess.Popen([exe, "-c", conf], stdout=log, stderr=subprocess.STDOUT,
                                    env=child_env())
            try:
                if _wait_port(port, proc, timeout):
                    yield Broker("127.0.0.1", port)
                    return
            finally:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
                log.seek(0)
                output = log.read().decode(errors="replace")
                log.close()
        raise RuntimeError(f"mosquitto did not start; last output:\n{output}")


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether the broker listens on `port` within `timeout` (False: it exited, e.g. the
    port was taken, or it never answered)."""
    def answers() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            return False

    try:
        wait_for(lambda: proc.poll() is not None or answers(), timeout,
                 f"mosquitto on port {port}", interval=0.02)
    except AssertionError:
        return False
    return proc.poll() is None
