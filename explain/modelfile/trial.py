"""The trial load of an untrusted model in a child process, under a memory cap, a CPU-time cap and a timeout.

:func:`run_trial` starts a fresh interpreter (``python -c``) that runs :func:`trial_main`,
which caps its own address space (``RLIMIT_AS``) and CPU time (``RLIMIT_CPU``) before it imports
anything heavy (importing ``explain`` and this module pulls in only the standard library), loads
the file with Keras only (the parent already ran the static checks) and reports one JSON line per
stage.  At most TRIAL_SLOTS children run at once in a server (one process): a visitor who uploads
while they are busy waits for a slot, up to the limits' ``timeout_s``, so that uploads cannot take
every core from the other visitors.  Used by ``explain.modelfile.safe_load.load_model_isolated``,
which re-exports the templates.  POSIX only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from explain.core.errors import refusal
from explain.core.text import one_line
from explain.modelfile.common import LOAD_FAILED, KerasPath, is_memory_error
from explain.modelfile.limits import Limits

ISOLATED_TOO_LARGE = (
    "{path}: the model is too large to load: loading it needed more than {limit} of "
    "memory ({detail}). To fix: use a smaller model, or raise it with --limit memory_limit_bytes=N "
    "on the command line if you trust this file."
)
ISOLATED_TIMEOUT = (
    "{path}: loading the model took too long (more than {timeout:g} s) and was stopped. "
    "To fix: use a smaller model, or raise it with --limit timeout_s=N on the command line if you "
    "trust this file."
)
ISOLATED_CPU = (
    "{path}: loading the model used more than {cpu:g} s of CPU time and was stopped. To fix: use a "
    "smaller model (fewer layers), or raise it with --limit cpu_limit_s=N on the command line if you "
    "trust this file."
)
TRIALS_BUSY = (
    "{path} was not opened: this server is already checking {slots} uploaded models and none finished "
    "within {wait:g} s. To fix: upload it again in a minute."
)
TRIAL_SLOTS = 2  # trial loads at once per server process
_SLOTS = threading.BoundedSemaphore(TRIAL_SLOTS)
ISOLATED_FAILED = (
    "{path}: the trial load in a separate process failed ({detail}). To fix: if the "
    "detail mentions memory, raise memory_limit_bytes (TensorFlow alone needs about 2 GiB "
    "of address space); otherwise check that Keras and TensorFlow import in this "
    "environment."
)

TRIAL_MARK = "@@explain.modelfile.safe_load@@"
TRIAL_CODE = ("import sys; sys.path.insert(0, sys.argv[1]); "
              "from explain.modelfile.trial import trial_main; trial_main(sys.argv[2:])")
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


def trial_main(argv: list[str]) -> None:
    """The child of :func:`run_trial`: argv = [keras path, memory limit (bytes), mark, CPU limit (s)].

    Reports on stdout, one ``mark + JSON`` line per stage: ``imported`` once Keras is, then
    ``ok`` (its detail: the load's CPU and wall seconds, as JSON), ``error``, ``memory`` or ``import-failed``
    with a one-line detail.
    """
    import resource

    keras_path, limit, mark, cpu = argv[0], int(argv[1]), argv[2], int(argv[3])

    def say(status: str, detail: str = "", end: bool = True) -> None:
        sys.stdout.write("\n" + mark + json.dumps({"status": status, "detail": detail}) + "\n")
        sys.stdout.flush()
        if end:
            os._exit(0)

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cpu > 0:  # SIGXCPU at the soft limit, SIGKILL a few seconds later
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        import keras
    except BaseException as exc:  # noqa: BLE001 - reported, the child ends
        say("import-failed", one_line(exc))
    say("imported", end=False)
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        keras.saving.load_model(keras_path, safe_mode=True, compile=False)
    except BaseException as exc:  # noqa: BLE001 - reported, the child ends
        say("memory" if is_memory_error(exc) else "error", one_line(exc))
    say("ok", json.dumps({"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}))


@dataclass(frozen=True)
class TrialVerdict:
    """A trial load that succeeded: the CPU and wall seconds its ``keras.saving.load_model`` took in the child
    (None when the child did not say), which a second load of the same file repeats."""

    cpu_s: float | None = None
    wall_s: float | None = None

    @classmethod
    def of(cls, detail: str) -> "TrialVerdict":
        try:
            said = json.loads(detail)
            return cls(float(said["cpu_s"]), float(said["wall_s"]))
        except (ValueError, TypeError, KeyError):
            return cls()


@contextmanager
def slot(limits: Limits, shown: str):
    """Hold one of the TRIAL_SLOTS (a model load, in a child or in the server) while the block runs; TRIALS_BUSY
    when none is free within ``limits.timeout_s``."""
    if not _SLOTS.acquire(timeout=limits.timeout_s):
        raise refusal(TRIALS_BUSY, path=shown, slots=TRIAL_SLOTS, wait=float(limits.timeout_s))
    try:
        yield
    finally:
        _SLOTS.release()

_MEMORY_MARKERS = ("bad_alloc", "ResourceExhausted", "MemoryError", "OOM when allocating",
                   "Cannot allocate memory", "out of memory", "pthread_create")


def _stderr_summary(stderr: str) -> str:
    """The most telling line of a dead child's stderr (an assertion, an error...)."""
    lines = [ln.strip() for ln in stderr.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("@")]  # skip stack frames
    for key in ("Check failed", "what():", "terminate called", "Error", "error"):
        for line in lines:
            if key in line:
                return line[:200]
    return lines[-1][:200] if lines else ""


def _trial_env() -> dict[str, str]:
    env = dict(os.environ)
    # Fewer threads and malloc arenas: a smaller, more predictable address space.
    env.update({
        "MALLOC_ARENA_MAX": "2", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": env.get("KERAS_BACKEND", "tensorflow"),
        # The oneDNN allocator retries a failed allocation for 10 s; the plain one fails
        # at once.  The child only checks that the model loads, so numerics do not matter.
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    return env


def _human_bytes(n: int) -> str:
    if n >= 1024**3:
        return f"{n / 1024**3:g} GiB"
    return f"{n / 1024**2:g} MiB"


def run_trial(path: Path, shown: str, limits: Limits, suffix: str = ".keras") -> TrialVerdict:
    """Load ``path`` (already checked) in a capped child (``limits``: ``memory_limit_bytes``, ``cpu_limit_s``,
    ``timeout_s``), once one of the TRIAL_SLOTS is free; the :class:`TrialVerdict` if it loaded, else raise
    ``UnsafeModelError`` (TRIALS_BUSY, ISOLATED_TOO_LARGE, ISOLATED_TIMEOUT, ISOLATED_CPU, ISOLATED_FAILED or
    LOAD_FAILED)."""
    with slot(limits, shown):
        out, err, code = _child(path, shown, limits, suffix)
    return _verdict(out, err, code, shown, limits)


def _child(path: Path, shown: str, limits: Limits, suffix: str) -> tuple[bytes, bytes, int]:
    """(stdout, stderr, exit status) of the trial child, killed with its process group after ``timeout_s``."""
    workdir = tempfile.mkdtemp(prefix="explain-trial-load-")
    try:
        with KerasPath(path, suffix) as keras_path:
            proc = subprocess.Popen(
                [sys.executable, "-c", TRIAL_CODE, PROJECT_ROOT, keras_path, str(int(limits.memory_limit_bytes)),
                 TRIAL_MARK, str(int(limits.cpu_limit_s))],
                cwd=workdir, env=_trial_env(), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            )
            try:
                out, err = proc.communicate(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    proc.kill()
                proc.communicate()
                raise refusal(ISOLATED_TIMEOUT, path=shown, timeout=float(limits.timeout_s)) from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return out, err, proc.returncode


def _verdict(out: bytes, err: bytes, code: int, shown: str, limits: Limits) -> TrialVerdict:
    """Raise the refusal the child's report (or its death) calls for; the verdict if it loaded the model."""
    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace")
    result: dict = {}
    for line in reversed(stdout.splitlines()):
        if line.startswith(TRIAL_MARK):
            try:
                result = json.loads(line[len(TRIAL_MARK):])
            except ValueError:
                result = {}
            break
    limit_text = _human_bytes(int(limits.memory_limit_bytes))
    if result.get("status") in (None, "imported"):
        # Died without reporting: killed, aborted (std::bad_alloc, a failed thread
        # creation) or crashed.  Under RLIMIT_AS that is nearly always memory.
        if code == -signal.SIGXCPU:
            raise refusal(ISOLATED_CPU, path=shown, cpu=float(limits.cpu_limit_s))
        how = f"exit status {code}" if code >= 0 else f"killed by signal {_signal_name(-code)}"
        detail = f"{how}: {_stderr_summary(stderr)}".rstrip(": ")
        memory = code == -signal.SIGKILL or any(m in stderr for m in _MEMORY_MARKERS)
        if result.get("status") == "imported" and (memory or code < 0):
            raise refusal(ISOLATED_TOO_LARGE, path=shown, limit=limit_text, detail=detail)
        if not result:
            detail = f"it died before Keras was imported, {detail}"
        raise refusal(ISOLATED_FAILED, path=shown, detail=detail)
    status, detail = result.get("status"), str(result.get("detail", ""))
    if status == "memory":
        raise refusal(ISOLATED_TOO_LARGE, path=shown, limit=limit_text, detail=detail)
    if status == "import-failed":
        raise refusal(ISOLATED_FAILED, path=shown,
                      detail=f"Keras did not import under a {limit_text} limit: {detail}")
    if status == "error":
        raise refusal(LOAD_FAILED, path=shown, error=detail)
    return TrialVerdict.of(detail)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)

