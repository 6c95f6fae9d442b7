"""Utility functions (API §1.12) checked against the standard library."""

import base64
import hashlib
import hmac
import os
import re
import time
import zlib

import pytest

import cymongoose
from cymongoose import Event

MIB = 1024 * 1024

# Inputs shared by the hash/encoding comparisons: empty, every byte, NULs, non-ASCII,
# block-boundary lengths and one large input.
BYTE_INPUTS = [
    b"",
    b"a",
    b"abc",
    b"\x00",
    b"\x00\x00abc\x00",
    bytes(range(256)),
    "héllo wörld ☃ 𝄞".encode(),
    *(os.urandom(n) for n in (1, 2, 3, 55, 56, 63, 64, 65, 127, 128, 129, 1000)),
    os.urandom(MIB),
]


def ids(values):
    return [f"len{len(v)}" for v in values]


# -- event_name / log level ---------------------------------------------------------------


def test_event_name_known_events():
    for member in Event:
        assert cymongoose.event_name(member) == f"MG_EV_{member.name}"
    assert cymongoose.event_name(cymongoose.MG_EV_HTTP_MSG) == "MG_EV_HTTP_MSG"
    assert cymongoose.event_name(0) == "MG_EV_ERROR"


def test_event_name_user_and_unknown():
    user = cymongoose.MG_EV_USER
    assert cymongoose.event_name(user) == "MG_EV_USER"
    assert cymongoose.event_name(user + 1) == "MG_EV_USER+1"
    assert cymongoose.event_name(user + 100) == "MG_EV_USER+100"
    for ev in (20, 21, 22, -1):
        assert cymongoose.event_name(ev) == f"MG_EV_UNKNOWN({ev})"


def test_event_name_type_error():
    with pytest.raises(TypeError):
        cymongoose.event_name("11")


def test_log_set_get_roundtrip_and_validation():
    old = cymongoose.log_get()
    assert old == cymongoose.MG_LL_NONE  # set at import
    try:
        for level in range(5):
            cymongoose.log_set(level)
            assert cymongoose.log_get() == level
        for bad in (-1, 5, 100):
            with pytest.raises(ValueError):
                cymongoose.log_set(bad)
        assert cymongoose.log_get() == 4
        with pytest.raises(TypeError):
            cymongoose.log_set("debug")
    finally:
        cymongoose.log_set(old)


# -- URLs ---------------------------------------------------------------------------------


def test_url_encode_matches_urllib_quote():
    from urllib.parse import quote

    samples = [
        "",
        "abc",
        "a b",
        "/path/to?x=1&y=2",
        "é☃𝄞",
        "\x00\x01\x7f",
        "-._~",
        "".join(chr(c) for c in range(128)),
        "x" * 100000,
        "é" * 50000,
    ]
    for s in samples:
        got = cymongoose.url_encode(s)
        want = quote(s, safe="-._~")
        # Mongoose uses lowercase hex; urllib uppercase.
        want = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), want)
        assert got == want, s[:40]
    assert cymongoose.url_encode("/") == "%2f"


def test_url_encode_type_error():
    with pytest.raises(TypeError):
        cymongoose.url_encode(b"abc")
    with pytest.raises(TypeError):
        cymongoose.url_encode(None)


URLS = [
    # url, host, port, user, pass, uri, ssl
    ("http://example.com", "example.com", 80, "", "", "/", False),
    ("http://example.com/", "example.com", 80, "", "", "/", False),
    ("https://example.com:8443/a/b?x=1&y=2", "example.com", 8443, "", "", "/a/b?x=1&y=2", True),
    ("https://example.com/a", "example.com", 443, "", "", "/a", True),
    ("ws://h:1234", "h", 1234, "", "", "/", False),
    ("wss://h/chat", "h", 443, "", "", "/chat", True),
    ("mqtt://broker", "broker", 1883, "", "", "/", False),
    ("mqtts://broker", "broker", 8883, "", "", "/", True),
    ("tcp://127.0.0.1:9000", "127.0.0.1", 9000, "", "", "/", False),
    ("udp://1.2.3.4:53", "1.2.3.4", 53, "", "", "/", False),
    ("foo://host", "host", 0, "", "", "/", False),
    ("http://user:secret@host:81/p", "host", 81, "user", "secret", "/p", False),
    ("http://user@host/p", "host", 80, "user", "", "/p", False),
    ("https://u:p@[::1]:8443/x?q", "[::1]", 8443, "u", "p", "/x?q", True),
    ("http://[::1]/x", "[::1]", 80, "", "", "/x", False),
    ("http://[::1]:0", "[::1]", 0, "", "", "/", False),
    ("http://héllo.example/é", "héllo.example", 80, "", "", "/é", False),
]


@pytest.mark.parametrize("url,host,port,user,pw,uri,ssl", URLS, ids=[u[0] for u in URLS])
def test_url_parts(url, host, port, user, pw, uri, ssl):
    assert cymongoose.url_host(url) == host
    assert cymongoose.url_port(url) == port
    assert cymongoose.url_user(url) == user
    assert cymongoose.url_pass(url) == pw
    assert cymongoose.url_uri(url) == uri
    assert cymongoose.url_is_ssl(url) is ssl


def test_url_parts_agree_with_urllib_on_plain_urls():
    from urllib.parse import urlsplit

    for url in ("http://a.example:8080/x/y?z=1", "https://u:pw@b.example/q", "http://c.example"):
        parts = urlsplit(url)
        assert cymongoose.url_host(url) == parts.hostname
        assert cymongoose.url_port(url) == (parts.port or {"http": 80, "https": 443}[parts.scheme])
        assert cymongoose.url_user(url) == (parts.username or "")
        assert cymongoose.url_pass(url) == (parts.password or "")
        want_uri = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        assert cymongoose.url_uri(url) == want_uri


def test_url_functions_type_and_nul_errors():
    funcs = [
        cymongoose.url_port,
        cymongoose.url_host,
        cymongoose.url_user,
        cymongoose.url_pass,
        cymongoose.url_uri,
        cymongoose.url_is_ssl,
    ]
    for fn in funcs:
        with pytest.raises(TypeError):
            fn(b"http://x")
        with pytest.raises(TypeError):
            fn(None)
        with pytest.raises(ValueError):
            fn("http://x\x00evil/")
        fn("")  # empty is accepted


# -- match ----------------------------------------------------------------------------------


MATCHES = [
    ("", "", True, []),
    ("abc", "abc", True, []),
    ("abc", "abd", False, []),
    ("abc", "a?c", True, ["b"]),
    ("abc", "a??", True, ["b", "c"]),
    ("/api/foo", "/api/*", True, ["foo"]),
    ("/api/foo/bar", "/api/*", False, []),
    ("/api/foo/bar", "/api/#", True, ["foo/bar"]),
    ("/api/foo/bar", "/api/*/*", True, ["foo", "bar"]),
    ("/api/foo/bar", "/*/#", True, ["api", "foo/bar"]),
    ("/api/", "/api/*", True, [""]),
    ("/a/b/c.txt", "#.txt", True, ["/a/b/c"]),
    ("a.b.c", "*.*", True, ["a", "b.c"]),
    ("abcdc", "*??c", True, ["ab", "c", "d"]),
    ("ab", "*?", True, ["a", "b"]),
    ("", "*", True, [""]),
    ("", "#", True, [""]),
    ("x", "", False, []),
    ("héllo", "h*o", True, ["éll"]),
    # '*' never takes a '/' in, whatever the backtracking (Mongoose's own mg_match let it:
    # found by fuzzing against the glob as a regular expression).
    ("/api/a/b/items", "/api/*/items", False, []),
    ("/a/b/c/x", "/*/*/x", False, []),
    ("/api/v1/\x02/api/v1/use1s//2", "/api/*/*/u#", False, []),
    # A '#' before a '*' takes the '/' a later '*' cannot.
    ("xa/ab", "#a*b", True, ["xa/", ""]),
    ("a/b/c", "#/*", True, ["a/b", "c"]),
    # '?' is one character, not one UTF-8 byte: a capture is never half a character (found
    # by fuzzing).
    ("é", "?", True, ["é"]),
    ("aé€/b", "a??/*", True, ["é", "€", "b"]),
    ("é", "??", False, []),
]


@pytest.mark.parametrize("s,pattern,ok,caps", MATCHES, ids=[f"{m[0]}~{m[1]}" for m in MATCHES])
def test_match(s, pattern, ok, caps):
    assert cymongoose.match(s, pattern) == (ok, caps)


def test_match_many_wildcards_and_backtracking():
    # More than 20 wildcards, and heavy backtracking over '*' followed by '?'s: Mongoose's
    # own capture array handling can overrun here; ours must stay correct.
    s = "/".join(f"seg{i}" for i in range(30))
    pattern = "/".join("*" for _ in range(30))
    assert cymongoose.match(s, pattern) == (True, [f"seg{i}" for i in range(30)])
    s = "a" * 200 + "c"
    ok, caps = cymongoose.match(s, "*" + "?" * 10 + "c")
    assert ok
    assert caps == ["a" * 190] + ["a"] * 10
    ok, caps = cymongoose.match("x" * 300, "*?????y")
    assert (ok, caps) == (False, [])


def test_match_number_of_captures_equals_wildcards():
    for _s, pattern, ok, caps in MATCHES:
        if ok:
            assert len(caps) == sum(pattern.count(c) for c in "?*#")


def test_match_type_errors():
    with pytest.raises(TypeError):
        cymongoose.match(b"abc", "abc")
    with pytest.raises(TypeError):
        cymongoose.match("abc", None)


# -- http_var -------------------------------------------------------------------------------


def test_http_var_basic_and_raw():
    buf = "a=1&b=hello%20world&c=&plus=x+y&empty"
    assert cymongoose.http_var(buf, "a") == "1"
    assert cymongoose.http_var(buf, "b") == "hello%20world"  # raw, not decoded
    assert cymongoose.http_var(buf, "c") == ""
    assert cymongoose.http_var(buf, "plus") == "x+y"
    assert cymongoose.http_var(buf, "missing") is None
    assert cymongoose.http_var("", "a") is None
    assert cymongoose.http_var(b"k=v", "k") == "v"
    assert cymongoose.http_var(bytearray(b"k=v"), "k") == "v"
    assert cymongoose.http_var(memoryview(b"k=v"), "k") == "v"


def test_http_var_no_size_limit_and_non_ascii():
    big = "x" * (2 * MIB)
    assert cymongoose.http_var(f"a=1&big={big}&z=2", "big") == big
    assert cymongoose.http_var("name=héllo&n=2", "name") == "héllo"
    assert cymongoose.http_var(b"bin=\xff\xfe", "bin") == "\udcff\udcfe"


def test_http_var_type_errors():
    with pytest.raises(TypeError):
        cymongoose.http_var(123, "a")
    with pytest.raises(TypeError):
        cymongoose.http_var("a=1", b"a")


# -- multipart ------------------------------------------------------------------------------


def multipart(boundary, parts):
    out = b""
    for headers, body in parts:
        out += b"--" + boundary + b"\r\n"
        for h in headers:
            out += h + b"\r\n"
        out += b"\r\n" + body + b"\r\n"
    return out + b"--" + boundary + b"--\r\n"


def all_parts(body):
    parts, ofs = [], 0
    while True:
        ofs, part = cymongoose.http_parse_multipart(body, ofs)
        if part is None:
            assert ofs == 0
            return parts
        parts.append(part)


def test_multipart_parts():
    binary = bytes(range(256)) * 10 + b"\r\n--not-the-boundary\r\n"
    body = multipart(
        b"XyZ123",
        [
            ([b'Content-Disposition: form-data; name="field"'], b"value"),
            (
                [
                    b'Content-Disposition: form-data; name="file"; filename="a b.bin"',
                    b"Content-Type: application/octet-stream",
                ],
                binary,
            ),
            ([b'Content-Disposition: form-data; name="empty"'], b""),
            ([b'Content-Disposition: form-data; name="t"'], "héllo".encode()),
        ],
    )
    parts = all_parts(body)
    assert parts == [
        {"name": "field", "filename": "", "body": b"value"},
        {"name": "file", "filename": "a b.bin", "body": binary},
        {"name": "empty", "filename": "", "body": b""},
        {"name": "t", "filename": "", "body": "héllo".encode()},
    ]
    # str bodies are UTF-8 encoded and give the same parts.
    assert all_parts(body.decode("latin-1").encode("latin-1")) == parts


def test_multipart_offsets_and_edges():
    body = multipart(b"b", [([b'Content-Disposition: form-data; name="x"'], b"1")])
    nxt, part = cymongoose.http_parse_multipart(body)
    assert part == {"name": "x", "filename": "", "body": b"1"}
    assert 0 < nxt < len(body)
    assert cymongoose.http_parse_multipart(body, nxt) == (0, None)
    assert cymongoose.http_parse_multipart(b"") == (0, None)
    assert cymongoose.http_parse_multipart(b"garbage without crlf") == (0, None)
    assert cymongoose.http_parse_multipart(body, len(body)) == (0, None)
    assert cymongoose.http_parse_multipart(body, len(body) + 100) == (0, None)
    # Truncated body: the part's closing boundary is missing.
    assert cymongoose.http_parse_multipart(body[: len(body) // 2]) == (0, None)
    with pytest.raises(ValueError):
        cymongoose.http_parse_multipart(body, -1)
    with pytest.raises(TypeError):
        cymongoose.http_parse_multipart(body, "0")
    with pytest.raises(TypeError):
        cymongoose.http_parse_multipart(5)


# -- hashes, HMAC, base64, CRC ------------------------------------------------------------


@pytest.mark.parametrize("data", BYTE_INPUTS, ids=ids(BYTE_INPUTS))
def test_hashes_match_hashlib(data):
    assert cymongoose.md5(data) == hashlib.md5(data).digest()
    assert cymongoose.sha1(data) == hashlib.sha1(data).digest()
    assert cymongoose.sha256(data) == hashlib.sha256(data).digest()


def test_hashes_accept_str_and_bytes_like():
    s = "héllo ☃"
    for fn, ref in (
        (cymongoose.md5, hashlib.md5),
        (cymongoose.sha1, hashlib.sha1),
        (cymongoose.sha256, hashlib.sha256),
    ):
        want = ref(s.encode()).digest()
        assert fn(s) == want
        assert fn(bytearray(s.encode())) == want
        assert fn(memoryview(s.encode())) == want
        for bad in (5, None, 1.5):
            with pytest.raises(TypeError):
                fn(bad)
    assert len(cymongoose.md5(b"")) == 16
    assert len(cymongoose.sha1(b"")) == 20
    assert len(cymongoose.sha256(b"")) == 32


@pytest.mark.parametrize(
    "key", [b"", b"k", b"key" * 21, b"x" * 64, b"y" * 65, os.urandom(200), "clé"]
)
def test_hmac_sha256_matches_hmac(key):
    kb = key.encode() if isinstance(key, str) else key
    for data in (b"", b"message", bytes(range(256)), os.urandom(MIB), "dätä"):
        db = data.encode() if isinstance(data, str) else data
        assert cymongoose.hmac_sha256(key, data) == hmac.new(kb, db, hashlib.sha256).digest()


def test_hmac_sha256_type_errors():
    with pytest.raises(TypeError):
        cymongoose.hmac_sha256(1, b"x")
    with pytest.raises(TypeError):
        cymongoose.hmac_sha256(b"k", None)


@pytest.mark.parametrize("data", BYTE_INPUTS, ids=ids(BYTE_INPUTS))
def test_base64_roundtrip_matches_stdlib(data):
    enc = cymongoose.base64_encode(data)
    assert enc == base64.b64encode(data).decode()
    assert cymongoose.base64_decode(enc) == data


def test_base64_encode_str_and_bytes_like():
    assert cymongoose.base64_encode("hé") == base64.b64encode("hé".encode()).decode()
    assert cymongoose.base64_encode(bytearray(b"ab")) == "YWI="
    assert cymongoose.base64_encode(memoryview(b"abc")) == "YWJj"
    with pytest.raises(TypeError):
        cymongoose.base64_encode(3)


@pytest.mark.parametrize(
    "bad",
    [
        "a",
        "ab",
        "abc",
        "abcde",
        "ab=c",
        "a===",
        "====",
        "ab==cdef",
        "ab*d",
        "abc\x00",
        "aé==",
        "YW Jj",
        "=abc",
    ],
)
def test_base64_decode_invalid(bad):
    with pytest.raises(ValueError, match="base64"):
        cymongoose.base64_decode(bad)
    with pytest.raises(ValueError):  # the stdlib agrees these are invalid
        base64.b64decode(bad, validate=True)


def test_base64_decode_padding_forms_and_types():
    assert cymongoose.base64_decode("") == b""
    assert cymongoose.base64_decode("YQ==") == b"a"
    assert cymongoose.base64_decode("YWI=") == b"ab"
    assert cymongoose.base64_decode("YWJj") == b"abc"
    assert cymongoose.base64_decode("+/+/") == base64.b64decode("+/+/")
    with pytest.raises(TypeError):
        cymongoose.base64_decode(b"YQ==")


@pytest.mark.parametrize("data", BYTE_INPUTS, ids=ids(BYTE_INPUTS))
def test_crc32_matches_zlib(data):
    assert cymongoose.crc32(data) == zlib.crc32(data)
    assert cymongoose.crc32(data, 0x12345678) == zlib.crc32(data, 0x12345678)


def test_crc32_chaining_and_types():
    data = os.urandom(10000)
    crc = 0
    for i in range(0, len(data), 777):
        crc = cymongoose.crc32(data[i : i + 777], crc)
    assert crc == zlib.crc32(data)
    assert cymongoose.crc32("héllo") == zlib.crc32("héllo".encode())
    assert cymongoose.crc32(b"", 0xFFFFFFFF) == 0xFFFFFFFF
    with pytest.raises(OverflowError):
        cymongoose.crc32(b"x", -1)
    with pytest.raises(OverflowError):
        cymongoose.crc32(b"x", 1 << 32)
    with pytest.raises(TypeError):
        cymongoose.crc32(7)


# -- millis, random ---------------------------------------------------------------------------


def test_millis_monotonic():
    a = cymongoose.millis()
    time.sleep(0.05)
    b = cymongoose.millis()
    assert isinstance(a, int)
    assert 40 <= b - a < 5000


def test_random_bytes():
    assert cymongoose.random_bytes(0) == b""
    for n in (1, 16, 1000, MIB):
        out = cymongoose.random_bytes(n)
        assert isinstance(out, bytes) and len(out) == n
    many = {cymongoose.random_bytes(16) for _ in range(100)}
    assert len(many) == 100
    big = cymongoose.random_bytes(MIB)
    assert len(set(big)) == 256  # all byte values show up in 1 MiB of random data
    with pytest.raises(OverflowError):
        cymongoose.random_bytes(-1)
    with pytest.raises(TypeError):
        cymongoose.random_bytes("8")


def test_random_str():
    assert cymongoose.random_str(0) == ""
    for n in (1, 2, 10, 1000, 100000):
        s = cymongoose.random_str(n)
        assert isinstance(s, str) and len(s) == n
        assert re.fullmatch(r"[A-Za-z0-9]*", s)
    assert len({cymongoose.random_str(20) for _ in range(100)}) == 100
    assert len(set(cymongoose.random_str(10000))) == 62
    with pytest.raises(OverflowError):
        cymongoose.random_str(-1)
