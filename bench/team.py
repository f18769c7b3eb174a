"""A team of analysts on one server (issue 42): N browser sessions, each switching customer every 2 s.

    mkdir -p /tmp/team
    flock /tmp/team/browser.lock python3 bench/team.py --sessions 1,4,8,16
    flock /tmp/team/browser.lock python3 bench/team.py --sessions 8 --old /tmp/team/old   # new vs old, interleaved
    ... --steps auto          # settings a finished store of the demo answers (the dashboard's own background store)
    ... --browser-cpus 1      # the browsers on core 1 only (taskset), the server's core 0 to itself

Not a timed test: a figure to read with the machine's load. For each session count and each variant (``new``:
this checkout; ``old``: another checkout given by ``--old``, e.g. ``git worktree add --detach /tmp/team/old
f05f8ea``), interleaved (new, old, then old, new at the next count), it starts the dashboard (``streamlit run
app.py``, or ``explain serve``'s launcher with ``--serve``) on the demo or ``--bundle``, then drives Debian's
Chromium (/usr/bin/chromium, Playwright, nothing downloaded) with N sessions in one browser:

- each session opens the dashboard at its own first customer, then every ``--every`` seconds (2) types the next
  customer's id into the sidebar's customer box and presses Enter; a *switch* is timed from Enter to the new
  customer's heatmap drawn (its values differ from the last one's) and the script run finished (Streamlit's
  status widget gone). A switch that takes longer than the interval starts the next one at once. Customers are
  drawn at random per session (seeded) from the bundle's ids, so sessions rarely ask for one another's;
- ``/_stcore/health`` is polled every 0.25 s (1 s timeout: a slower answer counts as a failure) while the
  sessions switch;
- a new visitor (a fresh browser context) opens ``/`` once the switching has run ``--seconds / 3``: seconds until
  the first heatmap is drawn (the first page a colleague sees while the team works);
- the server's resident memory (its process and children) at the start of the switching and at its end.

Prints one row per (sessions, variant): switches timed, p50 / p95 / worst switch seconds, switches that failed
(an error shown or a timeout of 60 s), health-check p50 / worst / failures, the new visitor's first page, the
server's script runs (median and total seconds, from its ``EXPLAIN_TIMING`` lines: every run of the server's
life, the pages opened included), RSS, and the load average before and after; then the ratios new/old of p50
and worst per session count. ``--json`` writes every row to a file. Browser runs share the machine: wrap the
command in ``flock /tmp/team/browser.lock``.

Before the first measured run the bundle's store for What drives churn (the dashboard's background work at
launch, ``ui.stores``) is finished once into ``--stores`` (``EXPLAIN_STORES``, default /tmp/team/stores) by a
server started for that alone, so that no measured run shares its cores with that batch job.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from latency import HEATMAP, VIEWPORT, Server, load, machine  # noqa: E402
from load import CHROMIUM_ARGS, HealthProbe, chromium_executable  # noqa: E402

ROOT = HERE.parent
TIMEOUT_S = 60.0
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
FAILED = "[data-testid='stException'], [data-testid='stAlertContentError']"


def bundle_ids(folder: Path) -> list[str]:
    """The bundle's customer ids (its static table's id column)."""
    config = json.loads((folder / "bundle.json").read_text()) if (folder / "bundle.json").is_file() else {}
    column = config.get("id_column", "customer_id")
    if (folder / "static.parquet").is_file():
        import pyarrow.parquet as pq

        return [str(i) for i in pq.read_table(folder / "static.parquet", columns=[column]).column(0).to_pylist()]
    with open(folder / "static.csv", newline="") as fh:
        return [row[column] for row in csv.DictReader(fh)]


def rss_mb(pid: int) -> float:
    """Resident memory of the server and its children, MB."""
    import psutil

    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
        return sum(p.memory_info().rss for p in procs) / 2**20
    except psutil.Error:
        return float("nan")


async def drawn(page, before, timeout: float = TIMEOUT_S) -> bool:
    """Wait until a heatmap other than ``before`` is drawn and the run has finished; False if an error shows."""
    await page.wait_for_function(f"() => {{ const z = ({HEATMAP})(); return z && z !== {json.dumps(before)}; }}",
                                 polling="raf", timeout=timeout * 1000)
    await page.wait_for_function(IDLE, timeout=timeout * 1000)
    return await page.query_selector(FAILED) is None


async def first_page(browser, url: str) -> tuple[float, bool]:
    """A new visitor (fresh context) opens ``url``: (seconds to the first heatmap drawn and idle, no error)."""
    context = await browser.new_context(viewport=VIEWPORT)
    start = time.perf_counter()
    try:
        page = await context.new_page()
        await page.goto(url, timeout=TIMEOUT_S * 1000 * 3)
        ok = await drawn(page, None, TIMEOUT_S * 3)
        return time.perf_counter() - start, ok
    except Exception:  # noqa: BLE001 - a timeout is a failed first page
        return time.perf_counter() - start, False
    finally:
        await context.close()


async def switch(page, customer: str) -> tuple[float, bool]:
    """Type ``customer`` into the sidebar's customer box and press Enter: (seconds from Enter to drawn, ok)."""
    before = await page.evaluate(HEATMAP)
    box = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").filter(has_text="Customer (type").first
    await box.get_by_role("combobox").first.click()
    await page.keyboard.type(customer)
    start = time.perf_counter()
    await page.keyboard.press("Enter")
    try:
        ok = await drawn(page, before)
    except Exception:  # noqa: BLE001 - a timeout is a failed switch
        ok = False
    return time.perf_counter() - start, ok


class Run:
    """One (session count, variant): what its sessions measured."""

    def __init__(self):
        self.switches: list[tuple[float, bool]] = []
        self.opened: list[tuple[float, bool]] = []
        self.visitor: tuple[float, bool] = (float("nan"), False)


async def session(browser, url_of, ids, k: int, run: Run, clock: dict, args) -> None:
    rng = random.Random(1000 + k)
    context = await browser.new_context(viewport=VIEWPORT)
    try:
        page = await context.new_page()
        start = time.perf_counter()
        await page.goto(url_of(rng.choice(ids)), timeout=TIMEOUT_S * 3000)
        run.opened.append((time.perf_counter() - start, await drawn(page, None, TIMEOUT_S * 3)))
        await clock["all_open"].wait()
        await asyncio.sleep(k * args.every / max(1, args.n))  # the sessions' switches spread over the interval
        while time.monotonic() < clock["end"]:
            due = time.monotonic() + args.every
            run.switches.append(await switch(page, rng.choice(ids)))
            await asyncio.sleep(max(0.0, due - time.monotonic()))
    except Exception as error:  # noqa: BLE001 - a session that could not open counts as failed
        run.opened.append((float("nan"), False))
        print(f"  session {k}: {type(error).__name__}: {str(error)[:200]}", flush=True)
    finally:
        await context.close()


async def visitor(browser, url: str, run: Run, clock: dict, args) -> None:
    await clock["all_open"].wait()
    await asyncio.sleep(args.seconds / 3)
    run.visitor = await first_page(browser, url)


async def drive(server: Server, ids: list[str], args) -> tuple[Run, dict]:
    from playwright.async_api import async_playwright

    run, clock = Run(), {"all_open": asyncio.Event(), "end": float("inf")}
    url_of = lambda cid: f"{server.url}/?customer={cid}" + (f"&steps={args.steps}" if args.steps else "")  # noqa: E731
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_executable(args.browser_cpus), args=CHROMIUM_ARGS)
        cold = await first_page(browser, url_of(ids[0]))  # the server's first page: import, bundle, compile
        tasks = [asyncio.create_task(session(browser, url_of, ids, k, run, clock, args)) for k in range(args.n)]
        while len(run.opened) < args.n:
            await asyncio.sleep(0.05)
        probe, rss_start = HealthProbe(server.url), rss_mb(server.proc.pid)
        probe.start()
        clock["end"] = time.monotonic() + args.seconds
        clock["all_open"].set()
        await asyncio.gather(visitor(browser, server.url, run, clock, args), *tasks)
        probe.stop.set()
        probe.join()
        await browser.close()
    return run, {"cold": cold, "health": probe.latencies, "health_failures": probe.failures,
                 "rss_start": rss_start, "rss_end": rss_mb(server.proc.pid)}


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))]


def row_of(n: int, variant: str, run: Run, seen: dict, loads: tuple[str, str]) -> dict:
    times = [t for t, ok in run.switches if ok]
    return {
        "sessions": n, "variant": variant, "switches": len(times), "failed": sum(not ok for _, ok in run.switches),
        "p50": statistics.median(times) if times else float("nan"), "p95": quantile(times, 0.95),
        "worst": max(times, default=float("nan")),
        "opened p50": statistics.median([t for t, _ in run.opened]) if run.opened else float("nan"),
        "opened failed": sum(not ok for _, ok in run.opened),
        "health p50": statistics.median(seen["health"]) if seen["health"] else float("nan"),
        "health worst": max(seen["health"], default=float("nan")), "health failed": seen["health_failures"],
        "new visitor": run.visitor[0], "new visitor ok": run.visitor[1], "cold": seen["cold"][0],
        "server run p50": statistics.median(seen["server runs"]) if seen["server runs"] else float("nan"),
        "server runs s": sum(seen["server runs"]), "rss start MB": seen["rss_start"], "rss end MB": seen["rss_end"],
        "load before": loads[0],
        "load after": loads[1],
    }


def print_row(r: dict) -> None:
    print(f"{r['sessions']:>3} {r['variant']:4} switches {r['switches']:4} (failed {r['failed']}) "
          f"p50 {r['p50']:.2f} p95 {r['p95']:.2f} worst {r['worst']:.2f} s | health p50 "
          f"{r['health p50'] * 1000:.0f} worst {r['health worst'] * 1000:.0f} ms, failed {r['health failed']} | "
          f"new visitor {r['new visitor']:.1f} s{'' if r['new visitor ok'] else ' FAILED'} | sessions opened p50 "
          f"{r['opened p50']:.1f} s | server script runs p50 {r['server run p50']:.2f} s, "
          f"{r['server runs s']:.0f} s in all | RSS {r['rss start MB']:.0f} -> {r['rss end MB']:.0f} MB | "
          f"{r['load before']} -> {r['load after']}", flush=True)


def prepare_store(root: Path, env: dict, log_dir: Path, ids: list[str], timeout: float = 600.0) -> None:
    """Start a server once so that its background work finishes the bundle's store into ``EXPLAIN_STORES``."""
    stores = Path(env["EXPLAIN_STORES"])
    if any(stores.rglob("_SUCCESS")):
        return
    server = Server("prepare", env, log_dir, how="serve", root=root)
    try:
        server.wait_healthy()
        import urllib.request

        urllib.request.urlopen(f"{server.url}/?customer={ids[0]}", timeout=30).read()
        deadline = time.monotonic() + timeout
        while not any(stores.rglob("_SUCCESS")) and time.monotonic() < deadline:
            time.sleep(2)
        print(f"store prepared in {stores}: {any(stores.rglob('_SUCCESS'))}", flush=True)
    finally:
        server.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,4,8,16", help="session counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=40.0, help="switching time per run")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between a session's switches")
    parser.add_argument("--steps", default="", help="the sessions' steps (a deep link's steps=; default: the page's)")
    parser.add_argument("--bundle", default=None, help="bundle folder (default: the demo)")
    parser.add_argument("--old", default=None, help="another checkout to run as 'old', interleaved with this one")
    parser.add_argument("--also", action="append", default=[], metavar="NAME:KEY=VALUE",
                        help="one more variant: this checkout with a variable (wide:EXPLAIN_MODEL_SLOTS=64)")
    parser.add_argument("--serve", action="store_true", help="start with explain serve's launcher (ui/launch.py)")
    parser.add_argument("--stores", default="/tmp/team/stores", help="EXPLAIN_STORES of every server started")
    parser.add_argument("--browser-cpus", default="", help="cores for Chromium (a taskset list such as 1)")
    parser.add_argument("--json", default=None, help="write every row to this file")
    args = parser.parse_args(argv)
    bundle = Path(args.bundle).resolve() if args.bundle else ROOT / "bundles" / "demo"
    ids = bundle_ids(bundle)
    env = {"EXPLAIN_STORES": args.stores, **({"EXPLAIN_BUNDLE": str(bundle)} if args.bundle else {})}
    Path(args.stores).mkdir(parents=True, exist_ok=True)
    log_dir = Path("/tmp/team/logs") / time.strftime("%Y%m%d-%H%M%S")  # the servers' logs of this invocation
    log_dir.mkdir(parents=True, exist_ok=True)
    variants = [("new", ROOT, {})] + ([("old", Path(args.old).resolve(), {})] if args.old else [])
    for extra in args.also:  # NAME:KEY=VALUE, this checkout with one more variable (e.g. a wider pool)
        name, setting = extra.split(":", 1)
        variants.append((name, ROOT, dict([setting.split("=", 1)])))
    print(f"{machine()}; {load()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; bundle {bundle}; "
          f"steps {args.steps or 'default'}; every {args.every} s for {args.seconds:.0f} s; browsers on "
          f"{'core ' + args.browser_cpus if args.browser_cpus else 'every core'}", flush=True)
    prepare_store(ROOT, env, log_dir, ids)
    rows = []
    for turn, n in enumerate(int(x) for x in args.sessions.split(",")):
        for name, root, more in (variants if turn % 2 == 0 else variants[::-1]):
            args.n = n
            before = load()
            server = Server(f"{name}-{n}", {**env, **more}, log_dir, how="serve" if args.serve else "streamlit run",
                            root=root)
            try:
                server.wait_healthy()
                run, seen = asyncio.run(drive(server, ids, args))
                seen["server runs"] = [seconds for _, seconds in server.timings()]
            finally:
                server.stop()
            rows.append(row_of(n, name, run, seen, (before, load())))
            print_row(rows[-1])
    if args.old:
        for n in sorted({r["sessions"] for r in rows}):
            new, old = (next(r for r in rows if r["sessions"] == n and r["variant"] == v) for v in ("new", "old"))
            print(f"{n:>3} sessions: new/old p50 {new['p50'] / old['p50']:.2f}, "
                  f"worst {new['worst'] / old['worst']:.2f}, "
                  f"health worst {new['health worst'] / old['health worst']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
