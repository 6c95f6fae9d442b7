"""Constants come from the C values; every Mongoose event is accounted for."""

from __future__ import annotations

import re
from pathlib import Path

import cymongoose
from cymongoose import UNEXPOSED_EVENTS, Event, event_name

HEADER = Path(__file__).resolve().parents[2] / "vendor" / "mongoose" / "mongoose.h"


def _header_events() -> list[str]:
    text = HEADER.read_text()
    body = re.search(r"enum mg_event \{(.*?)\};", text, re.S)
    assert body, "enum mg_event not found in mongoose.h"
    return re.findall(r"\b(MG_EV_[A-Z0-9_]+)\b", re.sub(r"//[^\n]*", "", body.group(1)))


def test_every_mongoose_event_is_exposed_or_explained() -> None:
    names = _header_events()
    assert len(names) >= 24
    for position, name in enumerate(names):
        if name in UNEXPOSED_EVENTS:
            assert UNEXPOSED_EVENTS[name] == position
            continue
        assert getattr(cymongoose, name) == position, name
        assert Event[name.removeprefix("MG_EV_")] == position
        assert event_name(position) == name


def test_other_constants_match_the_header() -> None:
    text = HEADER.read_text()
    for name in ("WEBSOCKET_OP_TEXT", "WEBSOCKET_OP_BINARY", "WEBSOCKET_OP_PING",
                 "WEBSOCKET_OP_PONG"):
        value = re.search(rf"#define {name} (\d+)", text)
        assert value and getattr(cymongoose, name) == int(value.group(1))
    # Every opcode the header defines is exported (the ASGI server sends CLOSE with it).
    opcodes = re.findall(r"#define (WEBSOCKET_OP_[A-Z]+) (\d+)", text)
    assert len(opcodes) == 6
    for name, value in opcodes:
        assert name in cymongoose.__all__ and getattr(cymongoose, name) == int(value), name
    levels = re.search(r"enum \{ (MG_LL_NONE.*?) \};", text)
    assert levels
    for i, name in enumerate(n.strip() for n in levels.group(1).split(",")):
        assert getattr(cymongoose, name) == i
    props = re.search(r"enum \{\s*(MQTT_PROP_TYPE_BYTE.*?)\};", text, re.S)
    assert props
    for i, name in enumerate(n.strip() for n in props.group(1).split(",") if n.strip()):
        assert getattr(cymongoose, name) == i


def test_event_names_for_user_and_unknown() -> None:
    assert event_name(cymongoose.MG_EV_USER) == "MG_EV_USER"
    assert event_name(cymongoose.MG_EV_USER + 3) == "MG_EV_USER+3"
    assert event_name(22) == "MG_EV_UNKNOWN(22)"
    assert event_name(-1) == "MG_EV_UNKNOWN(-1)"
