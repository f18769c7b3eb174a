"""A team of analysts on one server (issue 42): N browser sessions, each switching customer every 2 s.

    mkdir -p /tmp/team
    flock /tmp/team/browser.lock python3 bench/team.py --sessions 1,4,8,16
    flock /tmp/team/browser.lock python3 bench/team.py --sessions 8 --old /tmp/team/old   # new vs old, interleaved
    ... --steps auto          # settings a finished store of the demo answers (the dashboard's own background store)
    ... --browser-cpus 1      # the browsers on core 1 only (taskset), the server's core 0 to itself
    ... --client wire         # no browser: each session speaks Streamlit's WebSocket protocol (the server's side)

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

With ``--client wire`` no browser runs: each session is a WebSocket client of the server's ``/_stcore/stream``
that sends what the browser's script sends (a script run with the deep link's query string, then every widget's
state with the customer box's new value) and reads the protobuf messages back; a switch is timed from the request
sent to the new heatmap's figure received (the run's end is printed apart), and nothing is drawn. On a small
machine the browsers of N sessions drawing on the server's cores are most of a switch's seconds
(8 Chromium tabs on 2 cores: p50 2.4 s while the server ran each switch's script in 0.24 s); analysts' browsers run
on their own machines, so the wire rows are the server's capacity, and a one-session Chromium row beside them shows
what a browser adds to draw the page.

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
import contextlib
import csv
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import latency  # noqa: E402
from latency import HEATMAP, VIEWPORT, Server, load, machine  # noqa: E402
from load import CHROMIUM_ARGS, HealthProbe, chromium_executable  # noqa: E402

ROOT = HERE.parent
TIMEOUT_S = 60.0
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
FAILED = "[data-testid='stException'], [data-testid='stAlertContentError']"
HEATMAP_TRACE = re.compile(r'"type":\s*"heatmap"')  # a figure's JSON with a heatmap trace


def bundle_ids(folder: Path) -> list[str]:
    """The bundle's customer ids (its static table's id column)."""
    config = json.loads((folder / "bundle.json").read_text()) if (folder / "bundle.json").is_file() else {}
    column = config.get("id_column", "customer_id")
    if (folder / "static.parquet").is_file():
        import pyarrow.parquet as pq

        return [str(i) for i in pq.read_table(folder / "static.parquet", columns=[column]).column(0).to_pylist()]
    with open(folder / "static.csv", newline="") as fh:
        return [row[column] for row in csv.DictReader(fh)]


def usage(server: Server) -> tuple[float, float]:
    """(resident memory MB, CPU seconds so far: user + system) of the server and its children; NaN where one of them
    could not be read (the server gone, a child ended while read)."""
    import psutil

    procs = server.processes()
    try:
        if not procs:
            raise psutil.NoSuchProcess(server.proc.pid)
        return (sum(p.memory_info().rss for p in procs) / 2**20, sum(sum(p.cpu_times()[:2]) for p in procs))
    except psutil.Error:
        return float("nan"), float("nan")


async def drawn(page, before, timeout: float = TIMEOUT_S) -> bool:
    """Wait until a heatmap other than ``before`` is drawn and the run has finished; False if an error shows."""
    await page.wait_for_function(f"() => {{ const z = ({HEATMAP})(); return z && z !== {json.dumps(before)}; }}",
                                 polling="raf", timeout=timeout * 1000)
    await page.wait_for_function(IDLE, timeout=timeout * 1000)
    return await page.query_selector(FAILED) is None


class Tab:
    """A session in a Chromium tab: what an analyst's browser does, drawn on this machine's cores."""

    def __init__(self, browser):
        self.browser, self.context, self.page = browser, None, None

    async def open(self, url: str, timeout: float = TIMEOUT_S * 3) -> tuple[float, bool]:
        """Open ``url`` in a fresh context: (seconds to the first heatmap drawn and the run finished, no error)."""
        self.context = await self.browser.new_context(viewport=VIEWPORT)
        start = time.perf_counter()
        try:
            self.page = await self.context.new_page()
            await self.page.goto(url, timeout=timeout * 1000)
            ok = await drawn(self.page, None, timeout)
        except Exception:  # noqa: BLE001 - a timeout is a failed first page
            ok = False
        return time.perf_counter() - start, ok

    async def switch(self, customer: str) -> tuple[float, bool]:
        """Type ``customer`` into the sidebar's customer box and press Enter: (seconds from Enter to drawn, ok)."""
        page = self.page
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

    async def close(self) -> None:
        if self.context is not None:
            await self.context.close()


class Wire:
    """A session spoken over Streamlit's own protocol (its WebSocket and protobuf messages), as the browser's
    script speaks it, with nothing drawn: the server's side of a switch, without a browser on the server's cores
    (analysts' browsers run on their own machines; what one of them adds to draw the page is the one-session
    Chromium row's difference). A switch's seconds are to the new heatmap's figure received (the answer the
    analyst waits for; the Chromium sessions time it to the heatmap drawn); the session reads its run to the end
    before its next switch, and those seconds are kept apart (``finished``)."""

    def __init__(self, base: str):
        self.url = base.replace("http", "ws", 1) + "/_stcore/stream"
        self.ws, self.query, self.box = None, "", None  # the customer box's widget id, from the page's elements
        self.widgets: dict = {}  # widget id -> its state, as the browser keeps them (every widget of the last run)
        self.finished: list[float] = []  # seconds from each request to its run finished

    async def open(self, url: str, timeout: float = TIMEOUT_S * 3) -> tuple[float, bool]:
        import websockets

        start = time.perf_counter()
        try:
            self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None)
            _, ok = await self.run(url.partition("?")[2], None, timeout)
        except Exception:  # noqa: BLE001 - a refused connection or a timeout is a failed first page
            ok = False
        return time.perf_counter() - start, ok

    async def switch(self, customer: str) -> tuple[float, bool]:
        """What the browser sends when the analyst types an id into the customer box and presses Enter."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        if self.box is None:
            return float("nan"), False
        try:
            return await self.run(self.query, WidgetState(id=self.box, string_value=customer), TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a timeout or a closed connection is a failed switch
            return float("nan"), False

    async def run(self, query: str, widget, timeout: float) -> tuple[float, bool]:
        """Ask for a script run and read its messages to the run's end: (seconds to the heatmap's figure received,
        a heatmap received and no error shown)."""
        from streamlit.proto.Alert_pb2 import Alert
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        ask = BackMsg()
        ask.rerun_script.query_string = query
        if widget is not None:  # every widget's value, as the browser sends them, the one typed into replaced
            ask.rerun_script.widget_states.widgets.extend({**self.widgets, widget.id: widget}.values())
        start, heatmap, ok, widgets = time.perf_counter(), None, True, {}
        deadline = start + timeout
        await self.ws.send(ask.SerializeToString())
        while True:
            message = ForwardMsg.FromString(await asyncio.wait_for(self.ws.recv(), deadline - time.perf_counter()))
            kind = message.WhichOneof("type")
            if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                element = message.delta.new_element
                which = element.WhichOneof("type")
                if which == "plotly_chart" and heatmap is None and HEATMAP_TRACE.search(element.plotly_chart.spec):
                    heatmap = time.perf_counter() - start
                elif which == "selectbox" and element.selectbox.label.startswith("Customer ("):
                    self.box = element.selectbox.id
                elif which == "exception" or (which == "alert" and element.alert.format == Alert.ERROR):
                    ok = False
                if (state := widget_state(element, self.widgets)) is not None:
                    widgets[state.id] = state
            elif kind == "page_info_changed":
                self.query = message.page_info_changed.query_string
            elif kind == "script_finished" and message.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                self.widgets = widgets
                self.finished.append(time.perf_counter() - start)
                return (float("nan"), False) if heatmap is None else (heatmap, ok)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


def widget_state(element, before: dict):
    """The state the browser keeps for a widget element when it is drawn: the value the app set, else the value
    it had (``before``: widget id -> state, the last run's), else its default; for the widgets the Customer page
    has (select boxes, radios, sliders, check boxes, number and text inputs, multiselects); None for buttons (a
    trigger is sent only when clicked) and other elements."""
    from streamlit.proto.Slider_pb2 import Slider
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    which = element.WhichOneof("type")
    widget = getattr(element, which)
    if not getattr(widget, "set_value", True) and getattr(widget, "id", None) in before:
        return before[widget.id]
    if which in ("selectbox", "radio"):
        value = widget.raw_value if widget.set_value else (
            widget.options[widget.default] if widget.HasField("default") and widget.options else None)
        return None if value is None else WidgetState(id=widget.id, string_value=value)
    if which == "multiselect":
        values = widget.raw_values if widget.set_value else [widget.options[i] for i in widget.default]
        return WidgetState(id=widget.id, string_array_value={"data": list(values)})
    if which == "slider" and widget.type == Slider.SELECT_SLIDER:
        values = widget.raw_value if widget.set_value else [widget.options[int(i)] for i in widget.default]
        return WidgetState(id=widget.id, string_array_value={"data": list(values)})
    if which == "slider":
        return WidgetState(id=widget.id, double_array_value={"data": list(widget.value if widget.set_value
                                                                            else widget.default)})
    if which == "checkbox":
        return WidgetState(id=widget.id, bool_value=widget.value if widget.set_value else widget.default)
    if which == "number_input" and (widget.set_value or widget.HasField("default")):
        value = widget.value if widget.set_value else widget.default
        return WidgetState(id=widget.id, **({"int_value": int(value)} if widget.data_type == widget.INT
                                            else {"double_value": value}))
    if which in ("text_input", "text_area") and (widget.set_value or widget.HasField("default")):
        return WidgetState(id=widget.id, string_value=widget.value if widget.set_value else widget.default)
    return None


class Run:
    """One (session count, variant): what its sessions measured."""

    def __init__(self):
        self.switches: list[tuple[float, bool]] = []
        self.opened: list[tuple[float, bool]] = []
        self.visitor: tuple[float, bool] = (float("nan"), False)
        self.finished: list[float] = []  # the wire sessions' seconds to each run finished


async def session(new_client, url_of, ids, k: int, run: Run, clock: dict, args) -> None:
    rng = random.Random(1000 + k)
    client = new_client()
    try:
        run.opened.append(await client.open(url_of(rng.choice(ids))))
        await clock["all_open"].wait()
        await asyncio.sleep(k * args.every / max(1, args.n))  # the sessions' switches spread over the interval
        while time.monotonic() < clock["end"]:
            due = time.monotonic() + args.every
            run.switches.append(await client.switch(rng.choice(ids)))
            await asyncio.sleep(max(0.0, due - time.monotonic()))
    except Exception as error:  # noqa: BLE001 - a session that could not open counts as failed
        run.opened.append((float("nan"), False))
        print(f"  session {k}: {type(error).__name__}: {str(error)[:200]}", flush=True)
    finally:
        run.finished += getattr(client, "finished", [])
        await client.close()


async def first_page(new_client, url: str) -> tuple[float, bool]:
    """A new visitor opens ``url``: seconds to the first heatmap and the run finished, no error."""
    client = new_client()
    try:
        return await client.open(url)
    finally:
        await client.close()


async def visitor(new_client, url: str, run: Run, clock: dict, args) -> None:
    await clock["all_open"].wait()
    await asyncio.sleep(args.seconds / 3)
    run.visitor = await first_page(new_client, url)


async def drive(server: Server, ids: list[str], args) -> tuple[Run, dict]:
    run, clock = Run(), {"all_open": asyncio.Event(), "end": float("inf")}
    url_of = lambda cid: f"{server.url}/?customer={cid}" + (f"&steps={args.steps}" if args.steps else "")  # noqa: E731
    async with contextlib.AsyncExitStack() as stack:
        if args.client == "wire":
            new_client = lambda: Wire(server.url)  # noqa: E731
        else:
            from playwright.async_api import async_playwright

            p = await stack.enter_async_context(async_playwright())
            browser = await p.chromium.launch(executable_path=chromium_executable(args.browser_cpus),
                                              args=CHROMIUM_ARGS)
            stack.push_async_callback(browser.close)
            new_client = lambda: Tab(browser)  # noqa: E731
        cold = await first_page(new_client, url_of(ids[0]))  # the server's first page: import, bundle, compile
        tasks = [asyncio.create_task(session(new_client, url_of, ids, k, run, clock, args)) for k in range(args.n)]
        while len(run.opened) < args.n:
            await asyncio.sleep(0.05)
        probe, (rss_start, cpu_start) = HealthProbe(server.url), usage(server)
        probe.start()
        clock["end"] = time.monotonic() + args.seconds
        clock["all_open"].set()
        await asyncio.gather(visitor(new_client, server.url, run, clock, args), *tasks)
        probe.stop.set()
        probe.join()
        rss_end, cpu_end = usage(server)
    return run, {"cold": cold, "health": probe.latencies, "health_failures": probe.failures,
                 "rss_start": rss_start, "rss_end": rss_end, "cpu": cpu_end - cpu_start}


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
        "finished p50": statistics.median(run.finished) if run.finished else float("nan"),
        "opened p50": statistics.median([t for t, _ in run.opened]) if run.opened else float("nan"),
        "opened failed": sum(not ok for _, ok in run.opened),
        "health p50": statistics.median(seen["health"]) if seen["health"] else float("nan"),
        "health worst": max(seen["health"], default=float("nan")), "health failed": seen["health_failures"],
        "new visitor": run.visitor[0], "new visitor ok": run.visitor[1], "cold": seen["cold"][0],
        "server run p50": statistics.median(seen["server runs"]) if seen["server runs"] else float("nan"),
        "server runs s": sum(seen["server runs"]),
        "server cpu per switch s": seen["cpu"] / max(1, len(run.switches) + 1),  # the visitor's too
        "rss start MB": seen["rss_start"], "rss end MB": seen["rss_end"],
        "load before": loads[0],
        "load after": loads[1],
    }


def print_row(r: dict) -> None:
    finished = "" if r["finished p50"] != r["finished p50"] else f" (run finished p50 {r['finished p50']:.2f})"
    print(f"{r['sessions']:>3} {r['variant']:4} switches {r['switches']:4} (failed {r['failed']}) "
          f"p50 {r['p50']:.2f}{finished} p95 {r['p95']:.2f} worst {r['worst']:.2f} s | health p50 "
          f"{r['health p50'] * 1000:.0f} worst {r['health worst'] * 1000:.0f} ms, failed {r['health failed']} | "
          f"new visitor {r['new visitor']:.1f} s{'' if r['new visitor ok'] else ' FAILED'} | sessions opened p50 "
          f"{r['opened p50']:.1f} s | server script runs p50 {r['server run p50']:.2f} s, "
          f"{r['server runs s']:.0f} s in all, CPU {r['server cpu per switch s']:.3f} s a switch | "
          f"RSS {r['rss start MB']:.0f} -> {r['rss end MB']:.0f} MB | "
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
        started, deadline = time.monotonic(), time.monotonic() + timeout
        while not any(stores.rglob("_SUCCESS")) and time.monotonic() < deadline:
            if time.monotonic() - started > 60 and not any(stores.rglob("dashboard-*")):
                print("no store started in a minute (a bundle larger than ui.stores.AUTO_LIMIT gets none)", flush=True)
                return
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
    parser.add_argument("--client", choices=("chromium", "wire"), default="chromium",
                        help="chromium: each session a tab of Debian's Chromium on this machine; wire: Streamlit's "
                             "WebSocket protocol spoken directly, nothing drawn (the server's side alone)")
    parser.add_argument("--browser-cpus", default="", help="cores for Chromium (a taskset list such as 1)")
    parser.add_argument("--json", default=None, help="write every row to this file")
    args = parser.parse_args(argv)
    # every server reads the store prepared below (latency.Server would give each start a new, empty folder, and
    # each server would then compute the store again beside the measured sessions)
    latency.FRESH_STORES = False
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
          f"steps {args.steps or 'default'}; every {args.every} s for {args.seconds:.0f} s; " + (
              "sessions over the wire, nothing drawn" if args.client == "wire" else
              f"browsers on {'core ' + args.browser_cpus if args.browser_cpus else 'every core'}"), flush=True)
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
