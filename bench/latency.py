"""Latency of the real dashboard in a real browser, as one run's medians and ratios (not a timed test).

    flock /tmp/team/browser.lock python3 bench/latency.py            # 5 repetitions of every action
    flock /tmp/team/browser.lock python3 bench/latency.py --reps 2   # a quick look
    ... --variants new,old                                           # also the old behaviour, interleaved
    ... --bundle /tmp/big/arrays-20000 --only customer --reps 4      # a real-size bundle (bench/big_bundle.py)

For each variant it starts ``streamlit run app.py`` (headless, the demo bundle; the variant's
environment), drives Debian's Chromium (/usr/bin/chromium, 1400x1000) with Playwright and
times, from the user's action to the new figures drawn *and* the script run finished (the
page idle; ``heatmap``: to the new heatmap drawn alone, what the visitor sees first):

- ``server start``: from the server's command to the first heatmap of the first visitor (``--starts``
  times per variant, interleaved), part by part: Streamlit up (the health check), the launcher's parts
  (``ui/launch.py``'s ``explain-timing part=`` lines: imports (TensorFlow and the app), bundle open, scores,
  first attribution (the first trace), the wait for the first page, the background work), the first page's
  script runs, the heatmap drawn and the run finished (the browser), each with when it ended;
- ``fresh session``: a new browser context opens ``/`` (warm server; the browser's caches empty, as on a
  first visit);
- ``new tab (cache warm)``: a new tab of that context opens ``/`` (a new session in a browser that has
  the page's scripts cached);
- ``customer (sidebar)``: Enter pressed in the customer box -> the new customer's heatmap;
- ``customer (deep link)``: the page opened at ``/?customer=ID`` (a new session);
- ``baseline``, ``steps``: the sidebar's baseline box (mean <-> median), the steps slider (one key);
- ``Compare page``, ``Cohort page``, ``Customer page``: a click on the page in the sidebar.

Each action also reports where the time went: ``server`` is the script run time from the
server's own timing (the app prints one line per run when ``EXPLAIN_TIMING=1``, see
``ui/frame.py``), ``figures KB`` the size of the Plotly figures in the websocket messages the
browser received for the action (all messages: ``ws KB``), and ``draw`` the time from the last
message before the figures were drawn to the drawing done (the browser's share).

``--bundle DIR`` serves that bundle instead of the demo (the customers switched to are spread over its ids)
and also prints each server's peak resident memory (``VmHWM`` of the server and its child processes, read
just before it is stopped). Its first start opens the bundle as a user's first visit would (``--cold``
removes the array cache first, so that start pays the first open); the figure that counts for a big bundle
is a later, cached start. ``--only customer`` runs the customer switches alone (no pages, baselines, steps).

Variants run in the same process, interleaved action by action, so the ratios ``new/old``
compare like with like: ``new`` is the app as it is, started by ``explain serve`` (``ui/launch.py``:
the startup bundle opened while Streamlit starts); ``late`` the same with the launcher's imports made once
Streamlit is up (``EXPLAIN_IMPORT_EARLY=0``); ``plain`` the same app started by ``streamlit
run app.py``; ``old`` the app under ``streamlit run app.py`` with ``EXPLAIN_SPEED=off`` (no figure
cache, figures as Plotly makes them, no pause for the heatmap to draw first; see ``ui/speed.py``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1400, "height": 1000}
# name: (how the server is started, its environment). `explain serve` runs ui/launch.py: `streamlit
# run app.py` with the startup bundle opened while Streamlit starts (README: the dashboard command).
VARIANTS = {"new": ("serve", {}), "late": ("serve", {"EXPLAIN_IMPORT_EARLY": "0"}), "plain": ("streamlit run", {}),
            "old": ("streamlit run", {"EXPLAIN_SPEED": "off"})}
COMMANDS = {"serve": ["ui/launch.py"], "streamlit run": ["-m", "streamlit", "run", "app.py"]}
TIMING_LINE = re.compile(r"explain-timing run=(\S+) seconds=([0-9.]+)")
PART_LINE = re.compile(r"explain-timing (part|run)=(\S+) seconds=([0-9.]+) at=([0-9.]+)")
VERBOSE = False
STARTS = itertools.count(1)
TIMEOUT_MS = 240_000
CUSTOMERS = ["C00002", "C00017", "C00031", "C00044", "C00058", "C00063", "C00077", "C00089", "C00091", "C00105",
             "C00118", "C00123", "C00136", "C00149", "C00150", "C00162"]

# JS: a fingerprint of the first heatmap trace drawn on the page (null while none is drawn), not the grey "no data"
# layer of a padded history: two customers with the same padding have the same one, and a switch between them would
# wait for a change that never comes.
HEATMAP = """() => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const trace = (gd._fullData || []).find(t => t.type === 'heatmap' && t.name !== 'no data');
    if (trace && trace.z) return JSON.stringify(Array.from(trace.z, row => Array.from(row)));
  }
  return null;
}"""


APP_ARGS: list[str] = []  # --limit NAME=VALUE: the app's own arguments (after "--")
PORT_BASE: int | None = None  # --port: variant k serves on PORT_BASE + k (else a free port)
FRESH_STORES = True  # --keep-stores: False (the stores the dashboard computed at an earlier start are found)


def _free_port(name: str = "") -> int:
    if PORT_BASE is not None:
        return PORT_BASE + list(VARIANTS).index(name)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The dashboard started as the variant says (``explain serve``'s launcher, or ``streamlit run
    app.py``) with the variant's environment; the log collects the timing lines."""

    def __init__(self, name: str, env: dict, log_dir: Path, how: str = "streamlit run", root: Path = ROOT):
        self.name, self.port = name, _free_port(name)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"server-{name}-{next(STARTS)}.log"  # one log per start
        env = {**{k: v for k, v in os.environ.items() if k != "EXPLAIN_BUNDLE"}, "EXPLAIN_TIMING": "1",
               "TF_CPP_MIN_LOG_LEVEL": "2", **env}
        if FRESH_STORES:  # the dashboard's own stores in a new folder: each start is a first start on this bundle
            env["EXPLAIN_STORES"] = str(self.log_path.with_suffix(".stores"))
        self.started, self.started_wall = time.perf_counter(), time.time()
        self.up = None  # seconds from the start to the first health check answered "ok"
        self.proc = subprocess.Popen(
            [sys.executable, *COMMANDS[how], "--server.port", str(self.port),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
             "--browser.gatherUsageStats", "false", *(["--", *APP_ARGS] if APP_ARGS else [])],
            cwd=root, env=env, stdout=(log := self.log_path.open("w")), stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()  # the child has its own copy of the file

    def wait_healthy(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.read().strip() == b"ok":
                        self.up = time.perf_counter() - self.started
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"streamlit ({self.name}) did not start; see {self.log_path}")

    def processes(self) -> list:
        """The server's process and its children (``psutil.Process``); [] once the server has exited."""
        try:
            import psutil

            procs = [psutil.Process(self.proc.pid)]
            return procs + procs[0].children(recursive=True)
        except Exception:  # noqa: BLE001 - the server has exited
            return []

    def peak_gb(self) -> float:
        """The largest peak resident memory (VmHWM) of the server's processes, GB; 0 once they are gone."""
        peaks = []
        for proc in self.processes():
            try:
                text = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                continue
            peaks += [int(line.split()[1]) / 2**20 for line in text.splitlines() if line.startswith("VmHWM:")]
        return max(peaks, default=0.0)

    def timings(self) -> list[tuple[str, float]]:
        return [(m[1], float(m[2])) for m in TIMING_LINE.finditer(self.log_path.read_text())]

    def parts(self) -> list[tuple[str, float, float]]:
        """(name, seconds, end in seconds after the server's command) of the launcher's parts (``part=`` lines,
        ``ui/launch.py``) and the script runs (``run=``, named ``page run NAME``), in the order of their ends."""
        found = [(m[2] if m[1] == "part" else f"page run {m[2]}", float(m[3]), float(m[4]) - self.started_wall)
                 for m in PART_LINE.finditer(self.log_path.read_text())]
        return sorted(found, key=lambda p: p[2])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class Wire:
    """The websocket messages a page receives: (time, bytes, type, figure bytes), decoded."""

    def __init__(self, page):
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.messages: list[tuple[float, int, str, int]] = []
        self._decode = ForwardMsg.FromString

        def on_socket(ws):
            ws.on("framereceived", self._received)

        page.on("websocket", on_socket)

    def _received(self, payload) -> None:
        now = time.perf_counter()
        data = payload if isinstance(payload, bytes) else payload.encode()
        try:
            msg = self._decode(data)
        except Exception:  # noqa: BLE001 - not a ForwardMsg
            self.messages.append((now, len(data), "?", 0))
            return
        kind = msg.WhichOneof("type") or "?"
        figure = 0
        if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            if element.WhichOneof("type") == "plotly_chart":
                figure = len(data)
        self.messages.append((now, len(data), kind, figure))

    def mark(self) -> int:
        return len(self.messages)

    def finished_since(self, mark: int) -> bool:
        return any(kind == "script_finished" for _, _, kind, _ in self.messages[mark:])

    def since(self, mark: int) -> list:
        return self.messages[mark:]


def _idle(page, wire: Wire, mark: int, timeout: float = 120.0) -> float:
    """Wait until a script run that started after ``mark`` has finished; its finish time."""
    deadline = time.perf_counter() + timeout
    while not wire.finished_since(mark):
        if time.perf_counter() > deadline:
            raise TimeoutError("the script run did not finish")
        page.wait_for_timeout(5)
    return next(t for t, _, kind, _ in wire.since(mark) if kind == "script_finished")


def _wait_heatmap(page, before) -> float:
    page.wait_for_function(f"() => {{ const z = ({HEATMAP})(); return z && z !== {json.dumps(before)}; }}",
                           polling="raf", timeout=TIMEOUT_MS)
    return time.perf_counter()


class Session:
    """One browser page on one server, with its websocket wire and results."""

    def __init__(self, browser, server: Server, context=None):
        self.server = server
        self.context = context or browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.page.set_default_timeout(120_000)
        self.wire = Wire(self.page)

    def close(self):
        self.context.close()

    def act(self, action, ready) -> dict:
        """Run ``action()``; time until ``ready(t0)`` returns the drawn time and the run has finished."""
        mark, runs_before = self.wire.mark(), len(self.server.timings())
        t0 = time.perf_counter()
        action()
        try:
            drawn = ready()
        except Exception:
            shot = self.server.log_path.with_suffix(".png")
            self.page.screenshot(path=str(shot))
            print(f"timed out after {time.perf_counter() - t0:.1f} s; screenshot {shot}", flush=True)
            raise
        finished = _idle(self.page, self.wire, mark)
        end = max(drawn, finished)
        messages = [m for m in self.wire.since(mark) if m[0] <= end]
        last_before_drawn = max([m[0] for m in messages if m[0] <= drawn] or [t0])
        time.sleep(0.05)  # the timing line is written right after the run
        server = sum(s for _, s in self.server.timings()[runs_before:])
        return {"total": end - t0, "server": server, "draw": max(0.0, drawn - last_before_drawn),
                "ws KB": sum(m[1] for m in messages) / 1024, "figures KB": sum(m[3] for m in messages) / 1024,
                "heatmap": drawn - t0, "drawn at": drawn, "finished at": finished}


def heatmap_now(page):
    return page.evaluate(HEATMAP)


def open_url(session: Session, url: str) -> dict:
    return session.act(lambda: session.page.goto(url), lambda: _wait_heatmap(session.page, None))


def pick(session: Session, label: str, text: str, nth: int = 0, option: bool = False) -> dict:
    page = session.page
    before = heatmap_now(page)
    box = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").filter(has_text=label).nth(nth)
    control = box.get_by_role("combobox")
    (control if control.count() else box).first.click()
    if not option:  # type the id and press Enter, as a user searching by id
        page.keyboard.type(text)
        return session.act(lambda: page.keyboard.press("Enter"), lambda: _wait_heatmap(page, before))
    page.keyboard.type(text)
    choice = page.get_by_role("option", name=text, exact=True)
    choice.wait_for(timeout=15_000)
    return session.act(choice.click, lambda: _wait_heatmap(page, before))


def steps_key(session: Session, key: str) -> dict:
    page = session.page
    before = heatmap_now(page)
    slider = page.locator("[data-testid=stSidebar] [data-testid=stSlider]").first
    slider.locator("[role=slider], [aria-valuenow], [tabindex='0']").first.focus()
    return session.act(lambda: page.keyboard.press(key), lambda: _wait_heatmap(page, before))


def go_page(session: Session, title: str, ready: str) -> dict:
    page = session.page
    link = page.locator("[data-testid=stSidebarNav] a").filter(has_text=title).first

    def drawn():
        page.wait_for_selector(ready, timeout=TIMEOUT_MS)
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length > 0 && "
                               "[...document.querySelectorAll('.js-plotly-plot')].every(g => g._fullData)",
                               polling="raf", timeout=TIMEOUT_MS)
        return time.perf_counter()

    return session.act(link.click, drawn)


def repetition(browser, server: Server, rep: int, results: dict, only: str = "all") -> None:
    """Every action once on ``server`` (``only="customer"``: the customer switches); adds to ``results[action]``."""
    def add(name, row):
        results.setdefault(name, []).append(row)
        if VERBOSE:
            print(f"  {server.name} {name}: {row['total']:.3f} s (server {row['server']:.3f}, heatmap "
                  f"{row['heatmap']:.3f}{', ' + row['customer'] if 'customer' in row else ''})", flush=True)

    fresh = Session(browser, server)
    try:
        add("fresh session", open_url(fresh, f"{server.url}/"))
        page = fresh.page
        page.wait_for_timeout(300)
        wanted, k = (2 if only == "all" else 8), 0
        while wanted:
            customer = CUSTOMERS[(8 * rep + k) % len(CUSTOMERS)]
            k += 1
            if page.get_by_role("heading", name=f"Customer {customer}").count():  # shown already (the default)
                continue
            add("customer (sidebar)", {**pick(fresh, "Customer (type", customer), "customer": customer})
            wanted -= 1
        if only == "customer":
            return
        add("baseline", pick(fresh, "Baseline (what", "median customer", option=True))
        add("baseline", pick(fresh, "Baseline (what", "mean customer", option=True))
        add("steps", steps_key(fresh, "ArrowRight"))
        add("steps", steps_key(fresh, "ArrowLeft"))
        add("Compare page", go_page(fresh, "Compare", "text=Compare with"))
        add("Customer page", go_page(fresh, "Customer", "text=How to read this"))
        add("Cohort page", go_page(fresh, "Cohort", "text=customers explained"))
        add("customer (deep link)", open_url(fresh, f"{server.url}/?customer={CUSTOMERS[-1 - rep % 8]}"))
        tab = Session(browser, server, context=fresh.context)  # a new tab of a browser that has been here
        add("new tab (cache warm)", open_url(tab, f"{server.url}/"))
    finally:
        fresh.close()


def start_parts(server: Server, row: dict) -> list[tuple[str, float, float]]:
    """A server start part by part: (name, seconds, end in seconds after the command): Streamlit up (the health
    check), the launcher's parts and the first page runs (the server's log), the first heatmap drawn and the run
    finished (the browser), the browser's drawing (after the last message before the heatmap was drawn)."""
    server_parts = [p for p in server.parts() if p[2] <= row["total"] + 0.5 or not p[0].startswith("page run")]
    return ([("streamlit up (health ok)", server.up or 0.0, server.up or 0.0), *server_parts,
             ("draw (browser)", row["draw"], row["heatmap"]), ("first heatmap drawn", row["heatmap"], row["heatmap"]),
             ("first run finished", row["total"], row["total"])])


def median_parts(runs: list[list[tuple[str, float, float]]]) -> list[tuple[str, float, float]]:
    """The parts of several starts: each name's median seconds and end (names in the first start's order)."""
    names = list(dict.fromkeys(name for run in runs for name, _, _ in run))
    out = []
    for name in names:
        found = [(s, e) for run in runs for n, s, e in run if n == name]
        out.append((name, statistics.median(s for s, _ in found), statistics.median(e for _, e in found)))
    return sorted(out, key=lambda p: p[2])


def parts_text(parts: list[tuple[str, float, float]]) -> str:
    return "\n".join(f"  {name:32s} {seconds:7.2f} s   ends at {end:7.2f} s" for name, seconds, end in parts)


def summary(rows: list[dict], key: str) -> tuple[float, float, float]:
    values = sorted(r[key] for r in rows)
    p95 = values[min(len(values) - 1, max(0, int(round(0.95 * (len(values) - 1)))))]
    return statistics.median(values), p95, values[-1]


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> str:
    cpu = "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, {platform.system()}, headless Chromium 1400x1000"


def use_bundle(folder: Path, cold: bool) -> None:
    """Serve ``folder``: every variant's environment names it, and the customers switched to are 16 of its ids
    spread over the table (read from the static table's id column only)."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    config = json.loads((folder / "bundle.json").read_text()) if (folder / "bundle.json").is_file() else {}
    column = config.get("id_column", "customer_id")
    table = (pq.read_table(folder / "static.parquet", columns=[column]) if (folder / "static.parquet").is_file()
             else pcsv.read_csv(folder / "static.csv").select([column]))
    ids = [str(i) for i in table.column(0).to_pylist()]
    CUSTOMERS[:] = [ids[k * (len(ids) - 1) // 15] for k in range(16)]
    for _, env in VARIANTS.values():
        env["EXPLAIN_BUNDLE"] = str(folder)
    if cold:
        sys.path.insert(0, str(ROOT))
        import shutil

        from explain.bundle.cache import places

        for place in places(folder):
            shutil.rmtree(place, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="repetitions of every action (default 5)")
    parser.add_argument("--variants", default="new",
                        help="comma-separated: new (explain serve), late (its imports after Streamlit is up), plain "
                             "(the same app under streamlit run app.py), old (streamlit run, EXPLAIN_SPEED=off) "
                             "(default new)")
    parser.add_argument("--starts", type=int, default=3, help="server starts per variant (default 3)")
    parser.add_argument("--verbose", action="store_true", help="print every action's time")
    parser.add_argument("--before", type=Path, default=None,
                        help="a checkout of an earlier version (git worktree add DIR REV): adds the variant 'before', "
                             "that checkout started as 'new' is (or by streamlit run app.py if it has no "
                             "ui/launch.py), "
                             "interleaved with the others")
    parser.add_argument("--bundle", type=Path, default=None,
                        help="serve this bundle instead of the demo (e.g. one of bench/big_bundle.py's)")
    parser.add_argument("--cold", action="store_true", help="with --bundle: remove its array cache first")
    parser.add_argument("--port", type=int, default=None, help="serve on this port (the k-th variant on port + k)")
    parser.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                        help="a table size limit for the app (e.g. max_table_cells=2e9 for a long 20k x 365 table)")
    parser.add_argument("--only", choices=("all", "customer"), default="all",
                        help="customer: time the customer switches alone")
    parser.add_argument("--keep-stores", action="store_true",
                        help="let a start find the store the dashboard computed at an earlier one (default: each "
                             "start gets a new $EXPLAIN_STORES folder, so a small bundle's start computes its store)")
    args = parser.parse_args(argv)
    if args.bundle is not None:
        use_bundle(args.bundle.resolve(), args.cold)
    global VERBOSE, PORT_BASE, FRESH_STORES
    VERBOSE, PORT_BASE, FRESH_STORES = args.verbose, args.port, not args.keep_stores
    APP_ARGS[:] = [word for limit in args.limit for word in ("--limit", limit)]
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    roots = {name: ROOT for name in names}
    if args.before is not None:
        names.append("before")
        roots["before"] = args.before.resolve()
        # started as `new` is (explain serve's launcher) when that checkout has one, else streamlit run
        VARIANTS["before"] = ("serve" if (roots["before"] / COMMANDS["serve"][0]).is_file() else "streamlit run",
                              dict(VARIANTS["new"][1]))  # the same environment: --bundle's EXPLAIN_BUNDLE too
    from playwright.sync_api import sync_playwright

    log_dir = Path(tempfile.mkdtemp(prefix="latency-"))
    results = {name: {} for name in names}
    servers, starts = {}, {}
    print(f"machine: {machine()}; logs in {log_dir}", flush=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for start in range(args.starts):  # server start to first heatmap, one server at a time, interleaved
                for name in (names if start % 2 == 0 else names[::-1]):
                    how, env = VARIANTS[name]
                    if name in servers:
                        servers.pop(name).stop()
                    server = servers[name] = Server(name, env, log_dir, how, roots[name])
                    session = Session(browser, server)
                    server.wait_healthy()
                    row = session.act(lambda: session.page.goto(f"{server.url}/"),
                                      lambda: _wait_heatmap(session.page, None))
                    row["total"] = time.perf_counter() - server.started
                    row["heatmap"] = row["drawn at"] - server.started  # what the visitor sees first
                    time.sleep(0.2)  # the run's timing line
                    results[name].setdefault("server start", []).append(row)
                    starts.setdefault(name, []).append(start_parts(server, row))
                    session.close()
                    print(f"{name}: server start to first heatmap drawn {row['heatmap']:.2f} s, to the run finished "
                          f"{row['total']:.2f} s; server peak RSS so far {server.peak_gb():.2f} GB; {load()}",
                          flush=True)
                    print(parts_text(starts[name][-1]), flush=True)
            for rep in range(args.reps):
                for name in (names if rep % 2 == 0 else names[::-1]):
                    repetition(browser, servers[name], rep, results[name], args.only)
                print(f"repetition {rep + 1}/{args.reps} done", flush=True)
        finally:
            browser.close()
            for name, server in servers.items():
                print(f"{name}: server peak RSS {server.peak_gb():.2f} GB (VmHWM, largest process); {load()}",
                      flush=True)
                server.stop()

    actions = list(results[names[0]])
    for name in names:
        print(f"\n{name}: seconds (p50 / p95 / max over the repetitions), server = script run time")
        print(f"{'action':22s} {'n':>3s} {'p50':>7s} {'p95':>7s} {'max':>7s} {'server':>7s} {'draw':>7s} "
              f"{'figures KB':>10s} {'ws KB':>7s} {'heatmap p50':>11s} {'max':>7s}")
        for action in actions:
            rows = results[name][action]
            p50, p95, top = summary(rows, "total")
            print(f"{action:22s} {len(rows):3d} {p50:7.3f} {p95:7.3f} {top:7.3f} {summary(rows, 'server')[0]:7.3f} "
                  f"{summary(rows, 'draw')[0]:7.3f} {summary(rows, 'figures KB')[0]:10.1f} "
                  f"{summary(rows, 'ws KB')[0]:7.1f} {summary(rows, 'heatmap')[0]:11.3f} "
                  f"{summary(rows, 'heatmap')[2]:7.3f}")
    for name in [n for n in names if starts.get(n)]:
        print(f"\n{name}: server start, part by part (median over {len(starts[name])} start(s))")
        print(parts_text(median_parts(starts[name])))
    for base in [b for b in ("old", "before") if "new" in names and b in names]:
        print(f"\nratios new/{base} (p50 of the total, server time, figure bytes)")
        for action in actions:
            new, old = results["new"][action], results[base][action]
            ratio = [summary(new, k)[0] / max(summary(old, k)[0], 1e-9) for k in ("total", "server", "figures KB")]
            print(f"{action:22s} total {ratio[0]:5.2f}  server {ratio[1]:5.2f}  figures {ratio[2]:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
