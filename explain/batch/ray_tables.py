"""The Ray engine's input: the bundle's tables read with Ray Data, regrouped into the run's chunks.

Neither the driver nor the actors hold the bundle's tables. The planning task
(``ray_batch._plan``) checks the bundle once with ``load_bundle`` and hands over, as an object
ref that the driver never fetches, a key table: ``customer_id, chunk, slot`` (where the run puts
each customer: chunk ``k`` holds customers ``k * size ... (k + 1) * size - 1`` of the manifest's
list, the local job's chunks). Then, on the cluster:

1. ``ray.data.read_csv`` (every column as text, as the loader reads CSV) or
   ``ray.data.read_parquet`` of ``static`` and of the long ``temporal`` table;
2. each block normalised (``map_batches``): the id and the period as the loader reads them
   (``column_text``, as ``bundle_report.column_texts``), the features as float64 in the model's
   order, and a bucket (a hash of the id) so that every row of a customer lands in the same group;
3. ``union`` with the key rows, ``groupby(bucket).map_groups``: the long table grouped per
   customer, vectorised within a bucket: one row per customer of the run with its static
   values and its T x F temporal values in period order (``bundle_checks.period_ranks``, the
   loader's order), its chunk and slot; customers not in the run are dropped here;
4. ``groupby(chunk).map_groups``: one row per chunk, customers in slot order, values as the
   loader's float32;
5. ``repartition(blocks).materialize()``: the chunks wait in the object store (spilled to disk
   when they exceed it), one per block up to ``blocks_for(n_chunks, workers)`` blocks, while the
   actor pool (``ray_batch.ChunkWriter``) takes them one block at a time and one chunk per call: a
   killed actor's retry redoes one block, and keeps (verifies) the chunks of it already written.
   (Streaming the shuffles into an actor pool that holds every CPU would starve the shuffle tasks.)
   The number of blocks is capped because the driver keeps Ray Data's bookkeeping of every
   materialised block (measured: about 0.15 MiB a block): one block per chunk would make the
   driver grow with the number of customers; capped, it grows with the cluster's workers only.

A chunk whose rows do not add up (a customer without its one static row or its T periods:
the tables changed after they were checked) fails the job naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from explain.bundle.checks import period_ranks
from explain.bundle.load import CONFIG_FILE, DEFAULT_ID_COLUMN, DEFAULT_PERIOD_COLUMN, TABLE_FILES
from explain.bundle.problems import cell_text
from explain.bundle.tables import oversized_table
from explain.core.errors import BundleError, ExplainError
from explain.modelfile.limits import OWNER_LIMITS, Limits

CUSTOMERS_PER_BUCKET = 5000  # customers regrouped per map_groups call (their rows are in memory together)
MIN_BLOCKS, BLOCKS_PER_WORKER = 64, 8  # the materialised chunks' blocks: at most max(64, 8 per worker)
STATIC, TEMPORAL, KEY = 0, 1, 2  # row kinds after step 2

ROWS = pa.schema([("customer_id", pa.string()), ("bucket", pa.int64()), ("kind", pa.int8()),
                  ("period", pa.string()), ("values", pa.list_(pa.float64())), ("chunk", pa.int64()),
                  ("slot", pa.int64())])
CUSTOMERS = pa.schema([("chunk", pa.int64()), ("slot", pa.int64()), ("customer_id", pa.string()),
                       ("static", pa.list_(pa.float64())), ("temporal", pa.list_(pa.float64()))])

# ---- messages (tests match these) ------------------------------------------------------------
TABLES_CHANGED = ("The bundle's {file} does not match what was checked when the job started ({why}). "
                  "Were the bundle's tables replaced while the job ran? Rerun the same command: finished "
                  "chunks are kept, the rest is read again.")


NOT_PLAIN = ("--engine ray reads bundles of one static and one temporal numeric table (a two-input model); "
             "{path} has {what}. Run it with the local engine (without --engine ray).")


def column_text(series: pd.Series, csv: bool) -> pd.Series:
    """A column's cells as the loader reads them (``bundle_report.column_texts`` of a whole table)."""
    return series.str.strip() if csv else series.map(cell_text).astype(object)


def table_layout(folder: Path, bundle, limits: Limits = OWNER_LIMITS) -> dict:
    """(Runs in the planning task, after ``load_bundle`` checked the folder.) What the readers
    need: each table's file and columns, the key columns, the features in the model's order
    and the rank of every period label. Each table is measured against ``limits`` again first, by the
    bundle reader's own check (``bundle.tables.oversized_table``: a Parquet file's metadata, a CSV file's
    bytes), before anything here or in Ray Data reads it: ``BundleError`` naming the file and the limit."""
    folder = Path(folder)
    other = [what for what, present in (("more inputs than static + temporal", bundle.input_arrays or bundle.roles),
                                        ("categorical columns", bundle.categories)) if present]
    if other:
        raise ExplainError(NOT_PLAIN.format(path=folder, what=" and ".join(other)))
    config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8")) if (folder / CONFIG_FILE).is_file() else {}
    id_column = config.get("id_column") or DEFAULT_ID_COLUMN
    period_column = config.get("period_column") or DEFAULT_PERIOD_COLUMN
    files = {}
    arrays = config.get("layout") == "arrays"  # the history is temporal.npy (explain.bundle.arrays)
    for kind in ("static",) if arrays else ("static", "temporal"):
        name = next(n for n in TABLE_FILES[kind] if (folder / n).is_file())
        too_large = oversized_table(folder / name, limits)[0]
        if too_large:
            raise BundleError(too_large, [too_large])
        files[kind] = {"path": str((folder / name).resolve()), "file": name, "csv": name.endswith(".csv"),
                       "columns": _csv_header(folder / name) if name.endswith(".csv") else None}
    if arrays:
        files["temporal"] = {"path": str((folder / "temporal.npy").resolve()), "file": "temporal.npy", "npy": True}
        return {"files": files, "id_column": id_column, "period_column": period_column,
                "static_features": list(bundle.static_features), "temporal_features": list(bundle.temporal_features),
                "n_periods": bundle.n_periods, "ranks": {}}
    labels = _distinct(files["temporal"], period_column)
    ranks = dict(zip(labels, (int(r) for r in period_ranks(np.asarray(labels, dtype=object)))))
    return {"files": files, "id_column": id_column, "period_column": period_column,
            "static_features": list(bundle.static_features), "temporal_features": list(bundle.temporal_features),
            "n_periods": bundle.n_periods, "ranks": ranks}


def _csv_header(path: Path) -> list[str]:
    """The header cells as Arrow's CSV reader names the columns (raw: the loader strips them later)."""
    import pyarrow.csv as pacsv

    return list(pacsv.open_csv(path).schema.names)


def csv_text_options(info: dict):
    import pyarrow.csv as pacsv

    return pacsv.ConvertOptions(column_types={c: pa.string() for c in info["columns"]},
                                strings_can_be_null=False, quoted_strings_can_be_null=False)


def _distinct(info: dict, column: str) -> list[str]:
    """The distinct labels of one column of a table, as the loader reads them."""
    if info["csv"]:
        import pyarrow.csv as pacsv

        table = pacsv.read_csv(info["path"], convert_options=csv_text_options(info))
        table = table.rename_columns([str(c).strip() for c in table.column_names]).select([column])
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(info["path"], columns=[column])
    return list(pd.unique(column_text(table.column(column).to_pandas(), info["csv"])))


def _numbers(series: pd.Series, csv: bool) -> np.ndarray:
    """A feature column as the loader reads a valid one: float64."""
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    return pd.to_numeric(column_text(series, csv)).to_numpy(np.float64)


def _buckets(ids: np.ndarray, n_buckets: int) -> np.ndarray:
    return (pd.util.hash_array(np.asarray(ids, dtype=object)) % np.uint64(n_buckets)).astype(np.int64)


def normalised_rows(table: pa.Table, *, kind: int, layout: dict, n_buckets: int) -> pa.Table:
    """Step 2: one block of a table, normalised to ``ROWS``."""
    csv = layout["files"]["static" if kind == STATIC else "temporal"]["csv"]
    frame = table.to_pandas()
    frame.columns = [str(c).strip() for c in frame.columns]
    features = layout["static_features" if kind == STATIC else "temporal_features"]
    ids = column_text(frame[layout["id_column"]], csv).to_numpy(dtype=object)
    n = len(ids)
    values = np.column_stack([_numbers(frame[c], csv) for c in features]) if n else np.zeros((0, len(features)))
    periods = (column_text(frame[layout["period_column"]], csv).to_numpy(dtype=object) if kind == TEMPORAL
               else np.full(n, "", dtype=object))
    offsets = np.arange(0, n * len(features) + 1, len(features), dtype=np.int32)
    return pa.table({"customer_id": pa.array(ids, pa.string()), "bucket": _buckets(ids, n_buckets),
                     "kind": np.full(n, kind, np.int8), "period": pa.array(periods, pa.string()),
                     "values": pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1), pa.float64())),
                     "chunk": np.full(n, -1, np.int64), "slot": np.full(n, -1, np.int64)}, schema=ROWS)


def key_rows(table: pa.Table, *, n_buckets: int) -> pa.Table:
    """Step 2 for the key table (customer_id, chunk, slot)."""
    ids = table.column("customer_id").to_numpy(zero_copy_only=False)
    n = len(ids)
    return pa.table({"customer_id": table.column("customer_id"), "bucket": _buckets(ids, n_buckets),
                     "kind": np.full(n, KEY, np.int8), "period": pa.array([""] * n, pa.string()),
                     "values": pa.array([[]] * n, pa.list_(pa.float64())),
                     "chunk": table.column("chunk"), "slot": table.column("slot")}, schema=ROWS)


def _flat(values, width: int) -> np.ndarray:
    """A list column as a (rows, width) float64 array."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return np.asarray(values.flatten().to_numpy(zero_copy_only=False), dtype=np.float64).reshape(-1, width)


def customers_of_bucket(table: pa.Table, *, layout: dict) -> pa.Table:
    """Step 3: every row of the customers of one bucket -> one row per customer of the run."""
    kind = table.column("kind").to_numpy()
    ids = table.column("customer_id").to_numpy(zero_copy_only=False)
    keyed = kind == KEY
    if not keyed.any():
        return CUSTOMERS.empty_table()
    index = pd.Index(ids[keyed])
    s, t, f = len(layout["static_features"]), layout["n_periods"], len(layout["temporal_features"])
    files = layout["files"]

    def place(mask: np.ndarray, file: str, expected: int, what: str) -> tuple[np.ndarray, np.ndarray]:
        at = index.get_indexer(ids[mask])
        counts = np.bincount(at[at >= 0], minlength=len(index))
        wrong = np.flatnonzero(counts != expected)
        if wrong.size:
            raise ExplainError(TABLES_CHANGED.format(file=file, why=(
                f"customer {index[wrong[0]]!r} has {counts[wrong[0]]} {what}, expected {expected}")))
        return at, at >= 0

    at, mine = place(kind == STATIC, files["static"]["file"], 1, "row(s)")
    static = np.empty((len(index), s))
    static[at[mine]] = _flat(table.column("values").filter(pa.array(kind == STATIC)), s)[mine]

    is_temporal = kind == TEMPORAL
    at, mine = place(is_temporal, files["temporal"]["file"], t, "period row(s)")
    labels = table.column("period").filter(pa.array(is_temporal)).to_numpy(zero_copy_only=False)[mine]
    rank = pd.Series(labels, dtype=object).map(layout["ranks"])
    if rank.isna().any():
        raise ExplainError(TABLES_CHANGED.format(file=files["temporal"]["file"], why=(
            f"period {labels[rank.isna().to_numpy()][0]!r} is new")))
    values = _flat(table.column("values").filter(pa.array(is_temporal)), f)[mine]
    order = np.lexsort((rank.to_numpy(np.int64), at[mine]))  # the loader's order: customer, then period rank
    temporal = values[order].reshape(len(index), t * f)
    keys = table.filter(pa.array(keyed))
    return pa.table({"chunk": keys.column("chunk"), "slot": keys.column("slot"),
                     "customer_id": keys.column("customer_id"),
                     "static": pa.array(list(static), pa.list_(pa.float64())),
                     "temporal": pa.array(list(temporal), pa.list_(pa.float64()))}, schema=CUSTOMERS)


def chunk_row(table: pa.Table) -> pa.Table:
    """Step 4: the customers of one chunk -> one row (ids, static, temporal), in slot order."""
    table = table.sort_by("slot")
    static = _flat(table.column("static"), 1).reshape(-1).astype(np.float32)
    temporal = _flat(table.column("temporal"), 1).reshape(-1).astype(np.float32)
    return pa.table({"chunk": [table.column("chunk")[0].as_py()], "ids": [table.column("customer_id").to_pylist()],
                     "slots": [table.column("slot").to_pylist()], "static": [static], "temporal": [temporal]})


def chunk_from_arrays(table: pa.Table, *, layout: dict) -> pa.Table:
    """Steps 1-4 for an array-layout bundle: the customers of one chunk (key rows) -> one row as ``chunk_row``
    makes it, their static rows from the static table and their histories read from the memory-mapped
    temporal.npy (row k: the customer of static row k)."""
    table = table.sort_by("slot")
    ids = [str(i) for i in table.column("customer_id").to_pylist()]
    info = layout["files"]["static"]
    if info["csv"]:
        import pyarrow.csv as pacsv

        static_table = pacsv.read_csv(info["path"], convert_options=csv_text_options(info))
    else:
        import pyarrow.parquet as pq

        static_table = pq.read_table(info["path"])
    frame = static_table.to_pandas()
    frame.columns = [str(c).strip() for c in frame.columns]
    rows = pd.Index(column_text(frame[layout["id_column"]], info["csv"])).get_indexer(ids)
    history = np.load(layout["files"]["temporal"]["path"], mmap_mode="r", allow_pickle=False)
    t, f = layout["n_periods"], len(layout["temporal_features"])
    if (rows < 0).any() or history.shape != (len(frame), t, f):
        why = (f"customer {ids[int(np.flatnonzero(rows < 0)[0])]!r} is gone" if (rows < 0).any()
               else f"temporal.npy has shape {history.shape}, expected {(len(frame), t, f)}")
        raise ExplainError(TABLES_CHANGED.format(file=info["file"] if (rows < 0).any() else "temporal.npy", why=why))
    static = np.column_stack([_numbers(frame[c], info["csv"])[rows] for c in layout["static_features"]])
    temporal = np.asarray(history[np.sort(rows)][np.argsort(np.argsort(rows))], np.float32)
    return pa.table({"chunk": [table.column("chunk")[0].as_py()], "ids": [ids],
                     "slots": [table.column("slot").to_pylist()], "static": [static.astype(np.float32).reshape(-1)],
                     "temporal": [temporal.reshape(-1)]})


def chunk_arrays(row: dict, layout: dict) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(ids, static (n, S), temporal (n, T, F)) of one row of ``chunks``."""
    ids = [str(i) for i in row["ids"]]
    n, s, t, f = len(ids), len(layout["static_features"]), layout["n_periods"], len(layout["temporal_features"])
    return (ids, np.asarray(row["static"], np.float32).reshape(n, s),
            np.asarray(row["temporal"], np.float32).reshape(n, t, f))


def blocks_for(n_chunks: int, workers: int) -> int:
    """Step 5's number of blocks: one chunk per block up to ``max(MIN_BLOCKS, BLOCKS_PER_WORKER * workers)``
    blocks (enough to keep every actor busy to the end), then several chunks per block."""
    return max(1, min(n_chunks, max(MIN_BLOCKS, BLOCKS_PER_WORKER * workers)))


def chunks(ray, layout: dict, keys_ref, *, n_customers: int, n_chunks: int, cpus: int, workers: int):
    """Steps 1-5: a materialised dataset with one row per chunk of the run (``keys_ref``: the planning task's
    key table; ``cpus``: the cluster's, for the shuffles' partitions; ``workers``: the actors, for the blocks)."""
    n_buckets = max(1, -(-n_customers // CUSTOMERS_PER_BUCKET))
    if layout["files"]["temporal"].get("npy"):  # array layout: no long table to regroup
        keys = ray.data.from_arrow_refs([keys_ref])
        return keys.groupby("chunk", num_partitions=max(1, min(n_chunks, 4 * cpus))).map_groups(
            chunk_from_arrays, batch_format="pyarrow", fn_kwargs={"layout": layout}).repartition(
            blocks_for(n_chunks, workers)).materialize()
    tables = []
    for kind, name in ((STATIC, "static"), (TEMPORAL, "temporal")):
        info = layout["files"][name]
        read = (ray.data.read_csv(info["path"], convert_options=csv_text_options(info)) if info["csv"]
                else ray.data.read_parquet(info["path"]))
        tables.append(read.map_batches(normalised_rows, batch_format="pyarrow", batch_size=None, zero_copy_batch=True,
                                       fn_kwargs={"kind": kind, "layout": layout, "n_buckets": n_buckets}))
    keys = ray.data.from_arrow_refs([keys_ref]).map_batches(
        key_rows, batch_format="pyarrow", batch_size=None, fn_kwargs={"n_buckets": n_buckets})
    customers = keys.union(*tables).groupby("bucket", num_partitions=max(1, min(n_buckets, 2 * cpus))).map_groups(
        customers_of_bucket, batch_format="pyarrow", fn_kwargs={"layout": layout})
    # a task of the actor pool is one block (one chunk per call), so a killed actor's retry redoes one block
    return customers.groupby("chunk", num_partitions=max(1, min(n_chunks, 4 * cpus))).map_groups(
        chunk_row, batch_format="pyarrow").repartition(blocks_for(n_chunks, workers)).materialize()
