"""`missing_default_headers()`: which of the fields a server adds by default (Date, Server)
an app's headers leave out. The WSGI and ASGI servers index their default header blocks
with it (serving/default_headers.py), so a response never carries two Date fields."""

from __future__ import annotations

from typing import Any

import pytest

from cymongoose._mongoose import DefaultHeader, missing_default_headers
from cymongoose.serving.default_headers import DATE, SERVER, DefaultHeaders

BOTH = DefaultHeader.DEFAULT_DATE | DefaultHeader.DEFAULT_SERVER


@pytest.mark.parametrize(("headers", "missing"), [
    ([], BOTH),
    ([(b"content-type", b"text/plain")], BOTH),
    ([(b"date", b"x")], DefaultHeader.DEFAULT_SERVER),
    ([(b"DATE", b"x"), (b"Server", b"y")], 0),
    ([("Server", "y")], DefaultHeader.DEFAULT_DATE),  # str names (WSGI) count too
    ([(b"dates", b"x"), (b"serve", b"y"), (b"x-server", b"z")], BOTH),
    ([(1, b"x"), (bytearray(b"date"), b"x"), ("dat\u0113", "x")], BOTH),  # refused later
])
def test_which_default_fields_the_app_left_out(headers: list[Any], missing: int) -> None:
    assert missing_default_headers(headers) == missing
    assert missing_default_headers(tuple(headers)) == missing


def test_the_bits_index_the_servers_default_blocks() -> None:
    assert (DATE, SERVER) == (DefaultHeader.DEFAULT_DATE, DefaultHeader.DEFAULT_SERVER)
    blocks = DefaultHeaders().blocks
    for headers in ([], [(b"date", b"x")], [(b"server", b"y")],
                    [(b"date", b"x"), (b"server", b"y")]):
        names = {bytes(name).lower() for name, _ in headers}
        block = blocks[missing_default_headers(headers)]
        added = {name.lower() for name, _ in block} if block is not None else set()
        assert added == {b"date", b"server"} - names
