"""The array layout of a bundle: each history a ``.npy`` file, one row per customer, memory-mapped.

A bundle whose ``bundle.json`` says ``"layout": "arrays"`` holds, instead of each long temporal table, the
history exactly as the model takes it: ``temporal.npy`` (or ``<stem>.npy`` where the long layout would have
``<stem>.csv``), shape ``(customers, T, F)`` (``(customers, T)`` for category ids), row k the customer of row k
of the static table, short histories already padded with the model's mask value. ``bundle.json``'s ``arrays``
says what each file must hold (``{"version": 1, "histories": {stem: {"shape", "dtype", "periods"}}}``); the
feature names are the usual ``temporal_features`` / ``inputs``. The static table stays a table.

We chose ``.npy`` over an Arrow fixed-size-list column: numpy maps it with ``numpy.load(mmap_mode="r")`` with no
copy and no conversion, its header is a few bytes that are checked before anything is mapped, a customer's rows
are one contiguous slice, and any tool writes it (``numpy.save``).

Opening it (:func:`histories`): each file's header is read with numpy's own parser (bounded; an object array,
which only pickle can hold, is refused before its data is touched; Fortran order too), its shape and dtype are
checked against ``bundle.json`` and the model, and its size against the header (a cut or padded file is
refused). Then every value is read once, a chunk of customers at a time with plain reads into one buffer
(memory holds the chunk, never the file): finite numbers, category ids in range, padding counted. The same pass
feeds the bundle's sha256 content hash and the mean of each numeric history's features over its real periods
(:class:`explain.core.baselines.FeatureSums`: the mean baseline's data-wide statistic, stored in the array cache,
so no later process reads the whole history for it). The bundle then holds the files memory-mapped read-only; the array
cache (:mod:`explain.bundle.cache`) records that they were checked, so later opens map them without reading.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from explain.bundle.checks import (
    INFINITE_VALUES,
    MISSING_VALUES,
    NOT_CATEGORY_IDS,
    PERIODS_PADDED_NOTE,
)
from explain.bundle.problems import CONFIG_FILE, EXAMPLES_SHOWN, ValidationReport
from explain.core.baselines import FeatureSums
from explain.core.text import examples as _examples

LAYOUTS = ("long", "arrays")
VERSION = 1                      # of bundle.json 'arrays'; a newer one is refused with a message
SUFFIX = ".npy"
CHUNK_BYTES = 32 << 20           # bytes of a history read (and checked) at a time
MAX_HEADER_BYTES = 1 << 16       # a .npy header is ~128 bytes; numpy's own bound is 10,000
FLOATS = ("float32", "float64")
INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")

NPY_MISSING = ("{file} is missing from {folder}: bundle.json says \"layout\": \"arrays\", so the history {input!r} "
               "is the array {file}. Write it with numpy.save, or convert a long bundle with "
               "`python -m explain convert --layout arrays`.")
NPY_TABLE_TOO = ("both {file} and {table} are in {folder}; bundle.json says \"layout\": \"arrays\", so the history "
                 "is {file}. Delete {table} (or set \"layout\": \"long\").")
NPY_UNREADABLE = ("{file} cannot be read as a NumPy .npy file: {reason}. Write it with "
                  "numpy.save(path, array, allow_pickle=False).")
NPY_OBJECTS = ("{file} holds Python objects (dtype object, stored with pickle) and was refused unread: pickled data "
               "can run code. Save numbers (float32 or float64), category ids (integers) or texts (numpy unicode).")
NPY_FORTRAN = ("{file} is stored in Fortran (column) order; a customer's rows must be one piece. Save "
               "numpy.ascontiguousarray(array).")
NPY_SIZE = ("{file} holds {size:,} bytes, but its header says shape {shape} of {dtype}: {expected:,} bytes with the "
            "header. It is {what}; write it again with numpy.save (a copy may have been cut off).")
NPY_DECLARED = ("{file} has shape {shape} and dtype {dtype}, but bundle.json 'arrays' says shape {declared_shape} "
                "and dtype {declared_dtype}. Write them together (save_bundle or `python -m explain convert`).")
NPY_SHAPE = ("{file} has shape {shape}; the model's input {input!r} needs ({rows}, {expected}): one row per "
             "customer of {static} in its order, {what}.")
NPY_DTYPE = "{file} holds {dtype} values; the model's input {input!r} reads {reads}. Save the array as {reads}."
ARRAYS_PERIODS = ("bundle.json 'arrays' gives {given} period label(s) for {file}, which has T={expected} periods. "
                  "Give one label per period, oldest first.")
ARRAYS_PERIODS_ORDER = ("bundle.json 'arrays' names a period of {file} twice ({examples}); give each period its "
                        "own label, oldest first, as the array's positions are.")
ARRAYS_ENTRY = ("bundle.json 'arrays' has no entry for {file} (input {input!r}); add {{\"shape\": [...], "
                "\"dtype\": ..., \"periods\": [...]}} under 'histories' → {stem!r}.")
ARRAYS_FEATURES = ("bundle.json must list the features of {file} (the input {input!r}): an array has no column "
                   "names. List them in 'temporal_features' (one history) or 'inputs'.")
ARRAYS_VERSION = ("bundle.json 'arrays' has version {version}; this explain reads version {known}. Update explain, "
                  "or convert the bundle to the long layout with the explain that wrote it.")
BAD_STEM = "the history table name {stem!r} in bundle.json is not a plain file name; use letters, digits and _ ."
IDS_FIX = "Write the category ids the model was trained with (0 is padding where the Embedding masks zeros)."
ALL_PADDING_NOTE = ("{file}: {count} customer(s) have no real period (every one is padding), e.g. {examples}; the "
                    "model sees only padding for them.")


@dataclass
class Header:
    """What a .npy file's header says, and where its data start."""

    shape: tuple
    dtype: np.dtype
    offset: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def read_header(path: Path, file: str, report: ValidationReport) -> Header | None:
    """The header of ``path``, checked (not an object array, C order, a size that matches); None after a problem."""
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            read = {(1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read is None:
                raise ValueError(f"unknown .npy format version {version}")
            shape, fortran, dtype = read(handle, max_header_size=MAX_HEADER_BYTES)
            offset = handle.tell()
    except (OSError, ValueError, SyntaxError, TypeError) as error:
        report.add(file, NPY_UNREADABLE.format(file=file, reason=str(error).strip().rstrip(".")[:200]))
        return None
    if dtype.hasobject:
        report.add(file, NPY_OBJECTS.format(file=file))
        return None
    if fortran and len(shape) > 1:
        report.add(file, NPY_FORTRAN.format(file=file))
        return None
    header = Header(tuple(int(d) for d in shape), dtype, offset)
    size = path.stat().st_size
    if size != offset + header.nbytes:
        report.add(file, NPY_SIZE.format(file=file, size=size, shape=header.shape, dtype=dtype,
                                         expected=offset + header.nbytes,
                                         what="cut short" if size < offset + header.nbytes else "longer than that"))
        return None
    return header


def stem_of(plan_tables: tuple[str, str]) -> str:
    """The history's file stem from the long layout's table names (``temporal.csv`` -> ``temporal``)."""
    return plan_tables[0].rsplit(".", 1)[0]


class Source(NamedTuple):
    """The bundle whose histories are checked: its folder, bundle.json (:class:`explain.bundle.config.Config`),
    the input plan (:func:`explain.bundle.config.input_plan`) and the report its problems go to."""

    folder: Path
    config: Any
    plan: dict
    report: ValidationReport


class Rows(NamedTuple):
    """The customers a history's rows must be: the static table's ids in its order (None when the static table
    has a problem) and that table's file name."""

    ids: Any
    static_file: str | None


class Npy(NamedTuple):
    """One history's ``.npy`` file and what it must hold: the model input's spec
    (:class:`explain.core.inputs.InputSpec`), its listed features and its periods' labels."""

    path: Path
    file: str
    header: Header
    spec: Any
    features: list
    periods: list | None = None


def histories(source: Source, static: dict | None, static_file: str | None, digest=None) -> dict | None:
    """Every history of an array-layout bundle checked: {"arrays": {key: read-only memmap}, "periods": {key:
    labels}, "features": {key: columns}, "files": [file names], "statistics": {key: {"mean": (F,) float64,
    "mask_value": value}} (numeric histories: each feature's mean over the real periods)}, or None after its
    problems went to ``source.report``.
    ``static``: what ``check_static`` found (its ids give the rows), None when the static table has a problem
    (the arrays are checked all the same). ``digest``: a sha256 object fed the files' bytes as they are read."""
    entries = source.config.arrays or {}
    version = entries.get("version", VERSION)
    if version != VERSION:
        source.report.add(CONFIG_FILE, ARRAYS_VERSION.format(version=version, known=VERSION), column="arrays")
        return None
    rows = Rows(None if static is None else np.asarray(static["ids"], dtype=object), static_file)
    found: dict = {"arrays": {}, "periods": {}, "features": {}, "files": [], "statistics": {}}
    ok = True
    for key, tables in source.plan["tables"].items():
        spec, stem = source.plan["specs"].get(key), stem_of(tables)
        one = _history(source, key, stem, rows, digest)
        if one is None:
            ok = False
            continue
        found["arrays"][key], found["periods"][key], found["features"][key], sums = one
        found["files"].append(stem + SUFFIX)
        if sums is not None:
            found["statistics"][key] = {"mean": sums.mean(), "mask_value": spec.mask_value}
    return found if ok else None


def _history(source: Source, key: str, stem: str, rows: Rows, digest):
    """(memmap, periods, features, FeatureSums or None) of one history, or None after its problems."""
    spec, report = source.plan["specs"].get(key), source.report
    npy = _opened(source, key, stem)
    if npy is None or spec is None or not _fits(npy, rows, report):
        return None
    entry = source.config.arrays["histories"][stem]
    npy = npy._replace(periods=_periods(npy.file, entry["periods"], spec.shape[0], report))
    if npy.periods is None:
        return None
    header = npy.header
    sums = FeatureSums(header.shape[-1]) if spec.embedding is None and len(header.shape) == 3 else None
    if not scan(npy, rows.ids, source.config.temporal_padding, report, digest=digest, sums=sums):
        return None
    mapped = np.load(npy.path, mmap_mode="r", allow_pickle=False)
    return mapped, npy.periods, list(npy.features), sums


def _opened(source: Source, key: str, stem: str) -> Npy | None:
    """The history's file found, its header read and matching bundle.json's 'arrays' entry; None after a problem
    (every problem of the header, the entry and the listed features is reported)."""
    path = _located(source, key, stem)
    if path is None:
        return None
    file, report = stem + SUFFIX, source.report
    spec = source.plan["specs"].get(key)
    name = spec.name if spec is not None else key
    header = read_header(path, file, report)
    entry = (source.config.arrays or {}).get("histories", {}).get(stem)
    features = source.plan["listed"].get(key)
    ok = header is not None
    if entry is None:
        report.add(CONFIG_FILE, ARRAYS_ENTRY.format(file=file, input=name, stem=stem), column="arrays")
        ok = False
    if features is None:
        report.add(CONFIG_FILE, ARRAYS_FEATURES.format(file=file, input=name), column="temporal_features")
        ok = False
    if not ok:
        return None
    if (list(header.shape), str(header.dtype)) != (list(entry["shape"]), entry["dtype"]):
        report.add(file, NPY_DECLARED.format(file=file, shape=header.shape, dtype=header.dtype,
                                             declared_shape=tuple(entry["shape"]), declared_dtype=entry["dtype"]))
        return None
    return Npy(path, file, header, spec, features)


def _located(source: Source, key: str, stem: str) -> Path | None:
    """The path of the history's ``.npy`` file: a plain name, no table of the same stem beside it, present."""
    file, folder, report = stem + SUFFIX, source.folder, source.report
    spec = source.plan["specs"].get(key)
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        report.add(CONFIG_FILE, BAD_STEM.format(stem=stem), column="inputs")
        return None
    for table in (f"{stem}.csv", f"{stem}.parquet"):
        if (folder / table).exists():
            report.add(file, NPY_TABLE_TOO.format(file=file, table=table, folder=folder))
            return None
    if not (folder / file).is_file():
        report.add(file, NPY_MISSING.format(file=file, folder=folder, input=spec.name if spec is not None else key))
        return None
    return folder / file


def _fits(npy: Npy, rows: Rows, report: ValidationReport) -> bool:
    """The array's shape and dtype are what the model's input takes, one row per customer of the static table."""
    file, header, spec, features = npy.file, npy.header, npy.spec, npy.features
    width = spec.shape[1] if len(spec.shape) > 1 else None
    expected = (spec.shape[0],) if width is None else (spec.shape[0], len(features))
    count = len(rows.ids) if rows.ids is not None else header.shape[0] if header.shape else 0
    what = f"T={spec.shape[0]} periods" + ("" if width is None else f" x the {len(features)} listed features")
    ok = True
    if header.shape != (count, *expected) or (width is not None and width != len(features)):
        if width is not None and width != len(features):
            what += f" (the model reads F={width}: list {width} features)"
        report.add(file, NPY_SHAPE.format(file=file, shape=header.shape, input=spec.name, rows=count,
                                          expected=", ".join(str(d) for d in expected),
                                          static=rows.static_file or "the static table", what=what))
        ok = False
    reads = _reads(spec)
    kind = header.dtype.kind
    good = (str(header.dtype) in FLOATS if spec.embedding is None else
            kind == "U" if spec.dtype == "string" else str(header.dtype) in INTEGERS)
    if not good:
        report.add(file, NPY_DTYPE.format(file=file, dtype=header.dtype, input=spec.name, reads=reads))
        ok = False
    return ok


def _reads(spec) -> str:
    if spec.embedding is None:
        return "float32 (or float64)"
    return "texts (numpy unicode)" if spec.dtype == "string" else "whole-number category ids (an integer dtype)"


def _periods(file: str, labels, t_len: int, report: ValidationReport) -> list[str] | None:
    labels = [str(p) for p in labels]
    if len(labels) != t_len:
        report.add(CONFIG_FILE, ARRAYS_PERIODS.format(given=len(labels), file=file, expected=t_len), column="arrays")
        return None
    if len(set(labels)) != len(labels):  # the positions give the order: labels need not sort (t1 ... t100)
        report.add(CONFIG_FILE, ARRAYS_PERIODS_ORDER.format(file=file, examples=_examples(labels, 8)), column="arrays")
        return None
    return labels


class _Cells:
    """Counts and the first examples (customer row, period, feature) of the cells a check flags, chunk by chunk."""

    def __init__(self, width: int) -> None:
        self.counts = np.zeros(width, np.int64)
        self.examples: list[list] = [[] for _ in range(width)]

    def add(self, flagged: np.ndarray, first_row: int, values=None) -> None:
        if flagged.ndim == 2:
            flagged = flagged[..., None]
        self.counts += flagged.sum(axis=(0, 1))
        for j in np.flatnonzero(flagged.any(axis=(0, 1))):
            need = EXAMPLES_SHOWN - len(self.examples[j])
            if need > 0:
                where = np.argwhere(flagged[..., j])[:need]
                shown = [None] * len(where) if values is None else [
                    (values[r, t, j] if values.ndim == 3 else values[r, t]) for r, t in where]
                self.examples[j] += [(first_row + int(r), int(t), v) for (r, t), v in zip(where, shown)]

    def text(self, j: int, file: str, ids, periods) -> str:
        shown = [(f"{ids[r]!r}" if ids is not None else f"row {r + 1}") + f" at {periods[t]}"
                 + ("" if v is None else f": {v!r}") for r, t, v in self.examples[j]]
        return f"{_examples(shown, total=int(self.counts[j]), quote=False)} in {file}"


def scan(npy: Npy, ids, side: str, report: ValidationReport, *, digest=None, sums: FeatureSums | None = None
         ) -> bool:
    """Read every value once, a chunk of customers at a time (plain reads into one buffer, never the whole file):
    missing or infinite numbers, category ids out of range (problems, per feature), padded and all-padding
    histories (notes). ``digest`` is fed every byte of the file, ``sums`` every real period's values (a numeric
    history). True when there is no problem."""
    header, spec = npy.header, npy.spec
    n = header.shape[0]
    row_bytes = max(1, int(np.prod(header.shape[1:], dtype=np.int64)) * header.dtype.itemsize)
    chunk = max(1, CHUNK_BYTES // row_bytes)
    found = _Found(len(npy.features) if len(header.shape) > 2 else 1,
                   int(spec.embedding.input_dim) - 1 if spec.embedding is not None else 0)
    buffer = bytearray(min(n, chunk) * row_bytes)
    with open(npy.path, "rb") as handle:
        head = handle.read(header.offset)
        if digest is not None:
            digest.update(head)
        for start in range(0, n, chunk):
            rows = min(chunk, n - start)
            view = memoryview(buffer)[:rows * row_bytes]
            if handle.readinto(view) != len(view):
                report.add(npy.file, NPY_UNREADABLE.format(file=npy.file, reason="the file changed while it was read"))
                return False
            if digest is not None:
                digest.update(view)
            found.add(np.frombuffer(view, dtype=header.dtype).reshape(rows, *header.shape[1:]), start, spec, side,
                      sums)
    return found.report(npy, ids, side, report)


class _Found:
    """What :func:`scan` found so far."""

    def __init__(self, width: int, high: int) -> None:
        self.missing, self.infinite, self.bad = _Cells(width), _Cells(width), _Cells(width)
        self.high, self.padded, self.empty, self.empty_rows = high, 0, 0, []

    def add(self, values: np.ndarray, start: int, spec, side: str, sums: FeatureSums | None = None) -> None:
        if spec.embedding is None:
            if not np.isfinite(values).all():
                self.missing.add(np.isnan(values), start)
                self.infinite.add(np.isinf(values), start, values)
        elif values.dtype.kind in "iu" and spec.lookup is None:
            out = (values < 0) | (values > self.high)
            if out.any():
                self.bad.add(out, start, values)
        pad = _padding(spec, values)
        if sums is not None and self.missing.counts.sum() + self.infinite.counts.sum() == 0:
            sums.add(values, spec.mask_value, pad if spec.mask_value is not None else None)
        if pad is not None and pad.shape[1]:
            self.padded += int(pad[:, 0 if side == "start" else -1].sum())
            full = np.flatnonzero(pad.all(axis=1))
            self.empty += len(full)
            self.empty_rows += (start + full[:EXAMPLES_SHOWN]).tolist()[:EXAMPLES_SHOWN - len(self.empty_rows)]

    def report(self, npy: Npy, ids, side: str, report: ValidationReport) -> bool:
        file, spec, features, periods = npy.file, npy.spec, npy.features, npy.periods
        ok = True
        for j, column in enumerate(features):
            for cells, template in ((self.missing, MISSING_VALUES), (self.infinite, INFINITE_VALUES)):
                if cells.counts[j]:
                    report.add(file, template.format(column=column, count=int(cells.counts[j]),
                                                     where=cells.text(j, file, ids, periods)), column=column)
                    ok = False
            if self.bad.counts[j]:
                report.add(file, NOT_CATEGORY_IDS.format(
                    column=column, input=spec.key, high=self.high, count=int(self.bad.counts[j]), fix=IDS_FIX,
                    where=self.bad.text(j, file, ids, periods)), column=column)
                ok = False
        if self.padded:
            report.notes.append(PERIODS_PADDED_NOTE.format(
                file=file, count=self.padded, expected=spec.shape[0], side=side, padded_by=spec.padded_by))
        if self.empty:
            shown = [ids[r] if ids is not None else f"row {r + 1}" for r in self.empty_rows]
            report.notes.append(ALL_PADDING_NOTE.format(file=file, count=self.empty,
                                                        examples=_examples(shown, total=self.empty)))
        return ok


def _padding(spec, values: np.ndarray) -> np.ndarray | None:
    """(rows, T) True where a history is padding, as the model sees it."""
    if spec.mask_value is not None:
        return np.all(values == spec.mask_value, axis=-1) if values.ndim == 3 else values == spec.mask_value
    if spec.mask_zero:
        token = getattr(spec.lookup, "mask_token", None) if spec.lookup is not None else 0
        if token is None:
            return None
        pad = values == (str(token) if values.dtype.kind == "U" else token)
        return pad if pad.ndim == 2 else pad.all(axis=-1)
    return None


def new_digest(folder: Path, names: list[str]):
    """A sha256 object already fed the files ``names`` (the bundle's files before the histories)."""
    digest = hashlib.sha256()
    for name in names:
        with open(folder / name, "rb") as handle:
            while piece := handle.read(CHUNK_BYTES):
                digest.update(piece)
    return digest
