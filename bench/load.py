"""Load figure of the dashboard: N simulated analysts on one running app (not a timed test).

    python bench/load.py                      # 4 users for 60 s on the demo bundle
    python bench/load.py --users 8 --seconds 120

Starts ``streamlit run app.py`` on a free loopback port, then drives N browser tabs of
Debian's Chromium (Playwright, ``/usr/bin/chromium``; nothing is downloaded) at once. Each
user opens a deep link to a random customer (a fresh attribution: customers rarely repeat,
so the cache rarely helps) and waits until the page has drawn its heatmap and finished
running. Meanwhile a thread polls ``/_stcore/health`` every 0.25 s with a 1 s timeout.
Prints requests served, p50/p95 latency of a page with a new attribution, errors (pages
that showed an error or timed out), and whether the health check always answered within 1 s.
Traffic goes to 127.0.0.1 only, and the run stops by itself after --seconds.

    python bench/load.py --hostile            # issue 25: one visitor uploads each hostile file

With --hostile, one visitor uploads each of issue 25's hostile files (with an otherwise valid 30-customer
bundle) on the Data & model page, while another polls /_stcore/health every 0.1 s. Prints, per file: the
seconds from "Check and open" to the refusal, the refusal's length (characters shown), the server's RSS
growth while it was handled (psutil, sampled every 20 ms) and the health checks' median and slowest latency
meanwhile.

Before the clock starts, one page is opened and its time printed as the cold start: the first
session imports TensorFlow, opens the bundle and compiles the IG function (seconds, once per
server process). The simulated users' browsers run here, on the server's cores (real users'
browsers run elsewhere): on a small machine most of the latency is Chromium loading and drawing
N dashboards. --browser-cpus 1 confines Chromium to core 1 (``taskset``; Chromium resets the
niceness of its processes but not their CPU affinity), so that the server has core 0 to itself.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import random
import socket
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(port: int, bundle: str | None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true"]
    if bundle:
        cmd += ["--", "--bundle", bundle]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_healthy(base: str, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the app did not become healthy")


class HealthProbe(threading.Thread):
    def __init__(self, base: str, every: float = 0.25):
        super().__init__(daemon=True)
        self.base, self.stop, self.latencies, self.failures = base, threading.Event(), [], 0
        self.every = every

    def run(self):
        while not self.stop.is_set():
            start = time.perf_counter()
            try:
                with urllib.request.urlopen(f"{self.base}/_stcore/health", timeout=1) as r:
                    ok = r.status == 200
            except OSError:
                ok = False
            self.latencies.append(time.perf_counter() - start)
            self.failures += not ok
            self.stop.wait(self.every)


async def open_customer(page, base, customer, steps) -> tuple[float, bool]:
    """Open a deep link to ``customer``; (seconds until drawn and idle, no error shown)."""
    start = time.perf_counter()
    try:
        await page.goto(f"{base}/?customer={customer}&steps={steps}", timeout=60_000)
        await page.wait_for_selector(".js-plotly-plot .heatmaplayer, .js-plotly-plot", timeout=60_000)
        await page.wait_for_function(
            "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
        failed = await page.query_selector("[data-testid='stException'], [data-testid='stAlertContentError']")
        return time.perf_counter() - start, failed is None
    except Exception:  # a timeout counts as an error
        return time.perf_counter() - start, False


async def user(browser, base, ids, deadline, results, seed, steps):
    rng = random.Random(seed)
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    try:
        while time.monotonic() < deadline:
            results.append(await open_customer(page, base, rng.choice(ids), steps))
    finally:
        await context.close()


def chromium_executable(cpus: str) -> str:
    """/usr/bin/chromium, or a wrapper script that starts it under ``taskset -c CPUS``."""
    if not cpus:
        return "/usr/bin/chromium"
    wrapper = Path(tempfile.mkdtemp(prefix="load-chromium-")) / "chromium"
    wrapper.write_text(f'#!/bin/sh\nexec taskset -c {cpus} /usr/bin/chromium "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


async def drive(base, ids, users, seconds, steps, cpus, on_start):
    from playwright.async_api import async_playwright

    results: list[tuple[float, bool]] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_executable(cpus), args=CHROMIUM_ARGS)
        warm = await browser.new_context(viewport={"width": 1400, "height": 1000})
        cold = await open_customer(await warm.new_page(), base, ids[0], steps)
        await warm.close()
        on_start()
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(user(browser, base, ids, deadline, results, i, steps) for i in range(users)))
        await browser.close()
    return cold, results


def hostile_files(folder: Path) -> dict[str, dict[str, Path]]:
    """{case: {upload name: file}}: a valid 30-customer bundle with one hostile file in place of its own."""
    sys.path.insert(0, str(ROOT))
    from tests.support import hostile as H

    small = H.small_bundle(ROOT / "bundles" / "demo", folder / "small")
    base = {name: small / name for name in ("model.keras", "static.csv", "temporal.csv", "bundle.json")}
    made = folder / "hostile"
    made.mkdir()

    def case(name, path, drop=()):
        files = {k: v for k, v in base.items() if k not in drop}
        files[name] = path
        return files

    (made / "deep").mkdir()
    deep = made / "deep" / "bundle.json"
    deep.write_bytes(H.deep_json(200_000))
    return {
        "config.json with 1,000,000 refused entries": case("model.keras", H.refused_entries_file(
            made / "refused1m.keras", 10**6)),
        "config.json with 15,000 refused entries": case("model.keras", H.refused_entries_file(
            made / "refused15k.keras", 15_000)),
        "Sequential of 2,000 layers": case("model.keras", H.long_sequential_file(made / "long.keras", 2000)),
        "static.parquet of 20 M rows of zeros": case("static.parquet", H.zeros_parquet(
            made / "static.parquet", 20 * 10**6), drop=("static.csv",)),
        "static.csv of 12 M rows (48 MB)": case("static.csv", H.long_csv(made / "static.csv", 12 * 10**6)),
        "bundle.json nested 200,000 deep": case("bundle.json", deep),
    }


class RssProbe(threading.Thread):
    """The server's peak RSS since :meth:`reset`, sampled every 20 ms."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        import psutil

        self.process, self.stop, self.base, self.peak = psutil.Process(pid), threading.Event(), 0, 0

    def reset(self) -> None:
        self.base = self.peak = self.process.memory_info().rss

    def run(self):
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, self.process.memory_info().rss)


def hostile(base: str, server_pid: int) -> None:
    """One visitor uploads each hostile file; another's health checks and the server's RSS are measured."""
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="load-hostile-"))
    cases = hostile_files(folder)
    probe, rss = HealthProbe(base, every=0.1), RssProbe(server_pid)
    probe.start()
    rss.start()
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for name, files in cases.items():
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(f"{base}/data", timeout=120_000)
            page.wait_for_selector("[data-testid=stFileUploaderDropzoneInput]", state="attached", timeout=120_000)
            staged = folder / "staged" / name.split(" ")[0].replace(".", "_") / str(len(rows))
            staged.mkdir(parents=True)
            for upload_name, path in files.items():  # the uploader sends the files under these names
                (staged / upload_name).symlink_to(path)
            sent = len(probe.latencies)
            page.locator("[data-testid=stFileUploaderDropzoneInput]").set_input_files(
                [str(staged / n) for n in files])
            button = page.get_by_role("button", name="Check and open")
            button.wait_for(timeout=120_000)
            page.wait_for_function("() => ![...document.querySelectorAll('button')].some("
                                   "b => b.innerText.includes('Check and open') && b.disabled)", timeout=120_000)
            rss.reset()
            mark = len(probe.latencies)
            start = time.perf_counter()
            button.click()
            page.get_by_text("The upload was not opened").wait_for(timeout=300_000)
            seconds = time.perf_counter() - start
            shown = page.evaluate("() => [...document.querySelectorAll('[data-testid=stAlertContentError]')]"
                                  ".map(e => e.innerText).join('\\n')")
            during = probe.latencies[mark:] or [float("nan")]
            transfer = probe.latencies[sent:mark] or [float("nan")]
            rows.append((name, seconds, len(shown), (rss.peak - rss.base) / 2**20, statistics.median(during),
                         max(during), max(transfer)))
            page.context.close()
        browser.close()
    probe.stop.set()
    rss.stop.set()
    print(f"{'hostile upload':42} {'refused in':>10} {'message':>8} {'RSS growth':>11} {'health p50':>11} "
          f"{'health max':>11} {'max sending':>12}")
    for name, seconds, chars, growth, p50, worst, sending in rows:
        print(f"{name:42} {seconds:9.2f}s {chars:7,}c {growth:9.0f}MB {p50 * 1000:9.0f}ms {worst * 1000:9.0f}ms "
              f"{sending * 1000:10.0f}ms")
    print(f"(health: while the server checked the files; max sending: while the browser sent them, before "
          f"'Check and open')\nhealth checks over the whole run (page loads included): {len(probe.latencies)}, "
          f"failed {probe.failures}, slowest {max(probe.latencies) * 1000:.0f} ms; every refusal within 10 s and "
          f"4 KB, RSS growth within 300 MB, health within 1 s while checking: "
          f"{all(r[1] <= 10 and r[2] <= 4096 and r[3] <= 300 and r[5] < 1 for r in rows)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--bundle", default=None, help="bundle folder (default: the demo)")
    parser.add_argument("--browser-cpus", default="",
                        help="cores for the simulated users' Chromium (a taskset list such as 1; default: every core)")
    parser.add_argument("--hostile", action="store_true", help="upload issue 25's hostile files instead (see above)")
    args = parser.parse_args()
    if args.hostile:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = start_app(port, args.bundle)
        try:
            wait_healthy(base)
            hostile(base, server.pid)
        finally:
            server.terminate()
            server.wait(timeout=20)
        return

    bundle = Path(args.bundle) if args.bundle else ROOT / "bundles" / "demo"
    with open(bundle / "static.csv", newline="") as fh:
        ids = [row["customer_id"] for row in csv.DictReader(fh)]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_app(port, args.bundle)
    try:
        wait_healthy(base)
        probe = HealthProbe(base)
        clock = {}

        def on_start():  # after the cold start: the probe and the clock measure the steady state
            probe.start()
            clock["started"] = time.monotonic()

        cold, results = asyncio.run(drive(base, ids, args.users, args.seconds, args.steps, args.browser_cpus,
                                          on_start))
        elapsed = time.monotonic() - clock["started"]
        probe.stop.set()
        probe.join()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    ok = sorted(t for t, good in results if good)
    errors = sum(1 for _, good in results if not good)
    q = statistics.quantiles(ok, n=20) if len(ok) >= 2 else [float("nan")] * 19
    print(f"{args.users} users for {elapsed:.0f} s, {args.steps} steps, {os.cpu_count()} cores, "
          f"browsers on {'core ' + args.browser_cpus if args.browser_cpus else 'every core'}")
    print(f"cold start (first page after the server started): {cold[0]:.2f} s{'' if cold[1] else ', FAILED'}")
    print(f"requests served: {len(ok)} ({len(ok) / elapsed:.2f}/s), errors: {errors}")
    print(f"latency of a page with a new attribution: p50 {statistics.median(ok) if ok else float('nan'):.2f} s, "
          f"p95 {q[18]:.2f} s")
    worst = max(probe.latencies) if probe.latencies else float("nan")
    print(f"/_stcore/health: {len(probe.latencies)} probes, {probe.failures} failed, slowest {worst * 1000:.0f} ms, "
          f"always within 1 s: {probe.failures == 0 and worst < 1.0}")


if __name__ == "__main__":
    main()
