"""The batch stores the What drives churn page reads, and the one it computes itself for a small bundle.

Where stores live is decided by ``explain.batch.stores.store_dirs`` alone (``<bundle>/attributions/``,
where ``python -m explain batch --out BUNDLE/attributions/NAME`` writes, and ``$EXPLAIN_STORES/<content
hash>/`` when the environment variable ``EXPLAIN_STORES`` names a folder: a read-only bundle folder's
stores; the tests point it to a temporary folder); the page reads the bundle's most exact finished
store of its baseline, target, space and path (``explain.batch.stores.stores_of(bundle).best``, what
``python -m explain drivers`` reads too), whatever its steps; :func:`earlier` lists the stores drift can be
measured against, from the same listing.

A bundle of at most ``AUTO_LIMIT`` store rows (customers x (S + T x F); the demo has 243,000)
without such a store gets one computed in a background thread when the launcher starts (the
default settings) or the page asks for one (its settings), always with adaptive steps
(``background``: each customer's attributions add up within the tolerance): ``python -m explain
batch``'s own job (``run_batch_job``), into ``dashboard-<settings digest>`` under the first of
``store_dirs`` that can be written, ``$EXPLAIN_STORES`` first. The job is shared by every session
(one per bundle content and settings, one running at a time; its progress is read by every page
that waits for it). Larger bundles get the command that computes their store.

The launcher's job (``start(..., separate=True)``, after the first visitor's page has answered: ``ui/launch.py``)
runs that command in a process of its own at the lowest CPU priority (``nice -n 19 python -m explain batch``,
:func:`batch_command`): the pages' model calls keep the cores, the job takes what they leave. Its progress is read
from the store folder (a chunk's summary file is written when the chunk is done), and a session that asks for the
same store meanwhile finds this job, not a second one. ``EXPLAIN_STORE_NICENESS`` (a whole number 0-19, default 19)
is how much lower than the server's its CPU priority is: 0 runs it at the server's own priority (the tests do, beside
other test processes that would otherwise starve it; another value is logged and 19 used).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

from explain.batch.local import run_batch_job
from explain.batch.store import Store
from explain.batch.stores import STORES_ENV, BundleStores, store_dirs
from explain.core.errors import ExplainError
from explain.core.settings import AUTO, Settings
from ui import startup

LOG = logging.getLogger("explain.app")
ENV = STORES_ENV  # the environment variable (explain.batch.store decides what it means)
AUTO_LIMIT = 5_000_000   # store rows a background job computes (the demo: 243,000, 4-6 s with auto steps, 2 cores)
CHUNK = 200              # customers per chunk of the dashboard's jobs (the CLI's default)

COMMAND = ("python -m explain batch --bundle {bundle} --out {bundle}/attributions/{name}{settings}")
NICE = 19                # the separate job's niceness: the lowest CPU priority
NICE_ENV = "EXPLAIN_STORE_NICENESS"  # another niceness (0-19) for it
BAD_NICE = ("{env}={value!r} is not a whole number from 0 to 19 (how much lower than the server's the separate store "
            "job's CPU priority is); using {default}.")
POLL = 0.5               # seconds between two reads of a separate job's progress
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Job:
    """One store the dashboard computes: its folder and progress (read by every session)."""

    folder: Path
    total: int
    done: int = 0
    state: str = "queued"    # queued | running | finished | failed
    error: str | None = None
    started: float = field(default_factory=time.monotonic)
    seconds: float = 0.0

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


_JOBS: dict[tuple, Job] = {}
_JOBS_LOCK = threading.Lock()
_ONE_AT_A_TIME = threading.Lock()


def background(settings: Settings) -> Settings:
    """The settings of a store the dashboard computes itself: ``settings`` with adaptive steps."""
    return settings.replace(steps=AUTO)


def earlier(found: BundleStores, current: Store) -> list[tuple[str, Store]]:
    """(label, store) of the other finished stores in the bundle's store folders made with the same settings
    and layout as ``current`` (an earlier month's run of the same kind; ``BundleStores.earlier``), newest first."""
    return [(f"{s.path.name} (finished {s.completed.replace('T', ' ')[:16]} UTC, {s.n_customers:,} customers)", s)
            for s in found.earlier(current)]


def default_against(found: BundleStores, current: Store) -> Store | None:
    """The store drift is measured against by default: the newest of :func:`earlier`, or None."""
    found = found.earlier(current)
    return found[0] if found else None


def rows(bundle) -> int:
    """The rows of this bundle's store (customers x (S + T x F))."""
    per = bundle.n_static + bundle.n_periods * bundle.n_temporal
    return int(bundle.n_customers) * int(per)


def _digest(settings: Settings, bundle) -> str:
    identity = sorted(settings.resolved(bundle.output_names).identity().items())
    return sha256(repr(identity).encode("utf-8")).hexdigest()[:10]


def target_folder(bundle, settings: Settings) -> Path | None:
    """Where the dashboard writes this bundle's store for ``settings``: the first search folder
    that can be written (made if needed), or None."""
    name = f"dashboard-{_digest(settings, bundle)}"
    for base in reversed(store_dirs(bundle)):  # $EXPLAIN_STORES first when set
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(base, os.W_OK):
            return base / name
    return None


def command(bundle, settings: Settings) -> str:
    """The command that computes this bundle's store with ``settings``."""
    given = {k: v for k, v in settings.to_strings().items() if v != Settings().to_strings().get(k)}
    options = "".join(f" --{k} {v}" for k, v in given.items())
    return COMMAND.format(bundle=bundle.path or "BUNDLE", name="all", settings=options)


def automatic(bundle) -> bool:
    """True when the dashboard computes this bundle's store itself (small, from a folder)."""
    return bool(bundle.content_hash) and bundle.path is not None and rows(bundle) <= AUTO_LIMIT


def job(bundle, settings: Settings) -> Job | None:
    """This bundle's job for ``settings`` (running, queued or done), or None."""
    with _JOBS_LOCK:
        return _JOBS.get(_key(bundle, settings))


def _key(bundle, settings: Settings) -> tuple:
    return bundle.content_hash, settings.resolved(bundle.output_names).key(), tuple(map(str, store_dirs(bundle)))


def start(bundle, settings: Settings, *, separate: bool = False) -> Job | None:
    """The job computing this bundle's store for ``settings``: the one queued, running or failed
    (its error is shown until :func:`forget`), else a new one (also when a finished job's store
    is gone); None when the bundle is too large or no folder can be written. ``separate``: a new job runs
    as a process of its own at the lowest priority (:func:`batch_command`), else in a thread of this one."""
    if not automatic(bundle):
        return None
    key = _key(bundle, settings)
    with _JOBS_LOCK:
        existing = _JOBS.get(key)
        if existing is not None and existing.state != "finished":
            return existing
        folder = target_folder(bundle, settings)
        if folder is None:
            return None
        new = _JOBS[key] = Job(folder=folder, total=int(bundle.n_customers))
    threading.Thread(target=_run_separate if separate else _run, args=(new, bundle, settings), name="explain-store",
                     daemon=True).start()
    return new


def forget(bundle, settings: Settings) -> None:
    """Drop this bundle's job for ``settings`` (a failed one: the next :func:`start` tries again)."""
    with _JOBS_LOCK:
        _JOBS.pop(_key(bundle, settings), None)


def _run(job: Job, bundle, settings: Settings) -> None:
    def progress(done: int, total: int) -> None:
        job.done, job.total = done, total

    with _ONE_AT_A_TIME:
        job.state, started = "running", time.monotonic()
        try:
            run_batch_job(bundle, job.folder, settings, chunk_size=CHUNK, progress=False, on_chunk=progress)
            job.state = "finished"
        except Exception as error:  # noqa: BLE001 - reported on the page that waits for it
            job.state, job.error = "failed", str(error) if isinstance(error, ExplainError) else type(error).__name__
            if not sys.is_finalizing():  # a server stopping mid-job: nothing to report (the next start resumes it)
                LOG.warning("the dashboard's store %s failed", job.folder,
                            exc_info=not isinstance(error, ExplainError))
        finally:
            job.seconds = time.monotonic() - started


def batch_command(bundle, folder: Path, settings: Settings) -> list[str]:
    """The command of a separate job: ``python -m explain batch`` on the bundle's folder into ``folder`` with every
    one of ``settings`` spelled out (the CLI reads them back to equal settings) and, for the startup bundle, the
    owner's options (``ui.startup.owner_arguments``), under ``nice -n`` :func:`niceness` where ``nice`` is installed."""
    options = [word for name, value in settings.to_strings().items() if value
               for word in (f"--{name.replace('_', '-')}", value)]
    owner = startup.owner_arguments() if _is_startup(bundle) else []
    command = [sys.executable, "-m", "explain", "batch", "--bundle", str(bundle.path), "--out", str(folder),
               "--batch-size", str(CHUNK), *options, *owner]
    nice = shutil.which("nice")
    return [nice, "-n", str(niceness()), *command] if nice else command


def niceness() -> int:
    """The separate job's niceness: ``EXPLAIN_STORE_NICENESS`` (0-19), else :data:`NICE`."""
    value = os.environ.get(NICE_ENV, str(NICE))
    try:
        nice = int(value)
    except ValueError:
        nice = -1
    if not 0 <= nice <= 19:
        LOG.error(BAD_NICE.format(env=NICE_ENV, value=value, default=NICE))
        return NICE
    return nice


def _is_startup(bundle) -> bool:
    try:
        return Path(bundle.path).resolve() == startup.bundle_path().resolve()
    except OSError:
        return False


def chunks_done(folder: Path) -> int:
    """The chunks of the store in ``folder`` written so far (one summary file each)."""
    from explain.batch.format import SUMMARY_DIR

    try:
        return sum(1 for f in (Path(folder) / SUMMARY_DIR).iterdir() if f.suffix == ".parquet")
    except OSError:
        return 0


_PROCESSES: set = set()


@atexit.register
def _stop_processes() -> None:
    """A server that exits ends its separate jobs (the next start resumes the store where it stopped)."""
    for process in list(_PROCESSES):
        if process.poll() is None:
            process.terminate()


def _run_separate(job: Job, bundle, settings: Settings) -> None:
    from explain.batch.format import SUCCESS

    with _ONE_AT_A_TIME:
        job.state, started = "running", time.monotonic()
        cwd = ROOT if (ROOT / "explain" / "__main__.py").is_file() else None  # a source checkout: its own package
        with tempfile.NamedTemporaryFile("w", prefix="explain-store-", suffix=".log", delete=False) as log:
            err = Path(log.name)  # its stderr: the CLI's one-line error, if any
        try:
            with open(err, "w") as log:
                process = subprocess.Popen(batch_command(bundle, job.folder, settings), cwd=cwd,
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
            _PROCESSES.add(process)
            while process.poll() is None:
                job.done = min(job.total, chunks_done(job.folder) * CHUNK)
                time.sleep(POLL)
            _PROCESSES.discard(process)
            if process.returncode == 0 and (job.folder / SUCCESS).exists():
                job.state, job.done = "finished", job.total
            else:
                job.state, job.error = "failed", _why(err, process.returncode)
                if process.returncode > 0:  # < 0: stopped by a signal (the server exiting): nothing to report
                    LOG.warning("the dashboard's store %s failed: %s", job.folder, job.error)
        except OSError as error:  # the command could not start
            job.state, job.error = "failed", f"{type(error).__name__}: {error}"
            LOG.warning("the dashboard's store %s could not start: %s", job.folder, job.error)
        finally:
            job.seconds = time.monotonic() - started
            err.unlink(missing_ok=True)


def _why(log: Path, code: int) -> str:
    """The CLI's one-line error (``error: ...``) from its log, else the exit status."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    said = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    return said[-1] if said else f"python -m explain batch exited with status {code}"
