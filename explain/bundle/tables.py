"""Reading a bundle's tables as data only, with pyarrow and no pandas frame: CSV (every cell kept as text
for the checks; pyarrow's parser, or Python's ``csv`` module for files with quotes, blank or ragged lines)
or Parquet (read column by column when a check asks for it), with a message for each way a file can be
unreadable. A :class:`Table` hands out one column at a time, as Arrow or as codes of its distinct texts.

Before a table is read its size is measured (``Limits.max_table_cells`` and ``max_table_bytes``):
a CSV file's bytes (lines x fields of its header, and every field), a Parquet file's metadata
(rows x columns, the uncompressed size of its columns, no nested columns; only its footer is read),
so that a 1 MB Parquet file of 400 million zeros is refused before any column is made."""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from explain.bundle.problems import TABLE_FILES, ValidationReport, cell_text, rows_text
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


class UnreadableTable(Exception):
    """A Parquet column that cannot be decoded (a damaged page): the loader reports it as UNREADABLE_PARQUET."""

    def __init__(self, table: "Table", error: BaseException) -> None:
        super().__init__(one_line(error))
        self.table = table


@dataclass(eq=False)
class Table:
    """One table as read: its column names, the data row number of each row, and its columns on demand
    (CSV: every cell as text, all in memory; Parquet: its own types, each column read from the file when a
    check first asks for it, so that memory holds one column at a time)."""

    file: str
    path: Path
    columns: list[str]
    rows: np.ndarray          # (n,) the 1-based data row number of each row
    is_csv: bool
    _text: pa.Table | None = None                      # CSV: column k is columns[k], as text
    _keys: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> pa.ChunkedArray:
        """The column ``name`` (dictionary-encoded columns decoded); ``UnreadableTable`` if Parquet cannot decode it."""
        if self._text is not None:
            return self._text.column(self.columns.index(name))
        try:
            column = pq.ParquetFile(self.path).read(columns=[name], use_threads=True).column(0)
        except Exception as error:  # pyarrow raises several types for a damaged page
            raise UnreadableTable(self, error) from error
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        return column

    def keys(self, name: str, keep: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(codes (n,) int32, texts (k,) object): row r's cell as text (``cell_text``: stripped, "" when
        missing) is ``texts[codes[r]]``; each text once, in order of first appearance. Python sees only the
        distinct values, so an id column of millions of rows costs one pass of pyarrow. Kept for the next
        call unless ``keep`` is false (a feature column read as text once)."""
        if name in self._keys:
            return self._keys[name]
        column = self.column(name)
        distinct = pc.unique(column)
        codes = pc.index_in(column, value_set=distinct)  # a null matches the null of ``distinct``
        codes = np.concatenate([chunk.to_numpy(zero_copy_only=False) for chunk in codes.chunks]
                               or [np.zeros(0, np.int32)])
        # cells that differ only in spaces around them (or 5 and "5") are one text
        merged, texts = pd.factorize(np.asarray([cell_text(v) for v in distinct.to_pylist()], dtype=object))
        found = (merged.astype(np.int32 if len(texts) < 2**31 else np.int64)[codes], np.asarray(texts, dtype=object))
        del column, distinct, codes
        pa.default_memory_pool().release_unused()  # the pool would keep the column's memory for the next reads
        if keep:
            self._keys[name] = found
        return found

    def texts(self, name: str, keep: bool = True) -> np.ndarray:
        """(n,) object: every cell of column ``name`` as text (``cell_text``)."""
        codes, texts = self.keys(name, keep)
        return texts[codes]

    def text(self, name: str, row: int) -> str:
        """The cell of column ``name`` at row position ``row`` as text."""
        codes, texts = self.keys(name)
        return texts[codes[row]]


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
    if name.endswith(".parquet"):
        table = _read_parquet(name, path, csv_name, what, report)
    else:
        if not raw or raw.isspace():
            report.add(name, EMPTY_FILE.format(file=name, what=what))
            return None
        table = _parse_csv(name, path, raw, kind, report)
    if table is not None and len(table) == 0:
        report.add(name, NO_DATA_ROWS.format(file=name, what=what))
        return None
    return table


def oversized_table(path: Path, limits: Limits = DEFAULT_LIMITS) -> tuple[str | None, bytes]:
    """(TABLE_TOO_LARGE or NESTED_COLUMNS, or None when it fits; the file's bytes, b"" when not read) of the
    table file ``path`` (.csv, else Parquet): its size on disk first, then a CSV file's bytes or a Parquet
    file's metadata (its footer only: the columns are read later, one at a time)."""
    name, size = path.name, path.stat().st_size
    if size > limits.max_table_bytes:
        return TABLE_TOO_LARGE.format(file=name, what=f"{size:,} bytes", field="max_table_bytes",
                                      limit=limits.max_table_bytes), b""
    if not name.lower().endswith(".csv"):
        return _parquet_size(name, path, limits), b""
    raw = path.read_bytes()
    return (_csv_size(name, raw, limits) if raw and not raw.isspace() else None), raw


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


def _parquet_size(name: str, path: Path, limits: Limits) -> str | None:
    """TABLE_TOO_LARGE (or NESTED_COLUMNS) from the Parquet file's metadata: columns over
    ``max_table_columns``, rows x columns over ``max_table_cells``, its columns' uncompressed size over
    ``max_table_bytes``; None when it fits or when the metadata cannot be read (the reader then says why)."""
    import pyarrow.types as pt

    try:
        meta = pq.ParquetFile(path).metadata
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


def _read_parquet(name: str, path: Path, csv_name: str, what: str, report: ValidationReport) -> Table | None:
    """The file's footer and column names (no data yet). Columns that pandas wrote for its index are left out,
    as ``pandas.read_parquet`` leaves them out."""
    size = path.stat().st_size
    if size == 0 or (size <= 1 << 20 and path.read_bytes().isspace()):
        report.add(name, EMPTY_FILE.format(file=name, what=what))
        return None
    try:
        metadata = pq.ParquetFile(path).metadata
        schema = metadata.schema.to_arrow_schema()
    except Exception as error:  # pyarrow raises several types for a damaged file
        report.add(name, UNREADABLE_PARQUET.format(file=name, reason=one_line(error), csv_name=csv_name))
        return None
    index = {c for c in (schema.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)}
    columns = [field.name for field in schema if field.name not in index]
    duplicated = [c for c, count in Counter(columns).items() if count > 1]
    for column in duplicated:
        report.add(name, DUPLICATE_COLUMN.format(file=name, column=column, count=columns.count(column)),
                   column=column)
    if duplicated:
        return None
    return Table(name, path, columns, np.arange(1, metadata.num_rows + 1), is_csv=False)


def _parse_csv(name: str, path: Path, raw: bytes, kind: str, report: ValidationReport) -> Table | None:
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
    plain = _plain_csv(raw)
    if plain is not None:
        header, text_table = plain
        columns = _header(name, header, report)
        if columns is None:
            return None
        text_table = text_table.rename_columns(columns)
        return Table(name, path, columns, np.arange(1, text_table.num_rows + 1), True, text_table)
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
    columns = _header(name, header, report)
    if columns is None:
        return None
    width = len(columns)
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
            file=name, expected=width,
            where=rows_text(name, True, ragged, ragged_values)), rows=ragged)
    by_column = list(zip(*cells)) if cells else [()] * width
    text_table = pa.table([pa.array(values, pa.string()) for values in by_column], names=columns)
    return Table(name, path, columns, np.asarray(rows, dtype=np.int64), True, text_table)


def _header(name: str, header: list[str], report: ValidationReport) -> list[str] | None:
    """The column names of a CSV header (stripped; a repeated name gets `` (2)``, said as a problem), or None
    when the header shows another separator than commas."""
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
    counts = Counter(header)
    columns, seen = [], Counter()
    for column in header:
        seen[column] += 1
        columns.append(column if seen[column] == 1 else f"{column} ({seen[column]})")
    for column, count in counts.items():
        if count > 1:
            report.add(name, DUPLICATE_COLUMN.format(file=name, column=column, count=count),
                       column=column)
    return columns


def _plain_csv(raw: bytes) -> tuple[list[str], pa.Table] | None:
    """(header cells, every data cell as text) through pyarrow's CSV parser when the file is plain: no
    quotes, no blank or lone-CR lines, the header on line 1 and every row as wide as the header (then row k
    is line k + 1), UTF-8. Else None, and the caller parses the text record by record (to report ragged
    rows by number, blank lines counted)."""
    start = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    first = raw.find(b"\n", start)
    if (first < 0 or b'"' in raw or raw.count(b"\r") != raw.count(b"\r\n")
            or b"\n\n" in raw or b"\n\r\n" in raw):
        return None
    try:
        header = raw[start:first].rstrip(b"\r").decode("utf-8").split(",")
    except UnicodeDecodeError:
        return None
    if not any(cell.strip() for cell in header) or first + 1 >= len(raw):
        return None
    names = [str(k) for k in range(len(header))]
    try:
        text_table = pa_csv.read_csv(
            pa.BufferReader(pa.py_buffer(raw)[first + 1:]),
            read_options=pa_csv.ReadOptions(column_names=names),
            parse_options=pa_csv.ParseOptions(delimiter=",", quote_char=False, double_quote=False,
                                              escape_char=False, newlines_in_values=False,
                                              ignore_empty_lines=False),
            convert_options=pa_csv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                  strings_can_be_null=False, quoted_strings_can_be_null=False,
                                                  check_utf8=True))
    except pa.ArrowException:  # a row of another width, text that is not UTF-8, ...
        return None
    return header, text_table


def _csv_records(text: str):
    """(line number, cells) of each record. Without quotes a record is one line split at
    commas (fast); with quotes the csv module parses it (a record may span lines)."""
    if '"' not in text:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return ((k, line.split(",") if line else []) for k, line in enumerate(lines, 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    return ((reader.line_num, record) for record in reader)
