"""What a server fixture hands a test: which server it is and where it listens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OURS = "cymongoose"
REFERENCE = "reference"


@dataclass
class Served:
    kind: str  # OURS or REFERENCE
    port: int
    rss_pid: Callable[[], int | str]  # the process whose memory serves the requests
    server: Any = None  # our WSGIServer (None for the reference)

    @property
    def ours(self) -> bool:
        return self.kind == OURS
