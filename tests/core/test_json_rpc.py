"""JSON path getters and the JSON-RPC dispatcher (API §1.11)."""

import gc
import json

import pytest

import cymongoose
from cymongoose import Rpc, RpcReq

DOC = json.dumps(
    {
        "a": 1,
        "b": {"c": [10, 20, {"d": "deep"}], "e": None, "t": True, "f": False},
        "s": "plain",
        "esc": 'quote" backslash\\ nl\n tab\t',
        "uni": "é中𝄞",
        "neg": -12.5,
        "exp": 1.5e3,
        "big": 123456789012345678901234567890,
        "arr": [[1, 2], [3, [4, 5]]],
        "empty": "",
        "ctrl": "\x01",
    },
    ensure_ascii=False,
)


def test_json_get_raw_tokens():
    g = cymongoose.json_get
    assert g(DOC, "$.a") == "1"
    assert g(DOC, "$.s") == '"plain"'  # strings keep their quotes
    assert g(DOC, "$.b.c[1]") == "20"
    assert g(DOC, "$.b.c[2].d") == '"deep"'
    assert json.loads(g(DOC, "$.b.c")) == [10, 20, {"d": "deep"}]
    assert g(DOC, "$.b.e") == "null"
    assert g(DOC, "$.b.t") == "true"
    assert g(DOC, "$.arr[1][1][0]") == "4"
    assert json.loads(g(DOC, "$")) == json.loads(DOC)
    assert json.loads(g(DOC, "$.uni")) == "é中𝄞"


@pytest.mark.parametrize(
    "path", ["$.missing", "$.b.c[3]", "$.a.b", "$.arr[5]", "$.b.x.y", "", "nonsense"]
)
def test_json_get_missing(path):
    assert cymongoose.json_get(DOC, path) is None
    assert cymongoose.json_get_num(DOC, path) is None
    assert cymongoose.json_get_bool(DOC, path) is None
    assert cymongoose.json_get_long(DOC, path) == 0
    assert cymongoose.json_get_str(DOC, path) is None


def test_json_get_invalid_documents():
    for doc in ("", "{", '{"a":}', "[1,2", '{"a" 1}', "nul"):
        assert cymongoose.json_get(doc, "$.a") is None
        assert cymongoose.json_get_str(doc, "$.a") is None


def test_json_get_num():
    n = cymongoose.json_get_num
    assert n(DOC, "$.a") == 1.0 and isinstance(n(DOC, "$.a"), float)
    assert n(DOC, "$.neg") == -12.5
    assert n(DOC, "$.exp") == 1500.0
    assert n(DOC, "$.b.c[1]") == 20.0
    # Correctly rounded, like float(): Mongoose's own conversion is not.
    for text in (
        "0.3",
        "1e-5",
        "2.5e-300",
        "1.7976931348623157e308",
        "-0.0",
        "1E5",
        "12e+2",
        "123456789.123456789",
        "0.1",
        "-7",
    ):
        assert n(f'{{"x": {text}}}', "$.x") == float(text), text
    assert n('{"x": 1e999}', "$.x") == float("inf")
    assert n(DOC, "$.s") is None  # not a number
    assert n(DOC, "$.s", default=7) == 7
    assert n(DOC, "$.missing", 3.5) == 3.5


def test_json_get_bool():
    b = cymongoose.json_get_bool
    assert b(DOC, "$.b.t") is True
    assert b(DOC, "$.b.f") is False
    assert b(DOC, "$.a") is None
    assert b(DOC, "$.a", default=True) is True
    assert b("[true,false]", "$[1]") is False


def test_json_get_long():
    lg = cymongoose.json_get_long
    assert lg(DOC, "$.a") == 1
    assert lg(DOC, "$.neg") == -12  # truncated toward zero
    assert lg(DOC, "$.exp") == 1500
    assert lg(DOC, "$.big") == 123456789012345678901234567890  # exact, no C long overflow
    assert lg('{"x": 1e999}', "$.x", 5) == 5  # infinite: not an integer
    assert lg('{"x": 2.9e1}', "$.x") == 29
    assert lg('{"x": 9007199254740993}', "$.x") == 9007199254740993  # 2**53 + 1, exact
    assert lg('{"x": -9223372036854775809}', "$.x") == -9223372036854775809
    assert lg(DOC, "$.s", 42) == 42
    assert lg(DOC, "$.missing", -1) == -1
    for bad in (None, 1.5, "1"):
        with pytest.raises(TypeError):
            lg(DOC, "$.a", bad)


def test_json_get_str():
    s = cymongoose.json_get_str
    assert s(DOC, "$.s") == "plain"
    assert s(DOC, "$.esc") == 'quote" backslash\\ nl\n tab\t'
    assert s(DOC, "$.uni") == "é中𝄞"
    assert s(DOC, "$.empty") == ""
    assert s(DOC, "$.ctrl") == "\x01"
    assert s(DOC, "$.a") is None  # not a string
    assert s(DOC, "$.b") is None
    # \u escapes, including ones Mongoose alone cannot decode and surrogate pairs.
    ascii_doc = json.dumps({"u": "é中𝄞 \x00 x"})  # ensure_ascii: all \u escapes
    assert "\\u" in ascii_doc
    assert s(ascii_doc, "$.u") == "é中𝄞 \x00 x"
    assert s('{"u": "\\u0041\\n"}', "$.u") == "A\n"
    assert s('{"u": "bad \\q escape"}', "$.u") is None


def test_json_data_types():
    doc = '{"k": "v"}'
    for data in (doc, doc.encode(), bytearray(doc.encode()), memoryview(doc.encode())):
        assert cymongoose.json_get(data, "$.k") == '"v"'
        assert cymongoose.json_get_str(data, "$.k") == "v"
    for fn in (
        cymongoose.json_get,
        cymongoose.json_get_num,
        cymongoose.json_get_bool,
        cymongoose.json_get_long,
        cymongoose.json_get_str,
    ):
        with pytest.raises(TypeError):
            fn(12, "$.k")
        with pytest.raises(TypeError):
            fn(None, "$.k")
        with pytest.raises(TypeError):
            fn(doc, b"$.k")
        with pytest.raises(TypeError):
            fn(doc, None)
        with pytest.raises(ValueError):
            fn(doc, "$.k\x00")


def test_json_large_document():
    doc = json.dumps({"items": list(range(100000)), "tail": "end"})
    assert cymongoose.json_get_long(doc, "$.items[99999]") == 99999
    assert cymongoose.json_get_str(doc, "$.tail") == "end"


# -- RPC ----------------------------------------------------------------------------------


def call(rpc, frame):
    out = rpc.process(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))
    return json.loads(out) if out else out


@pytest.fixture
def rpc():
    r = Rpc()

    def add(req):
        params = json.loads(req.frame)["params"]
        req.ok(json.dumps(params[0] + params[1]))

    def echo(req):
        req.ok(json.dumps(json.loads(req.frame).get("params")))

    def fail(req):
        req.err(-32000, 'custom "quoted" \x01 ☃ failure')

    r.add("sum", add)
    r.add("echo", echo)
    r.add("fail", fail)
    return r


def test_rpc_ok(rpc):
    assert call(rpc, {"id": 1, "method": "sum", "params": [2, 3]}) == {"id": 1, "result": 5}
    assert call(rpc, {"id": "abc", "method": "echo", "params": {"x": ["é", None]}}) == {
        "id": "abc",
        "result": {"x": ["é", None]},
    }
    assert call(rpc, b'{"id":7,"method":"sum","params":[1,1]}') == {"id": 7, "result": 2}
    raw = rpc.process('{"id":1,"method":"sum","params":[2,3]}')
    assert raw == '{"id":1,"result":5}'


def test_rpc_err_escapes_message(rpc):
    resp = call(rpc, {"id": 2, "method": "fail"})
    assert resp == {"id": 2, "error": {"code": -32000, "message": 'custom "quoted" \x01 ☃ failure'}}


def test_rpc_unknown_method(rpc):
    resp = call(rpc, {"id": 3, "method": "nope"})
    assert resp["id"] == 3
    assert resp["error"]["code"] == -32601
    assert "nope" in resp["error"]["message"]
    # A method name that would break naive JSON output.
    resp = call(rpc, {"id": 4, "method": 'a"b\\c%s%n'})
    assert resp["error"]["code"] == -32601
    assert 'a"b\\c%s%n' in resp["error"]["message"]


def test_rpc_handler_raises():
    r = Rpc()

    def boom(req):
        raise ValueError('went wrong: "%s" \n')

    r.add("boom", boom)
    resp = call(r, {"id": 5, "method": "boom"})
    assert resp == {"id": 5, "error": {"code": -32603, "message": 'went wrong: "%s" \n'}}


def test_rpc_handler_raises_after_answering():
    r = Rpc()

    def answer_then_raise(req):
        req.ok("true")
        raise RuntimeError("late")

    r.add("m", answer_then_raise)
    assert call(r, {"id": 1, "method": "m"}) == {"id": 1, "result": True}


def test_rpc_handler_base_exception_propagates():
    r = Rpc()

    def stop(req):
        raise KeyboardInterrupt

    r.add("stop", stop)
    with pytest.raises(KeyboardInterrupt):
        r.process('{"id":1,"method":"stop"}')


def test_rpc_handler_not_answering():
    r = Rpc()
    r.add("silent", lambda req: None)
    resp = call(r, {"id": 6, "method": "silent"})
    assert resp["id"] == 6 and resp["error"]["code"] == -32603


def test_rpc_double_answer_and_late_answer():
    r = Rpc()
    kept = []
    errors = []

    def twice(req):
        req.ok("1")
        for fn in (lambda: req.ok("2"), lambda: req.err(1, "x")):
            try:
                fn()
            except RuntimeError as exc:
                errors.append(str(exc))
        kept.append(req)

    r.add("twice", twice)
    assert call(r, {"id": 1, "method": "twice"}) == {"id": 1, "result": 1}
    assert len(errors) == 2
    # "already sent" is the 0.2.x phrase: code matching on it keeps working.
    assert all("already sent" in e for e in errors), errors
    req = kept[0]
    assert isinstance(req, RpcReq)
    assert json.loads(req.frame) == {"id": 1, "method": "twice"}  # still readable
    with pytest.raises(RuntimeError):
        req.ok("3")
    with pytest.raises(RuntimeError):
        req.err(1, "late")


def test_rpc_notification_returns_empty(rpc):
    calls = []
    rpc.add("note", lambda req: calls.append(req.frame) or req.ok("null"))
    assert rpc.process('{"method":"note","params":[1]}') == ""
    assert calls == ['{"method":"note","params":[1]}']
    assert rpc.process('{"method":"nope"}') == ""
    assert rpc.process('{"method":"fail"}') == ""


def test_rpc_invalid_frames(rpc):
    resp = call(rpc, "this is not json")
    assert resp == {"id": None, "error": {"code": -32700, "message": "Parse error"}}
    resp = call(rpc, {"id": 9, "params": []})
    assert resp["id"] == 9 and resp["error"]["code"] == -32600
    resp = call(rpc, {"id": 10, "method": 5})
    assert resp["id"] == 10 and resp["error"]["code"] == -32600
    assert call(rpc, "") == {"id": None, "error": {"code": -32700, "message": "Parse error"}}
    with pytest.raises(TypeError):
        rpc.process(None)
    with pytest.raises(TypeError):
        rpc.process(3)


def test_rpc_glob_patterns_and_methods():
    r = Rpc()
    seen = []
    r.add("user.*", lambda req: (seen.append("user.*"), req.ok('"glob"')))
    r.add("user.get", lambda req: (seen.append("user.get"), req.ok('"exact"')))
    assert r.methods == ["user.*", "user.get"]
    # Mongoose matches the newest registration first (mg_rpc_add prepends).
    assert call(r, {"id": 1, "method": "user.get"})["result"] == "exact"
    assert call(r, {"id": 2, "method": "user.set"})["result"] == "glob"
    # Mongoose globs: '*' stops at '/', '#' does not.
    assert call(r, {"id": 3, "method": "user.a/b"})["error"]["code"] == -32601
    assert call(r, {"id": 3, "method": "other"})["error"]["code"] == -32601
    r.add("tree/#", lambda req: req.ok('"tree"'))
    assert call(r, {"id": 3, "method": "tree/a/b"})["result"] == "tree"
    # Re-registering replaces the handler and keeps the list of patterns unchanged.
    r.add("user.*", lambda req: req.ok('"glob2"'))
    assert r.methods == ["user.*", "user.get", "tree/#"]
    assert call(r, {"id": 4, "method": "user.set"})["result"] == "glob2"


def test_rpc_add_validation():
    r = Rpc()
    with pytest.raises(TypeError):
        r.add(b"m", lambda req: None)
    with pytest.raises(TypeError):
        r.add("m", "not callable")
    with pytest.raises(ValueError):
        r.add("m\x00", lambda req: None)
    assert r.methods == []


def test_rpc_req_answer_types():
    r = Rpc()
    errors = []

    def h(req):
        for fn in (
            lambda: req.ok(None),
            lambda: req.ok(b"1"),
            lambda: req.err("1", "m"),
            lambda: req.err(1, None),
        ):
            try:
                fn()
            except TypeError:
                errors.append(1)
        req.ok("[1]")

    r.add("h", h)
    assert call(r, {"id": 1, "method": "h"}) == {"id": 1, "result": [1]}
    assert len(errors) == 4


def test_rpc_nested_process_and_many_calls():
    r = Rpc()

    def outer(req):
        inner = r.process('{"id":99,"method":"inner"}')
        req.ok(inner)

    r.add("outer", outer)
    r.add("inner", lambda req: req.ok('"in"'))
    assert call(r, {"id": 1, "method": "outer"}) == {"id": 1, "result": {"id": 99, "result": "in"}}
    big = "x" * 100000
    r.add("big", lambda req: req.ok(json.dumps(big)))
    for i in range(200):
        assert call(r, {"id": i, "method": "big"}) == {"id": i, "result": big}


def test_rpc_handlers_kept_alive_and_freed():
    # The C list borrows the handler; the Rpc keeps it alive until the Rpc is gone.
    import weakref

    class H:
        def __call__(self, req):
            req.ok("1")

    r = Rpc()
    h = H()
    ref = weakref.ref(h)
    r.add("m", h)
    del h
    gc.collect()
    assert ref() is not None
    assert call(r, {"id": 1, "method": "m"}) == {"id": 1, "result": 1}
    del r
    gc.collect()
    assert ref() is None


def test_rpc_req_cannot_be_constructed():
    with pytest.raises(TypeError):
        RpcReq()
