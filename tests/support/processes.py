"""Processes of the tests: a free loopback port, waiting for a server's health check, stopping a server
started by a test (``start_new_session=True``: its whole process group), and one call measured in a fresh
interpreter (time and RSS growth, :func:`measured`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request


def free_port() -> int:
    """A loopback port free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float, why) -> None:
    """Until ``url``'s ``/_stcore/health`` answers ok; ``RuntimeError(why())`` if ``proc`` ends first or
    ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(why())
        time.sleep(0.5)


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM to the process group, SIGKILL after ``timeout`` seconds; a finished process is left alone."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


MEASURED = """
import json, resource, sys, threading, time
import psutil
sys.path.insert(0, {root!r})
{setup}
process = psutil.Process()
before, peak_before = process.memory_info().rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
peak, done = [before], threading.Event()

def sample():
    while not done.wait(0.002):
        peak[0] = max(peak[0], process.memory_info().rss)

sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
start = time.perf_counter()
try:
    result = {call}
    error = None
except Exception as exc:
    result, error = None, exc
seconds = time.perf_counter() - start
done.set()
sampler.join()
peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
top = max(peak[0], process.memory_info().rss, peak_after if peak_after > peak_before else 0)
text = str(error) if error is not None else (result.format() if hasattr(result, "format") else str(result))
print(json.dumps({{"seconds": seconds, "growth": top - before, "error": type(error).__name__ if error else None,
                  "text": text}}))
"""


def measured(setup: str, call: str, timeout: float = 120) -> dict:
    """Run ``call`` (an expression) in a fresh interpreter after ``setup`` (imports): {"seconds": its wall
    time, "growth": the largest rise of the process's RSS while it ran (bytes; psutil sampled every 2 ms and
    the peak RSS of getrusage), "error": the exception's class name or None, "text": the exception's text,
    or the result's ``format()`` (a ValidationReport) or text}."""
    import json
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    code = MEASURED.format(root=root, setup=setup, call=call)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env,
                         cwd=root)
    if out.returncode != 0:
        raise AssertionError(f"the measured call failed (exit {out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
