"""Smoke tests: examples/mqtt_pubsub.py against Mosquitto (watched by a paho-mqtt client)
and examples/tcp_echo.py against a plain socket client, each run as a subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from support import mosquitto as mosq
from support.ports import free_port
from support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"




def run_example(name: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / name), *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(5)


@pytest.mark.skipif(mosq.mosquitto_path() is None, reason="mosquitto is not installed")
@pytest.mark.parametrize("extra", [["--qos", "1"], ["--qos", "2", "--mqtt5"], ["--qos", "0"]])
def test_mqtt_pubsub_example(extra: list[str]) -> None:
    count = 25
    topic = "example/" + "-".join(extra).replace("-", "")
    seen: list[bytes] = []
    with mosq.run_mosquitto() as broker:
        watcher = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="watcher")
        subscribed = threading.Event()
        watcher.on_subscribe = lambda *a: subscribed.set()
        watcher.on_message = lambda c, u, msg: seen.append(msg.payload)
        watcher.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
        watcher.connect(broker.host, broker.port)
        watcher.loop_start()
        try:
            assert subscribed.wait(5)
            proc = run_example("mqtt_pubsub.py", "--url", broker.url, "--topic", topic,
                               "--count", str(count), "--window", "5", "--timeout", "20",
                               *extra)
            try:
                out, err = proc.communicate(timeout=30)
            finally:
                stop(proc)
            wait_for(lambda: len(seen) >= count, 5,
                     lambda: f"the watcher to see {count} messages (saw {len(seen)})")
        finally:
            watcher.loop_stop()
            watcher.disconnect()
    assert proc.returncode == 0, (out, err)
    lines = [ln for ln in out.splitlines() if ln.startswith("received ")]
    assert len(lines) == count
    assert f"done: {count} messages" in out
    # Another client saw exactly what the example published.
    assert sorted(seen) == sorted(f"message {i}".encode() for i in range(1, count + 1))


def test_mqtt_pubsub_example_fails_cleanly_without_broker() -> None:
    port = free_port()  # nobody listens here
    proc = run_example("mqtt_pubsub.py", "--url", f"mqtt://127.0.0.1:{port}", "--count", "1",
                       "--timeout", "5")
    try:
        out, err = proc.communicate(timeout=20)
    finally:
        stop(proc)
    assert proc.returncode == 1
    assert "error:" in err and "Traceback" not in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_tcp_echo_example(sig: signal.Signals) -> None:
    port = free_port()
    proc = run_example("tcp_echo.py", "--port", str(port))
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == f"echo server listening on tcp://127.0.0.1:{port}", first
        for payload in (b"hello\n", b"\x00binary\xff" * 1000):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(payload)
                got = b""
                while len(got) < len(payload):
                    chunk = s.recv(65536)
                    assert chunk, "server closed early"
                    got += chunk
                assert got == payload
                s.settimeout(0.2)
                with pytest.raises(TimeoutError):  # echoed once, not twice
                    s.recv(1)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err
    assert out.count("accepted") == 2


def test_tcp_echo_example_port_in_use() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        proc = run_example("tcp_echo.py", "--port", str(port))
        try:
            out, err = proc.communicate(timeout=10)
        finally:
            stop(proc)
    assert proc.returncode == 1
    assert "Failed to listen" in err and "Traceback" not in err
