"""Reading one batch store (the folder ``python -m explain batch`` writes; see ``explain.batch.format``).

``open_store(OUT)`` gives a ``Store`` (its manifest, its files read lazily, one chunk at a time):
``arrays(bundle, ids)`` are the engine's arrays (what the Cohort page uses), ``rows(bundle)`` the
chunks as :class:`Rows` (the stores' row type, what ``explain.analysis.drivers.compute`` reads),
``chunk_arrays(chunk)`` one chunk of a compact store as numpy.
``read_store(OUT, ids)`` reads a finished store as tables in the order of ``ids``: the long format
(a view of a compact store: its ``value`` column from the bundle) and the summaries; with
``long=False`` the attributions as arrays by input. Stores of format 1 and 2 (long part files)
are read as before. ``pandas.read_parquet(OUT / "_summary")`` reads the summaries.

Where a bundle's stores live and which one is read: ``explain.batch.stores`` (``stores_of``).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from explain.analysis.report import input_views, long_frame, long_layout
from explain.batch.format import (
    LONG_SCHEMA,
    MANIFEST,
    SUCCESS,
    SUMMARY_SCHEMA,
    StoreError,
    chunk_paths,
    compact,
    inspect_folder,
    output_folder,
)
from explain.core.settings import AUTO, DEFAULT_TOLERANCE
from explain.core.text import examples, one_line

# ---- messages (tests match these) ------------------------------------------------------------
NO_MANIFEST = "{folder} is not a batch output folder: it has no {manifest}. Run `python -m explain batch` to make one."
INCOMPLETE = ("The batch output {folder} is incomplete: {done} of {total} chunks are there. Rerun the "
              "same `python -m explain batch` command to finish it (finished chunks are kept).")
NOT_IN_STORE = "{count} customer id(s) are not in the batch output {folder}: {examples}."
UNREADABLE_CHUNK = ("The batch output file {path} cannot be read ({why}). Rerun the `python -m explain batch` "
                    "command that made it: it verifies every chunk and recomputes the damaged ones.")
WRONG_INPUTS = ("The batch output {folder} does not fit this bundle's features and periods ({why}). It was written "
                "with another table layout; recompute it with `python -m explain batch` into a new --out folder.")
NEEDS_BUNDLE = ("The batch output {folder} is a compact store: it keeps the attributions, not the input values, so its "
                "long format needs the bundle it was computed from ({why}). Pass bundle= (the bundle folder or a "
                "loaded Bundle), or read the attributions as arrays (read_store(..., long=False), open_store(...)).")
OLD_FORMAT_ARRAYS = ("The batch output {folder} is of format {version} (the long format): read_store(..., long=False) "
                     "reads compact stores (format 3) only; read it with read_store(...) (long) or "
                     "open_store(...).arrays(bundle, ids).")
WRONG_LAYOUT = ("The batch output {folder} does not fit this bundle's features and periods (chunk {chunk}: "
                "{why}). It was written with another table layout; recompute it with `python -m explain batch` "
                "into a new --out folder.")


@dataclass(frozen=True)
class Rows:
    """k customers as a store chunk holds them (the stores' row type): for every model input (by the engine's
    key), the values and the attributions in the input's shape, (k, S) or (k, T, F), float64, NaN where
    there is no data (padding, or a text value). ``explain.analysis.drivers.compute`` reads any object
    with these four fields."""

    ids: np.ndarray              # (k,) str
    prediction: np.ndarray       # (k,)
    values: dict                 # key -> (k, S) or (k, T, F)
    attributions: dict           # key -> same shapes


def rows_of(attribution, bundle, ids: Sequence[str] | None = None) -> Rows:
    """An ``Attribution`` of ``ids`` (default: every customer of ``bundle``) as :class:`Rows`
    (padded cells NaN): attributions held in memory read as a store's chunk (``explain.batch.drivers.drivers_of``)."""
    ids = [str(i) for i in (bundle.ids if ids is None else ids)]
    inputs = bundle.inputs_for(ids)
    values, attrs = {}, {}
    for key, array in attribution.inputs.items():
        a = np.asarray(array, np.float64).copy()
        raw = np.asarray(inputs[key])
        v = raw.astype(np.float64) if raw.dtype.kind in "fiub" else np.full(raw.shape, np.nan)
        v = v.reshape(a.shape) if v.size == a.size else np.full(a.shape, np.nan)
        pad = attribution.padding.get(key)
        if pad is not None and np.any(pad):
            cells = np.asarray(pad, bool).reshape(pad.shape + (1,) * (a.ndim - 2))
            a = np.where(cells, np.nan, a)
            v = np.where(cells, np.nan, v)
        values[key], attrs[key] = v, a
    return Rows(np.asarray(ids, dtype=object), np.asarray(attribution.prediction, np.float64), values, attrs)


class Store:
    """A batch output folder: its manifest, and its files read lazily (one chunk at a time)."""

    def __init__(self, path, manifest: dict):
        self.path = Path(path)
        self.manifest = manifest

    def __repr__(self) -> str:
        return (f"Store({str(self.path)!r}, customers={self.n_customers}, chunks={self.n_chunks}, "
                f"complete={self.complete})")

    @property
    def settings(self) -> dict:
        return dict(self.manifest["settings"])

    @property
    def bundle_hash(self) -> str:
        return self.manifest["bundle"]["content_hash"]

    @property
    def n_customers(self) -> int:
        return int(self.manifest["customers"]["count"])

    @property
    def chunk_size(self) -> int:
        return int(self.manifest["chunk_size"])

    @property
    def n_chunks(self) -> int:
        return int(self.manifest["n_chunks"])

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete")) and (self.path / SUCCESS).exists() and all(
            all(p.exists() for p in chunk_paths(self.path, i)) for i in range(self.n_chunks))

    def chunk_paths(self, chunk: int) -> tuple[Path, Path]:
        """(long file, summary file) of one chunk."""
        return chunk_paths(self.path, chunk)

    def done_chunks(self) -> list[int]:
        return [i for i in range(self.n_chunks) if all(p.exists() for p in chunk_paths(self.path, i))]

    def require_complete(self) -> "Store":
        if not self.complete:
            raise StoreError(INCOMPLETE.format(folder=self.path, done=len(self.done_chunks()), total=self.n_chunks))
        return self

    @property
    def completed(self) -> str:
        """When the store was finished (UTC, ISO 8601), "" if it is not."""
        return str(self.manifest.get("completed") or "")

    @property
    def outside_tolerance(self) -> int | None:
        """Customers whose attributions do not add up within the store's tolerance (None: not recorded)."""
        value = self.manifest.get("outside_tolerance")
        return None if value is None else int(value)

    def customer_ids(self) -> list[str]:
        """Every customer id, in the order of the run (from the summary files)."""
        kept = self.__dict__.get("_kept_ids")
        if kept is None:
            kept = self.summary()["customer_id"].tolist()
            if "_kept_summaries" in self.__dict__:  # a finished store: its ids do not change either
                self.__dict__["_kept_ids"] = kept
        return list(kept)

    def summary(self, ids: Sequence[str] | None = None) -> pd.DataFrame:
        """One row per customer: customer_id, prediction, baseline_prediction, delta, steps,
        gradient_points, forward_points (the last two missing from a store of format 1)."""
        return self._summary_of(self._summaries(), ids)

    def _summaries(self) -> dict[int, pa.Table]:
        """{chunk: its summary table} of every finished chunk; a finished store's are read once per ``Store`` object
        (its files do not change: a store written again is listed again as a new object), so that reading one
        customer after another (the dashboard's Customer page) does not read every summary file each time."""
        kept = self.__dict__.get("_kept_summaries")
        if kept is not None:
            return kept
        found = {i: _read_table(chunk_paths(self.path, i)[1]) for i in self.done_chunks()}
        if len(found) == self.n_chunks and self.complete:
            self.__dict__["_kept_summaries"] = found
        return found

    def _summary_of(self, summaries: dict[int, pa.Table], ids: Sequence[str] | None) -> pd.DataFrame:
        table = pa.concat_tables(list(summaries.values())) if summaries else SUMMARY_SCHEMA.empty_table()
        return _select(table, ids, self.path)

    @property
    def compact(self) -> bool:
        """True for a store of format 3 on (one row per customer), False for the long format (1 and 2)."""
        return compact(self.manifest)

    def long(self, ids: Sequence[str] | None = None, columns: Sequence[str] | None = None, *,
             bundle=None) -> pd.DataFrame:
        """The long format of ``ids`` (default: all); reads only the chunks that hold them. A compact
        store's long format is a view: its ``value`` column comes from ``bundle`` (a ``Bundle`` or its
        folder; default: the folder in the manifest), which must be the one the store was computed from."""
        if self.compact:
            return self._long_view(ids, columns, bundle)
        chunks = self.done_chunks()
        if ids is not None:
            ids = [str(i) for i in ids]
            chunks = self._chunks_holding(ids, self._summaries())
        read_columns = None if columns is None else list(dict.fromkeys(["customer_id", *columns]))
        tables = []
        for i in chunks:
            table = _read_table(chunk_paths(self.path, i)[0], read_columns)
            if ids is not None:
                table = table.filter(pc.is_in(table["customer_id"], value_set=pa.array(ids, pa.string())))
            tables.append(table)
        schema = LONG_SCHEMA if read_columns is None else pa.schema([LONG_SCHEMA.field(c) for c in read_columns])
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        frame = _select(table, ids, self.path, check=False)
        return frame if columns is None else frame[list(columns)]


    def holds(self, ids: Sequence[str]) -> bool:
        """True if every one of ``ids`` is in the store's finished chunks."""
        where = self._where()
        return all(str(cid) in where for cid in ids)

    def _where(self) -> dict[str, int]:
        """{customer id: its chunk} of the finished chunks (kept with a finished store's summaries)."""
        summaries = self._summaries()
        if summaries is not self.__dict__.get("_kept_summaries"):
            return _chunk_of(summaries)
        where = self.__dict__.get("_kept_where")
        if where is None:
            where = self.__dict__["_kept_where"] = _chunk_of(summaries)
        return where

    def _chunks_holding(self, ids: Sequence[str], summaries: dict[int, pa.Table]) -> list[int]:
        """The chunks of ``summaries`` ({chunk: summary table}) that hold ``ids``; ``StoreError``
        naming the ids that none holds."""
        if summaries is self.__dict__.get("_kept_summaries"):  # the chunk of each customer, found once
            where = self._where()
        else:
            wanted = set(ids)
            where = {cid: i for cid, i in _chunk_of(summaries).items() if cid in wanted}
        missing = [cid for cid in ids if cid not in where]
        if missing:
            raise StoreError(NOT_IN_STORE.format(count=len(missing), folder=self.path, examples=examples(missing)))
        return sorted({where[cid] for cid in ids})

    def arrays(self, bundle, ids: Sequence[str]) -> "StoredAttributions":
        """The attributions of ``ids`` as arrays shaped like the engine's (``Attribution``):
        static (n, S), temporal (n, T, F), in the order of ``ids``; a history's padded periods
        are NaN in ``temporal`` and True in ``padding[key]`` (n, T): no data, not a zero effect.

        Reads one chunk at a time, only the chunks that hold ``ids``, and checks that every
        row is where ``bundle``'s features and periods put it (``StoreError`` if not).
        """
        ids = list(dict.fromkeys(str(i) for i in ids))
        if self.compact:
            return self._compact_arrays(bundle, ids)
        n, s, t, f = len(ids), bundle.n_static, bundle.n_periods, bundle.n_temporal
        per = s + t * f
        expected = long_layout(bundle)
        # where each input's rows are among a customer's rows (model input order): the static-like
        # inputs side by side, as bundle.static holds them, and the first history, as bundle.temporal
        static_rows, temporal_rows, first = _input_rows(bundle, expected["input"])
        position = {cid: k for k, cid in enumerate(ids)}
        static, temporal = np.zeros((n, s)), np.zeros((n, t, f))
        wanted = pa.array(ids, pa.string())
        summaries = self._summaries()  # read once: which chunks to open, and the summary rows
        for chunk in self._chunks_holding(ids, summaries):
            table = _read_table(chunk_paths(self.path, chunk)[0],
                                ["customer_id", "input", "period", "feature", "attribution"])
            table = table.filter(pc.is_in(table["customer_id"], value_set=wanted))
            k = _check_layout(self.path, chunk, table, expected, per)
            codes, names = _codes(table["customer_id"])
            rows = np.array([position[cid] for cid in names[codes[::per]]], dtype=np.int64)
            # a padded cell was written as null: NaN here, "no data" (never a 0 that would enter a mean)
            values = table["attribution"].to_numpy(zero_copy_only=False).reshape(k, per)
            static[rows] = values[:, static_rows]
            temporal[rows] = values[:, temporal_rows].reshape(k, t, f)
        return self._stored(static, temporal, first, self._summary_of(summaries, ids))

    def _stored(self, static, temporal, first: str, summary: pd.DataFrame) -> "StoredAttributions":
        return StoredAttributions(
            static=static, temporal=temporal, padding={first: np.isnan(temporal).all(axis=2)},
            prediction=summary["prediction"].to_numpy(np.float64),
            baseline_prediction=summary["baseline_prediction"].to_numpy(np.float64),
            delta=summary["delta"].to_numpy(np.float64), steps=summary["steps"].to_numpy(np.int64),
            gradient_points=summary["gradient_points"].to_numpy(np.int64) if "gradient_points" in summary else None,
            path=self.path, settings=self.settings, completed=str(self.manifest.get("completed", "")))

    def rows(self, bundle, *, same_periods: bool = True) -> Iterator[Rows]:
        """Every customer's values and attributions, one chunk at a time, as
        :class:`Rows` (what ``explain.analysis.drivers.compute`` reads): each input in its shape, padded
        cells NaN (no data), a text value NaN. Checks that every row is where ``bundle``'s features
        and periods put it (``StoreError`` if not); ``same_periods=False`` lets the period labels
        differ (an earlier store of the same layout: its periods are compared by position)."""
        if self.compact:
            yield from self._compact_rows(bundle, same_periods)
            return
        expected = long_layout(bundle)
        if not same_periods:
            del expected["period"]
        per = len(expected["input"])
        for chunk in self.done_chunks():
            long_path, summary_path = chunk_paths(self.path, chunk)
            table = _read_table(long_path, ["customer_id", *expected, "value", "attribution"],
                                text=["customer_id", *expected])
            k = _check_layout(self.path, chunk, table, expected, per)
            codes, names = _codes(table["customer_id"])
            ids = names[codes[::per]]
            summary = _read_table(summary_path, ["customer_id", "prediction"])
            if summary["customer_id"].to_pylist() != ids.tolist():
                raise StoreError(WRONG_LAYOUT.format(folder=self.path, chunk=chunk, why=(
                    "its summary file lists other customers than its long file")))
            values = _numbers(table["value"]).reshape(k, per)
            attributions = table["attribution"].to_numpy().reshape(k, per)
            by_input, at = {}, 0
            for view in input_views(bundle):
                shape = (len(view.features),) if view.role == "static" else (len(view.periods), len(view.features))
                width = int(np.prod(shape))
                by_input[view.key] = (values[:, at:at + width].reshape(k, *shape),
                                      attributions[:, at:at + width].reshape(k, *shape))
                at += width
            yield Rows(ids=ids, prediction=summary["prediction"].to_numpy(),
                       values={key: v for key, (v, _) in by_input.items()},
                       attributions={key: a for key, (_, a) in by_input.items()})


    # ---- a compact store (format 3): one row per customer, each input's cells as a list

    @property
    def inputs(self) -> list[dict]:
        """A compact store's inputs: key, role, features, periods (None: static), width (cells per customer)."""
        return list(self.manifest.get("inputs") or [])

    def chunk_arrays(self, chunk: int, ids: Sequence[str] | None = None) -> tuple[np.ndarray, dict]:
        """(ids (k,), {input key: (k, *shape) float64 attributions, NaN where there is no data}) of one
        chunk of a compact store (only ``ids`` of it, in the file's order, when given); shape: (S,) or (T, F)."""
        path = chunk_paths(self.path, chunk)[0]
        table = _read_table(path, ["customer_id", *(spec["key"] for spec in self.inputs)])
        if ids is not None:
            table = table.filter(pc.is_in(table["customer_id"], value_set=pa.array(list(ids), pa.string())))
        got = np.asarray(table["customer_id"].to_pylist(), dtype=object)
        arrays = {}
        for spec in self.inputs:
            column = table[spec["key"]].combine_chunks()
            if getattr(column.type, "list_size", None) != spec["width"]:
                raise StoreError(UNREADABLE_CHUNK.format(path=path, why=(
                    f"column {spec['key']!r} is {column.type}, the manifest says {spec['width']} cells per customer")))
            cells = column.flatten().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)  # null: NaN
            shape = (len(spec["features"]),) if spec["periods"] is None else (len(spec["periods"]),
                                                                            len(spec["features"]))
            arrays[spec["key"]] = cells.reshape(len(got), *shape)
        return got, arrays

    def _check_inputs(self, bundle, same_periods: bool = True) -> None:
        """``StoreError`` (``WRONG_INPUTS``) unless the compact store's cells are where ``bundle``'s
        features and periods put them (the same words as a long store's check)."""
        stored, expected = _layout_of(self.inputs), long_layout(bundle)
        if not same_periods:
            del stored["period"], expected["period"]
        if len(stored["input"]) != len(expected["input"]):
            raise StoreError(WRONG_INPUTS.format(folder=self.path, why=(
                f"{len(stored['input'])} cells per customer in the store, this bundle has {len(expected['input'])} "
                f"({', '.join(f'{n} {key}' for key, n in Counter(expected['input']).items())})")))
        for name, values in expected.items():
            bad = np.flatnonzero(stored[name] != values)
            if bad.size:
                j = int(bad[0])
                raise StoreError(WRONG_INPUTS.format(folder=self.path, why=(
                    f"row {j + 1} of a customer has {name} {stored[name][j]!r}, this bundle expects {values[j]!r}")))

    def _compact_arrays(self, bundle, ids: list[str]) -> "StoredAttributions":
        self._check_inputs(bundle)
        n, s, t, f = len(ids), bundle.n_static, bundle.n_periods, bundle.n_temporal
        static_keys = [spec["key"] for spec in self.inputs if spec["role"] == "static"]
        first = next(spec["key"] for spec in self.inputs if spec["role"] == "temporal")
        position = {cid: k for k, cid in enumerate(ids)}
        static, temporal = np.zeros((n, s)), np.zeros((n, t, f))
        summaries = self._summaries()  # read once: which chunks to open, and the summary rows
        for chunk in self._chunks_holding(ids, summaries):
            got, arrays = self.chunk_arrays(chunk, ids)
            rows = np.array([position[cid] for cid in got], dtype=np.int64)
            if static_keys:
                static[rows] = np.concatenate([arrays[key] for key in static_keys], axis=1)
            temporal[rows] = arrays[first]
        return self._stored(static, temporal, first, self._summary_of(summaries, ids))

    def _compact_rows(self, bundle, same_periods: bool) -> Iterator[Rows]:
        self._check_inputs(bundle, same_periods)
        known = {str(i): k for k, i in enumerate(bundle.ids)}
        for chunk in self.done_chunks():
            ids, arrays = self.chunk_arrays(chunk)
            summary = _read_table(chunk_paths(self.path, chunk)[1], ["customer_id", "prediction"])
            if summary["customer_id"].to_pylist() != ids.tolist():
                raise StoreError(WRONG_LAYOUT.format(folder=self.path, chunk=chunk, why=(
                    "its summary file lists other customers than its part file")))
            yield Rows(ids=ids, prediction=summary["prediction"].to_numpy(), attributions=arrays,
                       values=_bundle_values(bundle, ids, arrays, known))

    def _long_view(self, ids, columns, bundle) -> pd.DataFrame:
        """The long format of a compact store (format 1 and 2's rows, row for row), a chunk at a time."""
        bundle = self._values_bundle(bundle)
        self._check_inputs(bundle)
        summaries = self._summaries()
        chunks = self.done_chunks() if ids is None else self._chunks_holding([str(i) for i in ids], summaries)
        frames = []
        for chunk in chunks:
            got, arrays = self.chunk_arrays(chunk, None if ids is None else [str(i) for i in ids])
            view = SimpleNamespace(inputs=arrays, padding={
                spec["key"]: np.isnan(arrays[spec["key"]]).all(axis=2) for spec in self.inputs
                if spec["role"] == "temporal"})
            frame = long_frame(view, bundle, list(got))
            frames.append(frame if columns is None else frame[list(dict.fromkeys(["customer_id", *columns]))])
        if frames:
            frame = pd.concat(frames, ignore_index=True)
        else:
            frame = pd.DataFrame({c: [] for c in (LONG_SCHEMA.names if columns is None else
                                                  dict.fromkeys(["customer_id", *columns]))})
        if ids is not None:
            position = {cid: k for k, cid in enumerate(dict.fromkeys(str(i) for i in ids))}
            order = np.argsort(frame["customer_id"].map(position).to_numpy(), kind="stable")
            frame = frame.iloc[order].reset_index(drop=True)
        return frame if columns is None else frame[list(columns)]

    def _values_bundle(self, bundle):
        """The bundle whose values the long view shows: ``bundle`` (or the manifest's), of this store's content."""
        if bundle is None:
            where = (self.manifest.get("bundle") or {}).get("path")
            if not where or not Path(where).is_dir():
                raise StoreError(NEEDS_BUNDLE.format(folder=self.path,
                                                     why=f"its manifest names {where!r}, not a folder"))
            bundle = where
        if isinstance(bundle, (str, os.PathLike)):
            from explain.bundle.load import load_bundle

            bundle = load_bundle(bundle)
        if getattr(bundle, "content_hash", None) != self.bundle_hash:
            raise StoreError(NEEDS_BUNDLE.format(folder=self.path, why=(
                f"the bundle given has content hash {str(getattr(bundle, 'content_hash', None))[:12]}..., the store "
                f"was computed from {self.bundle_hash[:12]}...")))
        return bundle

    def array_view(self, ids: Sequence[str] | None = None) -> dict:
        """A compact store's attributions of ``ids`` (default: all, in the order of the run) as
        {input key: (n, *shape) float64, NaN where there is no data}, in the order of ``ids``."""
        if not self.compact:
            raise StoreError(OLD_FORMAT_ARRAYS.format(folder=self.path, version=self.manifest.get("format_version")))
        summaries = self._summaries()
        wanted = None if ids is None else list(dict.fromkeys(str(i) for i in ids))
        chunks = self.done_chunks() if wanted is None else self._chunks_holding(wanted, summaries)
        parts = [self.chunk_arrays(chunk, wanted) for chunk in chunks]
        got = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, object)
        order = np.arange(len(got)) if wanted is None else np.argsort(
            pd.Series(got).map({cid: k for k, cid in enumerate(wanted)}).to_numpy(), kind="stable")
        return {spec["key"]: np.concatenate([p[1][spec["key"]] for p in parts])[order] if parts else
                np.zeros((0, spec["width"])) for spec in self.inputs}


def _layout_of(inputs: list[dict]) -> dict[str, np.ndarray]:
    """A compact store's cells as ``analysis.report.long_layout`` gives a bundle's: input, period, feature of each."""
    columns = {"input": [], "period": [], "feature": []}
    for spec in inputs:
        periods = [""] if spec["periods"] is None else spec["periods"]
        for period in periods:
            for feature in spec["features"]:
                columns["input"].append(spec["key"])
                columns["period"].append(period)
                columns["feature"].append(feature)
    return {name: np.array(values, dtype=object) for name, values in columns.items()}


def _bundle_values(bundle, ids: np.ndarray, arrays: dict, known: dict) -> dict:
    """{input key: values shaped as ``arrays``} of ``ids`` from ``bundle`` (float64; NaN for a text value,
    where the attribution is NaN (no data) and for a customer the bundle does not hold)."""
    rows = [k for k, cid in enumerate(ids) if cid in known]
    inputs = bundle.inputs_for([ids[k] for k in rows]) if rows else {}
    out = {}
    for key, attr in arrays.items():
        values = np.full(attr.shape, np.nan)
        if rows and key in inputs:
            raw = np.asarray(inputs[key])
            if raw.dtype.kind in "fiub" and raw.size == len(rows) * int(np.prod(attr.shape[1:])):
                values[rows] = raw.astype(np.float64).reshape(len(rows), *attr.shape[1:])
        values[np.isnan(attr)] = np.nan
        out[key] = values
    return out


def _input_rows(bundle, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """(positions of the static-like inputs' rows, positions of the first history's rows, that
    history's key) among one customer's rows of the long format, whose ``input`` column is ``inputs``."""
    views = input_views(bundle)
    static = [np.flatnonzero(inputs == view.key) for view in views if view.role == "static"]
    first = next(view.key for view in views if view.role == "temporal")
    return np.concatenate(static) if static else np.zeros(0, np.int64), np.flatnonzero(inputs == first), first


@dataclass(frozen=True)
class StoredAttributions:
    """Attributions read back from a store: the arrays of ``explain.core.ig.Attribution`` (static
    (n, S), temporal (n, T, F), prediction, baseline_prediction, delta, steps) and where they
    came from."""

    static: np.ndarray
    temporal: np.ndarray     # (n, T, F): NaN at padded periods
    padding: dict            # {the history's key: (n, T) bool, True where it is padding}, as Attribution's
    prediction: np.ndarray
    baseline_prediction: np.ndarray
    delta: np.ndarray
    steps: np.ndarray
    path: Path
    settings: dict
    completed: str  # when the batch run finished (UTC, ISO 8601)
    gradient_points: np.ndarray | None = None  # (n,) evaluations spent per customer (None: a format-1 store)

    @property
    def n_customers(self) -> int:
        return int(self.prediction.shape[0])

    def total(self) -> np.ndarray:
        """Sum of all attributions per customer (padded periods count as nothing)."""
        return self.static.sum(axis=1) + np.nansum(self.temporal, axis=(1, 2))


def _read_table(path: Path, columns: Sequence[str] | None = None, text: Sequence[str] = ()) -> pa.Table:
    """One Parquet file of a store; ``StoreError`` (not an Arrow traceback) if it is damaged.
    ``text``: columns read as Arrow dictionaries (codes and distinct values, as Parquet keeps
    them: no string per row is made)."""
    try:
        return pq.read_table(path, columns=None if columns is None else list(columns),
                             read_dictionary=list(text) or None)
    except (OSError, pa.ArrowException) as error:
        raise StoreError(UNREADABLE_CHUNK.format(path=path, why=one_line(error))) from None


def _codes(column) -> tuple[np.ndarray, np.ndarray]:
    """(codes (rows,) int, distinct values (object)) of a text column (read as a dictionary, or
    encoded here in one hash pass): millions of rows are compared as integers."""
    encoded = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(encoded.type):
        encoded = pc.dictionary_encode(encoded)
    return encoded.indices.to_numpy(zero_copy_only=False), np.asarray(encoded.dictionary.to_pylist(), dtype=object)


def _check_layout(folder, chunk: int, table: pa.Table, expected: dict, per: int) -> int:
    """The number of customers in a chunk's long ``table``, once every row is checked to be where
    ``expected`` ({column: (per,) values of one customer}, ``long_layout``) puts it, and each
    customer's rows are together; ``StoreError`` (``WRONG_LAYOUT``) naming the first misplaced row."""
    if table.num_rows % per:
        raise StoreError(WRONG_LAYOUT.format(folder=folder, chunk=chunk, why=(
            f"{table.num_rows} rows for the customers asked for, not a multiple of the {per} rows per customer "
            f"this bundle has ({', '.join(f'{n} {key}' for key, n in Counter(expected['input']).items())})")))
    k = table.num_rows // per
    ids = _codes(table["customer_id"])[0].reshape(k, per)
    if not (ids == ids[:, :1]).all():
        raise StoreError(WRONG_LAYOUT.format(folder=folder, chunk=chunk, why="a customer's rows are not together"))
    for name, values in expected.items():
        codes, names = _codes(table[name])
        codes = codes.reshape(k, per)
        lookup = {value: i for i, value in enumerate(names)}
        wanted = np.array([lookup.get(value, -1) for value in values], dtype=codes.dtype if codes.size else np.int64)
        bad = np.flatnonzero((codes != wanted).any(axis=0))
        if bad.size:
            j = int(bad[0])
            got = names[codes[:, j][codes[:, j] != wanted[j]][0]]
            raise StoreError(WRONG_LAYOUT.format(folder=folder, chunk=chunk, why=(
                f"row {j + 1} of a customer has {name} {got!r}, this bundle expects {values[j]!r}")))
    return k


def _numbers(column) -> np.ndarray:
    """A value column as float64: numbers as they are, null and text (a category) NaN."""
    if pa.types.is_floating(column.type) or pa.types.is_integer(column.type):
        return column.to_numpy().astype(np.float64)
    return pd.to_numeric(pd.Series(column.to_pylist(), dtype=object), errors="coerce").to_numpy(np.float64)


def _select(table: pa.Table, ids, folder, check: bool = True) -> pd.DataFrame:
    """``table`` as pandas, restricted to ``ids`` in their order (stable within a customer)."""
    if ids is None:
        return table.to_pandas()
    ids = [str(i) for i in ids]
    table = table.filter(pc.is_in(table["customer_id"], value_set=pa.array(ids, pa.string())))
    frame = table.to_pandas()
    if check:
        missing = sorted(set(ids) - set(frame["customer_id"]), key=ids.index)
        if missing:
            raise StoreError(NOT_IN_STORE.format(count=len(missing), folder=folder, examples=examples(missing)))
    position = {cid: k for k, cid in enumerate(dict.fromkeys(ids))}
    order = np.argsort(frame["customer_id"].map(position).to_numpy(), kind="stable")
    return frame.iloc[order].reset_index(drop=True)


def open_store(out) -> Store:
    """The batch output folder ``out`` (finished or not); ``StoreError`` if it is not one."""
    folder = output_folder(out)
    if not (folder / MANIFEST).is_file():
        raise StoreError(NO_MANIFEST.format(folder=folder, manifest=MANIFEST))
    manifest, _ = inspect_folder(folder, None)
    return Store(folder, manifest)


def read_store(path, ids: Sequence[str] | None = None, *, long: bool = True,
               bundle=None) -> tuple[pd.DataFrame | dict, pd.DataFrame]:
    """(long frame, summary frame) of a finished store, for ``ids`` (default: every customer),
    in the order of ``ids`` (or of the run).

    ``long=False`` (a compact store): the attributions as arrays instead of the long frame,
    {input key: (n, S) or (n, T, F) float64, NaN where a history is padding}. The long frame of a
    compact store is a view built a chunk at a time, its ``value`` column read from ``bundle`` (a
    ``Bundle`` or its folder; default: the folder in the manifest, if it still holds the same
    content); it holds a row per customer and cell, so read only the ``ids`` you need."""
    store = open_store(path).require_complete()
    if not long:
        return store.array_view(ids), store.summary(ids)
    return store.long(ids, bundle=bundle), store.summary(ids)


def settings_words(settings: dict, output_names: Sequence[str] | None = None) -> str:
    """A store's settings in a few words: its exactness first ("adaptive steps (each customer's effects
    add up within 0.5 %)", "64 steps"), then the baseline, and the space, path and target (by its
    name in ``output_names`` when given) when not the defaults."""
    if settings.get("steps") == AUTO:
        share = f"{100 * float(settings.get('tolerance', DEFAULT_TOLERANCE)):.3g} %"
        words = [f"adaptive steps (each customer's effects add up within {share})"]
    else:
        words = [f"{settings.get('steps')} steps"]
    words.append(f"baseline {settings.get('baseline')}")
    if settings.get("space", "output") != "output":
        words.append("in log-odds" if settings["space"] == "logit" else f"{settings['space']} space")
    if settings.get("path", "joint") != "joint":
        words.append(f"{settings['path']} path")
    target = settings.get("target")
    if target not in (None, 0):
        named = output_names is not None and isinstance(target, int) and 0 <= target < len(output_names)
        words.append(f"output {output_names[target] if named else target}")
    return ", ".join(words)


def _chunk_of(summaries: dict[int, pa.Table]) -> dict[str, int]:
    """{customer id: the chunk whose summary holds it} (the last, where one is in two)."""
    where: dict[str, int] = {}
    for i, table in summaries.items():
        where.update(dict.fromkeys(table.column("customer_id").to_pylist(), i))
    return where
