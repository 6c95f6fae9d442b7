"""log_escape() and log_escape_fields(): the one escaping every log applies to what a client
chose (nginx's rule: control characters, `"`, `\\` and every byte from 0x80 on as `\\xNN`),
checked over every byte value, and the cheap path that hands back the same object."""

from __future__ import annotations

import random

import pytest

from cymongoose._mongoose import log_escape, log_escape_fields


@pytest.mark.parametrize("byte", range(256))
def test_every_byte_value(byte: int) -> None:
    ch = chr(byte)  # a header byte, as the servers decode it (latin-1)
    got = log_escape(f"a{ch}b")
    if 0x20 <= byte < 0x7F and ch not in '"\\':
        assert got == f"a{ch}b"
    else:
        assert got == f"a\\x{byte:02x}b"
    assert got.isascii() and got.isprintable()


@pytest.mark.parametrize("offset", range(17))
def test_every_byte_at_every_offset_of_a_longer_text(offset: int) -> None:
    """The fast check reads eight bytes at a time: a byte to escape is found wherever it is
    within a word or in the tail, and every plain byte passes."""
    base = "x" * 16
    for byte in range(128):
        ch = chr(byte)
        text = base[:offset] + ch + base[offset:]
        escaped = log_escape(text)
        if 0x20 <= byte < 0x7F and ch not in '"\\':
            assert escaped is text
        else:
            assert escaped == base[:offset] + f"\\x{byte:02x}" + base[offset:], (byte, offset)


def test_random_texts_against_a_plain_rule() -> None:
    """Bytes next to the edges of the rule (0x1f/0x20, 0x21/0x22/0x23, 0x5b/0x5c/0x5d,
    0x7e/0x7f, 0x00), in random orders and lengths (seeded: the same run every time)."""
    rng = random.Random(33)
    alphabet = [chr(b) for b in (0, 1, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x41, 0x5B, 0x5C, 0x5D,
                                 0x7E, 0x7F)]

    def rule(text: str) -> str:
        return "".join(ch if 0x20 <= ord(ch) < 0x7F and ch not in '"\\' else
                       f"\\x{ord(ch):02x}" for ch in text)

    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(41)))
        assert log_escape(text) == rule(text), repr(text)


def test_text_with_nothing_to_escape_is_the_same_object() -> None:
    text = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36"
    assert log_escape(text) is text
    assert log_escape("") == ""


def test_characters_above_latin1() -> None:
    """Only a decoded path has them (ASGI's is UTF-8): escaped, never passed on."""
    assert log_escape("/caf\u00e9\u2028\u202e\U0001f600") == "/caf\\xe9\\u2028\\u202e\\U0001f600"


def test_an_escaped_line_gives_the_bytes_back() -> None:
    raw = bytes(range(256)).decode("latin-1")
    escaped = log_escape(raw)
    assert escaped.encode("ascii").decode("unicode_escape") == raw


def test_fields_in_one_call() -> None:
    plain = ("192.0.2.1", "-", "GET / HTTP/1.1", 200, 0, "-", "ua/1", "0.000100")
    assert log_escape_fields(plain) is plain
    mixed = ("GET /a\"b HTTP/1.1", 200, None, "x\ty")
    assert log_escape_fields(mixed) == ("GET /a\\x22b HTTP/1.1", 200, None, "x\\x09y")
    assert log_escape_fields(()) == ()


def test_wrong_types() -> None:
    with pytest.raises(TypeError):
        log_escape(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        log_escape(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        log_escape_fields(["a list"])  # type: ignore[arg-type]
