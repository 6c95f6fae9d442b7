"""Accept-Encoding negotiation (RFC 9110 12.5.3), the core's one reader of the field for
response compression and precompressed static files: q-values, `*`, `identity`, ties going
to zstd > br > gzip, and any malformed field read as "identity only"."""

from __future__ import annotations

import pytest

from cymongoose._mongoose import _pick_content_coding

IDENTITY, GZIP, BR, ZSTD = 0, 1, 2, 4
ALL = GZIP | BR | ZSTD


@pytest.mark.parametrize(("header", "offered", "chosen"), [
    (None, ALL, IDENTITY),  # says nothing: gets what it surely reads
    (b"", ALL, IDENTITY),
    (b"gzip", ALL, GZIP),
    (b"GZip", ALL, GZIP),
    (b"x-gzip", ALL, GZIP),
    (b"gzip, deflate, br, zstd", ALL, ZSTD),  # Chrome: ties go to zstd
    (b"gzip, deflate, br", ALL, BR),
    (b"gzip, deflate, br", GZIP | ZSTD, GZIP),
    (b"gzip;q=0.5, zstd;q=0.4", ALL, GZIP),
    (b"gzip;q=1.0, zstd;q=1", ALL, ZSTD),
    (b"gzip ; q=0.5 , br;Q=0.9", ALL, BR),
    (b"*", ALL, ZSTD),
    (b"*;q=0.2, gzip;q=0.5", ALL, GZIP),
    (b"*;q=0.5, gzip;q=0", ZSTD | GZIP, ZSTD),
    (b"gzip;q=0", ALL, IDENTITY),
    (b"zstd", GZIP, IDENTITY),  # nothing we offer
    (b"deflate", ALL, IDENTITY),
    (b"identity", ALL, IDENTITY),
    (b"gzip;q=0.5, identity", ALL, IDENTITY),  # likes the identity better
    (b"gzip;q=0.5, identity;q=0.1", ALL, GZIP),
    (b"gzip, gzip;q=0", ALL, GZIP),  # the first weight counts
    (b", ,gzip,", ALL, GZIP),  # empty list elements are allowed
    (b"gzip;level=3", ALL, GZIP),  # a parameter that is not q is ignored
    (b"gzip", IDENTITY, IDENTITY),
])
def test_negotiation(header: bytes | None, offered: int, chosen: int) -> None:
    assert _pick_content_coding(header, offered) == chosen


@pytest.mark.parametrize("header", [
    b"gzip;q=2", b"gzip;q=1.5", b"gzip;q=0.1234", b"gzip;q=", b"gzip;q=x", b"gzip;q=.5",
    b"gzip;", b"gzip;=1", b"gzip zstd", b"gz\x00ip", b"gzip\xff", b"\"gzip\"", b"gzip;q=0.5x",
    b"gzip;q",
])
def test_a_malformed_field_is_identity(header: bytes) -> None:
    assert _pick_content_coding(header, ALL) == IDENTITY


def test_a_long_field_is_read_in_one_pass() -> None:
    header = b", ".join([b"deflate;q=0.1"] * 4000 + [b"gzip"])
    assert _pick_content_coding(header, ALL) == GZIP
