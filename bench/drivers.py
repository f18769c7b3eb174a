"""The What drives churn page from a big store, in a real browser (not a test): how long from
navigation to the last chart drawn, and what ``explain.drivers`` costs from the store and from its summary.

    python3 bench/drivers.py                                   # 100,000 customers of the demo's shape
    python3 bench/drivers.py --shape year                      # 20,000 x (40 static + 365 days x 24)
    python3 bench/drivers.py --shape year --keep DIR           # build (or reuse) the bundle and its store in DIR
    python3 bench/drivers.py --customers 20000 --visits 3
    python3 bench/drivers.py --customers 1000000 --keep DIR  # 1,000,000 of the demo's shape (raised table limits)
    python3 bench/drivers.py --keep DIR --visits 3 --before /tmp/before   # and an earlier checkout, interleaved

Builds, with no model call:

- a bundle: ``--shape demo``: N customers shaped like the demo (9 static features, 12 months x 6),
  the demo's own table generator and model file; ``--shape year``: ``bench/big_bundle.py``'s
  generator (40 static, 365 days x 24, histories padded at the start, an untrained LSTM), opened
  with its raised table limits;
- a finished batch store of every customer written through the store's own writer
  (``explain.batch.format.write_chunk``; the page's default settings in its manifest): the
  attributions of a linear stand-in with planted drivers (weight x (value - mean value); padded
  days no data), predictions its sigmoid. Its rows, seconds and size on disk are printed.

Then it times, in one run:

- ``compute``: ``explain.drivers(bundle)`` in this process, first from the store (which writes the
  summary next to it, ``<store>.drivers-<key>.npz``), then from that summary (what the page, the
  launcher's warm-up and the CLI read afterwards);
- ``page``: ``explain serve``'s launcher on that bundle (it opens the bundle, scores every customer
  and reads the summary into the cache while Streamlit starts); Chromium (1280x720) opens
  ``/drivers`` in a new browser context per visit; the time from ``page.goto`` to every chart of
  the page drawn (five Plotly graphs holding data) and the script run finished; then a click in the
  sidebar from the Customer page back to the page. Visit 1 is the first of a fresh browser
  (Streamlit's scripts and the chart library are fetched); the others reuse nothing but the
  server's cache, as a second user would.

It prints each visit's time and the server's own script run time (``EXPLAIN_TIMING``), the date and the load
average at the start and the end. ``--before DIR`` (an earlier checkout: ``git worktree add DIR REV``) serves the
same bundle from that checkout too, both servers at once, and visits them in turn (before, new, before, ...), so
that the two are compared under the same load; it prints the ratio of the medians of the sidebar clicks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from latency import CHROMIUM, CHROMIUM_ARGS, COMMANDS, Server, machine  # noqa: E402

from explain.batch.format import MANIFEST, completed, new_manifest, write_chunk, write_json, write_success  # noqa: E402
from explain.bundle.load import load_bundle  # noqa: E402
from explain.core.settings import Settings  # noqa: E402
from explain.demo import churn  # noqa: E402
from explain.modelfile.limits import DEFAULT_LIMITS, Limits, parse_limits  # noqa: E402

CHUNK = 5_000
YEAR_CHUNK = 500  # customers per chunk of the year store (500 x 8,800 rows)
YEAR_PERIODS, YEAR_FEATURES, YEAR_STATIC = 365, 24, 40
CHARTS = 5  # ranking, beeswarm, segments, dependence, time profile
DRAWN = f"""() => !document.querySelector('[data-testid=stStatusWidget]') &&
  Array.from(document.querySelectorAll('[class*="st-key-plot-drivers_"] .js-plotly-plot'))
    .filter(g => (g._fullData || []).length).length >= {CHARTS}"""
IDLE = "() => !document.querySelector('[data-testid=stStatusWidget]') && document.querySelector('.js-plotly-plot')"
# the linear stand-in of the demo's rule: weight per static feature, per temporal (feature, months)
STATIC_WEIGHTS = {"contract_month_to_month": 2.0, "tenure_months": -0.045}
TEMPORAL_WEIGHTS = {"support_calls": ((9, 12, 1.2 / 3), (0, 9, -1.2 / 9)),
                    "data_usage_gb": ((9, 12, -5.0 / 24), (0, 9, 5.0 / 72)),
                    "late_payments": ((6, 12, 0.9),)}
SCALE = 0.12  # log-odds to probability near the base rate: p (1 - p) at p ~ 0.2


def build_bundle(folder: Path, n: int) -> None:
    static, temporal, _ = churn.make_demo_tables(n, seed=11)
    folder.mkdir(parents=True)
    static.to_parquet(folder / "static.parquet", index=False)
    temporal.to_parquet(folder / "temporal.parquet", index=False)
    shutil.copy(ROOT / "bundles" / "demo" / "model.keras", folder / "model.keras")
    config = json.loads((ROOT / "bundles" / "demo" / "bundle.json").read_text())
    (folder / "bundle.json").write_text(json.dumps(config))


def planted_weights(bundle, shape: str) -> tuple[np.ndarray, np.ndarray]:
    """(static weights (S,), temporal weights (T, F)) of the linear stand-in."""
    s, t, f = bundle.n_static, bundle.n_periods, bundle.n_temporal
    static_w, temporal_w = np.zeros(s), np.zeros((t, f))
    if shape == "demo":
        static_w = np.array([STATIC_WEIGHTS.get(c, 0.0) for c in bundle.static_features])
        for j, column in enumerate(bundle.temporal_features):
            for first, last, weight in TEMPORAL_WEIGHTS.get(column, ()):
                temporal_w[first:last, j] = weight
        return static_w, temporal_w
    static_w[:3] = (1.5, -1.0, 0.6)            # year: three static drivers,
    temporal_w[-30:, 0] = 0.08                 # the last 30 days of the first daily feature,
    temporal_w[-90:, 1] = -0.03                # the last 90 days of the second,
    temporal_w[:, 2] = 0.004                   # the whole year of the third, a little each day
    return static_w, temporal_w


def build_store(bundle, out: Path, shape: str = "demo", chunk_size: int = CHUNK) -> float:
    """A finished store of every customer of ``bundle`` (the stand-in's attributions, written
    through the store's own writer, ``explain.batch.format.write_chunk``); seconds."""

    start = time.perf_counter()
    ids = [str(i) for i in bundle.ids]
    settings = Settings().resolved(bundle.output_names)
    manifest = new_manifest(bundle, ids, settings, chunk_size)
    out.mkdir(parents=True)
    (out / "_summary").mkdir()
    write_json(out / MANIFEST, manifest)
    static_w, temporal_w = planted_weights(bundle, shape)
    static_mean, temporal_mean = bundle.static.mean(axis=0), bundle.temporal.mean(axis=0)
    inputs = [v.key for v in _views(bundle)]
    summaries = []
    for chunk, at in enumerate(range(0, len(ids), chunk_size)):
        rows = slice(at, at + chunk_size)
        k = len(ids[rows])
        xs, xt = bundle.static[rows].astype(np.float64), bundle.temporal[rows].astype(np.float64)
        a_s = SCALE * static_w * (xs - static_mean)            # (k, S)
        a_t = SCALE * temporal_w * (xt - temporal_mean)        # (k, T, F)
        if shape != "demo":  # padded days (the mask value 0 in every feature): no data
            pad = (xt == 0).all(axis=2)
            a_t[pad], xt[pad] = np.nan, np.nan
        score = -1.4 + (a_s.sum(axis=1) + np.nansum(a_t, axis=(1, 2))) / SCALE
        prediction = 1 / (1 + np.exp(-score))
        base = 1 / (1 + np.exp(1.4))
        arrays = {inputs[0]: a_s, inputs[1]: a_t.reshape(k, -1)}  # a compact store (format 3), NaN = no data
        summary = pd.DataFrame({"customer_id": ids[rows], "prediction": prediction,
                                "baseline_prediction": np.full(k, base),
                                "delta": prediction - base - a_s.sum(axis=1) - np.nansum(a_t, axis=(1, 2)),
                                "steps": np.full(k, 64, np.int64), "gradient_points": np.full(k, 64, np.int64),
                                "forward_points": np.zeros(k, np.int64)})
        write_chunk(out, manifest, chunk, arrays, summary)
        summaries.append(summary)
    write_json(out / MANIFEST, completed(manifest, summaries))
    write_success(out)
    return time.perf_counter() - start


def _views(bundle):
    from explain.analysis.report import input_views

    return input_views(bundle)


def visit(browser, url: str) -> tuple[float, float]:
    """(a new browser context opens /drivers, a click on the page in the sidebar from the Customer
    page of that session): seconds to the last chart drawn."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        start = time.perf_counter()
        page.goto(f"{url}/drivers")
        page.wait_for_function(DRAWN, timeout=600_000, polling=50)
        fresh = time.perf_counter() - start
        page.locator("[data-testid=stSidebarNav] a").filter(has_text="Customer").first.click()
        page.wait_for_timeout(500)
        page.wait_for_function(IDLE, timeout=600_000, polling=50)
        page.wait_for_timeout(1000)
        start = time.perf_counter()
        page.locator("[data-testid=stSidebarNav] a").filter(has_text="What drives churn").first.click()
        page.wait_for_function(DRAWN, timeout=600_000, polling=50)
        return fresh, time.perf_counter() - start
    finally:
        context.close()


def prepare(folder: Path, shape: str, customers: int) -> tuple[object, Limits]:
    """The bundle of ``shape`` in ``folder`` (built unless it is there) and the limits it opens with."""
    from big_bundle import LIMITS, generate

    if shape == "demo":
        if not (folder / "bundle.json").is_file():
            build_bundle(folder, customers)
        # 1,000,000 customers x 12 months is 96 million cells of temporal.parquet: over the default table limit
        limits = DEFAULT_LIMITS if customers * 12 * 8 <= DEFAULT_LIMITS.max_table_cells else parse_limits(list(LIMITS))
        return load_bundle(folder, limits=limits), limits

    if not (folder / "bundle.json").is_file():
        generate(folder, customers, YEAR_PERIODS, YEAR_FEATURES, YEAR_STATIC, seed=7)
    limits = parse_limits(list(LIMITS))
    return load_bundle(folder, limits=limits), limits


def measure_compute(bundle) -> tuple[list[float], object]:
    """Seconds of explain.drivers: from the store (the summary written next to it), then from that summary."""
    import explain

    for old in (Path(bundle.path) / "attributions").glob("*.drivers-*.npz"):
        old.unlink()
    seconds, d = [], None
    for _ in range(2):
        start = time.perf_counter()
        d = explain.drivers(bundle)
        seconds.append(time.perf_counter() - start)
    return seconds, d


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("demo", "year"), default="demo",
                        help="demo: 12 months x 6 + 9 static; year: 365 days x 24 + 40 static (bench/big_bundle.py)")
    parser.add_argument("--customers", type=int, default=None, help="default: 100,000 (demo), 20,000 (year)")
    parser.add_argument("--visits", type=int, default=4)
    parser.add_argument("--keep", type=Path, default=None, help="build (or reuse) the bundle and its store here")
    parser.add_argument("--before", type=Path, default=None,
                        help="an earlier checkout (git worktree add DIR REV): its server too, visits interleaved")
    args = parser.parse_args(argv)
    customers = args.customers or (100_000 if args.shape == "demo" else 20_000)
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {load()}")

    with tempfile.TemporaryDirectory(prefix="explain-drivers-bench-") as tmp:
        folder = args.keep or Path(tmp) / "bundle"
        start = time.perf_counter()
        bundle, limits = prepare(folder, args.shape, customers)
        print(f"machine: {machine().replace('1400x1000', '1280x720')}")
        print(f"bundle: {bundle.n_customers:,} customers, {bundle.n_static} static, {bundle.n_periods} x "
              f"{bundle.n_temporal} temporal; built and loaded in {time.perf_counter() - start:.1f} s")
        store = folder / "attributions" / "bench"
        rows = bundle.n_customers * (bundle.n_static + bundle.n_periods * bundle.n_temporal)
        if not (store / "_SUCCESS").is_file():
            shutil.rmtree(store, ignore_errors=True)
            seconds = build_store(bundle, store, args.shape, CHUNK if args.shape == "demo" else YEAR_CHUNK)
            size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
            print(f"store: {rows:,} rows written in {seconds:.1f} s through the store writer, {size / 1e9:.2f} GB on "
                  f"disk (no model call)")
        computes, d = measure_compute(bundle)
        summary = next((Path(bundle.path) / "attributions").glob("bench.drivers-*.npz"))
        print(f"compute: explain.drivers from the store {computes[0]:.2f} s (writes the summary, "
              f"{summary.stat().st_size / 1e6:.1f} MB), from the summary {computes[1]:.2f} s "
              f"({len(d.segments)} segments; top 5: {', '.join(r.feature.name for r in d.ranking[:5])})")
        del bundle, d
        roots = {"before": args.before.resolve(), "new": ROOT} if args.before else {"new": ROOT}
        results = serve_and_visit(folder, limits, Path(tmp), roots, args.visits)
        for name, (times, runs, healthy) in results.items():
            if len(results) > 1:
                print(f"{name} ({roots[name]}):")
            report(times, runs, healthy, computes[1])
        if args.before:
            clicks = {name: statistics.median(c for _, c in times) for name, (times, _, _) in results.items()}
            print(f"sidebar click, median: before {clicks['before']:.2f} s, new {clicks['new']:.2f} s, "
                  f"before / new {clicks['before'] / clicks['new']:.2f}")
        print(f"uptime at the end: {load()}")
    return 0


def serve_and_visit(folder: Path, limits: Limits, tmp: Path, roots: dict, visits: int) -> dict:
    """Each checkout of ``roots`` (name: its folder) serving ``folder`` with ``explain serve``'s launcher, all at
    once; Chromium visits them in turn, ``visits`` times: name -> (visit times, the server's script runs of the
    page, seconds from the server's start to the first visit)."""
    from playwright.sync_api import sync_playwright

    # explain serve's launcher with the app's own arguments after Streamlit's ("-- --limit FIELD=VALUE ...")
    app_args = [w for field in limit_fields(limits) for w in ("--limit", field)]
    COMMANDS["serve-limits"] = ["-c", "import runpy, sys; sys.argv = ['ui/launch.py', *sys.argv[1:], '--', "
                                f"*{app_args!r}]; runpy.run_path('ui/launch.py', run_name='__main__')"]
    servers = {name: Server(f"drivers-{name}", {"EXPLAIN_BUNDLE": str(folder), "EXPLAIN_STORES": str(tmp / "stores")},
                            tmp, how="serve-limits", root=root) for name, root in roots.items()}
    try:
        for server in servers.values():
            server.wait_healthy(900)
        started = time.perf_counter()
        times = {name: [] for name in servers}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(visits):  # interleaved: each checkout's k-th visit under the same load
                for name, server in servers.items():
                    times[name].append(visit(browser, server.url))
            browser.close()
        return {name: (times[name], [s for page, s in server.timings() if page == "drivers"],
                       started - server.started) for name, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()


def load() -> str:
    """``uptime``'s load averages."""
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def limit_fields(limits: Limits) -> list[str]:
    """The ``--limit FIELD=VALUE`` words of the limits that differ from the defaults."""
    return [f"{f.name}={getattr(limits, f.name)}" for f in fields(Limits)
            if getattr(limits, f.name) != getattr(DEFAULT_LIMITS, f.name)]


def report(times, runs, healthy: float, compute: float) -> None:
    print(f"page (the server was healthy {healthy:.1f} s after its start; server script runs of "
          f"the page: {', '.join(f'{r:.2f}' for r in runs)} s):")
    for k, (fresh, click) in enumerate(times):
        print(f"  visit {k + 1}: new browser context -> /drivers {fresh:.2f} s; sidebar click from the Customer "
              f"page {click:.2f} s (to the last chart drawn)")
    later = [f for f, _ in times[1:]] or [times[0][0]]
    clicks = [c for _, c in times]
    print(f"medians: new context (visits 2..{len(times)}) {statistics.median(later):.2f} s, sidebar click "
          f"{statistics.median(clicks):.2f} s, all {len(clicks)} clicks: {', '.join(f'{c:.2f}' for c in clicks)} s; "
          f"first visit / later visits {times[0][0] / statistics.median(later):.2f}; explain.drivers from the "
          f"summary {compute:.2f} s")


if __name__ == "__main__":
    sys.exit(main())
