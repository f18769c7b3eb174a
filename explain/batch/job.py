"""What the local and the Ray batch jobs share: the checks of their arguments, the loop that follows the chunks as
they finish (progress bar, Ctrl-C, counts), and the result. Each job only says how its chunks are computed."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from explain.batch.format import SUMMARY_DIR
from explain.core.errors import ExplainError
from explain.core.settings import ABSOLUTE_TOLERANCE, AUTO

DEFAULT_CHUNK_SIZE = 200

BAD_CHUNK_SIZE = "--batch-size (customers per chunk) must be a positive integer, got {value!r}."
INTERRUPTED = "interrupted: the finished chunks are kept in {where}; rerun the same command to resume."


@dataclass(frozen=True)
class BatchResult:
    """What a batch job did (``run_batch_job``, ``run_ray_batch_job``)."""

    path: Path  # or the URI of a store written by the Ray engine
    n_customers: int
    n_chunks: int
    computed_chunks: int
    reused_chunks: int
    removed_temporary_files: int
    rows: int  # long-format rows the whole store stands for (customers x cells)
    seconds: float
    manifest: dict = field(repr=False)
    outside_tolerance: int | None = None  # customers whose attributions miss the tolerance (None: not counted)

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete"))

    def describe(self) -> str:
        reused = f", reused {self.reused_chunks} finished chunk(s)" if self.reused_chunks else ""
        text = (f"wrote {self.n_customers} customers ({self.rows} long-format rows) in {self.n_chunks} chunk(s) to "
                f"{self.path}: computed {self.computed_chunks}{reused} in {self.seconds:.1f} s. Read it with "
                f"explain.batch.store.open_store('{self.path}') (arrays, one chunk at a time), read_store (the long "
                f"format) or pandas.read_parquet('{self.path}/{SUMMARY_DIR}') (one row per customer); "
                "docs/batch.md.")  # path: a Path or a URI
        return text if self.outside_tolerance is None else f"{text}\n{self.tolerance_line()}"

    def tolerance_line(self) -> str:
        """How many customers' attributions do not add up within the tolerance, and what to do."""
        settings = self.manifest.get("settings", {})
        share = f"{float(settings.get('tolerance', 0)):.2%}".replace("%", " %")
        head = (f"{self.outside_tolerance} of {self.n_customers} customers outside the tolerance "
                f"(|delta| above {share} of |f(x) - f(b)|, at least {ABSOLUTE_TOLERANCE:g})")
        if not self.outside_tolerance:
            return head + "."
        advice = ("raise --max-points" if settings.get("steps") == AUTO else "use --steps auto or more --steps")
        return f"{head}: their attributions do not add up; {advice}, or read their delta in the summary."


def check_chunk_size(value) -> int:
    """``value`` as a positive ``int`` (a NumPy integer too); ``ExplainError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ExplainError(BAD_CHUNK_SIZE.format(value=value))
    return int(value)


def follow(results: Iterable[tuple[int, bool]], *, total: int, initial: int = 0, desc: str = "batch",
           progress: bool = True, where, on_chunk=None) -> tuple[int, int]:
    """(chunks computed, chunks reused) of ``results``, one ``(customers, computed)`` pair per finished chunk,
    with a progress bar on stderr and ``on_chunk(customers done, total)`` called before the first chunk and after
    each (the dashboard's progress bar). Ctrl-C says where the finished chunks are kept; any other error passes
    through (each job words its own)."""
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, unit=" customers", desc=desc, file=sys.stderr, disable=not progress,
               dynamic_ncols=True, smoothing=0.1)
    computed = reused = 0
    done = initial
    if on_chunk is not None:
        on_chunk(done, total)
    try:
        for customers, was_computed in results:
            computed += bool(was_computed)
            reused += not was_computed
            bar.update(int(customers))
            done += int(customers)
            if on_chunk is not None:
                on_chunk(done, total)
    except KeyboardInterrupt:
        bar.close()
        print(INTERRUPTED.format(where=where), file=sys.stderr)
        raise
    finally:
        bar.close()
    return computed, reused


def result(path, manifest: dict, *, n_chunks: int, computed: int, reused: int, temporary_files: int,
           started: float) -> BatchResult:
    """The ``BatchResult`` of a finished job (``started``: its ``time.perf_counter()`` at the start)."""
    customers = manifest["customers"]["count"]
    return BatchResult(path=path, n_customers=customers, n_chunks=n_chunks, computed_chunks=computed,
                       reused_chunks=reused, removed_temporary_files=temporary_files,
                       rows=manifest["rows_per_customer"] * customers, seconds=time.perf_counter() - started,
                       manifest=manifest, outside_tolerance=manifest.get("outside_tolerance"))
