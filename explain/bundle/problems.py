"""What every check of a bundle writes: the problems (file, column, data rows, message) in a
``ValidationReport``, the bundle's file names, and how messages name rows and values.

Row numbers in messages are data rows counted from 1, as a spreadsheet shows them below the
header: row 5 of a CSV file is line 6 of the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from explain.core.text import capped, listing

MODEL_FILE = "model.keras"
LEGACY_MODEL_FILE = "model.h5"  # used when there is no model.keras

CONFIG_FILE = "bundle.json"
TABLE_FILES = {
    "static": ("static.csv", "static.parquet"),
    "temporal": ("temporal.csv", "temporal.parquet"),
}
BUNDLE_FILES = (MODEL_FILE, *TABLE_FILES["static"], *TABLE_FILES["temporal"], CONFIG_FILE)
MISSING_TOKENS = frozenset({"", "na", "n/a", "nan", "null", "none", "#n/a", "nil", "-", "?"})
EXAMPLES_SHOWN = 5

ROW_CONVENTION_CSV = "row 1 is the first data row, line 2 of the file counting the header"
ROW_CONVENTION_PARQUET = "rows counted from 1"


@dataclass(frozen=True)
class Problem:
    """One problem of a bundle: which file, which column (if any), which data rows (1-based)."""

    file: str
    column: str | None
    rows: tuple[int, ...]
    message: str

    def __str__(self) -> str:
        if self.message.startswith(self.file + " "):
            return self.message  # "static.csv is empty. ..." names its file already
        return f"{self.file}: {self.message}"


@dataclass
class ValidationReport:
    """Every problem and note found in a bundle; ``ok`` when there are no problems."""

    path: Path | None = None
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, file: str, message: str, column: str | None = None,
            rows: Iterable[int] = ()) -> None:
        rows = np.asarray(rows if isinstance(rows, np.ndarray) else list(rows), dtype=np.int64)
        self.problems.append(Problem(file, column, tuple(rows.tolist()), message))

    def format(self) -> str:
        """The report as text: the first problems and notes (``explain.core.text.listing``: about 20, a few
        KB), then how many more there are."""
        where = f"Bundle {self.path}" if self.path is not None else "Bundle"
        if self.ok:
            lines = [f"{where} is valid" + (f": {self.summary}." if self.summary else ".")]
        else:
            count = len(self.problems)
            lines = [f"{where} has {count:,} problem{'s' if count != 1 else ''}:"]
            lines += listing((f"  {i}. {problem}" for i, problem in enumerate(self.problems, 1)),
                             total=count, more="  ... and {count:,} more problems")
        if self.notes:
            lines.append("Notes:")
            lines += listing((f"  - {note}" for note in self.notes), limit=10, budget=1500,
                             more="  ... and {count:,} more notes")
        return capped("\n".join(lines))

    def __str__(self) -> str:
        return self.format()


def rows_text(file: str, is_csv: bool, rows: Sequence[int], shown: Sequence[str] | None = None) -> str:
    """'rows 5 ('12,5'), 9 ('abc') and 3 more of static.csv (row 1 is the first data row ...)'."""
    count = len(rows)
    rows = [int(r) for r in rows[:EXAMPLES_SHOWN]]
    items = [str(r) if not shown or not shown[k] else f"{r} ({shown[k]})"
             for k, r in enumerate(rows)]
    more = f" and {count - EXAMPLES_SHOWN} more" if count > EXAMPLES_SHOWN else ""
    word = "row" if count == 1 else "rows"
    if is_csv and count == 1:
        convention = f"line {rows[0] + 1} counting the header"
    else:
        convention = ROW_CONVENTION_CSV if is_csv else ROW_CONVENTION_PARQUET
    return f"{word} {', '.join(items)}{more} of {file} ({convention})"


def cell_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value).strip()
