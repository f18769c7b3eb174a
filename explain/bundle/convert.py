"""Converting a bundle between its two layouts: long temporal tables and ``.npy`` histories
(:mod:`explain.bundle.arrays`). ``convert_bundle(IN, OUT, "arrays")`` (``python -m explain convert``) opens IN with
every check, writes OUT next to it under a temporary name (the model and the static table copied as they are,
each history written a chunk of customers at a time, ``bundle.json`` with the other layout's keys), checks OUT as
``explain check`` does and only then renames it into place: a failed conversion leaves nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from explain.bundle import arrays as array_io
from explain.bundle import load as bundle_io
from explain.bundle.checks import period_ranks
from explain.bundle.config import input_plan, read_config
from explain.bundle.problems import CONFIG_FILE, LEGACY_MODEL_FILE, MODEL_FILE, TABLE_FILES, ValidationReport
from explain.core.errors import BundleError, ExplainError
from explain.core.files import make_readable
from explain.core.text import examples as _examples
from explain.modelfile.limits import DEFAULT_LIMITS, Limits
from explain.modelfile.savedmodel import FOLDER as SAVEDMODEL_DIR

CHUNK_BYTES = 64 << 20      # history bytes copied at a time
UNKNOWN_LAYOUT = "layout must be 'arrays' or 'long'; it is {value!r}."
OUT_IN_USE = "{path} exists and is not empty; give a new folder for the converted bundle (or delete it first)."
UNSORTED_PERIODS = ("the periods of {stem} ({examples}) do not sort in their order as {kind}, and a long table is "
                    "put in period order when it is read; name the periods so that they sort (2024-01-05, ...), or "
                    "keep the array layout.")
CONVERTED_BUT_INVALID = "the converted bundle did not pass its checks (nothing was written):\n{report}"


def convert_bundle(source: str | os.PathLike, out: str | os.PathLike, layout: str = "arrays", *,
                   loader=None, limits: Limits = DEFAULT_LIMITS) -> Path:
    """Write the bundle ``source`` (either layout) into the new folder ``out`` in ``layout`` ("arrays" or
    "long"); return ``out``. ``loader``/``limits`` as in ``load_bundle`` (for opening both)."""
    if layout not in array_io.LAYOUTS:
        raise ExplainError(UNKNOWN_LAYOUT.format(value=layout))
    source, out = Path(source).expanduser(), Path(out).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExplainError(OUT_IN_USE.format(path=out))
    bundle = bundle_io.load_bundle(source, loader=loader, limits=limits)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = make_readable(tempfile.mkdtemp(prefix=f".{out.name}.converting-", dir=out.parent))
    try:
        write_layout(staging, source, bundle, layout, limits)
        report = bundle_io.validate_bundle(staging, loader=loader, limits=limits)
        if not report.ok:
            raise BundleError(CONVERTED_BUT_INVALID.format(report=report.format()), report.problems)
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def write_layout(folder: Path, source: Path, bundle, layout: str, limits: Limits = DEFAULT_LIMITS) -> None:
    """The files of ``bundle`` (opened from ``source``) in ``layout`` into ``folder``: the model and the static
    table copied, the histories written, ``bundle.json`` rewritten."""
    static = next(name for name in TABLE_FILES["static"] if (source / name).is_file())
    if (source / SAVEDMODEL_DIR).is_dir():  # a TensorFlow SavedModel (opened with --trust-model): its folder
        shutil.copytree(source / SAVEDMODEL_DIR, folder / SAVEDMODEL_DIR, symlinks=False)
    else:
        model = MODEL_FILE if (source / MODEL_FILE).is_file() else LEGACY_MODEL_FILE
        shutil.copyfile(source / model, folder / model)
    shutil.copyfile(source / static, folder / static)
    report = ValidationReport(path=source)
    config = read_config(source, report, limits)
    data = json.loads(config.raw.decode("utf-8")) if config.present else {}
    plan = input_plan(config, bundle.layout, report)
    for key in ("layout", "arrays"):
        data.pop(key, None)
    histories = {}
    for key, tables in plan["tables"].items():
        stem = array_io.stem_of(tables)
        periods = list(bundle.input_periods.get(key) or bundle.periods)
        if layout == "arrays":
            shape, dtype = write_npy(folder / f"{stem}{array_io.SUFFIX}", bundle.arrays[key])
            histories[stem] = {"shape": shape, "dtype": dtype, "periods": periods}
        else:
            ranks = period_ranks(np.asarray(periods, dtype=object))
            if np.any(np.diff(ranks) <= 0):
                raise ExplainError(UNSORTED_PERIODS.format(stem=stem, examples=_examples(periods, 6),
                                                           kind="numbers, dates or text"))
            write_long(folder / f"{stem}.parquet", bundle, key, periods, config.id_column, config.period_column)
        if plan["listed"].get(key) is None:  # an array has no header: the features go to bundle.json
            data["temporal_features"] = list(bundle.input_features.get(key) or bundle.temporal_features)
    if layout == "arrays":
        data.update({"id_column": config.id_column, "layout": "arrays",
                     "arrays": {"version": array_io.VERSION, "histories": histories}})
    (folder / CONFIG_FILE).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def write_npy(path: Path, values: np.ndarray) -> tuple[list[int], str]:
    """``values`` as a .npy file, a chunk of rows at a time (a memory-mapped source is read piece by piece);
    (its shape, its dtype)."""
    dtype = np.dtype(str(values.dtype)) if values.dtype.kind != "O" else np.asarray(values[:1]).astype(str).dtype
    if values.dtype.kind == "O":  # texts for a lookup layer: fixed-width unicode (no pickle)
        dtype = np.asarray(values, dtype=str).dtype
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=values.shape)
    row_bytes = max(1, int(np.prod(values.shape[1:], dtype=np.int64)) * dtype.itemsize)
    step = max(1, CHUNK_BYTES // row_bytes)
    for start in range(0, len(values), step):
        out[start:start + step] = np.asarray(values[start:start + step]).astype(dtype, copy=False)
    out.flush()
    del out
    return list(values.shape), str(dtype)


def write_long(path: Path, bundle, key: str, periods: list[str], id_column: str, period_column: str) -> None:
    """One history as a long Parquet table (padded periods left out), a chunk of customers at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = bundle.arrays[key]
    features = list(bundle.input_features.get(key) or bundle.temporal_features)
    row_bytes = max(1, int(np.prod(values.shape[1:], dtype=np.int64)) * values.dtype.itemsize)
    step = max(1, CHUNK_BYTES // row_bytes)
    writer = None
    try:
        for start in range(0, len(values), step):
            block = np.asarray(values[start:start + step])
            pad = bundle.padding(key, slice(start, start + step))
            rows, cols = np.nonzero(~pad) if pad is not None else np.nonzero(np.ones(block.shape[:2], bool))
            cells = block[rows, cols].reshape(len(rows), -1)
            columns = {id_column: pa.array(bundle.ids[start:start + step][rows].astype(str), pa.string()),
                       period_column: pa.array(np.asarray(periods, dtype=object)[cols], pa.string()),
                       **{c: cells[:, j].astype(str) if cells.dtype.kind == "U" else cells[:, j].astype(np.float64)
                          for j, c in enumerate(features)}}
            table = pa.table(columns)
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
