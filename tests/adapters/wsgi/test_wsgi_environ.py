"""The environ a WSGI app receives (PEP 3333), and reading wsgi.input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.http_client import HttpConnection, raw_request
from support.served import Served


def environ_for(served: Served, target: str = "/environ", headers: Any = (),
                raw: bytes | None = None) -> dict[str, Any]:
    with HttpConnection(served.port) as c:
        if raw is None:
            resp = c.request("GET", target, headers)
        else:
            c.send_raw(raw)
            resp = c.read_response("GET", "1.1")
    assert resp.status == 200, resp.body
    return json.loads(resp.body)  # type: ignore[no-any-return]


def test_required_keys_and_types(served: Served) -> None:
    env = environ_for(served, "/environ?a=1&b=%20x")
    assert env["REQUEST_METHOD"] == "GET"
    assert env["SCRIPT_NAME"] == ""
    assert env["PATH_INFO"] == "/environ"
    assert env["QUERY_STRING"] == "a=1&b=%20x"
    assert env["SERVER_NAME"]
    assert env["SERVER_PORT"] == str(served.port)
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["REMOTE_PORT"].isdigit()
    assert env["wsgi.version"] == [1, 0]
    assert env["wsgi.url_scheme"] == "http"
    assert env["wsgi.multithread"] is True
    assert env["wsgi.multiprocess"] is False
    assert env["wsgi.run_once"] is False
    assert env["wsgi.input_terminated"] is True
    assert env["has_file_wrapper"] is True
    assert set(env["input_methods"]) == {"read", "readline", "readlines", "__iter__"}
    # Every CGI-style key is a native str (the validator checks it too).
    assert set(env["types"].values()) == {"str"}


def test_remote_port_is_the_clients(served: Served) -> None:
    with HttpConnection(served.port) as c:
        local_port = c.sock.getsockname()[1]
        env = json.loads(c.request("GET", "/environ").body)
    assert env["REMOTE_PORT"] == str(local_port)


def test_http_headers_and_content_headers(served: Served) -> None:
    with HttpConnection(served.port) as c:
        resp = c.request("POST", "/environ", [("X-Custom-Thing", "v1"),
                                              ("Content-Type", "text/x-test"),
                                              ("User-Agent", "tester/1")], b"abc")
    env = json.loads(resp.body)
    assert env["HTTP_X_CUSTOM_THING"] == "v1"
    assert env["HTTP_USER_AGENT"] == "tester/1"
    assert env["CONTENT_TYPE"] == "text/x-test"
    assert env["CONTENT_LENGTH"] == "3"
    assert "HTTP_CONTENT_TYPE" not in env and "HTTP_CONTENT_LENGTH" not in env
    assert env["HTTP_HOST"] == f"127.0.0.1:{served.port}"


def test_header_names_that_change_between_requests(served: Served) -> None:
    """One keep-alive connection, other names (and other cases) at the same positions: each
    request gets its own keys, and none of an earlier request's."""
    sequences = [[("X-Alpha", "1"), ("Accept", "a")],
                 [("X-ALPHA", "2"), ("X_Under", "dropped"), ("Accept", "b")],
                 [("X-Beta", "3"), ("X-Alphb", "4")],
                 [("Content-Type", "text/x"), ("X-Alpha", "5")]]
    with HttpConnection(served.port) as c:
        for headers in sequences:
            env = json.loads(c.request("GET", "/environ", headers).body)
            own = {k: v for k, v in env.items() if k.startswith("HTTP_X") or k == "CONTENT_TYPE"
                   or k == "HTTP_ACCEPT"}
            want = {("CONTENT_TYPE" if n == "Content-Type" else
                     "HTTP_" + n.upper().replace("-", "_")): v
                    for n, v in headers if "_" not in n}
            assert own == want, (headers, own)


def test_no_body_means_no_or_empty_content_length(served: Served) -> None:
    env = environ_for(served)
    assert env.get("CONTENT_LENGTH", "") in ("", "0")


def test_header_bytes_arrive_as_latin1(served: Served) -> None:
    raw = b"GET /environ HTTP/1.1\r\nHost: x\r\nX-Latin: caf\xe9 \xff!\r\n\r\n"
    env = environ_for(served, raw=raw)
    assert env["HTTP_X_LATIN"] == "caf\xe9 \xff!"


def test_duplicate_headers_are_joined(served: Served) -> None:
    env = environ_for(served, headers=[("X-Dup", "one"), ("X-Dup", "two"), ("X-Dup", "3")])
    value = env["HTTP_X_DUP"]
    assert [v.strip() for v in value.split(",")] == ["one", "two", "3"]
    if served.ours:
        assert value == "one, two, 3"  # gunicorn joins with a bare ","


def test_duplicate_cookie_headers_are_joined_with_semicolons(served: Served) -> None:
    env = environ_for(served, headers=[("Cookie", "a=1"), ("Cookie", "b=2; c=3")])
    if not served.ours:
        pytest.skip("gunicorn joins repeated Cookie fields with ',' (not a cookie separator)")
    assert env["HTTP_COOKIE"] == "a=1; b=2; c=3"


def test_path_info_is_percent_decoded_as_latin1(served: Served) -> None:
    env = environ_for(served, "/environ/caf%C3%A9/%E9/a%2Fb%20c?q=%C3%A9")
    assert env["PATH_INFO"] == "/environ/caf\xc3\xa9/\xe9/a/b c"
    assert env["QUERY_STRING"] == "q=%C3%A9"
    # Decoding the WSGI str back to bytes gives what the client meant.
    assert env["PATH_INFO"].encode("latin-1").decode("utf-8", "replace").startswith(
        "/environ/café/")


@pytest.mark.parametrize("target", ["/environ/plain", "/environ/a%2Fb%0d%0a?q=%C3%A9&r",
                                    "/environ/x?", '/environ/q"\\'])
def test_raw_uri_is_the_target_as_sent(served: Served, target: str) -> None:
    """RAW_URI, gunicorn's key (the reference here): path and query undecoded, what the
    access log's request line shows."""
    env = environ_for(served, raw=f"GET {target} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
    assert env["RAW_URI"] == target


def test_raw_uri_keeps_the_root_path(serve_app: Any) -> None:
    served = serve_app(root_path="/app")
    env = environ_for(served, "/app/environ?x=1")
    assert (env["RAW_URI"], env["SCRIPT_NAME"], env["PATH_INFO"]) == \
        ("/app/environ?x=1", "/app", "/environ")


@pytest.mark.parametrize("path, script, info", [
    ("/app/environ", "/app", "/environ"),
    ("/app/environ/deeper?x=1", "/app", "/environ/deeper"),
])
def test_root_path_splits_script_name(serve_app: Any, path: str, script: str,
                                      info: str) -> None:
    served = serve_app(root_path="/app")
    env = environ_for(served, path)
    assert env["SCRIPT_NAME"] == script
    assert env["PATH_INFO"] == info


def test_root_path_exact(serve_app: Any) -> None:
    served = serve_app(root_path="/app")
    with HttpConnection(served.port) as c:
        resp = c.request("GET", "/app")
    # The generic app answers 404 for an empty PATH_INFO; what matters is that it ran.
    assert resp.status == 404


def test_http_10_protocol(served: Served) -> None:
    with HttpConnection(served.port) as c:
        c.send_raw(raw_request("GET", "/environ", version="1.0"))
        resp = c.read_response("GET", "1.0")
    assert json.loads(resp.body)["SERVER_PROTOCOL"] == "HTTP/1.0"


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
def test_request_method(served: Served, method: str) -> None:
    with HttpConnection(served.port) as c:
        resp = c.request(method, "/environ", body=b"x" if method in ("PUT", "PATCH") else None)
    assert json.loads(resp.body)["REQUEST_METHOD"] == method


BODY = b"line one\nline two\n\nlast line without newline"
LINES = [b"line one\n", b"line two\n", b"\n", b"last line without newline"]


@pytest.mark.parametrize("target, expected", [
    ("/raw/echo?mode=read", [BODY]),
    ("/echo?mode=readn&n=7", [BODY[i:i + 7] for i in range(0, len(BODY), 7)]),
    ("/echo?mode=readline", LINES),
    ("/echo?mode=readline_n&n=5",
     [b"line ", b"one\n", b"line ", b"two\n", b"\n", b"last ", b"line ", b"witho",
      b"ut ne", b"wline"]),
    ("/echo?mode=readlines", LINES),
    ("/echo?mode=iter", LINES),
])
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_wsgi_input_reading(served: Served, target: str, expected: list[bytes],
                            chunked: bool) -> None:
    body: Any = iter([BODY[:10], BODY[10:11], BODY[11:]]) if chunked else BODY
    with HttpConnection(served.port) as c:
        resp = c.request("POST", target, body=body)
    assert resp.status == 200, resp.body
    parts = [p.encode("latin-1") for p in json.loads(resp.body)["parts"]]
    if "readn" in target and chunked:
        # read(n) may return less than n before the end; the bytes must still all be there.
        assert b"".join(parts) == BODY and all(0 < len(p) <= 7 for p in parts)
    else:
        assert parts == expected


def test_binary_body_roundtrip(served: Served) -> None:
    body = bytes(range(256)) * 1000
    with HttpConnection(served.port) as c:
        resp = c.request("POST", "/raw/echo?mode=read", body=body)
    assert b"".join(p.encode("latin-1") for p in json.loads(resp.body)["parts"]) == body


def test_chunked_body_is_dechunked_and_hashed(served: Served) -> None:
    import hashlib
    pieces = [bytes([i]) * (1000 + i * 37) for i in range(50)]
    with HttpConnection(served.port) as c:
        resp = c.request("POST", "/hash", body=iter(pieces))
    data = b"".join(pieces)
    assert json.loads(resp.body) == {"length": len(data),
                                     "sha256": hashlib.sha256(data).hexdigest()}
