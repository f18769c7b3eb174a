"""The batch store's files: what the local job (``explain.batch.local``), the Ray engine
(``explain.batch.ray_job``, ``explain.batch.ray_store``) and the reader (``explain.batch.store``) share.

The output folder (``OUT``; a name ending in ``.parquet`` is a folder too, the usual name of a
Parquet dataset), format version 3 (the compact store, written since issue 26)::

    OUT/_manifest.json                 settings, bundle hash, customer list hash, chunk size, the
                                       inputs (key, role, features, periods) ...
    OUT/part-00000.parquet ...         the attributions, one file per chunk, ONE ROW PER CUSTOMER:
                                       customer_id, then one column per model input (by its key:
                                       "static", "temporal" for a plain bundle), a fixed-size list
                                       of float64 of the input's cells (S; a history T x F, period
                                       by period), null where the history is padding (no data)
    OUT/_summary/summary-00000.parquet one row per customer, one file per chunk:
                                       customer_id, prediction, baseline_prediction, delta, steps,
                                       gradient_points, forward_points (evaluations spent)
    OUT/_SUCCESS                       written last, once every chunk is there

The input values are not stored (they are the bundle's): ``explain.batch.store`` gives the long
format of docs/cli.md as a view (``read_store``), with the values read from the bundle. Stores of
format 1 and 2 (the long format in the part files: customer_id, input, period, feature, value,
attribution; one row per customer and cell) are still read.

Parquet readers skip names starting with ``_`` or ``.``, so ``pandas.read_parquet(OUT)`` reads
the part files only. Each file also carries the settings and the bundle hash as Parquet
key-value metadata (key ``explain.batch``). Every file is written through
``files.write_atomic`` (a hidden temporary file, then a rename), so a chunk file exists whole
or not at all.

Here: the names and schemas, the manifest (``new_manifest``, ``completed``), the identity a
folder is checked against, the checks that refuse a folder (``inspect_folder``), the lock
(``FolderLock``), and one chunk's two files (``chunk_paths``, ``verify_chunk``, ``write_chunk``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from explain.analysis.report import SUMMARY_COLUMNS, input_views
from explain.core.errors import ExplainError
from explain.core.files import write_atomic
from explain.core.settings import DEFAULT_TOLERANCE, Settings, outside_tolerance
from explain.core.text import examples, one_line

FORMAT = "explain-batch"
# 2: the summary's gradient_points and forward_points; the manifest's outside_tolerance.
# 3: the part files hold one row per customer, each input's attributions as a fixed-size list (compact).
FORMAT_VERSION = 3
COMPACT_SINCE = 3  # stores of an older version hold the long format in their part files
MANIFEST = "_manifest.json"
SUCCESS = "_SUCCESS"
SUMMARY_DIR = "_summary"
LOCK = ".lock"
PART = "part-{:05d}.parquet"
SUMMARY = "summary-{:05d}.parquet"
METADATA_KEY = b"explain.batch"

_PART_RE = re.compile(r"part-(\d{5,})\.parquet")
_SUMMARY_RE = re.compile(r"summary-(\d{5,})\.parquet")
TEMP_RE = re.compile(r"\..+\.part")  # files.write_atomic's temporary files (and ray_store's uploads)

LONG_SCHEMA = pa.schema([("customer_id", pa.string()), ("input", pa.string()), ("period", pa.string()),
                         ("feature", pa.string()), ("value", pa.float64()), ("attribution", pa.float64())])
# A bundle with a text input (a category as text, read by a StringLookup): ``value`` is text, every
# value as ``analysis.report.long_frame`` writes it (numbers as text, "" where a history is padding).
LONG_TEXT_SCHEMA = LONG_SCHEMA.set(LONG_SCHEMA.get_field_index("value"), pa.field("value", pa.string()))
SUMMARY_SCHEMA = pa.schema([("customer_id", pa.string()), ("prediction", pa.float64()),
                            ("baseline_prediction", pa.float64()), ("delta", pa.float64()),
                            ("steps", pa.int64()), ("gradient_points", pa.int64()),
                            ("forward_points", pa.int64())])

# ---- messages (tests match these) ------------------------------------------------------------
START_OVER = ("Nothing was changed. To keep it, choose a new --out folder; to start over, delete "
              "the folder ({delete}). (There is no --force on purpose.)")
NOT_A_FOLDER = ("--out {path} is a file, not a folder. The batch output is a folder (a Parquet dataset); "
                "choose another name.")
CORRUPT_MANIFEST = ("Refusing to use {folder}: its manifest {manifest} cannot be read ({why}), so "
                    "the files there cannot be checked against these settings. " + START_OVER)
FOREIGN_FILES = ("Refusing to write into {folder}: it holds {count} file(s) this tool did not write: "
                 "{files}. A batch output folder must be new, empty, or an earlier run of the same "
                 "batch. " + START_OVER)
DIFFERENT_RUN = ("Refusing to resume in {folder}: it holds a batch run that differs from this one: "
                 "{differences}. Resuming would mix results. " + START_OVER)
UNWRITABLE_CHUNK = ("Chunk {chunk}'s {kind} table cannot be written as Parquet ({why}); nothing of this chunk was "
                    "kept.")
LOCKED = ("Another batch run is writing into {folder} right now (its lock file {lock} is held). "
          "Wait for it to finish, or choose another --out.")


class StoreError(ExplainError):
    """A batch output folder cannot be used (refused, corrupt, incomplete)."""


# ---- settings and identity --------------------------------------------------------------------


def store_settings(settings: Settings, bundle=None) -> dict:
    """The settings a store is identified by: ``Settings.identity()`` with the target resolved
    against the bundle's output names (a name and its index are the same store)."""
    if bundle is not None:
        settings = settings.for_bundle(bundle)
    return settings.identity()


def customers_hash(ids: Sequence[str]) -> str:
    """sha256 of the ordered customer ids, one per line."""
    digest = sha256()
    for cid in ids:
        digest.update(str(cid).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def _identity(manifest: dict) -> dict:
    return {
        "format_version": manifest.get("format_version"),
        "settings": manifest.get("settings"),
        "bundle_hash": (manifest.get("bundle") or {}).get("content_hash"),
        "customers_count": (manifest.get("customers") or {}).get("count"),
        "customers_sha256": (manifest.get("customers") or {}).get("sha256"),
        "chunk_size": manifest.get("chunk_size"),
    }


def _differences(stored: dict, wanted: dict) -> list[str]:
    a, b = _identity(stored), _identity(wanted)
    out = []
    if a["format_version"] != b["format_version"]:
        out.append(f"format version: stored {a['format_version']!r}, this tool writes {b['format_version']!r}")
    sa, sb = a["settings"] or {}, b["settings"] or {}
    for key in list(dict.fromkeys([*sb, *sa])):
        if sa.get(key, "(missing)") != sb.get(key, "(missing)"):
            out.append(f"setting {key}: stored {sa.get(key, '(missing)')!r}, requested {sb.get(key, '(missing)')!r}")
    if a["bundle_hash"] != b["bundle_hash"]:
        out.append(f"bundle content hash: stored {str(a['bundle_hash'])[:12]}..., this bundle "
                   f"{str(b['bundle_hash'])[:12]}... (the model or its data changed)")
    if (a["customers_count"], a["customers_sha256"]) != (b["customers_count"], b["customers_sha256"]):
        out.append(f"customers: stored {a['customers_count']} (list sha256 {str(a['customers_sha256'])[:12]}...), "
                   f"requested {b['customers_count']} (list sha256 {str(b['customers_sha256'])[:12]}...)")
    if a["chunk_size"] != b["chunk_size"]:
        out.append(f"chunk size (--batch-size): stored {a['chunk_size']!r}, requested {b['chunk_size']!r}")
    return out


def compact(manifest: dict) -> bool:
    """True for a store whose part files hold one row per customer (format 3 on), False for the long format."""
    return int(manifest.get("format_version", 1)) >= COMPACT_SINCE


def part_kind(manifest: dict) -> str:
    """What a store's part files hold: "arrays" (compact) or "long"."""
    return "arrays" if compact(manifest) else "long"


def _file_metadata(manifest: dict, kind: str, chunk: int) -> dict:
    return {"format": FORMAT, "format_version": manifest.get("format_version", FORMAT_VERSION), "kind": kind,
            "chunk": chunk,
            "n_chunks": manifest["n_chunks"], "chunk_size": manifest["chunk_size"],
            "settings": manifest["settings"], "bundle_hash": manifest["bundle"]["content_hash"],
            "customers_sha256": manifest["customers"]["sha256"]}


def now() -> str:
    """The time, UTC, ISO 8601 to the second (the manifest's ``created`` and ``completed``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _delete_hint(folder: Path) -> str:
    return f"rm -r '{folder}'"


# ---- the folder -----------------------------------------------------------------------------


def output_folder(out) -> Path:
    """The folder of ``--out``: the path itself, also when it ends in ``.parquet``."""
    return Path(out).expanduser()


def _scan(folder: Path, n_chunks: int | None):
    """(foreign entries, temporary files) of a batch folder. ``n_chunks`` bounds the chunk numbers."""
    foreign, temps = [], []

    def chunk_ok(match) -> bool:
        return match is not None and (n_chunks is None or int(match.group(1)) < n_chunks)

    for entry in sorted(folder.iterdir()):
        name = entry.name
        if TEMP_RE.fullmatch(name) and entry.is_file():
            temps.append(entry)
        elif name in (MANIFEST, SUCCESS, LOCK) and entry.is_file():
            continue
        elif name == SUMMARY_DIR and entry.is_dir():
            for sub in sorted(entry.iterdir()):
                if TEMP_RE.fullmatch(sub.name) and sub.is_file():
                    temps.append(sub)
                elif not (sub.is_file() and chunk_ok(_SUMMARY_RE.fullmatch(sub.name))):
                    foreign.append(f"{SUMMARY_DIR}/{sub.name}")
        elif not (entry.is_file() and chunk_ok(_PART_RE.fullmatch(name))):
            foreign.append(name + ("/" if entry.is_dir() else ""))
    return foreign, temps


def _read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise StoreError(CORRUPT_MANIFEST.format(folder=folder, manifest=path, why=one_line(error),
                                                 delete=_delete_hint(folder))) from None
    why = None
    if not isinstance(manifest, dict):
        why = "not a JSON object"
    elif manifest.get("format") != FORMAT:
        why = f"its 'format' is {manifest.get('format')!r}, not {FORMAT!r}: another tool wrote it"
    else:
        checks = {"format_version": int, "settings": dict, "bundle": dict, "customers": dict,
                  "chunk_size": int, "n_chunks": int, "rows_per_customer": int}
        missing = [key for key, kind in checks.items() if not isinstance(manifest.get(key), kind)]
        if missing:
            why = f"missing or malformed key(s): {', '.join(missing)}"
        elif not isinstance(manifest["customers"].get("count"), int) or manifest["chunk_size"] < 1:
            why = "malformed 'customers' or 'chunk_size'"
    if why:
        raise StoreError(CORRUPT_MANIFEST.format(folder=folder, manifest=path, why=why,
                                                 delete=_delete_hint(folder)))
    return manifest


def inspect_folder(folder: Path, wanted: dict | None) -> tuple[dict | None, list[Path]]:
    """Check an existing folder (read-only). Returns (stored manifest or None, temporary files);
    raises StoreError when the folder must be refused."""
    if not folder.exists():
        return None, []
    if not folder.is_dir():
        raise StoreError(NOT_A_FOLDER.format(path=folder))
    if (folder / MANIFEST).exists():
        stored = _read_manifest(folder)
        foreign, temps = _scan(folder, stored["n_chunks"])
    else:
        # a new folder, or one whose run was killed before its manifest was renamed into place:
        # nothing but temporary files and the lock file may be there
        stored = None
        temps = [e for e in folder.iterdir() if TEMP_RE.fullmatch(e.name) and e.is_file()]
        foreign = [e.name + ("/" if e.is_dir() else "") for e in sorted(folder.iterdir())
                   if e not in temps and e.name != LOCK]
    if foreign:
        shown = examples(foreign)
        raise StoreError(FOREIGN_FILES.format(folder=folder, count=len(foreign), files=shown,
                                              delete=_delete_hint(folder)))
    if stored is not None and wanted is not None:
        differences = _differences(stored, wanted)
        if differences:
            raise StoreError(DIFFERENT_RUN.format(folder=folder, differences="; ".join(differences),
                                                  delete=_delete_hint(folder)))
    return stored, temps


class FolderLock:
    """An exclusive ``flock`` on ``folder/.lock`` (released by the kernel if the process dies)."""

    def __init__(self, folder: Path):
        self.path = folder / LOCK
        self.handle = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            return self
        self.handle = open(self.path, "a+")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.handle.close()
            self.handle = None
            raise StoreError(LOCKED.format(folder=self.path.parent, lock=self.path)) from None
        return self

    def __exit__(self, *exc):
        if self.handle is not None:
            self.handle.close()  # releases the lock
            self.handle = None


def chunk_paths(folder: Path, chunk: int) -> tuple[Path, Path]:
    return folder / PART.format(chunk), folder / SUMMARY_DIR / SUMMARY.format(chunk)


def verify_chunk(folder: Path, manifest: dict, chunk: int, ids: Sequence[str]) -> str | None:
    """None if both files of ``chunk`` exist, read back, carry this run's metadata and hold
    exactly ``ids`` (in order); else why not."""
    part_path, summary_path = chunk_paths(folder, chunk)
    if not part_path.exists() and not summary_path.exists():
        return "missing"
    rows_per_customer = manifest["rows_per_customer"]
    kind = part_kind(manifest)
    try:
        for path, kind in ((summary_path, "summary"), (part_path, kind)):
            if not path.exists():
                return f"{path.name} missing"
            meta = pq.read_schema(path).metadata or {}
            stored = json.loads(meta.get(METADATA_KEY, b"{}"))
            expected = _file_metadata(manifest, kind, chunk)
            if stored != expected:
                return f"{path.name} was written by another run"
            file = pq.ParquetFile(path)
            column = file.read(columns=["customer_id"]).column("customer_id").to_pylist()
            if kind in ("summary", "arrays"):
                if column != list(ids):
                    return f"{path.name} holds other customers"
                if kind == "arrays" and file.metadata.num_rows != len(ids):
                    return f"{path.name} holds other rows"
            else:
                if len(column) != rows_per_customer * len(ids) or column[::rows_per_customer] != list(ids):
                    return f"{path.name} holds other customers or rows"
    except (OSError, ValueError, pa.ArrowException) as error:
        return f"unreadable ({one_line(error)})"
    return None


def _write_table(path: Path, table: pa.Table) -> None:
    write_atomic(path, lambda tmp: pq.write_table(table, tmp, **_parquet_options(table)), readable=True)


def _parquet_options(table: pa.Table) -> dict:
    """zstd; the float cells of an arrays file split by byte (they compress a third better); ids as a dictionary."""
    split = [f"{field.name}.list.element" for field in table.schema if pa.types.is_fixed_size_list(field.type)]
    if not split:
        return {}
    return {"compression": "zstd", "use_dictionary": ["customer_id"], "use_byte_stream_split": split}


def write_json(path: Path, document: dict) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8"),
                 readable=True)


def write_success(folder: Path) -> None:
    """The ``_SUCCESS`` marker, written last."""
    write_atomic(folder / SUCCESS, lambda tmp: tmp.write_text("", encoding="utf-8"), readable=True)


def remove_temporary_files(folder: Path) -> int:
    """Remove the temporary files of writers killed mid-write (in ``folder`` and its summaries)."""
    temps = [p for base in (folder, folder / SUMMARY_DIR) if base.is_dir() for p in base.iterdir()
             if TEMP_RE.fullmatch(p.name) and p.is_file()]
    for temp in temps:
        temp.unlink(missing_ok=True)
    return len(temps)


def long_schema(long: pd.DataFrame) -> pa.Schema:
    """The long table's schema: ``value`` as text when the frame holds text (a bundle with a text input)."""
    return LONG_SCHEMA if pd.api.types.is_numeric_dtype(long["value"].dtype) else LONG_TEXT_SCHEMA


def _table(frame: pd.DataFrame, schema: pa.Schema, metadata: dict, chunk: int, kind: str) -> pa.Table:
    try:
        table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    except (pa.ArrowException, ValueError, TypeError) as error:
        raise StoreError(UNWRITABLE_CHUNK.format(chunk=chunk, kind=kind, why=one_line(error))) from None
    return _with_metadata(table, metadata)


def _with_metadata(table: pa.Table, metadata: dict) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps(metadata, sort_keys=True).encode("utf-8")
    return table.replace_schema_metadata(meta)


def arrays_table(manifest: dict, chunk: int, ids: Sequence[str], arrays: dict) -> pa.Table:
    """One chunk's part file of a compact store: ``customer_id`` and, per input of the manifest's
    ``inputs``, ``arrays[key]`` (c, *cells) float64 as a fixed-size list of its cells (NaN: null)."""
    columns = {"customer_id": pa.array([str(i) for i in ids], pa.string())}
    try:
        for spec in manifest["inputs"]:
            width = spec["width"]
            cells = np.ascontiguousarray(np.asarray(arrays[spec["key"]], np.float64).reshape(len(ids), width))
            values = pa.array(cells.reshape(-1), pa.float64(), from_pandas=True)  # NaN (padding) -> null
            columns[spec["key"]] = pa.FixedSizeListArray.from_arrays(values, width)
    except (pa.ArrowException, ValueError, TypeError, KeyError) as error:
        raise StoreError(UNWRITABLE_CHUNK.format(chunk=chunk, kind="arrays", why=one_line(error))) from None
    return _with_metadata(pa.table(columns), _file_metadata(manifest, "arrays", chunk))


def write_chunk(folder: Path, manifest: dict, chunk: int, arrays: dict, summary: pd.DataFrame) -> int:
    """Write one chunk's two files (a compact store): ``arrays`` ({input key: (c, *cells) float64
    attributions, NaN where there is no data}) and the summary frame (its ``customer_id`` in the
    chunk's order). Both tables are converted first, then the summary is written, then the
    part file; if the part file cannot be written the summary is removed again, so a chunk is
    whole or absent (``verify_chunk`` counts a chunk done only when both files read back).
    Returns the long-format rows the chunk stands for."""
    part_path, summary_path = chunk_paths(folder, chunk)
    ids = summary["customer_id"].astype(str).tolist()
    summary_table = _table(summary, SUMMARY_SCHEMA, _file_metadata(manifest, "summary", chunk), chunk, "summary")
    part_table = arrays_table(manifest, chunk, ids, arrays)
    _write_table(summary_path, summary_table)
    try:
        _write_table(part_path, part_table)
    except BaseException:
        summary_path.unlink(missing_ok=True)
        raise
    return len(ids) * manifest["rows_per_customer"]


# ---- the manifest ---------------------------------------------------------------------------


def new_manifest(bundle, ids: Sequence[str], request: Settings, chunk_size: int) -> dict:
    """The manifest of a new store of ``ids`` of ``bundle`` (also the identity a folder is checked
    against); the local and the Ray engine write the same one."""
    inputs = store_inputs(bundle)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "written_by": "explain.batch.local (python -m explain batch)",
        "created": now(),
        "settings": store_settings(request, bundle),
        "bundle": {"content_hash": bundle.content_hash,
                   "path": str(Path(bundle.path).resolve()) if bundle.path is not None else None},
        "customers": {"count": len(ids), "sha256": customers_hash(ids), "all": ids == [str(i) for i in bundle.ids],
                      "first": ids[0], "last": ids[-1]},
        "chunk_size": chunk_size,
        "n_chunks": -(-len(ids) // chunk_size),
        "rows_per_customer": bundle.n_static + bundle.n_periods * bundle.n_temporal,
        "inputs": inputs,
        "layout": {"arrays": "part-NNNNN.parquet", "summary": f"{SUMMARY_DIR}/summary-NNNNN.parquet",
                   "metadata_key": METADATA_KEY.decode()},
        "columns": {"arrays": ["customer_id", *(spec["key"] for spec in inputs)], "summary": SUMMARY_COLUMNS},
        "complete": False,
    }


def store_inputs(bundle) -> list[dict]:
    """The inputs of a compact store, in model order: key, role, features, periods (a history's;
    None for a static input) and width (cells per customer: S, or T x F period by period)."""
    out = []
    for view in input_views(bundle):
        periods = None if view.periods is None else [str(p) for p in view.periods]
        width = len(view.features) * (1 if periods is None else len(periods))
        out.append({"key": str(view.key), "role": view.role, "features": [str(f) for f in view.features],
                    "periods": periods, "width": width})
    return out


def count_outside_tolerance(summaries: Iterable[pd.DataFrame], settings: dict) -> int:
    """How many customers of the ``summaries`` (summary frames) have attributions that do not add
    up within the ``settings``' tolerance (``core.settings.outside_tolerance``)."""
    tolerance = float(settings.get("tolerance", DEFAULT_TOLERANCE))
    return sum(int(outside_tolerance(s["delta"], s["prediction"], s["baseline_prediction"], tolerance).sum())
               for s in summaries)


def read_summaries(folder: Path, manifest: dict) -> Iterator[pd.DataFrame]:
    """The summary frame of every chunk of a local store, one at a time (the columns the count reads)."""
    for chunk in range(manifest["n_chunks"]):
        yield pq.read_table(chunk_paths(folder, chunk)[1], columns=["delta", "prediction", "baseline_prediction"]
                            ).to_pandas()


def completed(manifest: dict, summaries: Iterable[pd.DataFrame]) -> dict:
    """``manifest`` marked complete (written just before ``_SUCCESS``), with ``outside_tolerance``:
    how many customers of the store's ``summaries`` (every chunk's) miss the settings' tolerance."""
    return {**manifest, "complete": True, "completed": now(),
            "rows": manifest["rows_per_customer"] * manifest["customers"]["count"],
            "outside_tolerance": count_outside_tolerance(summaries, manifest["settings"])}
