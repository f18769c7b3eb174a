"""Attributions of every customer of a bundle, in resumable chunks, to a Parquet dataset.

    python -m explain batch --bundle DIR --out OUT [settings] [--batch-size N] [--customers-file F]

The output folder (``OUT``; a name ending in ``.parquet`` is a folder too, the usual name of a
Parquet dataset)::

    OUT/_manifest.json                 settings, bundle hash, customer list hash, chunk size, ...
    OUT/part-00000.parquet ...         the long format of DESIGN.md, one file per chunk:
                                       customer_id, input, period, feature, value, attribution
    OUT/_summary/summary-00000.parquet one row per customer, one file per chunk:
                                       customer_id, prediction, baseline_prediction, delta, steps
    OUT/_SUCCESS                       written last, once every chunk is there

``pandas.read_parquet(OUT)`` reads the long format of every customer (Parquet readers skip
names starting with ``_`` or ``.``, so the manifest, the marker, the summaries and the temporary
files are not mixed in), and ``pandas.read_parquet(OUT / "_summary")`` the summaries; or use
``read_store(OUT)``. Each file also carries the settings and the bundle hash as Parquet
key-value metadata (key ``explain.batch``).

Every file is written to a hidden temporary file, then renamed, so a chunk file exists whole
or not at all. Rerunning the same command after an interruption (Ctrl-C, a crash, kill -9)
keeps the chunks whose two files read back with the expected customers, removes leftover
temporary files and computes the rest. A folder written with other settings, another bundle
(content hash), other customers or another chunk size, a folder with a corrupt manifest, and
a folder holding files this tool did not write are refused, never overwritten: to start over,
delete the folder or choose a new ``--out``. There is deliberately no ``--force``.

Memory is bounded by the chunk size: one chunk's attributions are held at a time (the
bundle's input arrays are in memory anyway).

The dashboard reuses a finished store instead of recomputing: ``find_store(bundle, request)``
looks in ``<bundle>/attributions/*/`` for one with this bundle's content hash and these
settings, ``read_store(path, ids)`` reads it as tables, and ``open_store(path).arrays(bundle,
ids)`` as the engine's arrays (what the Cohort page uses).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from explain.errors import ExplainError
from explain.explainer import explain_customers
from explain.files import write_atomic
from explain.report import LONG_COLUMNS, SUMMARY_COLUMNS, long_frame, long_layout, summary_frame
from explain.settings import Settings
from explain.text import examples, one_line

FORMAT = "explain-batch"
FORMAT_VERSION = 1
MANIFEST = "_manifest.json"
SUCCESS = "_SUCCESS"
SUMMARY_DIR = "_summary"
LOCK = ".lock"
PART = "part-{:05d}.parquet"
SUMMARY = "summary-{:05d}.parquet"
METADATA_KEY = b"explain.batch"
DEFAULT_CHUNK_SIZE = 200
STORES_DIR = "attributions"  # <bundle>/attributions/<name>/ : where find_store looks by default

_PART_RE = re.compile(r"part-(\d{5,})\.parquet")
_SUMMARY_RE = re.compile(r"summary-(\d{5,})\.parquet")
_TEMP_RE = re.compile(r"\..+\.part")  # files.write_atomic's temporary files

LONG_SCHEMA = pa.schema([("customer_id", pa.string()), ("input", pa.string()), ("period", pa.string()),
                         ("feature", pa.string()), ("value", pa.float64()), ("attribution", pa.float64())])
SUMMARY_SCHEMA = pa.schema([("customer_id", pa.string()), ("prediction", pa.float64()),
                            ("baseline_prediction", pa.float64()), ("delta", pa.float64()),
                            ("steps", pa.int64())])

# ---- messages (tests match these) ------------------------------------------------------------
START_OVER = ("Nothing was changed. To keep it, choose a new --out folder; to start over, delete "
              "the folder ({delete}). (There is no --force on purpose.)")
NOT_A_FOLDER = "--out {path} is a file, not a folder. The batch output is a folder (a Parquet dataset); choose another name."
CORRUPT_MANIFEST = ("Refusing to use {folder}: its manifest {manifest} cannot be read ({why}), so "
                    "the files there cannot be checked against these settings. " + START_OVER)
FOREIGN_FILES = ("Refusing to write into {folder}: it holds {count} file(s) this tool did not write: "
                 "{files}. A batch output folder must be new, empty, or an earlier run of the same "
                 "batch. " + START_OVER)
DIFFERENT_RUN = ("Refusing to resume in {folder}: it holds a batch run that differs from this one: "
                 "{differences}. Resuming would mix results. " + START_OVER)
LOCKED = ("Another batch run is writing into {folder} right now (its lock file {lock} is held). "
          "Wait for it to finish, or choose another --out.")
NO_MANIFEST = "{folder} is not a batch output folder: it has no {manifest}. Run `python -m explain batch` to make one."
INCOMPLETE = ("The batch output {folder} is incomplete: {done} of {total} chunks are there. Rerun the "
              "same `python -m explain batch` command to finish it (finished chunks are kept).")
UNKNOWN_IDS = ("{source}: {count} unknown customer id(s): {examples}. Ids are text and case-sensitive; "
               "this bundle has {n} customers, for example {known}. Fix or remove these lines.")
NOT_IN_STORE = "{count} customer id(s) are not in the batch output {folder}: {examples}."
NO_CUSTOMERS = "{source} lists no customer ids: expected one id per line."
UNREADABLE_CHUNK = ("The batch output file {path} cannot be read ({why}). Rerun the `python -m explain batch` "
                    "command that made it: it verifies every chunk and recomputes the damaged ones.")
WRONG_LAYOUT = ("The batch output {folder} does not fit this bundle's features and periods (chunk {chunk}: "
                "{why}). It was written with another table layout; recompute it with `python -m explain batch` "
                "into a new --out folder.")
CHUNK_FAILED = ("Chunk {chunk} (customers {first} to {last}) failed: {error} The finished chunks are "
                "kept in {folder}; fix the cause and rerun the same command to resume.")
BAD_CHUNK_SIZE = "--batch-size (customers per chunk) must be a positive integer, got {value!r}."
NO_HASH = ("The batch job needs a bundle loaded from a folder (load_bundle): its content hash "
           "identifies the results, and this bundle has none.")


class StoreError(ExplainError):
    """A batch output folder cannot be used (refused, corrupt, incomplete)."""


# ---- settings and identity --------------------------------------------------------------------


def store_settings(settings: Settings, bundle=None) -> dict:
    """The settings a store is identified by: ``Settings.identity()`` with the target resolved
    against the bundle's output names (a name and its index are the same store)."""
    if bundle is not None:
        settings = settings.resolved(bundle.output_names)
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


def _file_metadata(manifest: dict, kind: str, chunk: int) -> dict:
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "kind": kind, "chunk": chunk,
            "n_chunks": manifest["n_chunks"], "chunk_size": manifest["chunk_size"],
            "settings": manifest["settings"], "bundle_hash": manifest["bundle"]["content_hash"],
            "customers_sha256": manifest["customers"]["sha256"]}


def _now() -> str:
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
        if _TEMP_RE.fullmatch(name) and entry.is_file():
            temps.append(entry)
        elif name in (MANIFEST, SUCCESS, LOCK) and entry.is_file():
            continue
        elif name == SUMMARY_DIR and entry.is_dir():
            for sub in sorted(entry.iterdir()):
                if _TEMP_RE.fullmatch(sub.name) and sub.is_file():
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


def _inspect(folder: Path, wanted: dict | None) -> tuple[dict | None, list[Path]]:
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
        temps = [e for e in folder.iterdir() if _TEMP_RE.fullmatch(e.name) and e.is_file()]
        foreign = [e.name + ("/" if e.is_dir() else "") for e in sorted(folder.iterdir())
                   if e not in temps and e.name != LOCK]
    if foreign:
        shown = ", ".join(repr(name) for name in foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise StoreError(FOREIGN_FILES.format(folder=folder, count=len(foreign), files=shown,
                                              delete=_delete_hint(folder)))
    if stored is not None and wanted is not None:
        differences = _differences(stored, wanted)
        if differences:
            raise StoreError(DIFFERENT_RUN.format(folder=folder, differences="; ".join(differences),
                                                  delete=_delete_hint(folder)))
    return stored, temps


class _Lock:
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


# ---- chunks ---------------------------------------------------------------------------------


def _chunks(ids: Sequence[str], size: int) -> list[list[str]]:
    return [list(ids[start:start + size]) for start in range(0, len(ids), size)]


def _paths(folder: Path, chunk: int) -> tuple[Path, Path]:
    return folder / PART.format(chunk), folder / SUMMARY_DIR / SUMMARY.format(chunk)


def _verify_chunk(folder: Path, manifest: dict, chunk: int, ids: Sequence[str]) -> str | None:
    """None if both files of ``chunk`` exist, read back, carry this run's metadata and hold
    exactly ``ids`` (in order); else why not."""
    long_path, summary_path = _paths(folder, chunk)
    if not long_path.exists() and not summary_path.exists():
        return "missing"
    rows_per_customer = manifest["rows_per_customer"]
    try:
        for path, kind in ((summary_path, "summary"), (long_path, "long")):
            if not path.exists():
                return f"{path.name} missing"
            meta = pq.read_schema(path).metadata or {}
            stored = json.loads(meta.get(METADATA_KEY, b"{}"))
            expected = _file_metadata(manifest, kind, chunk)
            if stored != expected:
                return f"{path.name} was written by another run"
            column = pq.read_table(path, columns=["customer_id"]).column("customer_id").to_pylist()
            if kind == "summary":
                if column != list(ids):
                    return f"{path.name} holds other customers"
            else:
                if len(column) != rows_per_customer * len(ids) or column[::rows_per_customer] != list(ids):
                    return f"{path.name} holds other customers or rows"
    except (OSError, ValueError, pa.ArrowException) as error:
        return f"unreadable ({one_line(error)})"
    return None


def _write_parquet(path: Path, frame: pd.DataFrame, schema: pa.Schema, metadata: dict) -> None:
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps(metadata, sort_keys=True).encode("utf-8")
    table = table.replace_schema_metadata(meta)
    _write_file(path, lambda tmp: pq.write_table(table, tmp))


def _write_file(path: Path, write) -> None:
    write_atomic(path, write, readable=True)


def _write_json(path: Path, document: dict) -> None:
    _write_file(path, lambda tmp: tmp.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8"))


def _compute_chunk(bundle, ids: list[str], request: Settings, engine_batch_size: int | None):
    """(long frame, summary frame) of one chunk: ``explain_customers`` on these ids only."""
    attribution = explain_customers(bundle, ids, request, batch_size=engine_batch_size)
    return long_frame(attribution, bundle, ids), summary_frame(attribution, ids)


def _write_chunk(folder: Path, manifest: dict, chunk: int, long: pd.DataFrame, summary: pd.DataFrame) -> int:
    long_path, summary_path = _paths(folder, chunk)
    # the summary first: a chunk counts as done only when its long file exists too
    _write_parquet(summary_path, summary, SUMMARY_SCHEMA, _file_metadata(manifest, "summary", chunk))
    _write_parquet(long_path, long, LONG_SCHEMA, _file_metadata(manifest, "long", chunk))
    return len(long)


# ---- the job --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchResult:
    """What ``run_batch_job`` did."""

    path: Path  # or the URI of a store written by the Ray engine
    n_customers: int
    n_chunks: int
    computed_chunks: int
    reused_chunks: int
    removed_temporary_files: int
    rows: int  # long-format rows of the whole store
    seconds: float
    manifest: dict = field(repr=False)

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete"))

    def describe(self) -> str:
        reused = f", reused {self.reused_chunks} finished chunk(s)" if self.reused_chunks else ""
        return (f"wrote {self.n_customers} customers ({self.rows} rows) in {self.n_chunks} chunk(s) to "
                f"{self.path}: computed {self.computed_chunks}{reused} in {self.seconds:.1f} s. Read it with "
                f"pandas.read_parquet('{self.path}') (long format) and "
                f"pandas.read_parquet('{self.path}/{SUMMARY_DIR}') (one row per customer).")  # path: a Path or a URI


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


def new_manifest(bundle, ids: Sequence[str], request: Settings, chunk_size: int) -> dict:
    """The manifest of a new store of ``ids`` of ``bundle`` (also the identity a folder is checked
    against); the local and the Ray engine write the same one."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "written_by": "explain.batch (python -m explain batch)",
        "created": _now(),
        "settings": store_settings(request, bundle),
        "bundle": {"content_hash": bundle.content_hash,
                   "path": str(Path(bundle.path).resolve()) if bundle.path is not None else None},
        "customers": {"count": len(ids), "sha256": customers_hash(ids), "all": ids == [str(i) for i in bundle.ids],
                      "first": ids[0], "last": ids[-1]},
        "chunk_size": chunk_size,
        "n_chunks": -(-len(ids) // chunk_size),
        "rows_per_customer": bundle.n_static + bundle.n_periods * bundle.n_temporal,
        "layout": {"long": "part-NNNNN.parquet", "summary": f"{SUMMARY_DIR}/summary-NNNNN.parquet",
                   "metadata_key": METADATA_KEY.decode()},
        "columns": {"long": LONG_COLUMNS, "summary": SUMMARY_COLUMNS},
        "complete": False,
    }


def run_batch_job(bundle, out, request: Settings = Settings(), *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                  ids: Iterable | None = None, progress: bool = True,
                  engine_batch_size: int | None = None) -> BatchResult:
    """Attributions of ``ids`` (default: every customer of ``bundle``) into the folder ``out``,
    ``chunk_size`` customers at a time; resumes an interrupted run of the same job.

    ``bundle``: a ``Bundle`` or a bundle folder. ``progress``: a tqdm bar on stderr.
    ``engine_batch_size``: interpolation points per gradient call (never changes a number).
    Raises ``StoreError`` (an ``ExplainError``) when ``out`` must be refused.
    """
    started = time.perf_counter()
    if isinstance(bundle, (str, os.PathLike)):
        from explain.bundle import load_bundle

        bundle = load_bundle(bundle)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ExplainError(BAD_CHUNK_SIZE.format(value=chunk_size))
    chunk_size = int(chunk_size)
    if not getattr(bundle, "content_hash", ""):
        raise ExplainError(NO_HASH)
    all_ids = [str(i) for i in bundle.ids]
    ids = all_ids if ids is None else check_ids(bundle, ids)
    folder = output_folder(out)
    chunks = _chunks(ids, chunk_size)
    manifest = new_manifest(bundle, ids, request, chunk_size)

    _inspect(folder, manifest)  # refuse early, before any work and without touching anything
    # Bad settings (baseline, target, steps) fail here, before the folder is made.
    explain_customers(bundle, ids[:1], request, batch_size=engine_batch_size)

    folder.mkdir(parents=True, exist_ok=True)
    with _Lock(folder):
        stored, temps = _inspect(folder, manifest)
        for temp in temps:
            temp.unlink(missing_ok=True)
        if stored is None:
            _write_json(folder / MANIFEST, manifest)
        else:
            manifest = stored
        (folder / SUMMARY_DIR).mkdir(exist_ok=True)

        todo, reused = [], 0
        for index, chunk_ids in enumerate(chunks):
            why = _verify_chunk(folder, manifest, index, chunk_ids)
            if why is None:
                reused += 1
            else:
                if why != "missing" and progress:
                    print(f"chunk {index}: {why}; recomputing it", file=sys.stderr)
                todo.append(index)
        if progress and stored is not None:
            print(f"resuming {folder}: {reused} of {len(chunks)} chunk(s) already done and verified, "
                  f"{len(todo)} to compute" + (f"; removed {len(temps)} temporary file(s)" if temps else ""),
                  file=sys.stderr)

        if todo and (manifest.get("complete") or (folder / SUCCESS).exists()):
            # a finished store with a damaged chunk: not complete while it is repaired
            (folder / SUCCESS).unlink(missing_ok=True)
            manifest = {**manifest, "complete": False}
            _write_json(folder / MANIFEST, manifest)

        from tqdm import tqdm

        done_customers = len(ids) - sum(len(chunks[i]) for i in todo)
        bar = tqdm(total=len(ids), initial=done_customers, unit=" customers", desc="batch",
                   file=sys.stderr, disable=not progress, dynamic_ncols=True, smoothing=0.1)
        try:
            for index in todo:
                long, summary = _compute_chunk(bundle, chunks[index], request, engine_batch_size)
                _write_chunk(folder, manifest, index, long, summary)
                del long, summary
                bar.update(len(chunks[index]))
        except KeyboardInterrupt:
            bar.close()
            print(f"interrupted: the finished chunks are kept in {folder}; rerun the same command to "
                  "resume.", file=sys.stderr)
            raise
        except ExplainError as error:
            bar.close()
            ids_of = chunks[index]
            raise ExplainError(CHUNK_FAILED.format(chunk=index, first=ids_of[0], last=ids_of[-1],
                                                   error=error, folder=folder)) from error
        bar.close()

        if not manifest.get("complete") or not (folder / SUCCESS).exists():
            manifest = {**manifest, "complete": True, "completed": _now(),
                        "rows": manifest["rows_per_customer"] * len(ids)}
            _write_json(folder / MANIFEST, manifest)
            _write_file(folder / SUCCESS, lambda tmp: tmp.write_text("", encoding="utf-8"))
    (folder / LOCK).unlink(missing_ok=True)
    return BatchResult(path=folder, n_customers=len(ids), n_chunks=len(chunks), computed_chunks=len(todo),
                       reused_chunks=reused, removed_temporary_files=len(temps),
                       rows=manifest["rows_per_customer"] * len(ids),
                       seconds=time.perf_counter() - started, manifest=manifest)


# ---- reading --------------------------------------------------------------------------------


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
            all(p.exists() for p in _paths(self.path, i)) for i in range(self.n_chunks))

    def chunk_paths(self, chunk: int) -> tuple[Path, Path]:
        """(long file, summary file) of one chunk."""
        return _paths(self.path, chunk)

    def done_chunks(self) -> list[int]:
        return [i for i in range(self.n_chunks) if all(p.exists() for p in _paths(self.path, i))]

    def require_complete(self) -> "Store":
        if not self.complete:
            raise StoreError(INCOMPLETE.format(folder=self.path, done=len(self.done_chunks()), total=self.n_chunks))
        return self

    def customer_ids(self) -> list[str]:
        """Every customer id, in the order of the run (from the summary files)."""
        return self.summary()["customer_id"].tolist()

    def summary(self, ids: Sequence[str] | None = None) -> pd.DataFrame:
        """One row per customer: customer_id, prediction, baseline_prediction, delta, steps."""
        return self._summary_of(self._summaries(), ids)

    def _summaries(self) -> dict[int, pa.Table]:
        """{chunk: its summary table} of every finished chunk."""
        return {i: _read_table(_paths(self.path, i)[1]) for i in self.done_chunks()}

    def _summary_of(self, summaries: dict[int, pa.Table], ids: Sequence[str] | None) -> pd.DataFrame:
        table = pa.concat_tables(list(summaries.values())) if summaries else SUMMARY_SCHEMA.empty_table()
        return _select(table, ids, self.path)

    def iter_chunks(self) -> Iterator[tuple[int, pd.DataFrame, pd.DataFrame]]:
        """(chunk, long frame, summary frame) of every finished chunk, one at a time."""
        for i in self.done_chunks():
            long_path, summary_path = _paths(self.path, i)
            yield i, _read_table(long_path).to_pandas(), _read_table(summary_path).to_pandas()

    def long(self, ids: Sequence[str] | None = None, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The long format of ``ids`` (default: all); reads only the chunks that hold them."""
        chunks = self.done_chunks()
        if ids is not None:
            ids = [str(i) for i in ids]
            chunks = self._chunks_holding(ids, self._summaries())
        read_columns = None if columns is None else list(dict.fromkeys(["customer_id", *columns]))
        tables = []
        for i in chunks:
            table = _read_table(_paths(self.path, i)[0], read_columns)
            if ids is not None:
                table = table.filter(pc.is_in(table["customer_id"], value_set=pa.array(ids, pa.string())))
            tables.append(table)
        schema = LONG_SCHEMA if read_columns is None else pa.schema([LONG_SCHEMA.field(c) for c in read_columns])
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        frame = _select(table, ids, self.path, check=False)
        return frame if columns is None else frame[list(columns)]


    def _chunks_holding(self, ids: Sequence[str], summaries: dict[int, pa.Table]) -> list[int]:
        """The chunks of ``summaries`` ({chunk: summary table}) that hold ``ids``; ``StoreError``
        naming the ids that none holds."""
        wanted, where = set(ids), {}
        for i, table in summaries.items():
            for cid in table.column("customer_id").to_pylist():
                if cid in wanted:
                    where[cid] = i
        missing = [cid for cid in ids if cid not in where]
        if missing:
            raise StoreError(NOT_IN_STORE.format(count=len(missing), folder=self.path, examples=examples(missing)))
        return sorted(set(where.values()))

    def arrays(self, bundle, ids: Sequence[str]) -> "StoredAttributions":
        """The attributions of ``ids`` as arrays shaped like the engine's (``Attribution``):
        static (n, S), temporal (n, T, F), in the order of ``ids``.

        Reads one chunk at a time, only the chunks that hold ``ids``, and checks that every
        row is where ``bundle``'s features and periods put it (``StoreError`` if not).
        """
        ids = list(dict.fromkeys(str(i) for i in ids))
        n, s, t, f = len(ids), bundle.n_static, bundle.n_periods, bundle.n_temporal
        per = s + t * f
        expected = long_layout(bundle)
        position = {cid: k for k, cid in enumerate(ids)}
        static, temporal = np.zeros((n, s)), np.zeros((n, t, f))
        wanted = pa.array(ids, pa.string())
        summaries = self._summaries()  # read once: which chunks to open, and the summary rows
        for chunk in self._chunks_holding(ids, summaries):
            table = _read_table(_paths(self.path, chunk)[0],
                                ["customer_id", "input", "period", "feature", "attribution"])
            table = table.filter(pc.is_in(table["customer_id"], value_set=wanted))
            if table.num_rows % per:
                raise StoreError(WRONG_LAYOUT.format(folder=self.path, chunk=chunk, why=(
                    f"{table.num_rows} rows for the customers asked for, not a multiple of the {per} rows "
                    f"per customer ({s} static + {t} periods x {f} temporal)")))
            k = table.num_rows // per
            column = {name: table[name].to_numpy(zero_copy_only=False).reshape(k, per)
                      for name in ("customer_id", *expected)}
            if not (column["customer_id"] == column["customer_id"][:, :1]).all():
                raise StoreError(WRONG_LAYOUT.format(folder=self.path, chunk=chunk,
                                                     why="a customer's rows are not together"))
            for name, values in expected.items():
                bad = np.flatnonzero((column[name] != values).any(axis=0))
                if bad.size:
                    j = int(bad[0])
                    got = column[name][:, j][column[name][:, j] != values[j]][0]
                    raise StoreError(WRONG_LAYOUT.format(folder=self.path, chunk=chunk, why=(
                        f"row {j + 1} of a customer has {name} {got!r}, this bundle expects {values[j]!r}")))
            rows = np.array([position[cid] for cid in column["customer_id"][:, 0]], dtype=np.int64)
            values = table["attribution"].to_numpy().reshape(k, per)
            static[rows] = values[:, :s]
            temporal[rows] = values[:, s:].reshape(k, t, f)
        summary = self._summary_of(summaries, ids)
        return StoredAttributions(
            static=static, temporal=temporal, prediction=summary["prediction"].to_numpy(np.float64),
            baseline_prediction=summary["baseline_prediction"].to_numpy(np.float64),
            delta=summary["delta"].to_numpy(np.float64), steps=summary["steps"].to_numpy(np.int64),
            path=self.path, settings=self.settings, completed=str(self.manifest.get("completed", "")))


@dataclass(frozen=True)
class StoredAttributions:
    """Attributions read back from a store: the arrays of ``explain.ig.Attribution`` (static
    (n, S), temporal (n, T, F), prediction, baseline_prediction, delta, steps) and where they
    came from."""

    static: np.ndarray
    temporal: np.ndarray
    prediction: np.ndarray
    baseline_prediction: np.ndarray
    delta: np.ndarray
    steps: np.ndarray
    path: Path
    settings: dict
    completed: str  # when the batch run finished (UTC, ISO 8601)

    @property
    def n_customers(self) -> int:
        return int(self.prediction.shape[0])

    def total(self) -> np.ndarray:
        return self.static.sum(axis=1) + self.temporal.sum(axis=(1, 2))


def _read_table(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """One Parquet file of a store; ``StoreError`` (not an Arrow traceback) if it is damaged."""
    try:
        return pq.read_table(path, columns=None if columns is None else list(columns))
    except (OSError, pa.ArrowException) as error:
        raise StoreError(UNREADABLE_CHUNK.format(path=path, why=one_line(error))) from None


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
    manifest, _ = _inspect(folder, None)
    return Store(folder, manifest)


def read_store(path, ids: Sequence[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(long frame, summary frame) of a finished store, for ``ids`` (default: every customer),
    in the order of ``ids`` (or of the run)."""
    store = open_store(path).require_complete()
    return store.long(ids), store.summary(ids)


def find_store(bundle, request: Settings, search_dirs: Iterable | None = None, *,
               ids: Sequence[str] | None = None) -> Path | None:
    """A finished store computed from this bundle (same content hash) with these settings, or None.

    Looks in each folder of ``search_dirs`` (default ``<bundle>/attributions``) and its
    subfolders. With ``ids=None`` the store must hold every customer of the bundle; otherwise
    at least ``ids``. The most recently finished match wins.
    """
    if search_dirs is None:
        if getattr(bundle, "path", None) is None:
            return None
        search_dirs = [Path(bundle.path) / STORES_DIR]
    elif isinstance(search_dirs, (str, os.PathLike)):
        search_dirs = [search_dirs]
    settings = store_settings(request, bundle)
    all_ids = [str(i) for i in bundle.ids]
    wanted_hash = customers_hash(all_ids)
    candidates = []
    for base in search_dirs:
        base = Path(base)
        if not base.is_dir():
            continue
        folders = [base] if (base / MANIFEST).is_file() else [
            d for d in sorted(base.iterdir()) if d.is_dir() and (d / MANIFEST).is_file()]
        for folder in folders:
            try:
                store = open_store(folder)
            except ExplainError:
                continue
            if store.bundle_hash != bundle.content_hash or store.settings != settings or not store.complete:
                continue
            customers = store.manifest["customers"]
            if ids is None:
                if not (customers.get("count") == len(all_ids) and customers.get("sha256") == wanted_hash):
                    continue
            elif not set(map(str, ids)) <= set(store.customer_ids()):
                continue
            candidates.append((str(store.manifest.get("completed", "")), str(folder), folder))
    if not candidates:
        return None
    return max(candidates)[2]
