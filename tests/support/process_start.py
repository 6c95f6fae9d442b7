"""How long a test allows for a Python process to start, on the interpreter running the suite.

CPython 3.13 built free-threaded locks an object again when the same thread already holds
its critical section (3.14 skips that: gh-114203), and each such re-lock spins through 40
sched_yield() calls before it gets the lock back. A buffered file's close() does it once (it
flushes under the lock it holds), so importing a module does it once: `python -c pass` makes
1,840 of those calls and a cymongoose worker (about 180 modules) some 7,000. On an idle
machine they cost microseconds. With every CPU busy each one hands the CPU to another task
for the rest of its slice: a worker replaced beside `stress-ng --cpu 2` and the test's own
load took 0.7 to 9 s to answer (once more than 12 s), against 0.35 s on the GIL build. The
CLI tests' children run on the suite's interpreter, so their waits scale with it."""

from __future__ import annotations

import sys
import sysconfig

SLOW_START = bool(sysconfig.get_config_var("Py_GIL_DISABLED")) and sys.version_info < (3, 14)

# Measured above: up to ~25x an unloaded start; the waits below are already well past that on
# the GIL build, so four times theirs covers the free-threaded 3.13 one.
_SLOW_START_FACTOR = 4.0


def start_bound(seconds: float) -> float:
    """A wait of `seconds` that includes starting a Python process, stretched where a start
    is slow under load (free-threaded 3.13)."""
    return seconds * _SLOW_START_FACTOR if SLOW_START else seconds
