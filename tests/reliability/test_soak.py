"""The soak in short (make soak runs it for minutes, soak.py): every workload at half its
peak for a few seconds, with no failed request, no lost or mismatched message, and the
server's descriptors and threads back to their level before the load within 5 s."""

from __future__ import annotations

import shutil

import pytest

from . import soak

pytestmark = [
    pytest.mark.no_asan,  # subprocess servers of the normal build, under load
    pytest.mark.timeout(240),
    pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is installed by make test"),
]


@pytest.mark.parametrize("workload", soak.WORKLOADS)
def test_short_soak(workload: str) -> None:
    (outcome,) = soak.soak([workload], minutes=2 / 60, fraction=0.5,
                           phases=soak.Phases(peak=1, trial=0))
    assert outcome.operations > 0
    assert not outcome.failures, (workload, outcome.failures)
