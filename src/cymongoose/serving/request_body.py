"""What the servers ask the core about a request body the app has not read."""

from __future__ import annotations

from .._mongoose import Connection, RequestBodyTooLarge

__all__ = ["body_refusal"]


def body_refusal(conn: Connection) -> RequestBodyTooLarge | None:
    """The core's refusal of this request's body (past max_body_size: it answered 413, or
    closed once the response had started), else None. An app may answer before its reads
    would have told it, so a response the core refuses asks this first."""
    try:
        conn.body_read(0)
    except RequestBodyTooLarge as exc:
        return exc
    except (RuntimeError, OSError):  # closed, or broken framing: not a refusal
        pass
    return None
