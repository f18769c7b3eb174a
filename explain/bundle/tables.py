"""Reading a bundle's tables as data only: CSV (Python's ``csv`` module, every cell kept as
text for the checks) or Parquet (pyarrow), with a message for each way a file can be unreadable.

Before a table is read its size is measured (``Limits.max_table_cells`` and ``max_table_bytes``):
a CSV file's bytes (lines x fields of its header, and every field), a Parquet file's metadata
(rows x columns, the uncompressed size of its columns, no nested columns), so that a 1 MB
Parquet file of 400 million zeros is refused before any DataFrame is made."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from explain.bundle.problems import TABLE_FILES, Table, ValidationReport, rows_text
from explain.core.text import examples as _examples
from explain.core.text import one_line
from explain.modelfile.limits import DEFAULT_LIMITS, Limits

MISSING_FILE = "{file} is missing from {folder}: expected {accepted}. Add the file (names are case-sensitive)."
AMBIGUOUS_FILE = "both {first} and {second} are in {folder}; keep only one of them."
EMPTY_FILE = "{file} is empty. Expected a header row and {what}."
NO_DATA_ROWS = "{file} has a header but no data rows. Expected {what}."
BINARY_CSV = ("{file} cannot be read as a CSV file: it is not text (it looks like {guess}). "
              "{fix}")
NOT_UTF8 = ("{file} cannot be read as a CSV file: it is not UTF-8 text (undecodable byte at "
            "position {position}). Save it as 'CSV UTF-8' (comma-separated).")
UNREADABLE_PARQUET = ("{file} cannot be read as a Parquet file: {reason}. Save it again with "
                      "pandas.DataFrame.to_parquet, or as CSV named {csv_name}.")
WRONG_SEPARATOR = ("{file} seems to use {separator} between values (the header is one column: "
                   "{header!r}). Save it with commas between values and points as decimal marks.")
RAGGED_ROWS = ("{file} has rows whose number of values differs from the header's {expected}: "
               "{where}. Quote values that contain commas, or fix those rows.")
DUPLICATE_COLUMN = ("{file} has the column name '{column}' {count} times; column names must be "
                    "unique. Rename or delete the copies.")
HEADER_SPACES_NOTE = "{file}: spaces around column names were removed ({columns})."
TABLE_TOO_LARGE = ("{file} is too large to open: {what}, over the limit {field}={limit:,}. Nothing of it was read "
                   "into memory. To fix: split the customers into smaller bundles, or keep only the columns the "
                   "model reads; if you trust the file, raise the limit with --limit {field}=N on the command line.")
NESTED_COLUMNS = ("{file} has columns that hold lists or records ({columns}); a table holds one number or text "
                  "per cell. Save the table with one column per feature.")


def read_table(folder: Path, kind: str, report: ValidationReport,
               names: tuple[str, str] | None = None, limits: Limits = DEFAULT_LIMITS) -> Table | None:
    csv_name, parquet_name = names or TABLE_FILES[kind]
    present = [name for name in (csv_name, parquet_name) if (folder / name).is_file()]
    what = ("one row per customer" if kind == "static"
            else "one row per customer and period")
    if not present:
        report.add(csv_name, MISSING_FILE.format(
            file=f"the {kind} table", folder=folder, accepted=f"{csv_name} or {parquet_name}"))
        return None
    if len(present) == 2:
        report.add(csv_name, AMBIGUOUS_FILE.format(first=csv_name, second=parquet_name,
                                                   folder=folder))
        return None
    name = present[0]
    path = folder / name
    too_large, raw = oversized_table(path, limits)
    if too_large:
        report.add(name, too_large)
        return None
    if not raw.strip():
        report.add(name, EMPTY_FILE.format(file=name, what=what))
        return None
    if name.endswith(".parquet"):
        try:
            frame = pd.read_parquet(io.BytesIO(raw))
        except Exception as error:  # pyarrow raises several types for a damaged file
            report.add(name, UNREADABLE_PARQUET.format(
                file=name, reason=one_line(error), csv_name=csv_name))
            return None
        frame.columns = [str(c) for c in frame.columns]
        frame = frame.reset_index(drop=True)
        rows = np.arange(1, len(frame) + 1)
        is_csv = False
    else:
        parsed = _parse_csv(name, raw, kind, report)
        if parsed is None:
            return None
        frame, rows = parsed
        is_csv = True
    if len(frame) == 0:
        report.add(name, NO_DATA_ROWS.format(file=name, what=what))
        return None
    return Table(name, path, frame, rows, is_csv, raw)


def oversized_table(path: Path, limits: Limits = DEFAULT_LIMITS) -> tuple[str | None, bytes]:
    """(TABLE_TOO_LARGE or NESTED_COLUMNS, or None when it fits; the file's bytes, b"" when not read) of the
    table file ``path`` (.csv, else Parquet): its size on disk first, then its bytes or its metadata."""
    name, size = path.name, path.stat().st_size
    if size > limits.max_table_bytes:
        return TABLE_TOO_LARGE.format(file=name, what=f"{size:,} bytes", field="max_table_bytes",
                                      limit=limits.max_table_bytes), b""
    raw = path.read_bytes()
    measure = _csv_size if name.lower().endswith(".csv") else _parquet_size
    return (measure(name, raw, limits) if raw.strip() else None), raw


def _cells_text(rows: int, columns: int) -> str:
    return f"{rows:,} rows x {columns:,} columns = {rows * columns:,} cells"


def _csv_size(name: str, raw: bytes, limits: Limits) -> str | None:
    """TABLE_TOO_LARGE when the CSV text ``raw`` has more than ``max_table_columns`` fields in its first line,
    or would hold more than ``max_table_cells`` cells, measured on its bytes: lines x the header's fields,
    and every field of every line (a row longer than the header); None when it fits."""
    newline = b"\n" if b"\n" in raw else b"\r"
    lines = raw.count(newline) + (0 if raw.endswith(newline) else 1)
    width = raw[: raw.find(newline) if newline in raw else len(raw)].count(b",") + 1
    fields = raw.count(b",") + lines
    if width > limits.max_table_columns:
        return TABLE_TOO_LARGE.format(file=name, what=f"{width:,} columns", field="max_table_columns",
                                      limit=limits.max_table_columns)
    if max(lines * width, fields) <= limits.max_table_cells:
        return None
    what = _cells_text(lines, width) if lines * width >= fields else f"{fields:,} values on {lines:,} lines"
    return TABLE_TOO_LARGE.format(file=name, what=f"about {what}", field="max_table_cells",
                                  limit=limits.max_table_cells)


def _parquet_size(name: str, raw: bytes, limits: Limits) -> str | None:
    """TABLE_TOO_LARGE (or NESTED_COLUMNS) from the Parquet file's metadata: columns over
    ``max_table_columns``, rows x columns over ``max_table_cells``, its columns' uncompressed size over
    ``max_table_bytes``; None when it fits or when the metadata cannot be read (the reader then says why)."""
    import pyarrow.parquet as pq
    import pyarrow.types as pt

    try:
        meta = pq.ParquetFile(io.BytesIO(raw)).metadata
        schema = meta.schema.to_arrow_schema()
    except Exception:  # noqa: BLE001 - a damaged file: UNREADABLE_PARQUET says why
        return None
    nested = [f.name for f in schema if pt.is_nested(f.type)]
    if nested:
        return NESTED_COLUMNS.format(file=name, columns=_examples(nested))
    rows, columns = int(meta.num_rows), len(schema)
    if columns > limits.max_table_columns:
        return TABLE_TOO_LARGE.format(file=name, what=f"{columns:,} columns", field="max_table_columns",
                                      limit=limits.max_table_columns)
    if rows * columns > limits.max_table_cells:
        return TABLE_TOO_LARGE.format(file=name, what=_cells_text(rows, columns), field="max_table_cells",
                                      limit=limits.max_table_cells)
    unpacked = sum(int(meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups))
    if unpacked > limits.max_table_bytes:
        return TABLE_TOO_LARGE.format(file=name, what=f"{unpacked:,} bytes once uncompressed",
                                      field="max_table_bytes", limit=limits.max_table_bytes)
    return None


def _parse_csv(name: str, raw: bytes, kind: str,
               report: ValidationReport) -> tuple[pd.DataFrame, np.ndarray] | None:
    head = raw[:8192]
    if b"\x00" in head or head.startswith((b"PAR1", b"PK\x03\x04", b"\xd0\xcf\x11\xe0")):
        guess, fix = "a binary file", "Export the table as a comma-separated UTF-8 .csv file."
        if head.startswith(b"PAR1"):
            guess, fix = "a Parquet file", f"Rename it to {kind}.parquet."
        elif head.startswith((b"PK\x03\x04", b"\xd0\xcf\x11\xe0")):
            guess = "an Excel workbook or a ZIP archive"
            fix = "Open it in the spreadsheet program and save it as 'CSV UTF-8'."
        report.add(name, BINARY_CSV.format(file=name, guess=guess, fix=fix))
        return None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        report.add(name, NOT_UTF8.format(file=name, position=error.start))
        return None

    records = _csv_records(text)
    header_line, header = 0, None
    for header_line, header in records:
        if any(cell.strip() for cell in header):
            break
    else:
        header = None
    if header is None:
        report.add(name, EMPTY_FILE.format(file=name, what="data rows"))
        return None
    stripped = [cell.strip() for cell in header]
    if stripped != header:
        changed = [repr(cell) for cell in header if cell != cell.strip()]
        report.notes.append(HEADER_SPACES_NOTE.format(file=name, columns=_examples(changed)))
    header = stripped
    if len(header) == 1:
        for separator, label in ((";", "semicolons (;)"), ("\t", "tabs")):
            if separator in header[0]:
                report.add(name, WRONG_SEPARATOR.format(file=name, separator=label,
                                                        header=header[0][:80]))
                return None

    width = len(header)
    counts = Counter(header)
    columns, seen = [], Counter()
    for column in header:
        seen[column] += 1
        columns.append(column if seen[column] == 1 else f"{column} ({seen[column]})")
    for column, count in counts.items():
        if count > 1:
            report.add(name, DUPLICATE_COLUMN.format(file=name, column=column, count=count),
                       column=column)
    if header_line == 1:
        frame = _plain_csv_frame(text, width)
        if frame is not None:
            frame.columns = columns
            return frame, np.arange(1, len(frame) + 1)

    rows, cells, ragged, ragged_values = [], [], [], []
    for line, record in records:
        if len(record) == width:
            rows.append(line - header_line)
            cells.append(record)
        elif record and (len(record) > 1 or record[0].strip()):  # not a blank line
            ragged.append(line - header_line)
            ragged_values.append(f"{len(record)} values")
    if ragged:
        report.add(name, RAGGED_ROWS.format(
            file=name, expected=len(header),
            where=rows_text(name, True, ragged, ragged_values)), rows=ragged)
    frame = pd.DataFrame(cells, columns=range(width), dtype=object).astype("str")
    frame.columns = columns
    return frame, np.asarray(rows, dtype=np.int64)


def _plain_csv_frame(text: str, width: int) -> pd.DataFrame | None:
    """The data rows through pandas' C parser when the file is plain (no quotes, no blank,
    ragged or lone-CR lines, the header on line 1): then row k is line k + 1. Else None, and
    the caller parses record by record to report ragged rows by number."""
    if '"' in text or text.count("\r") != text.count("\r\n"):
        return None
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    ends = np.flatnonzero(data == ord("\n"))
    if data.size and data[-1] != ord("\n"):
        ends = np.append(ends, data.size)
    starts = np.concatenate(([0], ends[:-1] + 1))
    def per_line(byte: str) -> np.ndarray:  # how many times ``byte`` occurs on each line
        at = np.flatnonzero(data == ord(byte))
        return np.searchsorted(at, ends) - np.searchsorted(at, starts)

    if (ends - starts - per_line("\r") == 0).any() or (per_line(",") != width - 1).any():
        return None
    return pd.read_csv(io.StringIO(text), header=None, skiprows=1, names=list(range(width)),
                       dtype="str", na_filter=False, keep_default_na=False, index_col=False,
                       engine="c")


def _csv_records(text: str):
    """(line number, cells) of each record. Without quotes a record is one line split at
    commas (fast); with quotes the csv module parses it (a record may span lines)."""
    if '"' not in text:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return ((k, line.split(",") if line else []) for k, line in enumerate(lines, 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    return ((reader.line_num, record) for record in reader)
