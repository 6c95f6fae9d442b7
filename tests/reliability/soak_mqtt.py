"""The MQTT workload of the soak (soak.py): our MQTT client, subscribed to its own topic,
publishes numbered QoS 1 messages through a broker at a fixed rate (--rate 0: as fast as 100
in flight allow) for --seconds, and reads each one back. One JSON line at the end: sent,
received, lost, mismatched, the rate, disconnects, and this process's RSS, descriptors and
threads before the load and how long after it they took to come back (the soak samples the
rest from outside).

    python soak_mqtt.py --url mqtt://127.0.0.1:1883 --seconds 60 --rate 5000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import cymongoose as cm

TOPIC = "cymongoose/soak"
WINDOW = 100  # messages in flight at most when --rate is 0
PAYLOAD = b"x" * 64


def process_state() -> tuple[int, int, int]:
    status = Path("/proc/self/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]), len(os.listdir("/proc/self/fd")),
            int(fields["Threads"]))


class Client:
    def __init__(self, mgr: cm.Manager, url: str) -> None:
        self.opened = self.subscribed = False
        self.disconnects = 0
        self.received = self.mismatched = 0
        self.next_expected = 0
        self.conn = mgr.mqtt_connect(url, self.handler, client_id=f"soak-{os.getpid()}")

    def handler(self, conn: cm.Connection, ev: int, msg: Any) -> None:
        if ev == cm.MG_EV_MQTT_OPEN:
            self.opened = True
            conn.mqtt_sub(TOPIC, qos=1)
        elif ev == cm.MG_EV_MQTT_CMD and msg.cmd == 9:  # SUBACK
            self.subscribed = True
        elif ev == cm.MG_EV_MQTT_MSG:
            data = msg.data
            number = int(data[:12])
            if data[12:] != PAYLOAD or number < self.next_expected:
                self.mismatched += 1
            self.next_expected = number + 1
            self.received += 1
        elif ev == cm.MG_EV_CLOSE:
            self.disconnects += 1


def pump(mgr: cm.Manager, until: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise SystemExit(f"soak_mqtt: timed out waiting for {what}")
        mgr.poll(5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--rate", type=float, default=0.0)
    args = parser.parse_args()
    mgr = cm.Manager()
    client = Client(mgr, args.url)
    pump(mgr, lambda: client.subscribed, 10, "the subscription")
    rss0, fds0, threads0 = process_state()
    sent = 0
    start = time.monotonic()
    end = start + args.seconds
    while True:
        now = time.monotonic()
        if now >= end or client.disconnects:
            break
        due = int((now - start) * args.rate) if args.rate > 0 else client.received + WINDOW
        while sent < due and sent - client.received < 10 * WINDOW:
            client.conn.mqtt_pub(TOPIC, b"%012d" % sent + PAYLOAD, qos=1)
            sent += 1
        mgr.poll(1)
    elapsed = time.monotonic() - start
    pump(mgr, lambda: client.received >= sent or client.disconnects > 0, 10, "the last echoes")
    rss1 = process_state()[0]
    back_start = time.monotonic()
    back: float | None = None
    while time.monotonic() - back_start < 5:
        _, fds, threads = process_state()
        if fds <= fds0 and threads <= threads0:
            back = round(time.monotonic() - back_start, 2)
            break
        mgr.poll(10)
    print(json.dumps({
        "sent": sent, "received": client.received, "lost": sent - client.received,
        "mismatched": client.mismatched, "disconnects": client.disconnects,
        "per_s": round(client.received / elapsed, 1) if elapsed else 0,
        "rss_kib_start": rss0, "rss_kib_end": rss1, "fds_before": fds0,
        "threads_before": threads0, "back_to_baseline_s": back,
    }))
    mgr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
