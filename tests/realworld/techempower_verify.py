"""TechEmpower's verify step: `verify(base_url)` asks each endpoint of an app the way the
benchmark's verifier does before timing it and returns the problems found (empty: good).

Every answer: status 200, `Server` and `Date` fields, a length (Content-Length or chunked).
- /json: application/json, exactly {"message": "Hello, World!"}.
- /plaintext: text/plain, exactly "Hello, World!".
- /db, /slowdb: one JSON object {"id", "randomNumber"} of integers in 1..10000.
- /queries and /updates: a JSON list of such objects, as many as asked: `queries` of 1, 20
  and 500 as given, 0 and "" and "foo" as 1, 501 as 500.
- /fortunes: text/html; charset=utf-8; the fortune table's 12 rows plus id 0 "Additional
  fortune added at request time.", sorted by message, each message escaped (the page is
  parsed, so any correct escaping passes; an unescaped <script> does not).
Spec values are written here again rather than imported from the apps, so an app and the
verifier cannot agree on a mistake; the table's rows come from the cluster that seeds them."""

from __future__ import annotations

import http.client
import json
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

from realworld.postgres_cluster import FORTUNES

HELLO = "Hello, World!"
ADDED_FORTUNE = (0, "Additional fortune added at request time.")
WORLD_ROWS = 10_000
# `queries` as sent -> how many rows the answer must hold.
QUERY_COUNTS = {"1": 1, "20": 20, "500": 500, "0": 1, "": 1, "foo": 1, "501": 500}
TIMEOUT_S = 30.0


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers  # names lower-cased
        self.body = body


def fetch(base_url: str, target: str) -> Answer:
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80,
                                      timeout=TIMEOUT_S)
    try:
        conn.request("GET", parts.path.rstrip("/") + target)
        resp = conn.getresponse()
        body = resp.read()
        return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    finally:
        conn.close()


def verify(base_url: str) -> list[str]:
    problems: list[str] = []
    problems += _check_json(base_url)
    problems += _check_plaintext(base_url)
    for path in ("/db", "/slowdb"):
        problems += _check_rows(base_url, path, None)
    for path in ("/queries", "/updates"):
        for sent, count in QUERY_COUNTS.items():
            problems += _check_rows(base_url, f"{path}?queries={sent}", count)
    problems += _check_fortunes(base_url)
    return problems


def _common(target: str, answer: Answer, content_type: str) -> list[str]:
    problems = []
    if answer.status != 200:
        problems.append(f"{target}: status {answer.status}: {answer.body[:200]!r}")
    for name in ("server", "date"):
        if not answer.headers.get(name):
            problems.append(f"{target}: no {name.title()} header")
    if "content-length" not in answer.headers and \
            answer.headers.get("transfer-encoding", "").lower() != "chunked":
        problems.append(f"{target}: neither Content-Length nor chunked")
    got = answer.headers.get("content-type", "").replace(" ", "").lower()
    if not got.startswith(content_type.replace(" ", "").lower()):
        problems.append(f"{target}: Content-Type {got!r}, want {content_type!r}")
    return problems


def _parsed(target: str, answer: Answer) -> tuple[Any, list[str]]:
    try:
        return json.loads(answer.body), []
    except ValueError:
        return None, [f"{target}: not JSON: {answer.body[:200]!r}"]


def _check_json(base_url: str) -> list[str]:
    answer = fetch(base_url, "/json")
    problems = _common("/json", answer, "application/json")
    value, bad = _parsed("/json", answer)
    if not bad and value != {"message": HELLO}:
        bad = [f"/json: {value!r}, want {{'message': {HELLO!r}}}"]
    return problems + bad


def _check_plaintext(base_url: str) -> list[str]:
    answer = fetch(base_url, "/plaintext")
    problems = _common("/plaintext", answer, "text/plain")
    if answer.body != HELLO.encode():
        problems.append(f"/plaintext: {answer.body[:200]!r}, want {HELLO!r}")
    return problems


def _world_problem(value: Any) -> str | None:
    if not isinstance(value, dict) or set(value) != {"id", "randomNumber"}:
        return f"{value!r} is not {{id, randomNumber}}"
    for key, number in value.items():
        if type(number) is not int or not 1 <= number <= WORLD_ROWS:
            return f"{key} {number!r} not an integer in 1..{WORLD_ROWS}"
    return None


def _check_rows(base_url: str, target: str, count: int | None) -> list[str]:
    """One world object (count None) or a list of `count` of them."""
    answer = fetch(base_url, target)
    problems = _common(target, answer, "application/json")
    value, bad = _parsed(target, answer)
    if bad:
        return problems + bad
    if count is None:
        rows = [value]
    elif not isinstance(value, list) or len(value) != count:
        size = len(value) if isinstance(value, list) else type(value).__name__
        return problems + [f"{target}: {size} rows, want a list of {count}"]
    else:
        rows = value
    for row in rows:
        problem = _world_problem(row)
        if problem:
            return problems + [f"{target}: {problem}"]
    return problems


class _FortuneTable(HTMLParser):
    """The (id, message) rows of the page's table, text unescaped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _check_fortunes(base_url: str) -> list[str]:
    answer = fetch(base_url, "/fortunes")
    problems = _common("/fortunes", answer, "text/html; charset=utf-8")
    try:
        page = answer.body.decode("utf-8")
    except UnicodeDecodeError:
        return problems + ["/fortunes: not UTF-8"]
    if not page.lstrip().lower().startswith("<!doctype html>"):
        problems.append("/fortunes: no <!DOCTYPE html> first")
    if "<script>" in page:
        problems.append("/fortunes: a message's <script> is not escaped")
    table = _FortuneTable()
    table.feed(page)
    table.close()
    got = [tuple(row) for row in table.rows if row]
    want = [(str(i), message) for i, message in
            sorted([*FORTUNES, ADDED_FORTUNE], key=lambda row: row[1])]
    if got != want:
        problems.append(f"/fortunes: rows {got!r}, want {want!r}")
    return problems
