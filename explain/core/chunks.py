"""Interpolation points per gradient call, chosen by measurement.

A call's time does not grow in proportion to its points: small calls pay a fixed cost each, and
large ones can get slower per point (caches, memory; on a GPU the issue that asked for this saw
192,000 points per call run 19x slower per customer than 6,400). So the chunk is picked from a
measured curve, not "as large as memory allows": :func:`calibrate` times one gradient call of
the engine at each candidate size (after a first call that compiles it) and :func:`pick` takes
the smallest size whose throughput is within ``slack`` (5 %) of the best, since smaller calls
also hold less memory and can be stopped sooner. A size that runs out of memory (a GPU) ends the
curve: the larger ones are not tried. The choice depends only on the measurements (tests feed a
fake clock).

Defaults (``points_per_call``): TensorFlow keeps 4,096 (``explain.core.ig.DEFAULT_BATCH_SIZE``,
its results bit-for-bit as before); JAX on a CPU uses ``CPU_TABLE`` (measured by
``bench/gpu.py``); JAX on a GPU calibrates once per model and output space on first use.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from explain.core.engine import Ends

CANDIDATES = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
SLACK = 0.05
CPU_TABLE = {"tensorflow": 4096, "jax": 1024}  # points per call on a CPU (bench/gpu.py's curves, docs/backends.md)
OUT_OF_MEMORY = ("RESOURCE_EXHAUSTED", "out of memory", "OOM")

_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Calibration:
    """The measured curve {points per call: points per second} and the size picked from it."""

    points: int
    curve: dict = field(default_factory=dict)
    stopped_by_memory: int | None = None  # the first size that ran out of memory, if any


def pick(curve: dict, slack: float = SLACK) -> int:
    """The smallest size whose throughput (points per second) is at least (1 - slack) of the best."""
    if not curve:
        raise ValueError("no measured size to pick from: the curve is empty")
    best = max(curve.values())
    return min(size for size, rate in curve.items() if rate >= (1.0 - slack) * best)


def _is_out_of_memory(error: Exception) -> bool:
    text = f"{type(error).__name__}: {error}"
    return isinstance(error, MemoryError) or any(mark in text for mark in OUT_OF_MEMORY)


def calibrate(engine, *, space: str = "output", alphas: int = 64, candidates=CANDIDATES, repeats: int = 2,
              clock=time.perf_counter) -> Calibration:
    """Time ``engine.path_sums`` on zero rows (values do not change a call's time) at each candidate
    size: one call first (it compiles that shape), then the fastest of ``repeats`` timed calls."""
    curve, stopped = {}, None
    weights = np.full(alphas, 1.0 / alphas)
    grid = np.linspace(0.0, 1.0, alphas)
    for size in sorted(int(c) for c in candidates):
        rows = max(1, size // alphas)
        x = {k: np.zeros((rows, *engine.point_shapes[k]), engine.point_dtypes[k].as_numpy_dtype) for k in engine.keys}
        raw = {k: np.zeros((rows, *engine.shapes[k]), engine.raw_dtypes[k].as_numpy_dtype)
               for k in engine.categorical}
        try:
            engine.path_sums(Ends(x, x, raw), grid, weights, 0, space, rows * alphas)
            best = float("inf")
            for _ in range(max(1, repeats)):
                start = clock()
                engine.path_sums(Ends(x, x, raw), grid, weights, 0, space, rows * alphas)
                best = min(best, clock() - start)
        except Exception as error:  # noqa: BLE001 - only running out of memory ends the curve
            if not _is_out_of_memory(error):
                raise
            stopped = size
            break
        curve[rows * alphas] = rows * alphas / max(best, 1e-12)
    return Calibration(points=pick(curve), curve=curve, stopped_by_memory=stopped)


def device_kind() -> str:
    """"gpu" when Keras' backend computes on a GPU (JAX's default device), else "cpu"."""
    from explain.core import backend

    if backend.name() != "jax":
        return "cpu"  # TensorFlow: the CPU wheel (requirements.txt); a GPU build keeps 4,096 too
    import jax

    return "gpu" if jax.default_backend() in ("gpu", "cuda", "rocm") else "cpu"


def points_per_call(engine, space: str = "output") -> int:
    """The default points per gradient call for ``engine`` (see the module's text)."""
    kind = device_kind()
    if kind == "cpu" or engine.backend != "jax":
        return CPU_TABLE.get(engine.backend, 4096)
    key = (id(engine), space)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = calibrate(engine, space=space).points
        return _CACHE[key]
