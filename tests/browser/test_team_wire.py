"""bench/team.py's wire sessions (``--client wire``) switch customers as the browser does: the server's run answers
the customer typed, with the page's other settings kept, so that the team figures they give are of real switches.

No browser is used; the demo's server is the browser tests' shared one (tests/browser/conftest.py)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from urllib.parse import parse_qs

import pytest

from tests.browser.served import ROOT

pytestmark = pytest.mark.browser


def team():
    """bench/team.py as a module (it puts bench/ on the path for its own imports; taken off again here)."""
    before = list(sys.path)
    spec = importlib.util.spec_from_file_location("bench_team", ROOT / "bench" / "team.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = before
    return module


def test_a_wire_session_switches_like_the_browser_and_keeps_the_pages_settings(server):
    bench = team()

    async def session():
        wire = bench.Wire(server)
        try:
            opened = await wire.open(f"{server}/?customer=C00017&baseline=median&steps=32")
            first = parse_qs(wire.query)
            switches = [(await wire.switch(customer), parse_qs(wire.query)) for customer in ("C01234", "C02500")]
            return opened, first, switches, len(wire.finished)
        finally:
            await wire.close()

    (seconds, ok), first, switches, finished = asyncio.run(session())
    assert ok and seconds > 0
    assert first["customer"] == ["C00017"] and first["baseline"] == ["median"] and first["steps"] == ["32"]
    for ((seconds, ok), query), customer in zip(switches, ("C01234", "C02500")):
        assert ok and 0 < seconds < bench.TIMEOUT_S  # the new customer's heatmap arrived, no error shown
        assert query["customer"] == [customer]
        # every other setting as the deep link set it: the widgets' states went back as the browser sends them
        assert {k: v for k, v in query.items() if k != "customer"} == {
            k: v for k, v in first.items() if k != "customer"}
    assert finished == 3  # each run was read to its end before the next request
