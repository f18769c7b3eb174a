"""Streamlit's scan of the installed packages for components, made once per test process.

Each ``AppTest`` makes its own ``BidiComponentManager`` on its first run, which scans every installed
distribution's metadata for component manifests (``scan_component_manifests``: about 0.2 s of CPU and 0.5 s
of wall time here, 534 distributions, none a component). A server scans once at its start
(``Runtime.__init__``); the installed packages do not change while the tests run, so the first scan's answer
serves every later AppTest of the process.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def scanned_once() -> Iterator[None]:
    """Within the block, ``scan_component_manifests`` scans once and answers every later call with that list."""
    from streamlit.components.v2 import manifest_scanner

    scan = functools.cache(manifest_scanner.scan_component_manifests)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_scanner, "scan_component_manifests", lambda max_workers=None: list(scan()))
        yield
