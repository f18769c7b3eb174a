"""bench/latency.py lays a server start out part by part from the server's log (``explain-timing part=`` and
``run=`` lines, ``ui/frame``) and the browser's times: each part's seconds and when it ended after the command."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def latency():
    spec = importlib.util.spec_from_file_location("bench_latency", ROOT / "bench" / "latency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Logged:
    """A Server as far as the parts read it: its log, its start (wall clock) and when it answered."""

    def __init__(self, log: Path, started_wall: float, up: float):
        self.log_path, self.started_wall, self.up = log, started_wall, up


def test_a_start_part_by_part_from_the_servers_log(tmp_path):
    bench = latency()
    log = tmp_path / "server.log"
    log.write_text("  You can now view your Streamlit app in your browser.\n"
                   "explain-timing part=imports seconds=4.2500 at=1005.000\n"
                   "noise explain-timing without numbers\n"
                   "explain-timing part=bundle-open seconds=0.5000 at=1005.500\n"
                   "explain-timing run=customer seconds=2.0000 at=1007.250\n"
                   "explain-timing part=first-attribution seconds=1.5000 at=1007.000\n"
                   "explain-timing run=compare seconds=0.3000 at=1030.000\n")
    server = Logged(log, started_wall=1000.0, up=1.5)
    assert bench.Server.parts(server) == [("imports", 4.25, 5.0), ("bundle-open", 0.5, 5.5),
                                          ("first-attribution", 1.5, 7.0), ("page run customer", 2.0, 7.25),
                                          ("page run compare", 0.3, 30.0)]
    assert bench.Server.timings(server) == [("customer", 2.0), ("compare", 0.3)]  # the old reading still works
    row = {"draw": 0.25, "heatmap": 7.6, "total": 7.7}
    server.parts = lambda: bench.Server.parts(server)
    parts = bench.start_parts(server, row)
    assert [name for name, _, _ in parts] == ["streamlit up (health ok)", "imports", "bundle-open", "first-attribution",
                                              "page run customer", "draw (browser)", "first heatmap drawn",
                                              "first run finished"]  # a later page's run is not part of the start
    assert parts[0] == ("streamlit up (health ok)", 1.5, 1.5) and parts[-1] == ("first run finished", 7.7, 7.7)
    other = [(n, s * 3, e * 3) for n, s, e in parts]
    third = [(n, s * 2, e * 2) for n, s, e in parts]
    assert bench.median_parts([parts, other, third]) == [(n, s * 2, e * 2) for n, s, e in parts]
    text = bench.parts_text(parts)
    assert "imports" in text.splitlines()[1] and "4.25 s" in text.splitlines()[1] and "ends at    5.00 s" in text
