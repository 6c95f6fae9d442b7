"""HTTP/2's engine in the build (issue 36): the module links libnghttp2 and says which, and the
HTTP guard's prior-knowledge check tells the preface from HTTP/1.1 on a plain connection's
first bytes, however they are split."""

from __future__ import annotations

import pytest

from cymongoose import _mongoose

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
NOT_PREFACE, PARTIAL, IS_PREFACE = 0, 1, 2


def test_the_module_says_which_libnghttp2_it_runs_with() -> None:
    version = _mongoose.HTTP2_LIBRARY
    assert version is not None, "built without HTTP/2 (CYMONGOOSE_HTTP2=OFF)"
    assert tuple(int(part) for part in version.split(".")[:2]) >= (1, 52)


@pytest.mark.parametrize("cut", range(len(PREFACE) + 1))
def test_every_prefix_of_the_preface_waits_for_more_and_the_whole_one_is_http2(cut: int) -> None:
    expected = IS_PREFACE if cut == len(PREFACE) else PARTIAL
    assert _mongoose._h2_preface_state(PREFACE[:cut]) == expected
    # What follows the preface (the client's SETTINGS) does not change the answer.
    assert _mongoose._h2_preface_state(PREFACE + b"\x00\x00\x12\x04") == IS_PREFACE


@pytest.mark.parametrize("start", [b"GET / HTTP/1.1\r\n", b"PRI * HTTP/1.1\r\n", b"PRI",
                                   b"pri * HTTP/2.0", b"\x16\x03\x01", b"P\x00"])
def test_anything_else_is_left_to_the_http11_guard(start: bytes) -> None:
    state = _mongoose._h2_preface_state(start)
    assert state == (PARTIAL if PREFACE.startswith(start) else NOT_PREFACE)
