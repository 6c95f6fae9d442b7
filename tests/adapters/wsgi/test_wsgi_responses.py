"""Response framing (PEP 3333 and HTTP/1.1): start_response and exc_info, write(), chunked
and close-delimited bodies, HEAD, Date/Server, file_wrapper."""

from __future__ import annotations

import uuid

import pytest
from support.app_state import wait_app_state
from support.http_client import HttpConnection, IncompleteResponse, get, raw_request
from support.patterns import pattern_sha256
from support.served import Served


def wait_state(served: Served, token: str, key: str) -> dict[str, object]:
    return wait_app_state(served.port, token, key)


def test_hello_has_date_server_and_content_length(served: Served) -> None:
    resp = get(served.port, "/hello")
    assert (resp.status, resp.reason, resp.body) == (200, "OK", b"hello")
    assert resp.header("content-length") == "5"
    assert resp.header("date") and resp.header("date").endswith(" GMT")  # type: ignore
    assert resp.header("server")
    assert resp.http_version == "1.1"


def test_app_headers_kept_in_order_and_repeated(served: Served) -> None:
    resp = get(served.port, "/headers_out")
    assert resp.header_list("x-multi") == ["a", "b"]
    assert resp.header_list("set-cookie") == ["a=1", "b=2"]
    assert resp.header("x-latin") == "caf\xe9"
    assert resp.body == b"ok"


def test_no_content_length_is_chunked_on_http11(served: Served) -> None:
    resp = get(served.port, "/nocl")
    assert resp.header("transfer-encoding") == "chunked"
    assert resp.header("content-length") is None
    assert resp.body == b"no content-length"


def test_no_content_length_is_close_delimited_on_http10(served: Served) -> None:
    with HttpConnection(served.port) as c:
        c.send_raw(raw_request("GET", "/nocl", version="1.0"))
        resp = c.read_response("GET", "1.0")
        assert resp.header("transfer-encoding") is None
        assert resp.body == b"no content-length"
        assert c.server_closed()


def test_empty_body(served: Served) -> None:
    resp = get(served.port, "/empty")
    assert resp.status == 200 and resp.body == b""


@pytest.mark.parametrize("code", ["204", "304", "404", "418"])
def test_status_codes(served: Served, code: str) -> None:
    with HttpConnection(served.port) as c:
        resp = c.request("GET", f"/status?code={code}")
        assert resp.status == int(code)
        if code in ("204", "304"):
            assert resp.body == b"" and resp.header("transfer-encoding") is None
        # The connection stays usable.
        assert c.request("GET", "/hello").body == b"hello"


@pytest.mark.parametrize("target", ["/hello", "/nocl", "/stream?size=100000", "/raw/file"])
def test_head_has_headers_but_no_body(served: Served, target: str) -> None:
    with HttpConnection(served.port) as c:
        got = c.request("GET", target)
        head = c.request("HEAD", target)
        assert head.status == got.status == 200
        assert head.body == b""
        if got.header("content-length") is not None and head.header("content-length"):
            assert head.header("content-length") == got.header("content-length")
        assert head.header("content-type") == got.header("content-type")
        if c.keep_alive:
            # A body sent after the HEAD response would be read as the next response here.
            assert c.request("GET", "/hello").body == b"hello"
        else:
            # Neither Content-Length nor chunked: h11 will not reuse the connection, but no
            # body byte may follow the head (server_closed() fails on any byte).
            c.server_closed(timeout=0.3)


def test_start_response_twice_without_exc_info_raises(served: Served) -> None:
    resp = get(served.port, "/exc_info?mode=again")
    assert resp.status == 200
    assert resp.body.startswith(b"second call raised ")


def test_start_response_with_exc_info_before_sending_replaces(served: Served) -> None:
    resp = get(served.port, "/exc_info?mode=replace")
    assert resp.status == 503
    assert resp.header("x-second") == "yes"
    if served.ours:  # gunicorn 27 appends the new headers to the first call's (PEP 3333: replace)
        assert resp.header("x-first") is None
    assert resp.body == b"replaced"


def test_start_response_with_exc_info_after_sending_reraises(served: Served) -> None:
    token = uuid.uuid4().hex
    with HttpConnection(served.port) as c:
        c.send_request("GET", f"/exc_info?mode=after_sent&token={token}")
        resp = c.read_head()
        assert resp.status == 200
        with pytest.raises(IncompleteResponse) as err:
            c.read_body(resp)
        assert err.value.partial is not None
        assert err.value.partial.body == b"already sent\n"
    st = wait_state(served, token, "reraised")
    assert st["reraised"] is True
    assert wait_state(served, token, "closed").get("closed") is True


def test_write_callable_then_iterable(served: Served) -> None:
    resp = get(served.port, "/exc_info?mode=write")
    assert resp.body == b"via write; via iterable"


@pytest.mark.parametrize("target", ["/file", "/raw/file"], ids=["validated", "sendfile"])
@pytest.mark.parametrize("size", [0, 1, 100_000, 3_000_000])
def test_file_wrapper(served: Served, target: str, size: int) -> None:
    import hashlib
    token = uuid.uuid4().hex
    with HttpConnection(served.port, timeout=10) as c:
        resp = c.request("GET", f"{target}?size={size}&token={token}")
        assert resp.status == 200
        assert int(resp.header("content-length") or -1) == size
        assert hashlib.sha256(resp.body).hexdigest() == pattern_sha256(size)
        assert c.request("GET", "/hello").body == b"hello"
    assert wait_state(served, token, "closed").get("closed") is True


def test_file_wrapper_class_iterates_in_blocks() -> None:
    import io

    from cymongoose.wsgi import FileWrapper

    closed: list[bool] = []

    class F(io.BytesIO):
        def close(self) -> None:
            closed.append(True)
            super().close()

    w = FileWrapper(F(b"abcdefghij"), 4)
    assert list(w) == [b"abcd", b"efgh", b"ij"]
    w.close()
    assert closed == [True]
