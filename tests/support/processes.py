"""Stopping a server started by a test (``start_new_session=True``): its whole process group."""

from __future__ import annotations

import os
import signal
import subprocess


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
