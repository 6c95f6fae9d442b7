"""Real apps through the server: Flask and a Django project configured in code (both inside
wsgiref's validator): form posts, multipart uploads, JSON, streamed responses."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import pytest
from support.http_client import HttpConnection
from support.served import Served

APPS = {"flask": "support.flask_app:app", "django": "support.django_site:application"}


@pytest.fixture(params=sorted(APPS))
def framework(request: pytest.FixtureRequest, serve_app: Any) -> Served:
    served: Served = serve_app(APPS[request.param])
    served.app_name = request.param  # type: ignore[attr-defined]
    return served


def multipart(fields: dict[str, str], filename: str, content: bytes) -> tuple[str, bytes]:
    boundary = "----cymongoose-test-boundary-7d3f"
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                     f"{value}\r\n".encode())
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                 f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                 .encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", b"".join(parts)


def test_form_post(framework: Served) -> None:
    body = b"name=J%C3%BCrgen+X&tag=a&tag=b"
    with HttpConnection(framework.port) as c:
        resp = c.request("POST", "/form", [("Content-Type",
                                            "application/x-www-form-urlencoded")], body)
    assert resp.status == 200, resp.body
    got = json.loads(resp.body)
    assert got["name"] == "Jürgen X" and got["tags"] == ["a", "b"]


@pytest.mark.parametrize("size", [10, 3 << 20])
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_multipart_upload(framework: Served, size: int, chunked: bool) -> None:
    if chunked and framework.app_name == "django":  # type: ignore[attr-defined]
        pytest.skip("Django reads no request body without CONTENT_LENGTH "
                    "(it ignores wsgi.input_terminated)")
    content = os.urandom(size)
    ctype, body = multipart({"note": "hi"}, "data.bin", content)
    payload: Any = iter([body[i:i + 100_000] for i in range(0, len(body), 100_000)]) \
        if chunked else body
    with HttpConnection(framework.port, timeout=10) as c:
        resp = c.request("POST", "/upload", [("Content-Type", ctype)], payload)
    assert resp.status == 200, resp.body[:500]
    assert json.loads(resp.body) == {"filename": "data.bin", "size": size, "note": "hi",
                                     "sha256": hashlib.sha256(content).hexdigest()}


def test_json_roundtrip(framework: Served) -> None:
    payload = {"items": list(range(100)), "text": "caf\u00e9 \u2603"}
    with HttpConnection(framework.port) as c:
        resp = c.request("POST", "/json", [("Content-Type", "application/json")],
                         json.dumps(payload).encode())
    assert resp.status == 200
    assert json.loads(resp.body) == {"received": payload, "count": 100}


def test_streamed_response(framework: Served) -> None:
    with HttpConnection(framework.port) as c:
        resp = c.request("GET", "/stream?n=50")
        assert resp.status == 200
        assert resp.body == "".join(f"line {i}\n" for i in range(50)).encode()
        assert resp.header("content-length") is None
        assert resp.header("transfer-encoding") == "chunked"
        # Keep-alive survives a streamed response.
        assert c.request("GET", "/stream?n=1").body == b"line 0\n"


def test_django_sees_script_name(serve_app: Any) -> None:
    served = serve_app(APPS["django"], root_path="/site")
    with HttpConnection(served.port) as c:
        resp = c.request("GET", "/site/whoami")
    assert json.loads(resp.body) == {"path": "/site/whoami", "path_info": "/whoami",
                                     "script_name": "/site"}
