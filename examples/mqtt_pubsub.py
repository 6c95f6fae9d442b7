"""MQTT publish/subscribe: subscribe to a topic, publish N messages to it, print what
comes back, and exit once all N arrived (or on Ctrl-C).

    mosquitto -p 1883 &
    python examples/mqtt_pubsub.py --url mqtt://127.0.0.1:1883 --count 10 --qos 1

Mongoose answers PUBACK/PUBREC/PUBREL/PUBCOMP itself but keeps no count of unacknowledged
messages, and brokers cap how many a client may have in flight (Mosquitto disconnects a
client past its max_inflight_messages). So this publisher keeps a window: it publishes
the next message when an earlier one is acknowledged (PUBACK for QoS 1, PUBCOMP for 2).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import cymongoose as cm

MQTT_CMD_PUBACK = 4
MQTT_CMD_PUBCOMP = 7
MQTT_CMD_SUBACK = 9


class PubSub:
    def __init__(self, topic: str, count: int, qos: int, window: int) -> None:
        self.topic = topic
        self.count = count
        self.qos = qos
        self.window = window
        self.published = 0
        self.acked = 0
        self.received = 0
        self.failed: str | None = None
        self.closed = False

    @property
    def done(self) -> bool:
        acks_done = self.qos == 0 or self.acked >= self.count
        return (self.received >= self.count and acks_done) or self.closed

    def publish_more(self, conn: cm.Connection) -> None:
        in_flight = self.published - self.acked if self.qos else 0
        while self.published < self.count and in_flight < self.window:
            conn.mqtt_pub(self.topic, f"message {self.published + 1}", qos=self.qos)
            self.published += 1
            in_flight += 1 if self.qos else 0

    def __call__(self, conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_MQTT_OPEN:
            if data != 0:
                self.failed = f"broker refused the connection (CONNACK code {data})"
                return
            print(f"connected; subscribing to {self.topic!r}", flush=True)
            conn.mqtt_sub(self.topic, qos=self.qos)
        elif ev == cm.MG_EV_MQTT_CMD:
            if data.cmd == MQTT_CMD_SUBACK:
                if data.ack == 0x80:
                    self.failed = "subscription refused"
                    return
                self.publish_more(conn)
            elif data.cmd == (MQTT_CMD_PUBACK if self.qos == 1 else MQTT_CMD_PUBCOMP):
                self.acked += 1
                self.publish_more(conn)
        elif ev == cm.MG_EV_MQTT_MSG:
            self.received += 1
            print(f"received {self.received}/{self.count} on {data.topic}: {data.text}",
                  flush=True)
        elif ev == cm.MG_EV_ERROR:
            self.failed = data
        elif ev == cm.MG_EV_CLOSE:
            self.closed = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="mqtt://127.0.0.1:1883", help="broker URL")
    parser.add_argument("--topic", default="cymongoose/example")
    parser.add_argument("--count", type=int, default=10, help="messages to send and receive")
    parser.add_argument("--qos", type=int, choices=(0, 1, 2), default=1)
    parser.add_argument("--window", type=int, default=20, help="QoS 1/2 messages in flight")
    parser.add_argument("--client-id", default="", help="default: chosen by Mongoose")
    parser.add_argument("--mqtt5", action="store_true", help="speak MQTT 5 instead of 3.1.1")
    parser.add_argument("--timeout", type=float, default=30.0, help="give up after seconds")
    args = parser.parse_args(argv)

    app = PubSub(args.topic, args.count, args.qos, max(1, args.window))
    deadline = time.monotonic() + args.timeout
    with cm.Manager() as mgr:
        try:
            conn = mgr.mqtt_connect(args.url, app, client_id=args.client_id,
                                    version=5 if args.mqtt5 else 4)
            while not app.done and app.failed is None:
                if time.monotonic() > deadline:
                    app.failed = f"timed out after {args.timeout} s"
                    break
                mgr.poll(50)
            if not app.closed:
                conn.mqtt_disconnect()  # sent when the manager closes (it flushes)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            return 130
    if app.received >= app.count:
        print(f"done: {app.received} messages", flush=True)
        return 0
    print(f"error: {app.failed or 'connection closed'} after {app.received} messages",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
