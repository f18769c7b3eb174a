"""The batch store as it was written before the compact format (issue 26): format 1 and 2, the long format
in the part files. Kept here only so that tests can make the stores users already have and check they
still open; ``explain`` itself writes format 3.

Each part file holds one row per customer and cell (customer_id, input, period, feature, value,
attribution; a padded cell's value and attribution null), each summary file one row per customer
(format 1 without gradient_points and forward_points); both carry the run's metadata; the manifest
has no ``inputs``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from explain.analysis.explainer import explain_customers
from explain.analysis.report import LONG_COLUMNS, SUMMARY_COLUMNS, long_frame, summary_frame
from explain.batch import format as fmt

SUMMARY_V1 = pa.schema([f for f in fmt.SUMMARY_SCHEMA if f.name not in ("gradient_points", "forward_points")])


def manifest(bundle, ids: list[str], request, chunk_size: int, version: int) -> dict:
    """The manifest of format ``version`` (1 or 2), as the code before issue 26 wrote it."""
    new = fmt.new_manifest(bundle, ids, request, chunk_size)
    del new["inputs"]
    summary = SUMMARY_COLUMNS if version >= 2 else [c for c in SUMMARY_COLUMNS if c in SUMMARY_V1.names]
    return {**new, "format_version": version,
            "layout": {"long": "part-NNNNN.parquet", "summary": f"{fmt.SUMMARY_DIR}/summary-NNNNN.parquet",
                       "metadata_key": fmt.METADATA_KEY.decode()},
            "columns": {"long": LONG_COLUMNS, "summary": summary}}


def _write(path: Path, frame, schema: pa.Schema, metadata: dict) -> None:
    table = pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[fmt.METADATA_KEY] = json.dumps(metadata, sort_keys=True).encode("utf-8")
    pq.write_table(table.replace_schema_metadata(meta), path)


def write_old_store(bundle, out, request, ids, chunk_size: int, version: int = 2) -> Path:
    """A finished store of format ``version`` (1 or 2) of ``ids`` of ``bundle``, in chunks of ``chunk_size``."""
    out = Path(out)
    ids = [str(i) for i in ids]
    document = manifest(bundle, ids, request, chunk_size, version)
    (out / fmt.SUMMARY_DIR).mkdir(parents=True)
    fmt.write_json(out / fmt.MANIFEST, document)
    for chunk, start in enumerate(range(0, len(ids), chunk_size)):
        part = ids[start:start + chunk_size]
        attribution = explain_customers(bundle, part, request)
        long, summary = long_frame(attribution, bundle, part), summary_frame(attribution, part)
        long_path, summary_path = fmt.chunk_paths(out, chunk)
        meta = {"format": fmt.FORMAT, "format_version": version, "chunk": chunk, "n_chunks": document["n_chunks"],
                "chunk_size": chunk_size, "settings": document["settings"],
                "bundle_hash": document["bundle"]["content_hash"], "customers_sha256": document["customers"]["sha256"]}
        _write(summary_path, summary, fmt.SUMMARY_SCHEMA if version >= 2 else SUMMARY_V1, {**meta, "kind": "summary"})
        _write(long_path, long, fmt.long_schema(long), {**meta, "kind": "long"})
    document = fmt.completed(document, fmt.read_summaries(out, document))
    if version < 2:
        del document["outside_tolerance"]
    fmt.write_json(out / fmt.MANIFEST, document)
    fmt.write_success(out)
    return out
