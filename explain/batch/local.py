"""Attributions of every customer of a bundle, in resumable chunks, to a Parquet dataset (a compact store).

    python -m explain batch --bundle DIR --out OUT [settings] [--batch-size N] [--customers-file F]

This module writes the store (the local engine; ``explain.batch.ray_job`` is the Ray one); its
files are described in ``explain.batch.format``, read by ``explain.batch.store`` (``read_store``,
``open_store``) and found by ``explain.batch.stores`` (``stores_of``, ``find_store``).

Rerunning the same command after an interruption (Ctrl-C, a crash, kill -9) keeps the chunks
whose two files read back with the expected customers, removes leftover temporary files and
computes the rest. A folder written with other settings, another bundle (content hash), other
customers or another chunk size, a folder with a corrupt manifest, and a folder holding files
this tool did not write are refused, never overwritten: to start over, delete the folder or
choose a new ``--out``. There is deliberately no ``--force``.

Memory is bounded by the chunk size and the points per gradient call (``points_per_call``: fewer
for long histories): one chunk's attributions are held at a time, and the bundle's arrays are
read a chunk at a time (memory-mapped from its array cache when it is big).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Iterable

import numpy as np

from explain.analysis.explainer import explain_customers
from explain.analysis.report import input_views, summary_frame
from explain.batch.format import (
    LOCK,
    MANIFEST,
    SUCCESS,
    SUMMARY_DIR,
    FolderLock,
    completed,
    inspect_folder,
    new_manifest,
    output_folder,
    read_summaries,
    verify_chunk,
    write_chunk,
    write_json,
    write_success,
)
from explain.batch.job import DEFAULT_CHUNK_SIZE, BatchResult, check_chunk_size, follow, result
from explain.core import xla
from explain.core.engine import cut_notes
from explain.core.errors import ExplainError
from explain.core.ig import DEFAULT_BATCH_SIZE
from explain.core.settings import Settings
from explain.core.text import examples
from explain.core.xla import compiled_calls

POINT_PERIODS = 400_000  # interpolation points x history periods per gradient call (memory, see points_per_call)
MIN_POINTS = 64

# ---- messages (tests match these) ------------------------------------------------------------
UNKNOWN_IDS = ("{source}: {count} unknown customer id(s): {examples}. Ids are text and case-sensitive; "
               "this bundle has {n} customers, for example {known}. Fix or remove these lines.")
NO_CUSTOMERS = "{source} lists no customer ids: expected one id per line."
CHUNK_FAILED = ("Chunk {chunk} (customers {first} to {last}) failed: {error} The finished chunks are "
                "kept in {folder}; fix the cause and rerun the same command to resume.")
NO_HASH = ("The batch job needs a bundle loaded from a folder (load_bundle): its content hash "
           "identifies the results, and this bundle has none.")


# ---- one chunk ----------------------------------------------------------------------------


def compute_chunk(bundle, ids: list[str], request: Settings, engine_batch_size: int | None = None, *,
                  baseline: dict | None = None):
    """(attributions, summary frame) of one chunk: ``explain_customers`` on these ids only;
    attributions {input key: (c, *cells) float64}, NaN where a history is padding (no data).

    ``baseline``: the data-wide baseline arrays, when ``bundle`` holds one chunk only (the Ray
    engine's actors); default: computed from ``bundle`` as always. ``engine_batch_size``: points
    per gradient call; default: ``points_per_call(bundle)``.
    """
    if engine_batch_size is None:
        engine_batch_size = points_per_call(bundle)
    compiled = compiled_calls(bundle.model) if xla.chosen() is not False else contextlib.nullcontext()
    with compiled:  # many calls of few shapes: compiled (XLA) where the cut is on (EXPLAIN_XLA=0: not)
        attribution = explain_customers(bundle, ids, request, batch_size=engine_batch_size, baseline=baseline)
    if hasattr(bundle, "release"):  # a memory-mapped history: its pages read for this chunk given back
        bundle.release(ids)
    return chunk_arrays(attribution, bundle, len(ids)), summary_frame(attribution, ids)


def chunk_arrays(attribution, bundle, n: int) -> dict:
    """{input key: (n, cells) float64} of an attribution as a compact store holds it: each input's
    cells in the long format's order (a history period by period), NaN where the history is padding."""
    out = {}
    for view in input_views(bundle):
        attr = np.asarray(attribution.inputs[view.key], np.float64).reshape(n, -1)
        pad = attribution.padding.get(view.key) if view.role == "temporal" else None
        if pad is not None and np.any(pad):
            cells = np.repeat(np.asarray(pad, bool), attr.shape[1] // pad.shape[1], axis=1)
            attr = np.where(cells, np.nan, attr)
        out[view.key] = attr
    return out


def points_per_call(bundle) -> int:
    """Interpolation points per gradient call of a batch job: the engine's default (4096), fewer for
    long histories, so that one call's activations stay near ``POINT_PERIODS`` points x periods
    (a Masking + LSTM(64) on 365 days: 1,095 points, about 1 GB of activations instead of 4)."""
    periods = max(1, int(getattr(bundle, "n_periods", 1) or 1))
    return int(max(MIN_POINTS, min(DEFAULT_BATCH_SIZE, POINT_PERIODS // periods)))


# ---- the job --------------------------------------------------------------------------------


def check_ids(bundle, ids: Iterable, source: str = "customers", lines: dict | None = None) -> list[str]:
    """The ids as text, duplicates dropped (first kept); ``ExplainError`` naming unknown ids
    (with their line numbers when ``lines`` maps an id to one)."""
    ids = list(dict.fromkeys(str(i) for i in ids))
    if not ids:
        raise ExplainError(NO_CUSTOMERS.format(source=source))
    known = set(str(i) for i in bundle.ids)
    unknown = [i for i in ids if i not in known]
    if unknown:
        shown = [f"{i!r} (line {lines[i]})" if lines and i in lines else repr(i) for i in unknown]
        raise ExplainError(UNKNOWN_IDS.format(
            source=source, count=len(unknown), examples=examples(shown, quote=False), n=len(known),
            known=", ".join(repr(str(i)) for i in list(bundle.ids[:3]))))
    return ids



def run_batch_job(bundle, out, request: Settings = Settings(), *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                  ids: Iterable | None = None, progress: bool = True,
                  engine_batch_size: int | None = None, on_chunk=None) -> BatchResult:
    """Attributions of ``ids`` (default: every customer of ``bundle``) into the folder ``out``,
    ``chunk_size`` customers at a time; resumes an interrupted run of the same job.

    ``bundle``: a ``Bundle`` or a bundle folder. ``progress``: a tqdm bar on stderr.
    ``engine_batch_size``: interpolation points per gradient call (never changes a number).
    ``on_chunk(done, total)``: called with the customers done so far before the first chunk and after
    each (the dashboard's progress bar).
    Raises ``StoreError`` (an ``ExplainError``) when ``out`` must be refused.
    """
    started = time.perf_counter()
    if isinstance(bundle, (str, os.PathLike)):
        from explain.bundle.load import load_bundle

        bundle = load_bundle(bundle)
    chunk_size = check_chunk_size(chunk_size)
    if not getattr(bundle, "content_hash", ""):
        raise ExplainError(NO_HASH)
    ids = [str(i) for i in bundle.ids] if ids is None else check_ids(bundle, ids)
    folder = output_folder(out)
    chunks = [list(ids[start:start + chunk_size]) for start in range(0, len(ids), chunk_size)]
    manifest = new_manifest(bundle, ids, request, chunk_size)

    inspect_folder(folder, manifest)  # refuse early, before any work and without touching anything
    # Bad settings (baseline, target, steps) fail here, before the folder is made.
    explain_customers(bundle, ids[:1], request, batch_size=engine_batch_size)

    folder.mkdir(parents=True, exist_ok=True)
    with FolderLock(folder):
        manifest, todo, temps = _prepare(folder, manifest, chunks, progress)

        def computed_chunks():
            for index in todo:
                try:
                    arrays, summary = compute_chunk(bundle, chunks[index], request, engine_batch_size)
                except ExplainError as error:
                    raise ExplainError(CHUNK_FAILED.format(chunk=index, first=chunks[index][0],
                                                           last=chunks[index][-1], error=error,
                                                           folder=folder)) from error
                write_chunk(folder, manifest, index, arrays, summary)
                del arrays, summary
                yield len(chunks[index]), True

        done = len(ids) - sum(len(chunks[i]) for i in todo)
        follow(computed_chunks(), total=len(ids), initial=done, progress=progress, where=folder, on_chunk=on_chunk)
        if progress and todo:
            print(f"engine: {cut_notes(bundle.model)}", file=sys.stderr)
        if not manifest.get("complete") or not (folder / SUCCESS).exists():
            manifest = completed(manifest, read_summaries(folder, manifest))
            write_json(folder / MANIFEST, manifest)
            write_success(folder)
    (folder / LOCK).unlink(missing_ok=True)
    return result(folder, manifest, n_chunks=len(chunks), computed=len(todo), reused=len(chunks) - len(todo),
                  temporary_files=len(temps), started=started)


def _prepare(folder: Path, manifest: dict, chunks: list[list[str]], progress: bool):
    """(the manifest in force, the chunks to compute, the temporary files removed) of a locked ``folder``: a new
    store gets its manifest; a resumed one keeps its own, reuses every chunk that reads back right and is marked
    incomplete while a damaged chunk is recomputed."""
    stored, temps = inspect_folder(folder, manifest)
    for temp in temps:
        temp.unlink(missing_ok=True)
    if stored is None:
        write_json(folder / MANIFEST, manifest)
    else:
        manifest = stored
    (folder / SUMMARY_DIR).mkdir(exist_ok=True)
    todo = []
    for index, chunk_ids in enumerate(chunks):
        why = verify_chunk(folder, manifest, index, chunk_ids)
        if why is not None:
            if why != "missing" and progress:
                print(f"chunk {index}: {why}; recomputing it", file=sys.stderr)
            todo.append(index)
    if progress and stored is not None:
        print(f"resuming {folder}: {len(chunks) - len(todo)} of {len(chunks)} chunk(s) already done and verified, "
              f"{len(todo)} to compute" + (f"; removed {len(temps)} temporary file(s)" if temps else ""),
              file=sys.stderr)
    if todo and (manifest.get("complete") or (folder / SUCCESS).exists()):
        # a finished store with a damaged chunk: not complete while it is repaired
        (folder / SUCCESS).unlink(missing_ok=True)
        manifest = {**manifest, "complete": False}
        write_json(folder / MANIFEST, manifest)
    return manifest, todo, temps
