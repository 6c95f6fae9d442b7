"""`--env-file FILE`: KEY=VALUE lines set in the environment before the app is imported, as
uvicorn's `--env-file` does (and with its precedence: a variable already set is kept).

The lines are a `.env` file's: blank lines and `#` comments are skipped, `export KEY=VALUE`
is accepted, a value in single quotes is taken as it is, one in double quotes understands
`\\n`, `\\t`, `\\"` and `\\\\`, and an unquoted value ends at ` #` (a comment) with spaces
around it stripped. Nothing is expanded (`$HOME` stays `$HOME`). A line that is none of
these stops the server with its number, so a typo is not silently half-applied.

The server's own options were read before (the file is one of them), so `CYMONGOOSE_*`
lines configure nothing: they only reach the app, and a warning says so.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping

__all__ = ["load_env_file", "read_env_file"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


def _value(raw: str, where: str) -> str:
    raw = raw.strip()
    if raw[:1] == "'":
        end = raw.find("'", 1)
        if end < 0 or raw[end + 1:].strip()[:1] not in ("", "#"):
            raise ValueError(f"{where}: unterminated or trailing text after a '...' value")
        return raw[1:end]
    if raw[:1] == '"':
        out: list[str] = []
        i = 1
        while i < len(raw):
            ch = raw[i]
            if ch == "\\" and i + 1 < len(raw):
                out.append(_ESCAPES.get(raw[i + 1], "\\" + raw[i + 1]))
                i += 2
                continue
            if ch == '"':
                if raw[i + 1:].strip()[:1] not in ("", "#"):
                    break
                return "".join(out)
            out.append(ch)
            i += 1
        raise ValueError(f'{where}: unterminated or trailing text after a "..." value')
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def read_env_file(path: str) -> dict[str, str]:
    """The variables of `path`, in order; ValueError naming the line that is wrong, OSError
    when the file cannot be read."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[7:].lstrip()
        name, sep, raw = stripped.partition("=")
        name = name.strip()
        where = f"{path}, line {number}"
        if not sep or not _NAME.match(name):
            raise ValueError(f"{where}: not a KEY=VALUE line")
        out[name] = _value(raw, where)
    return out


def load_env_file(path: str, environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set the variables of `path` that `environ` (os.environ) does not have yet; the
    CYMONGOOSE_* names found there (they configure nothing, see the top)."""
    environ = os.environ if environ is None else environ
    ignored = []
    for name, value in read_env_file(path).items():
        if name.startswith("CYMONGOOSE_"):
            ignored.append(name)
        environ.setdefault(name, value)
    return ignored
