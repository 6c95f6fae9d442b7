"""MQTT against a real broker (Mosquitto) and a real second client (paho-mqtt), plus our
broker-side listener serving paho, and malformed packets in both directions."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import paho.mqtt.client as paho
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from support.mosquitto import Broker, mosquitto_path, run_mosquitto
from support.waiting import recv_polling, wait_for

import cymongoose as cm

needs_mosquitto = pytest.mark.skipif(
    mosquitto_path() is None, reason="mosquitto is not installed (tools/debian-packages.txt)")

MQTT_CMD_CONNECT, MQTT_CMD_CONNACK, MQTT_CMD_PUBLISH, MQTT_CMD_PUBACK = 1, 2, 3, 4
MQTT_CMD_PUBREC, MQTT_CMD_PUBREL, MQTT_CMD_PUBCOMP, MQTT_CMD_SUBSCRIBE = 5, 6, 7, 8
MQTT_CMD_SUBACK, MQTT_CMD_UNSUBSCRIBE, MQTT_CMD_UNSUBACK = 9, 10, 11
MQTT_CMD_PINGREQ, MQTT_CMD_PINGRESP, MQTT_CMD_DISCONNECT = 12, 13, 14


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    if mosquitto_path() is None:
        pytest.skip("mosquitto is not installed")
    with run_mosquitto() as b:
        yield b


def paho_client(broker: Broker, client_id: str, v5: bool = False) -> paho.Client:
    client = paho.Client(
        paho.CallbackAPIVersion.VERSION2, client_id=client_id,
        protocol=paho.MQTTv5 if v5 else paho.MQTTv311)
    client.max_inflight_messages_set(100)
    client.max_queued_messages_set(0)
    return client


def paho_connect(client: paho.Client, host: str, port: int, keepalive: int = 30) -> None:
    connected = threading.Event()

    def on_connect(c: Any, userdata: Any, flags: Any, rc: Any, props: Any = None) -> None:
        connected.set()

    client.on_connect = on_connect
    client.connect(host, port, keepalive=keepalive)
    client.loop_start()
    assert connected.wait(5), "paho did not connect"


class Recorder:
    """A handler recording MQTT events of one connection."""

    def __init__(self) -> None:
        self.events: list[int] = []
        self.connack: int | None = None
        self.cmds: list[tuple[int, int, int]] = []  # (cmd, id, ack)
        self.msgs: list[tuple[str, bytes, int]] = []
        self.props: list[list[dict[str, Any]]] = []
        self.cmd_props: dict[int, list[dict[str, Any]]] = {}
        self.errors: list[str] = []
        self.closed = False
        self.on_open: Callable[[cm.Connection], None] | None = None

    def __call__(self, conn: cm.Connection, ev: int, data: Any) -> None:
        self.events.append(ev)
        if ev == cm.MG_EV_MQTT_OPEN:
            self.connack = data
            if self.on_open is not None:
                self.on_open(conn)
        elif ev == cm.MG_EV_MQTT_CMD:
            self.cmds.append((data.cmd, data.id, data.ack))
            self.cmd_props[data.cmd] = data.properties()
        elif ev == cm.MG_EV_MQTT_MSG:
            self.msgs.append((data.topic, data.data, data.qos))
            self.props.append(data.properties())
        elif ev == cm.MG_EV_ERROR:
            self.errors.append(data)
        elif ev == cm.MG_EV_CLOSE:
            self.closed = True

    def count(self, cmd: int) -> int:
        return sum(1 for c, _, _ in self.cmds if c == cmd)


def open_client(mgr: cm.Manager, broker: Broker, rec: Recorder, **kw: Any) -> cm.Connection:
    conn = mgr.mqtt_connect(broker.url, rec, **kw)
    wait_for(lambda: rec.connack is not None or rec.closed, 5, "CONNACK", manager=mgr)
    assert rec.connack == 0, (rec.connack, rec.errors)
    return conn


def subscribe(mgr: cm.Manager, conn: cm.Connection, rec: Recorder, topic: str,
              qos: int) -> None:
    before = rec.count(MQTT_CMD_SUBACK)
    conn.mqtt_sub(topic, qos=qos)
    wait_for(lambda: rec.count(MQTT_CMD_SUBACK) > before, 5, "SUBACK", manager=mgr)
    assert rec.cmds[-1][2] == qos  # ack carries the granted QoS


# Basic client behaviour against Mosquitto


@needs_mosquitto
@pytest.mark.parametrize("version", [4, 5])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_pub_sub_roundtrip(broker: Broker, version: int, qos: int) -> None:
    rec = Recorder()
    with cm.Manager() as mgr:
        conn = open_client(mgr, broker, rec, client_id=f"rt-{version}-{qos}", version=version)
        subscribe(mgr, conn, rec, f"rt/{version}/{qos}/#", qos)
        # Payloads around Mongoose's MQTT 5 short-payload edge (0, 1, 2 bytes), binary
        # with NUL bytes, and str.
        payloads: list[bytes | str] = [
            b"", b"a", b"ab", b"\x00\xff\x00", "h\u00e9llo", b"x" * 70000]
        ids = [conn.mqtt_pub(f"rt/{version}/{qos}/{i}", p, qos=qos)
               for i, p in enumerate(payloads)]
        if qos == 0:
            assert ids == [0] * len(payloads)
        else:
            assert all(isinstance(i, int) and 0 < i < 65536 for i in ids)
            assert len(set(ids)) == len(ids)
        wait_for(lambda: len(rec.msgs) == len(payloads), 5, "own messages", manager=mgr)
        expected = [(f"rt/{version}/{qos}/{i}", p if isinstance(p, bytes) else p.encode(), qos)
                    for i, p in enumerate(payloads)]
        assert sorted(rec.msgs) == sorted(expected)
        final_ack = {0: None, 1: MQTT_CMD_PUBACK, 2: MQTT_CMD_PUBCOMP}[qos]
        if final_ack is not None:
            wait_for(lambda: rec.count(final_ack) == len(ids), 5, "publish acks", manager=mgr)
            acked = {i for c, i, _ in rec.cmds if c == final_ack}
            assert acked == set(ids)
        conn.mqtt_unsub(f"rt/{version}/{qos}/#")
        wait_for(lambda: rec.count(MQTT_CMD_UNSUBACK) == 1, 5, "UNSUBACK", manager=mgr)
        conn.mqtt_ping()
        wait_for(lambda: rec.count(MQTT_CMD_PINGRESP) == 1, 5, "PINGRESP", manager=mgr)
        conn.mqtt_disconnect()
        wait_for(lambda: rec.closed, 5, "broker closing after DISCONNECT", manager=mgr)
    assert rec.errors == []
    assert rec.props == [[]] * len(payloads)  # no properties were sent


@needs_mosquitto
def test_message_view_fields_and_invalidation(broker: Broker) -> None:
    kept: list[cm.MqttMessage] = []
    seen: dict[str, Any] = {}

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_MQTT_OPEN:
            conn.mqtt_sub("view/t", qos=1)
        elif ev == cm.MG_EV_MQTT_CMD and data.cmd == MQTT_CMD_SUBACK:
            conn.mqtt_pub("view/t", "payload \u2713", qos=1)
        elif ev == cm.MG_EV_MQTT_MSG:
            assert bool(data)
            seen.update(topic=data.topic, data=data.data, text=data.text, qos=data.qos,
                        cmd=data.cmd, id=data.id)
            kept.append(data)

    with cm.Manager(handler) as mgr:
        mgr.mqtt_connect(broker.url, client_id="view")
        wait_for(lambda: bool(kept), 5, "message", manager=mgr)
    assert seen["topic"] == "view/t"
    assert seen["data"] == "payload \u2713".encode()
    assert seen["text"] == "payload \u2713"
    assert seen["qos"] == 1 and seen["cmd"] == MQTT_CMD_PUBLISH and seen["id"] > 0
    stale = kept[0]
    assert not stale
    for name in ("topic", "data", "text", "id", "cmd", "qos", "ack"):
        with pytest.raises(RuntimeError, match="after its event handler returned"):
            getattr(stale, name)
    with pytest.raises(RuntimeError):
        stale.properties()


@needs_mosquitto
def test_retain_and_will(broker: Broker) -> None:
    rec_a, rec_b = Recorder(), Recorder()
    with cm.Manager() as mgr:
        a = open_client(mgr, broker, rec_a, client_id="will-a", keepalive=30,
                        will_topic="will/a", will_message=b"a died", will_qos=1,
                        will_retain=False)
        a.mqtt_pub("retained/x", b"kept", qos=1, retain=True)
        wait_for(lambda: rec_a.count(MQTT_CMD_PUBACK) == 1, 5, "PUBACK", manager=mgr)
        b = open_client(mgr, broker, rec_b, client_id="will-b")
        subscribe(mgr, b, rec_b, "retained/x", 1)
        wait_for(lambda: len(rec_b.msgs) == 1, 5, "retained message", manager=mgr)
        assert rec_b.msgs[0][:2] == ("retained/x", b"kept")
        subscribe(mgr, b, rec_b, "will/a", 1)
        a.close()  # no DISCONNECT: the broker must publish the will
        wait_for(lambda: len(rec_b.msgs) == 2, 5, "will message", manager=mgr)
        assert rec_b.msgs[1][:2] == ("will/a", b"a died")
        b.mqtt_pub("retained/x", b"", qos=1, retain=True)  # clear the retained message
        wait_for(lambda: rec_b.count(MQTT_CMD_PUBACK) == 1, 5, "PUBACK", manager=mgr)


@needs_mosquitto
def test_credentials_are_sent_and_connack_code_delivered(broker: Broker) -> None:
    # Mosquitto allows anonymous logins and ignores credentials it has no file for, so
    # this checks that a CONNECT with user/password/clean_session=False is well formed.
    rec = Recorder()
    with cm.Manager() as mgr:
        open_client(mgr, broker, rec, client_id="cred", username="user",
                    password=b"p\x00ss", clean_session=False, keepalive=5)
    assert rec.connack == 0 and rec.errors == []


# MQTT 5 properties from paho


@needs_mosquitto
def test_v5_properties_from_paho(broker: Broker) -> None:
    rec = Recorder()
    pub = paho_client(broker, "props-pub", v5=True)
    with cm.Manager() as mgr:
        conn = open_client(mgr, broker, rec, client_id="props-sub", version=5)
        subscribe(mgr, conn, rec, "props/t", 1)
        # CONNACK of a v5 broker carries properties (Mosquitto sends topic alias and
        # receive maximum); Mongoose 7.23 does not parse them, our layer does.
        connack_props = rec.cmd_props[MQTT_CMD_CONNACK]
        assert connack_props and all(isinstance(p["iv"], int) for p in connack_props)
        paho_connect(pub, broker.host, broker.port)
        try:
            props = Properties(PacketTypes.PUBLISH)
            props.ContentType = "text/plain"
            props.CorrelationData = b"\x00\x01corr"
            props.UserProperty = [("k1", "v1"), ("k2", "v\u00e92")]
            props.MessageExpiryInterval = 3600
            props.PayloadFormatIndicator = 1
            pub.publish("props/t", b"with props", qos=1, properties=props).wait_for_publish(5)
            wait_for(lambda: len(rec.msgs) == 1, 5, "message with properties", manager=mgr)
        finally:
            pub.loop_stop()
            pub.disconnect()
    assert rec.msgs[0][:2] == ("props/t", b"with props")
    got = rec.props[0]
    by_id: dict[int, list[dict[str, Any]]] = {}
    for p in got:
        assert set(p) == {"id", "iv", "key", "val"}
        by_id.setdefault(p["id"], []).append(p)
    assert by_id[0x03] == [{"id": 0x03, "iv": 0, "key": None, "val": "text/plain"}]
    assert by_id[0x09] == [{"id": 0x09, "iv": 0, "key": None, "val": b"\x00\x01corr"}]
    assert [(p["key"], p["val"]) for p in by_id[0x26]] == [("k1", "v1"), ("k2", "v\u00e92")]
    assert by_id[0x01][0]["iv"] == 1 and by_id[0x01][0]["val"] is None
    assert 0 < by_id[0x02][0]["iv"] <= 3600  # expiry counts down in the broker


# 10,000 messages, QoS 1 and 2, both directions


N_LOSS = 10_000


# Mongoose keeps no count of unacknowledged publishes; a broker enforces one (Mosquitto
# disconnects a client with more QoS 2 messages in flight than max_inflight_messages,
# answering PUBREC with reason 0x97 "quota exceeded"). So, like any MQTT client, a
# cymongoose publisher keeps a window: publish more as PUBACK/PUBCOMP come back.
WINDOW = 50


@needs_mosquitto
@pytest.mark.timeout(90)
@pytest.mark.parametrize("qos", [1, 2])
def test_no_loss_ours_publishing_paho_subscribing(broker: Broker, qos: int) -> None:
    topic = f"loss/out/{qos}"
    received: Counter[bytes] = Counter()
    all_in = threading.Event()
    lock = threading.Lock()

    def on_message(c: Any, userdata: Any, msg: paho.MQTTMessage) -> None:
        with lock:
            received[msg.payload] += 1
            if len(received) == N_LOSS:
                all_in.set()

    sub = paho_client(broker, f"loss-out-sub-{qos}")
    sub.on_message = on_message
    paho_connect(sub, broker.host, broker.port)
    subscribed = threading.Event()
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.subscribe(topic, qos=qos)
    assert subscribed.wait(5)

    final_ack = MQTT_CMD_PUBACK if qos == 1 else MQTT_CMD_PUBCOMP
    sent: set[int] = set()
    acked: Counter[int] = Counter()
    errors: list[str] = []
    state = {"next": 0, "closed": False}

    def fill(conn: cm.Connection) -> None:
        while state["next"] < N_LOSS and len(sent) - sum(acked.values()) < WINDOW:
            packet_id = conn.mqtt_pub(topic, b"m%d" % state["next"], qos=qos)
            assert packet_id not in sent
            sent.add(packet_id)
            state["next"] += 1

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_MQTT_OPEN:
            assert data == 0
            fill(conn)
        elif ev == cm.MG_EV_MQTT_CMD and data.cmd == final_ack:
            acked[data.id] += 1
            fill(conn)
        elif ev == cm.MG_EV_ERROR:
            errors.append(data)
        elif ev == cm.MG_EV_CLOSE:
            state["closed"] = True

    try:
        with cm.Manager() as mgr:
            start = time.perf_counter()
            mgr.mqtt_connect(broker.url, handler, client_id=f"loss-out-pub-{qos}")
            wait_for(lambda: (all_in.is_set() and len(acked) == N_LOSS) or state["closed"], 60,
                     "all messages delivered and acknowledged", manager=mgr)
            elapsed = time.perf_counter() - start
            assert not state["closed"], f"broker closed the connection: {errors}"
    finally:
        sub.loop_stop()
        sub.disconnect()
    assert set(acked) == sent and max(acked.values()) == 1
    assert set(received) == {b"m%d" % i for i in range(N_LOSS)}
    if qos == 2:
        assert max(received.values()) == 1, "QoS 2 delivered a message twice"
    print(f"\nours -> paho, QoS {qos}: {N_LOSS} messages in {elapsed:.2f} s "
          f"({N_LOSS / elapsed:,.0f} msg/s)")


@needs_mosquitto
@pytest.mark.timeout(90)
@pytest.mark.parametrize("qos", [1, 2])
def test_no_loss_paho_publishing_ours_subscribing(broker: Broker, qos: int) -> None:
    topic = f"loss/in/{qos}"
    rec = Recorder()
    received: Counter[bytes] = Counter()

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_MQTT_MSG:
            received[data.data] += 1
        else:
            rec(conn, ev, data)

    pub = paho_client(broker, f"loss-in-pub-{qos}")
    with cm.Manager() as mgr:
        conn = mgr.mqtt_connect(broker.url, handler, client_id=f"loss-in-sub-{qos}")
        wait_for(lambda: rec.connack == 0, 5, "CONNACK", manager=mgr)
        subscribe(mgr, conn, rec, topic, qos)
        paho_connect(pub, broker.host, broker.port)
        try:
            start = time.perf_counter()
            done = threading.Event()

            def publish_all() -> None:
                infos = [pub.publish(topic, b"p%d" % i, qos=qos) for i in range(N_LOSS)]
                for info in infos:
                    info.wait_for_publish(60)
                done.set()

            t = threading.Thread(target=publish_all, daemon=True)
            t.start()
            wait_for(lambda: len(received) == N_LOSS and done.is_set(), 60, "all paho messages",
                     manager=mgr)
            elapsed = time.perf_counter() - start
            t.join(5)
            # Anything still in flight (a duplicate) would show up now.
            deadline = time.monotonic() + 0.3
            while time.monotonic() < deadline:
                mgr.poll(10)
        finally:
            pub.loop_stop()
            pub.disconnect()
    assert set(received) == {b"p%d" % i for i in range(N_LOSS)}
    if qos == 2:
        assert max(received.values()) == 1, "QoS 2 delivered a message twice"
        # Mongoose answered every PUBREL with PUBCOMP (the QoS 2 flow is completed for us).
        assert rec.count(MQTT_CMD_PUBREL) == N_LOSS
    assert rec.errors == []
    print(f"\npaho -> ours, QoS {qos}: {N_LOSS} messages in {elapsed:.2f} s "
          f"({N_LOSS / elapsed:,.0f} msg/s)")


# Our broker-side listener serving paho


def _split_packet(raw: bytes) -> tuple[int, bytes]:
    """First MQTT packet in raw: (first byte, variable header + payload)."""
    n, mul, i = 0, 1, 1
    while True:
        b = raw[i]
        n += (b & 0x7F) * mul
        mul *= 128
        i += 1
        if not b & 0x80:
            break
    return raw[0], raw[i:i + n]


class TinyBroker:
    """Just enough of a broker on top of mqtt_listen: CONNACK, SUBACK, routing of
    PUBLISH to matching subscribers, PINGRESP. Packets are read from the view; what the
    view does not carry (the SUBSCRIBE topic filters) comes from conn.recv_data(), which
    during MG_EV_MQTT_CMD starts with the packet being dispatched."""

    def __init__(self) -> None:
        self.subs: dict[cm.Connection, dict[str, int]] = {}
        self.v5: set[cm.Connection] = set()
        self.seen: list[int] = []
        self.errors: list[str] = []
        self.closed = 0

    def __call__(self, conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_ERROR:
            self.errors.append(data)
        elif ev == cm.MG_EV_CLOSE and not conn.is_listening:
            self.closed += 1
            self.subs.pop(conn, None)
        if ev != cm.MG_EV_MQTT_CMD:
            return
        self.seen.append(data.cmd)
        if data.cmd == MQTT_CMD_CONNECT:
            _, body = _split_packet(conn.recv_data())
            if body[6] == 5:  # protocol level
                self.v5.add(conn)
                conn.send(b"\x20\x03\x00\x00\x00")  # CONNACK + empty properties
            else:
                conn.send(b"\x20\x02\x00\x00")
            self.subs[conn] = {}
        elif data.cmd == MQTT_CMD_SUBSCRIBE:
            _, body = _split_packet(conn.recv_data())
            pid, rest = body[:2], body[2:]
            if conn in self.v5:
                rest = rest[1:]  # property length 0 (paho sends none here)
            codes = b""
            while rest:
                n = int.from_bytes(rest[:2], "big")
                topic, opts, rest = rest[2:2 + n].decode(), rest[2 + n], rest[3 + n:]
                self.subs[conn][topic] = opts & 3
                codes += bytes([opts & 3])
            if conn in self.v5:
                payload = pid + b"\x00" + codes
            else:
                payload = pid + codes
            conn.send(bytes([0x90, len(payload)]) + payload)
        elif data.cmd == MQTT_CMD_PUBLISH:
            for sub, filters in self.subs.items():
                for flt, granted in filters.items():
                    if _topic_matches(flt, data.topic):
                        sub.mqtt_pub(data.topic, data.data, qos=min(granted, data.qos))
        elif data.cmd == MQTT_CMD_PINGREQ:
            conn.mqtt_pong()
        elif data.cmd == MQTT_CMD_DISCONNECT:
            conn.close()


def _topic_matches(flt: str, topic: str) -> bool:
    f, t = flt.split("/"), topic.split("/")
    for i, part in enumerate(f):
        if part == "#":
            return True
        if i >= len(t) or (part != "+" and part != t[i]):
            return False
    return len(f) == len(t)


@pytest.mark.parametrize("v5", [False, True])
def test_our_listener_serves_paho(v5: bool) -> None:
    tiny = TinyBroker()
    got: list[tuple[str, bytes, int]] = []
    got_event = threading.Event()
    pinged = threading.Event()

    def on_message(c: Any, userdata: Any, msg: paho.MQTTMessage) -> None:
        got.append((msg.topic, msg.payload, msg.qos))
        if len(got) == 3:
            got_event.set()

    with cm.Manager() as mgr:
        lsn = mgr.mqtt_listen("mqtt://127.0.0.1:0", tiny)
        port = lsn.local_addr[1]
        assert port > 0
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="paho-on-ours",
                             protocol=paho.MQTTv5 if v5 else paho.MQTTv311)
        client.on_message = on_message
        stop = threading.Event()
        runner = threading.Thread(target=_poll_until, args=(mgr, stop), daemon=True)
        runner.start()
        try:
            subscribed = threading.Event()
            client.on_subscribe = lambda *a: subscribed.set()
            # keepalive=1: paho sends PINGREQ within about a second of silence.
            client.on_log = lambda c, u, level, buf: (
                pinged.set() if "PINGRESP" in buf else None)
            paho_connect(client, "127.0.0.1", port, keepalive=1)
            client.subscribe("own/#", qos=2)
            assert subscribed.wait(5), "no SUBACK from our listener"
            for qos in (0, 1, 2):
                client.publish(f"own/{qos}", b"echo %d" % qos, qos=qos).wait_for_publish(5)
            assert got_event.wait(5), f"paho got only {got}"
            assert pinged.wait(5), "no PINGRESP"
            client.disconnect()
            client.loop_stop()
            wait_for(lambda: tiny.closed >= 1, 5, "our listener to see the client go")
        finally:
            client.loop_stop()
            stop.set()
            runner.join(5)
    assert sorted(got) == [("own/0", b"echo 0", 0), ("own/1", b"echo 1", 1),
                           ("own/2", b"echo 2", 2)]
    assert tiny.seen[0] == MQTT_CMD_CONNECT
    # Mongoose acknowledged the client's QoS 1 and 2 publishes and completed QoS 2 by
    # itself: the PUBREL reached the handler, paho's wait_for_publish() returned.
    assert MQTT_CMD_PUBREL in tiny.seen and MQTT_CMD_PINGREQ in tiny.seen
    assert tiny.errors == [] and tiny.closed == 1


def _poll_until(mgr: cm.Manager, stop: threading.Event) -> None:
    while not stop.is_set():
        mgr.poll(5)


# Malformed packets


MALFORMED = {
    # PUBLISH whose topic length (9) runs past the end of the packet.
    "topic_past_end": b"\x30\x05\x00\x09abc",
    # Remaining length encoded with a fifth continuation byte (MQTT allows four).
    "varint_too_long": b"\x30\xff\xff\xff\xff\x01",
    # CONNACK with a one-byte body (needs two).
    "short_connack": b"\x20\x01\x00",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_packet_to_our_listener(name: str) -> None:
    tiny = TinyBroker()
    with cm.Manager() as mgr:
        lsn = mgr.mqtt_listen("mqtt://127.0.0.1:0", tiny)
        port = lsn.local_addr[1]
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            # A valid CONNECT first, then (once answered) the bad packet.
            s.sendall(b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00")
            s.setblocking(False)
            data = recv_polling(mgr, s, b"\x20\x02\x00\x00")
            assert data == b"\x20\x02\x00\x00"  # CONNACK
            s.sendall(MALFORMED[name])
            wait_for(lambda: tiny.closed == 1, 5, "the server to close", manager=mgr)
            assert len(tiny.errors) == 1 and "malformed MQTT packet" in tiny.errors[0]
            s.setblocking(True)
            s.settimeout(5)
            assert s.recv(4096) == b""  # a clean EOF, nothing else
        finally:
            s.close()
        # The listener goes on serving.
        s2 = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            s2.sendall(b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00\xc0\x00")
            s2.setblocking(False)
            data = recv_polling(mgr, s2, b"\x20\x02\x00\x00\xd0\x00")
            assert data == b"\x20\x02\x00\x00\xd0\x00"  # CONNACK, PINGRESP
        finally:
            s2.close()
    assert tiny.seen.count(MQTT_CMD_CONNECT) == 2


def _fake_broker(script: Callable[[socket.socket], None]) -> tuple[int, threading.Thread]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(5)
    port = srv.getsockname()[1]

    def run() -> None:
        try:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(5)
                script(conn)
        finally:
            srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return port, t


def _read_connect(conn: socket.socket) -> bytes:
    data = b""
    while len(data) < 2 or len(data) < 2 + data[1]:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize("name", ["topic_past_end", "varint_too_long"])
def test_malformed_packet_to_our_client(name: str) -> None:
    def script(conn: socket.socket) -> None:
        _read_connect(conn)
        conn.sendall(b"\x20\x02\x00\x00" + MALFORMED[name])
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass

    port, t = _fake_broker(script)
    rec = Recorder()
    with cm.Manager() as mgr:
        conn = mgr.mqtt_connect(f"mqtt://127.0.0.1:{port}", rec, client_id="victim")
        wait_for(lambda: rec.closed, 5, "our client to close", manager=mgr)
        assert conn.is_closing
    t.join(5)
    assert rec.connack == 0
    assert len(rec.errors) == 1 and "malformed MQTT packet" in rec.errors[0]
    assert rec.events.index(cm.MG_EV_ERROR) < rec.events.index(cm.MG_EV_CLOSE)


def test_connect_packet_bytes_and_refused_connack() -> None:
    seen: dict[str, bytes] = {}

    def script(conn: socket.socket) -> None:
        seen["connect"] = _read_connect(conn)
        conn.sendall(b"\x20\x02\x00\x05")  # refused: not authorized
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass

    port, t = _fake_broker(script)
    rec = Recorder()
    with cm.Manager() as mgr:
        mgr.mqtt_connect(f"mqtt://127.0.0.1:{port}", rec, client_id="cid", username="u",
                         password="pw", clean_session=True, keepalive=42)
        wait_for(lambda: rec.closed, 5, "close after refusal", manager=mgr)
    t.join(5)
    assert rec.connack == 5
    body = seen["connect"][2:]
    assert body[:7] == b"\x00\x04MQTT\x04"
    assert body[7] == 0x80 | 0x40 | 0x02  # user name, password, clean session
    assert body[8:10] == (42).to_bytes(2, "big")
    assert body[10:] == b"\x00\x03cid\x00\x01u\x00\x02pw"


def test_v5_connect_and_disconnect_bytes() -> None:
    seen: dict[str, bytes] = {}
    done = threading.Event()

    def script(conn: socket.socket) -> None:
        seen["connect"] = _read_connect(conn)
        # CONNACK v5 with a reason-string property, then a PUBLISH with a 1-byte payload
        # and no properties: Mongoose 7.23 alone would report data b"\x00z".
        conn.sendall(b"\x20\x08\x00\x00\x05\x1f\x00\x02ok" +
                     b"\x30\x05\x00\x01t\x00z")
        data = b""
        while not data.endswith(b"\xe0\x02\x00\x00") and len(data) < 100:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        seen["tail"] = data
        done.set()

    port, t = _fake_broker(script)
    rec = Recorder()
    rec.on_open = lambda c: None
    with cm.Manager() as mgr:
        conn = mgr.mqtt_connect(f"mqtt://127.0.0.1:{port}", rec, client_id="c5", version=5,
                                keepalive=0)
        wait_for(lambda: len(rec.msgs) == 1, 5, "PUBLISH", manager=mgr)
        conn.mqtt_disconnect()
        wait_for(done.is_set, 5, "DISCONNECT at the fake broker", manager=mgr)
    t.join(5)
    assert seen["connect"][2:9] == b"\x00\x04MQTT\x05"
    assert rec.connack == 0
    assert rec.cmd_props[MQTT_CMD_CONNACK] == [
        {"id": 0x1F, "iv": 0, "key": None, "val": "ok"}]
    assert rec.msgs == [("t", b"z", 0)]
    assert rec.props == [[]]
    assert seen["tail"].endswith(b"\xe0\x02\x00\x00")  # DISCONNECT, reason 0, no props


# Argument checking


def test_mqtt_connect_argument_errors() -> None:
    with cm.Manager() as mgr:
        url = "mqtt://127.0.0.1:1"
        with pytest.raises(TypeError, match="'bogus'"):
            mgr.mqtt_connect(url, bogus=1)
        with pytest.raises(TypeError, match="'a', 'b'"):
            mgr.mqtt_connect(url, a=1, b=2)
        with pytest.raises(ValueError, match="version"):
            mgr.mqtt_connect(url, version=3)
        with pytest.raises(TypeError, match="version"):
            mgr.mqtt_connect(url, version="5")
        with pytest.raises(TypeError, match="client_id"):
            mgr.mqtt_connect(url, client_id=None)
        with pytest.raises(TypeError, match="username"):
            mgr.mqtt_connect(url, username=b"u")
        with pytest.raises(ValueError, match="client_id"):
            mgr.mqtt_connect(url, client_id="a\x00b")
        with pytest.raises(ValueError, match="keepalive"):
            mgr.mqtt_connect(url, keepalive=70000)
        with pytest.raises(TypeError, match="keepalive"):
            mgr.mqtt_connect(url, keepalive="60")
        with pytest.raises(ValueError, match="will_topic"):
            mgr.mqtt_connect(url, will_qos=1)
        with pytest.raises(ValueError, match="will_qos"):
            mgr.mqtt_connect(url, will_topic="w", will_qos=3)
        with pytest.raises(TypeError, match="url"):
            mgr.mqtt_connect(b"mqtt://127.0.0.1:1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="handler"):
            mgr.mqtt_connect(url, 42)
        with pytest.raises(RuntimeError, match="Failed to listen"):
            mgr.mqtt_listen("mqtt://256.1.1.1:0")
        assert mgr.connections == ()  # nothing was half-created


def test_mqtt_method_argument_errors() -> None:
    with cm.Manager() as mgr:
        lsn = mgr.mqtt_listen("mqtt://127.0.0.1:0")
        conn = mgr.mqtt_connect(f"mqtt://127.0.0.1:{lsn.local_addr[1]}")
        with pytest.raises(ValueError, match="qos"):
            conn.mqtt_pub("t", b"x", qos=3)
        with pytest.raises(ValueError, match="qos"):
            conn.mqtt_sub("t", qos=-1)
        with pytest.raises(TypeError, match="qos"):
            conn.mqtt_pub("t", b"x", qos="1")
        with pytest.raises(TypeError, match="message"):
            conn.mqtt_pub("t", 5)
        with pytest.raises(TypeError, match="message"):
            conn.mqtt_pub("t", None)
        with pytest.raises(TypeError, match="topic"):
            conn.mqtt_pub(b"t", b"x")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="topic"):
            conn.mqtt_sub("a\x00b")
        assert isinstance(conn.mqtt_pub("t", bytearray(b"x"), qos=1), int)
        assert conn.mqtt_pub("t", memoryview(b"x")) == 0
        conn.close()
        wait_for(lambda: conn.id == 0, 5, "close", manager=mgr)
        for call in (lambda: conn.mqtt_pub("t", b"x"), lambda: conn.mqtt_sub("t"),
                     lambda: conn.mqtt_unsub("t"), conn.mqtt_ping, conn.mqtt_pong,
                     conn.mqtt_disconnect):
            with pytest.raises(RuntimeError, match="Connection has been closed"):
                call()
    with pytest.raises(RuntimeError, match="Manager has been closed"):
        mgr.mqtt_connect("mqtt://127.0.0.1:1")
    with pytest.raises(RuntimeError, match="Manager has been closed"):
        mgr.mqtt_listen("mqtt://127.0.0.1:0")


def test_handler_exception_in_mqtt_event_is_reported() -> None:
    reported: list[BaseException] = []

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        if ev == cm.MG_EV_MQTT_CMD:
            raise ValueError("boom in MQTT_CMD")

    def script(conn: socket.socket) -> None:
        _read_connect(conn)
        conn.sendall(b"\x20\x02\x00\x00\xd0\x00")  # CONNACK, PINGRESP
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass

    port, t = _fake_broker(script)
    with cm.Manager(error_handler=reported.append) as mgr:
        conn = mgr.mqtt_connect(f"mqtt://127.0.0.1:{port}", handler)
        wait_for(lambda: len(reported) == 2, 5, "two reported exceptions", manager=mgr)
        assert not conn.is_closing  # the loop and the connection go on
        conn.close()
        wait_for(lambda: conn.id == 0, 5, "close", manager=mgr)
    t.join(5)
    assert all(isinstance(e, ValueError) and "boom" in str(e) for e in reported)


def _random_packets(rng: random.Random, count: int) -> list[bytes]:
    """MQTT-shaped junk: any command/flags byte, a correct or wrong remaining length, and
    bodies that look like topics, packet ids and MQTT 5 property blocks."""
    out = []
    for _ in range(count):
        first = rng.randrange(256)
        body = bytearray()
        if rng.random() < 0.5:  # topic length + topic
            tlen = rng.choice([0, 1, 3, 200, 65535])
            body += tlen.to_bytes(2, "big") + b"t" * min(tlen, rng.randrange(8))
        if rng.random() < 0.5:  # packet id
            body += rng.randbytes(2)
        if rng.random() < 0.7:  # property length + properties (known and unknown ids)
            props = bytearray()
            for _ in range(rng.randrange(4)):
                props.append(rng.choice([0x01, 0x02, 0x03, 0x09, 0x0B, 0x26, 0x1F, 0x7F]))
                props += rng.randbytes(rng.randrange(6))
            plen = len(props) if rng.random() < 0.7 else rng.randrange(300)
            body += bytes([plen & 0x7F]) + props
        body += rng.randbytes(rng.randrange(6))
        n = len(body) if rng.random() < 0.8 else rng.randrange(len(body) + 3)
        length = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            length.append(b | (0x80 if n else 0))
            if not n:
                break
        out.append(bytes([first]) + bytes(length) + bytes(body))
    return out


def _touch(conn: cm.Connection, ev: int, data: Any) -> None:
    # Read every field of every view: the bounds of what Mongoose and our layer parsed.
    if ev in (cm.MG_EV_MQTT_CMD, cm.MG_EV_MQTT_MSG):
        (data.topic, data.data, data.text, data.id, data.cmd, data.qos, data.ack,
         data.properties())


@pytest.mark.parametrize("v5", [False, True])
def test_fuzzed_packets_to_our_listener(v5: bool) -> None:
    rng = random.Random(1234 + v5)
    connect = (b"\x10\x0d\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x00" if v5
               else b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00")
    errors: list[str] = []

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        _touch(conn, ev, data)
        if ev == cm.MG_EV_ERROR:
            errors.append(data)
        elif ev == cm.MG_EV_MQTT_CMD and data.cmd == MQTT_CMD_PINGREQ:
            conn.mqtt_pong()

    with cm.Manager(handler) as mgr:
        port = mgr.mqtt_listen("mqtt://127.0.0.1:0").local_addr[1]
        packets = _random_packets(rng, 400)
        for i in range(0, len(packets), 8):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(connect)
                for p in packets[i:i + 8]:
                    try:
                        s.sendall(p)
                    except OSError:
                        break  # closed by the server: fine
                    mgr.poll(0)
                for _ in range(3):
                    mgr.poll(1)
        # Still serving after all that.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"\xc0\x00")  # PINGREQ
            s.setblocking(False)
            assert recv_polling(mgr, s, b"\xd0\x00") == b"\xd0\x00"
    assert any("malformed MQTT packet" in e for e in errors)


@pytest.mark.parametrize("v5", [False, True])
def test_fuzzed_packets_to_our_client(v5: bool) -> None:
    rng = random.Random(99 + v5)
    packets = _random_packets(rng, 300)

    def script(conn: socket.socket) -> None:
        _read_connect(conn)
        conn.sendall(b"\x20\x03\x00\x00\x00" if v5 else b"\x20\x02\x00\x00")
        try:
            for p in packets:
                conn.sendall(p)
        except OSError:
            return
        finally:
            sent.set()
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass

    rec = Recorder()
    sent = threading.Event()

    def handler(conn: cm.Connection, ev: int, data: Any) -> None:
        _touch(conn, ev, data)
        rec(conn, ev, data)

    port, t = _fake_broker(script)
    with cm.Manager() as mgr:
        mgr.mqtt_connect(f"mqtt://127.0.0.1:{port}", handler, version=5 if v5 else 4)
        wait_for(sent.is_set, 5, "the junk to be sent", manager=mgr)
        for _ in range(20):
            mgr.poll(1)
        # Either dropped with a readable error, or still waiting for the rest of a packet
        # whose declared length has not arrived yet: both fine, as long as nothing crashed.
        assert cm.MG_EV_MQTT_OPEN in rec.events and len(rec.cmds) >= 1
        assert all(isinstance(e, str) and e for e in rec.errors)
        for c in mgr.connections:
            c.close()
        wait_for(lambda: rec.closed, 5, "close", manager=mgr)
    t.join(5)
