"""The MQTT packet path of a broker-side listener (`mqtt_listen`): arbitrary bytes as MQTT
packets in arbitrary reads. The handler reads every field of each command it is given
(topic, payload, id, QoS, properties), so the binding's views over a parsed packet are
fuzzed with the parser; the server survives each input and closes when the client does."""

from __future__ import annotations

from typing import Any

import cymongoose._mongoose as cm

from ..wire import LoopbackServer, split_pieces

CONNECT_311 = b"\x10\x10\x00\x04MQTT\x04\x02\x00\x3c\x00\x04fuzz"
CONNECT_5 = b"\x10\x11\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x04fuzz"
SEEDS = [
    b"\x00" + CONNECT_311 + b"\x82\x09\x00\x01\x00\x04a/b/\x01",
    b"\x00" + CONNECT_311 + b"\x30\x07\x00\x03a/bhi" + b"\x32\x09\x00\x03a/b\x00\x07hi",
    b"\x81" + CONNECT_5 + b"\x30\x0d\x00\x03a/b\x05\x01\x01\x23\x00\x01hi\xc0\x00\xe0\x00",
    b"\x00" + CONNECT_5 + b"\x82\x0a\x00\x02\x00\x00\x04a/b/\x02\xa2\x07\x00\x03\x00\x00\x03a/b",
]
CONNACK = b"\x20\x02\x00\x00"

_server: LoopbackServer | None = None


def _broker(conn: cm.Connection, ev: int, msg: Any) -> None:
    if ev != cm.MG_EV_MQTT_CMD:
        return
    assert isinstance(msg.cmd, int) and isinstance(msg.qos, int)
    assert isinstance(msg.topic, str) and isinstance(msg.data, bytes)
    assert isinstance(msg.id, int) and isinstance(msg.ack, int)
    assert bytes(msg.data_view) == msg.data
    for prop in msg.properties():
        assert isinstance(prop, dict)
    if msg.cmd == 1:  # CONNECT
        conn.send(CONNACK)


def _server_once() -> LoopbackServer:
    global _server
    if _server is None:
        _server = LoopbackServer(_broker, "mqtt://127.0.0.1:0")
    return _server


def one_input(data: bytes) -> None:
    server = _server_once()
    server.exchange(split_pieces(data))
    assert not server.errors, f"the handler raised: {server.errors!r}"
