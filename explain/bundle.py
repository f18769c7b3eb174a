"""Open, validate and hold a bundle: a Keras model and the customers' tables.

A bundle is a folder (see DESIGN.md)::

    model.keras                      one 2-D input (None, S) and one 3-D input (None, T, F)
    static.csv | static.parquet      one row per customer: id column + S features
    temporal.csv | temporal.parquet  long format: id column, period column, F features;
                                     exactly T rows per customer
    bundle.json (optional)           column roles, display names, units, output names, label

A model with more inputs (several static-like and temporal-like ones, categorical ids into
embeddings, padded histories) is described by ``bundle.json``'s ``inputs``: every static
input's columns come from the one static table, every temporal input has its own long table
(``temporal.csv`` when there is one temporal input, else ``temporal_<input>.csv`` or the
table named in ``inputs``). Histories behind a Masking layer (or ``mask_zero`` ids) may have
fewer than T rows per customer, padded at the start or the end (``temporal_padding``).

``validate_bundle(path)`` collects every problem it can find (tables are checked even when the
model cannot be opened, and the reverse) into a ``ValidationReport``; ``load_bundle(path)``
raises ``BundleError`` with the report's text when there is any problem, else returns a frozen
``Bundle`` holding float32 arrays in the model's feature order.

Row numbers in messages are data rows counted from 1, as a spreadsheet shows them below the
header: row 5 of a CSV file is line 6 of the file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from explain.text import examples as _examples
from explain.errors import BundleError, ExplainError, UnsafeModelError
from explain.inputs import input_layout
from explain import labels as label_values

if TYPE_CHECKING:  # keras is imported by explain.safe_load when a model is opened
    import keras

ModelLoader = Callable[[Path], "keras.Model"]  # opens model.keras / model.h5: safe_load.open_model or load_model_isolated
MODEL_FILE = "model.keras"
LEGACY_MODEL_FILE = "model.h5"  # used when there is no model.keras
CONFIG_FILE = "bundle.json"
TABLE_FILES = {
    "static": ("static.csv", "static.parquet"),
    "temporal": ("temporal.csv", "temporal.parquet"),
}
BUNDLE_FILES = (MODEL_FILE, *TABLE_FILES["static"], *TABLE_FILES["temporal"], CONFIG_FILE)

DEFAULT_ID_COLUMN = "customer_id"
DEFAULT_PERIOD_COLUMN = "period"
CONFIG_KEYS = ("id_column", "period_column", "static_features", "temporal_features",
               "display_names", "units", "output_names", "label_column", "positive_label",
               "inputs", "temporal_padding", "categories")
PADDING_SIDES = ("start", "end")
INPUT_KEYS = ("features", "display_name", "role", "table")
# Cell texts read as "missing" (reported as missing values, never parsed as numbers).
MISSING_TOKENS = frozenset({"", "na", "n/a", "nan", "null", "none", "#n/a", "nil", "-", "?"})
EXAMPLES_SHOWN = 5

# ---- message templates (tests import these) ---------------------------------------------
MISSING_FILE = "{file} is missing from {folder}: expected {accepted}. Add the file (names are case-sensitive)."
AMBIGUOUS_FILE = "both {first} and {second} are in {folder}; keep only one of them."
NOT_A_FOLDER = "{folder} is not a folder. A bundle is a folder holding {files}."
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
NO_FEATURE_COLUMNS = ("{file} has no feature columns (only {columns}). Expected the {role} "
                      "features next to the id column.")
MISSING_COLUMN = ("column '{column}' is missing from {file} (needed as {role}). Columns found: "
                  "{found}. {fix}")
EXTRA_COLUMNS_NOTE = "{file}: column(s) {columns} are not listed in bundle.json '{key}' and were ignored."
HEADER_SPACES_NOTE = "{file}: spaces around column names were removed ({columns})."
NON_NUMERIC = "column '{column}' must hold numbers, but {count} value(s) are not numbers: {where}. {fix}"
DECIMAL_COMMA_FIX = "Write decimals with a point ('12.5', not '12,5') and no thousands separators."
NON_NUMERIC_FIX = "Replace them with numbers (encode categories as 0/1 columns)."
MISSING_VALUES = ("column '{column}' has {count} missing value(s) (empty, NA or NaN): {where}. "
                  "Fill them in (for example with 0 or the column's median) or remove those rows.")
INFINITE_VALUES = "column '{column}' has {count} infinite value(s): {where}. Replace them with finite numbers."
EMPTY_KEYS = "column '{column}' has {count} empty value(s): {where}. Every row needs {what}."
DUPLICATE_IDS = ("{count} customer id(s) appear more than once in column '{column}': {examples}. "
                 "Each customer needs exactly one row in {file}; remove or merge the duplicates.")
IDS_MISSING_FROM = ("{count} customer(s) of {present_file} have no rows in {absent_file}: "
                    "{examples}. Every customer needs one row in the static table and one row per "
                    "period in the temporal table; add the rows or remove these customers.")
WRONG_PERIOD_COUNT = ("{count} customer(s) do not have exactly {expected} periods ({why}): "
                      "{examples}. Give each customer exactly {expected} rows, one per period.")
DUPLICATE_PERIODS = ("{count} (customer, period) pair(s) appear more than once: {examples}. "
                     "Each customer needs one row per period; remove the duplicate rows.")
PERIODS_SORTED_NOTE = ("{file}: the rows of {count} customer(s) were not in period order "
                       "(e.g. {examples}); they were sorted by '{column}'.")
MIXED_PERIODS_NOTE = ("{file}: {count} customer(s) have other period labels than {first}..{last} "
                      "(e.g. {examples}); each customer's periods are aligned by position "
                      "(first to last) and shown as {first}..{last}.")
FEATURE_COUNT_MISMATCH = ("the model's {role} input expects {symbol}={expected} features, but "
                          "{source} gives {given}: {columns}. {fix}")
MODEL_UNREADABLE = ("{file} could not be opened: {reason}. Save the model from Keras 3 with "
                    "model.save('model.keras').")
MODEL_REFUSED = "{file} was refused before loading: {reason}"
MODEL_INPUTS = ("the model must take exactly two inputs, one (None, S) and one (None, T, F), in either "
                "order, or more of them (every 2-D input static-like, every 3-D input temporal-like, "
                "category ids into an Embedding), with known S, T and F; it takes {found}.")
MODEL_INPUT_PROBLEM = "{problem}"
INPUTS_UNKNOWN = ("'inputs' names {names}, which the model does not have; its inputs are {known}. "
                  "Use the model's input names (or its dict keys).")
INPUTS_INCOMPLETE = ("'inputs' must list 'features' for every model input; missing for {names}. "
                     "List each input's table columns in the model's order.")
INPUT_WIDTH = ("input {input!r} expects {expected} feature(s) (shape {shape}), but bundle.json "
               "'inputs' lists {given}: {columns}.")
NOT_CATEGORY_IDS = ("column '{column}' feeds the Embedding of input {input!r} and must hold whole-number "
                    "category ids from 0 to {high}, but {count} value(s) are not: {where}. {fix}")
CATEGORY_IDS_FIX = ("Write the category ids the model was trained with, or put a StringLookup/IntegerLookup "
                    "in the model to read the categories as text.")
PERIODS_PADDED_NOTE = ("{file}: {count} customer(s) have fewer than {expected} periods; their histories "
                       "are padded at the {side} with the mask value of {padded_by}, as the model expects "
                       "('temporal_padding' in bundle.json), and shown as no data.")
NO_PAD_TOKEN = ("input {input!r} has customers with fewer than {expected} periods, but its lookup "
                "layer has no mask token to pad them with. Give each customer {expected} rows.")
MODEL_OUTPUT = "the model must have one output of shape (None, K); it has {found}."
INVALID_JSON = ("{file} is not valid JSON: {reason} (line {line}, column {col}). Fix the syntax "
                "or delete {file} to use the defaults.")
JSON_NOT_OBJECT = "{file} must hold a JSON object ({{\"key\": value, ...}}); it holds {found}."
JSON_BAD_TYPE = "'{key}' must be {expected}; it is {found}."
JSON_UNKNOWN_KEY_NOTE = "{file}: unknown key(s) {keys} were ignored (known keys: {known})."
JSON_UNKNOWN_COLUMN = ("'{key}' names column(s) that are in neither table: {columns}. "
                       "Columns found: {found}. Fix the names (they are case-sensitive).")
JSON_DUPLICATE_FEATURE = "'{key}' lists column(s) more than once: {columns}."
OUTPUT_NAMES_COUNT = ("'output_names' has {given} name(s), but the model has {expected} "
                      "output(s) (its output shape is (None, {expected})).")
POSITIVE_LABEL_NOTE = "{file}: positive_label {label!r} does not occur in label column '{column}'."
UNKNOWN_UPLOAD = ("cannot tell what the uploaded file '{name}' is. Expected a model '*.keras', "
                  "tables whose names contain 'static' or 'temporal' ending in .csv or .parquet, "
                  "and optionally 'bundle.json'. Rename the file.")
DUPLICATE_UPLOAD = "the uploaded files {names} would all be {target}; upload only one of them."
UNKNOWN_ID = ("unknown customer id(s): {unknown}. Ids are text and case-sensitive; this bundle "
              "has {n} customers, for example {examples}.")
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
        self.problems.append(Problem(file, column, tuple(int(r) for r in rows), message))

    def format(self) -> str:
        where = f"Bundle {self.path}" if self.path is not None else "Bundle"
        if self.ok:
            lines = [f"{where} is valid" + (f": {self.summary}." if self.summary else ".")]
        else:
            count = len(self.problems)
            lines = [f"{where} has {count} problem{'s' if count != 1 else ''}:"]
            lines += [f"  {i}. {problem}" for i, problem in enumerate(self.problems, 1)]
        if self.notes:
            lines.append("Notes:")
            lines += [f"  - {note}" for note in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True, eq=False)
class Bundle:
    """A model and its customers' data, in the model's input order and feature order."""

    path: Path | None
    model: "keras.Model"
    ids: np.ndarray                      # (n,) str
    static: np.ndarray                   # (n, S) float32
    temporal: np.ndarray                 # (n, T, F) float32
    static_features: list[str]
    temporal_features: list[str]
    static_labels: list[str] = field(default_factory=list)
    temporal_labels: list[str] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    periods: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    labels: np.ndarray | None = None     # (n,) true outcome, never fed to the model
    label_name: str | None = None
    positive_label: Any = None
    content_hash: str = ""
    notes: list[str] = field(default_factory=list)
    input_roles: tuple[str, ...] = ("static", "temporal")   # roles in model.inputs order
    # Every model input by the engine's key ("static"/"temporal" for two-input models, else
    # input names): arrays as the model takes them (floats, ids or texts; padded histories
    # padded), their columns, display names and periods. Empty for a plain two-input bundle.
    input_arrays: dict = field(default_factory=dict)
    layout: Any = None                   # explain.inputs.InputLayout
    input_features: dict = field(default_factory=dict)
    input_labels: dict = field(default_factory=dict)
    input_periods: dict = field(default_factory=dict)
    temporal_padding: str = "start"
    categories: dict = field(default_factory=dict)   # column -> {id or text: display text}
    roles: dict = field(default_factory=dict)        # bundle.json 'inputs' roles, for the engine
    _positions: dict = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.ids)
        if self.static.shape[0] != n or self.temporal.shape[0] != n:
            raise ExplainError(
                f"Bundle arrays disagree on the number of customers: ids {n}, static "
                f"{self.static.shape[0]}, temporal {self.temporal.shape[0]}.")
        if not self.static_labels:
            object.__setattr__(self, "static_labels", list(self.static_features))
        if not self.temporal_labels:
            object.__setattr__(self, "temporal_labels", list(self.temporal_features))
        if not self.periods:
            object.__setattr__(self, "periods", [f"t{i + 1}" for i in range(self.n_periods)])
        if not self.output_names:
            object.__setattr__(self, "output_names", _default_output_names(_output_width(self.model)))
        object.__setattr__(self, "_positions", {str(i): k for k, i in enumerate(self.ids)})

    @property
    def arrays(self) -> dict:
        """Every model input's array by the engine's key: ``input_arrays``, or static and
        temporal for a plain two-input bundle."""
        return self.input_arrays or {"static": self.static, "temporal": self.temporal}

    @property
    def plain(self) -> bool:
        """A model with one numeric static and one numeric temporal input, nothing padded."""
        return self.layout is None or (set(self.layout.engine_keys) == {"static", "temporal"} and all(
            spec.kind == "numeric" and spec.padded_by is None for spec in self.layout.specs))

    @property
    def engine_layout(self):
        """The layout to build baselines with (None for a plain bundle: the classic builders)."""
        return None if self.plain else self.layout

    def padding(self, key: str, rows=None) -> np.ndarray | None:
        """(k, T) True where input ``key``'s history is padding (None if it cannot be padded)."""
        if self.layout is None:
            return None
        spec = self.layout.spec(key)
        values = self.arrays[key] if rows is None else self.arrays[key][rows]
        if spec.mask_value is not None:
            return spec.padding(values)
        if spec.mask_zero:
            token = getattr(spec.lookup, "mask_token", None) if spec.lookup is not None else 0
            pad = values == token
            return pad if pad.ndim == 2 else pad.all(axis=-1)
        return None

    @classmethod
    def from_arrays(cls, model: "keras.Model", static: np.ndarray, temporal: np.ndarray, *,
                    ids: Sequence[str] | None = None, static_features: Sequence[str] | None = None,
                    temporal_features: Sequence[str] | None = None,
                    periods: Sequence[str] | None = None,
                    output_names: Sequence[str] | None = None) -> "Bundle":
        """An in-memory bundle (no files): names default to ``static_0``, ``temporal_0``, ..."""
        static = np.asarray(static, dtype=np.float32)
        temporal = np.asarray(temporal, dtype=np.float32)
        roles, shapes, problem = _input_roles(model)
        if problem:
            raise ExplainError(problem)
        if static.shape[1:] != shapes["static"][1:] or temporal.shape[1:] != shapes["temporal"][1:]:
            raise ExplainError(
                f"The arrays do not fit the model: static {static.shape}, temporal "
                f"{temporal.shape}; the model expects {shapes['static']} and {shapes['temporal']}.")
        n = static.shape[0]
        return cls(
            path=None, model=model,
            ids=np.array([str(i) for i in (ids if ids is not None else range(n))], dtype=object),
            static=static, temporal=temporal,
            static_features=list(static_features or [f"static_{j}" for j in range(static.shape[1])]),
            temporal_features=list(temporal_features
                                   or [f"temporal_{j}" for j in range(temporal.shape[2])]),
            periods=list(periods or []), output_names=list(output_names or []),
            input_roles=roles)

    @classmethod
    def from_objects(cls, model: "keras.Model", static, temporal, **names) -> "Bundle":
        """An in-memory bundle from a model, a DataFrame or (n, S) array and an (n, T, F) array
        or long DataFrame, every argument checked (see :mod:`explain.objects`)."""
        from explain.objects import from_objects

        return from_objects(model, static, temporal, **names)

    # ---- sizes ----
    @property
    def n_customers(self) -> int:
        return int(self.static.shape[0])

    @property
    def n_static(self) -> int:
        return int(self.static.shape[1])

    @property
    def n_periods(self) -> int:
        return int(self.temporal.shape[1])

    @property
    def n_temporal(self) -> int:
        return int(self.temporal.shape[2])

    # ---- access ----
    def index_of(self, customer_id: str) -> int:
        """Row of one customer; ``ExplainError`` naming the id (and valid examples) if unknown."""
        return self._indices([customer_id])[0]

    def inputs_for(self, ids: str | Iterable[str]) -> dict[str, np.ndarray]:
        """{"static": (k, S), "temporal": (k, T, F)} float32 copies for these customers."""
        if isinstance(ids, (str, bytes, int, np.integer)):
            ids = [ids]
        rows = np.asarray(self._indices(list(ids)), dtype=np.int64)
        return {key: value[rows] for key, value in self.arrays.items()}

    def data(self) -> dict[str, np.ndarray]:
        return dict(self.arrays)

    def model_inputs(self, inputs: Mapping[str, np.ndarray]) -> Any:
        """The structure the model is called with, from arrays keyed like ``data()``."""
        layout = self.layout if self.layout is not None else input_layout(self.model)
        return layout.feed(inputs)

    def predict(self, inputs: Mapping[str, np.ndarray] | None = None,
                batch_size: int = 1024, *, should_stop=None) -> np.ndarray:
        """Model outputs (k, K) for ``inputs`` (default: every customer), in batches
        (``explain.engine.predict``: the model's lock held per batch, ``should_stop`` asked before each)."""
        from explain.engine import predict

        inputs = self.data() if inputs is None else inputs
        out = predict(self.model, inputs, batch_size=batch_size, should_stop=should_stop)
        return out if out.shape[0] else np.zeros((0, len(self.output_names)))

    def _indices(self, ids: list) -> list[int]:
        keys = [str(i) for i in ids]
        unknown = [key for key in keys if key not in self._positions]
        if unknown:
            raise ExplainError(UNKNOWN_ID.format(
                unknown=_examples(unknown), n=self.n_customers,
                examples=_examples(self.ids[:3].tolist(), limit=3, more=False)))
        return [self._positions[key] for key in keys]


# ---- public entry points ------------------------------------------------------------------

def validate_bundle(path: str | os.PathLike, *, loader: ModelLoader | None = None) -> ValidationReport:
    """Check a bundle folder and return every problem and note found (never raises for data)."""
    report, _ = _inspect(Path(path), loader)
    return report


def inspect_bundle(path: str | os.PathLike, *, loader: ModelLoader | None = None
                   ) -> tuple[ValidationReport, Bundle | None]:
    """(every problem and note, the bundle when there is no problem): ``check`` then looks at the model."""
    return _inspect(Path(path), loader)


def load_bundle(path: str | os.PathLike, *, loader: ModelLoader | None = None) -> Bundle:
    """Open a bundle folder; ``BundleError`` (text = the full report) if it has any problem.

    ``loader(path) -> keras.Model`` opens model.keras or model.h5 (default ``safe_load.load_model`` / ``open_model``; the
    dashboard passes ``safe_load.load_model_isolated`` for uploads).
    """
    report, parts = _inspect(Path(path), loader)
    if not report.ok or parts is None:
        raise BundleError(report.format(), report.problems)
    return parts


def load_bundle_from_uploads(files: Mapping[str, bytes], workdir: str | os.PathLike, *,
                             loader: ModelLoader | None = None) -> Bundle:
    """Write uploaded files into ``workdir`` under the bundle's own names, then load it.

    Names are matched loosely: one ``*.keras`` model, tables whose names contain ``static`` /
    ``temporal`` (``.csv``, ``.parquet`` or ``.pq``) and ``bundle.json``. Any other name is
    refused (``BundleError``) before anything is written. The bundle files already in
    ``workdir`` (model.keras, static.csv, ...) are replaced; other files there are left alone.
    ``loader`` as in :func:`load_bundle`.
    """
    report = ValidationReport(path=Path(workdir))
    targets: dict[str, list[str]] = {}
    for name in files:
        base = PurePath(str(name).replace("\\", "/")).name
        target = _upload_target(base)
        if target is None:
            report.add(base, UNKNOWN_UPLOAD.format(name=base))
        else:
            targets.setdefault(target, []).append(str(name))
    for target, names in targets.items():
        if len(names) > 1:
            report.add(target, DUPLICATE_UPLOAD.format(names=_examples(names), target=target))
    for kind, (csv_name, parquet_name) in TABLE_FILES.items():
        if csv_name in targets and parquet_name in targets:
            report.add(csv_name, AMBIGUOUS_FILE.format(
                first=targets[csv_name][0], second=targets[parquet_name][0], folder="the upload"))
    if not report.ok:
        raise BundleError(report.format(), report.problems)

    folder = Path(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in BUNDLE_FILES:
        (folder / stale).unlink(missing_ok=True)
    for target, names in targets.items():
        _write_atomic(folder / target, bytes(files[names[0]]))
    return load_bundle(folder, loader=loader)


# ---- inspection -------------------------------------------------------------------------

@dataclass
class _Config:
    present: bool = False
    id_column: str = DEFAULT_ID_COLUMN
    period_column: str = DEFAULT_PERIOD_COLUMN
    static_features: list[str] | None = None
    temporal_features: list[str] | None = None
    display_names: dict[str, str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    output_names: list[str] | None = None
    label_column: str | None = None
    positive_label: Any = None
    inputs: dict[str, dict] | None = None
    temporal_padding: str = "start"
    categories: dict[str, dict] = field(default_factory=dict)
    raw: bytes = b""


@dataclass
class _Table:
    file: str
    path: Path
    frame: pd.DataFrame
    rows: np.ndarray          # (len(frame),) the 1-based data row number of each frame row
    is_csv: bool
    raw: bytes


@dataclass
class _ModelInfo:
    model: Any
    roles: tuple[str, ...] | None = None
    shapes: dict[str, tuple] | None = None       # role -> input shape
    outputs: int | None = None                    # K
    layout: Any = None                            # explain.inputs.InputLayout
    raw: bytes = b""


def _inspect(folder: Path, loader: ModelLoader | None = None) -> tuple[ValidationReport, Bundle | None]:
    report = ValidationReport(path=folder)
    if not folder.is_dir():
        report.add(str(folder), NOT_A_FOLDER.format(
            folder=folder, files=", ".join((MODEL_FILE, "static.csv", "temporal.csv"))))
        return report, None

    config = _read_config(folder, report)
    static_table = _read_table(folder, "static", report)
    model_info = _read_model(folder, report, loader)
    layout = _model_layout(model_info, config, report)
    plan = _input_plan(config, layout, report)
    temporal_tables = {key: _read_table(folder, "temporal", report, names)
                       for key, names in plan["tables"].items()}

    static = _check_static(static_table, config, plan, report)
    temporal = {key: _check_temporal(table, config, plan, key, report)
                for key, table in temporal_tables.items()}
    first_temporal = next(iter(temporal_tables.values()), None)
    _check_config_columns(config, static_table, first_temporal, report,
                          [t for t in temporal_tables.values() if t is not None])
    for key, checked in temporal.items():
        if static and checked:
            _check_same_customers(static, checked, static_table, temporal_tables[key],
                                  config.id_column, report)
    if model_info and model_info.outputs is not None and config.output_names is not None:
        if len(config.output_names) != model_info.outputs:
            report.add(CONFIG_FILE, OUTPUT_NAMES_COUNT.format(
                file=CONFIG_FILE, given=len(config.output_names), expected=model_info.outputs))

    complete = static and temporal and all(temporal.values()) and model_info and layout is not None
    if not report.ok or not complete:
        if report.ok:  # cannot happen, but never hand back a half-checked bundle
            report.add(str(folder), "the bundle could not be checked completely.")
        return report, None

    arrays = dict(static["values"])
    order = pd.Series(np.arange(len(static["ids"])), index=static["ids"])
    for key, checked in temporal.items():
        arrays[key] = _history_array(checked, layout.spec(key), order, config.temporal_padding,
                                     temporal_tables[key], report)
        if arrays[key] is None:
            return report, None

    names = {**config.display_names}
    labels = static["labels"]
    if labels is not None and config.positive_label is not None:
        if not label_values.occurs(labels, config.positive_label):  # as text and as numbers
            report.notes.append(POSITIVE_LABEL_NOTE.format(
                file=CONFIG_FILE, label=config.positive_label, column=config.label_column))
    static_keys, temporal_keys = layout.keys_of("static"), layout.keys_of("temporal")
    first = temporal_keys[0]
    static_x = _side_by_side([arrays[key] for key in static_keys])
    temporal_x = arrays[first] if arrays[first].ndim == 3 else arrays[first][..., None]
    features = {key: list(plan["features"][key]) for key in layout.engine_keys}
    all_columns = [c for key in layout.engine_keys for c in features[key]]
    plain = set(layout.engine_keys) == {"static", "temporal"} and all(
        spec.kind == "numeric" and spec.padded_by is None for spec in layout.specs)
    bundle = Bundle(
        path=folder,
        model=model_info.model,
        ids=np.asarray(static["ids"], dtype=object),
        static=static_x,
        temporal=temporal_x if temporal_x.dtype.kind != "f" else temporal_x,
        static_features=[c for key in static_keys for c in features[key]],
        temporal_features=list(features[first]),
        static_labels=[names.get(c, c) for key in static_keys for c in features[key]],
        temporal_labels=[names.get(c, c) for c in features[first]],
        units={c: u for c, u in config.units.items() if c in all_columns},
        periods=list(temporal[first]["periods"]),
        output_names=list(config.output_names or _default_output_names(model_info.outputs)),
        labels=labels,
        label_name=config.label_column if labels is not None else None,
        positive_label=config.positive_label,
        content_hash=_content_hash(model_info.raw, static_table.raw,
                                   *[t.raw for t in temporal_tables.values()], config.raw),
        notes=list(report.notes),
        input_roles=tuple(spec.role for spec in layout.specs),
        input_arrays={} if plain else arrays,
        layout=layout,
        input_features=features,
        input_labels={key: plan["labels"][key] for key in layout.engine_keys},
        input_periods={key: list(temporal[key]["periods"]) for key in temporal_keys},
        temporal_padding=config.temporal_padding,
        categories={c: dict(m) for c, m in config.categories.items() if c in all_columns},
        roles={key: spec["role"] for key, spec in (config.inputs or {}).items() if "role" in spec},
    )
    report.summary = (f"{bundle.n_customers} customers, {bundle.n_static} static features, "
                      f"{bundle.n_periods} periods x {bundle.n_temporal} temporal features, "
                      f"{len(bundle.output_names)} output(s)")
    if not plain:
        parts = [f"{len(layout.specs)} inputs"]
        categorical = [key for key in layout.engine_keys if layout.spec(key).kind == "categorical"]
        if categorical:
            parts.append(f"categorical: {', '.join(categorical)}")
        if len(temporal_keys) > 1:
            parts.append("histories: " + ", ".join(
                f"{key} {arrays[key].shape[1]} periods" for key in temporal_keys))
        padded = [key for key in temporal_keys if layout.spec(key).padded_by]
        if padded:
            parts.append(f"padded at the {config.temporal_padding}: {', '.join(padded)}")
        report.summary += " (" + "; ".join(parts) + ")"
    return report, bundle


def _side_by_side(parts: list[np.ndarray]) -> np.ndarray:
    """(n, S_total) of every static input: float32 (float64 stays), or object when texts occur."""
    flat = [p.reshape(len(p), -1) for p in parts]
    if all(p.dtype.kind == "f" for p in flat):
        return np.concatenate(flat, axis=1) if len(flat) > 1 else flat[0]
    if all(p.dtype.kind in "fiub" for p in flat):
        return np.concatenate([p.astype(np.float64) for p in flat], axis=1).astype(np.float32)
    return np.concatenate([p.astype(object) for p in flat], axis=1)


def _model_layout(model_info: _ModelInfo | None, config: _Config, report: ValidationReport):
    """The model's input layout with the roles of bundle.json 'inputs' (None if unusable)."""
    if model_info is None or model_info.roles is None:
        return None
    from explain.inputs import input_layout

    roles = {key: spec["role"] for key, spec in (config.inputs or {}).items() if "role" in spec}
    layout = input_layout(model_info.model, roles)
    if layout.problem is not None or layout.roles is None:
        report.add(MODEL_FILE, layout.problem if layout.problem != "roles" else MODEL_INPUTS.format(
            found=" and ".join(str(s) for s in layout.shapes)))
        return None
    if config.inputs is not None:
        known = set(layout.engine_keys) | set(layout.names) | set(layout.keys or ())
        unknown = [key for key in config.inputs if key not in known]
        if unknown:
            report.add(CONFIG_FILE, INPUTS_UNKNOWN.format(
                names=_examples(unknown), known=_examples(layout.engine_keys)), column="inputs")
            return None
    return layout


def _input_config(config: _Config, layout, spec) -> dict:
    """bundle.json 'inputs' entry of ``spec`` (by engine key, input name or dict key)."""
    entries = config.inputs or {}
    keys = [spec.key, spec.name] + ([layout.keys[spec.position]] if layout.keys is not None else [])
    for key in keys:
        if key is not None and str(key) in entries:
            return entries[str(key)]
    return {}


def _input_plan(config: _Config, layout, report: ValidationReport) -> dict:
    """Which columns feed which input and which table each history comes from.

    {"listed": {key: columns or None}, "tables": {key: (csv name, parquet name)},
     "labels": {key: display name}, "specs": {key: InputSpec}, "features": filled in by the checks}.
    """
    plan = {"listed": {}, "tables": {}, "labels": {}, "specs": {}, "features": {}}
    if layout is None:  # no usable model: check the tables as a plain two-input bundle
        plan["listed"] = {"static": config.static_features, "temporal": config.temporal_features}
        plan["tables"] = {"temporal": TABLE_FILES["temporal"]}
        return plan
    temporal_specs = [spec for spec in layout.specs if spec.role == "temporal"]
    missing = []
    for spec in layout.specs:
        entry = _input_config(config, layout, spec)
        plan["specs"][spec.key] = spec
        plan["labels"][spec.key] = entry.get("display_name", spec.key)
        listed = entry.get("features")
        if listed is None and spec.role == "static" and len(layout.keys_of("static")) == 1:
            listed = config.static_features
        if listed is None and spec.role == "temporal" and len(temporal_specs) == 1:
            listed = config.temporal_features
        if listed is None and config.inputs is not None:
            missing.append(spec.key)
        plan["listed"][spec.key] = listed
        if spec.role == "temporal":
            table = entry.get("table")
            if table:
                stem = table.rsplit(".", 1)[0] if table.lower().endswith((".csv", ".parquet")) else table
                plan["tables"][spec.key] = (f"{stem}.csv", f"{stem}.parquet")
            elif len(temporal_specs) == 1:
                plan["tables"][spec.key] = TABLE_FILES["temporal"]
            else:
                plan["tables"][spec.key] = (f"temporal_{spec.key}.csv", f"temporal_{spec.key}.parquet")
    if missing:
        report.add(CONFIG_FILE, INPUTS_INCOMPLETE.format(names=_examples(missing)), column="inputs")
    return plan


def _history_array(checked: dict, spec, order: pd.Series, side: str, table: _Table,
                   report: ValidationReport) -> np.ndarray | None:
    """Long rows -> (n, T, F) (or (n, T) for ids), customers in static-table order, short
    histories padded at ``side`` with the mask value."""
    n, t_len = len(order), spec.shape[0]
    values = checked["values"]
    position = order.loc[checked["ids"]].to_numpy()
    sort = np.lexsort((checked["period_rank"], position))
    position, values = position[sort], values[sort]
    counts = np.bincount(position, minlength=n)
    index = np.arange(len(position)) - np.repeat(np.cumsum(counts) - counts, counts)  # row within customer
    slot = index + (t_len - counts[position]) if side == "start" else index
    if spec.kind == "categorical":
        pad = 0
        if spec.lookup is not None:
            pad = getattr(spec.lookup, "mask_token", None)
            if pad is None and (counts < t_len).any():
                report.add(table.file, NO_PAD_TOKEN.format(input=spec.key, expected=t_len))
                return None
        out = np.full((n, t_len, values.shape[1]), pad, dtype=values.dtype)
    else:
        dtype = np.float64 if spec.dtype == "float64" else np.float32
        out = np.full((n, t_len, values.shape[1]), spec.mask_value or 0.0, dtype=dtype)
    out[position, slot] = values
    if (counts < t_len).any():
        report.notes.append(PERIODS_PADDED_NOTE.format(
            file=table.file, count=int((counts < t_len).sum()), expected=t_len, side=side,
            padded_by=spec.padded_by))
    return out if len(spec.shape) > 1 else out[..., 0]


def _read_config(folder: Path, report: ValidationReport) -> _Config:
    config = _Config()
    path = folder / CONFIG_FILE
    if not path.is_file():
        return config
    config.raw = path.read_bytes()
    config.present = True
    try:
        data = json.loads(config.raw.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        report.add(CONFIG_FILE, INVALID_JSON.format(
            file=CONFIG_FILE, reason="it is not UTF-8 text", line="?", col=error.start))
        return config
    except json.JSONDecodeError as error:
        report.add(CONFIG_FILE, INVALID_JSON.format(
            file=CONFIG_FILE, reason=error.msg, line=error.lineno, col=error.colno))
        return config
    if not isinstance(data, dict):
        report.add(CONFIG_FILE, JSON_NOT_OBJECT.format(file=CONFIG_FILE, found=_json_kind(data)))
        return config

    unknown = [key for key in data if key not in CONFIG_KEYS]
    if unknown:
        report.notes.append(JSON_UNKNOWN_KEY_NOTE.format(
            file=CONFIG_FILE, keys=_examples(unknown, limit=20), known=", ".join(CONFIG_KEYS)))

    def take(key: str, expected: str, check) -> Any:
        if key not in data or data[key] is None:
            return None
        value = data[key]
        if not check(value):
            report.add(CONFIG_FILE, JSON_BAD_TYPE.format(
                file=CONFIG_FILE, key=key, expected=expected, found=_json_kind(value)), column=key)
            return None
        return value

    def is_str(v):
        return isinstance(v, str) and v != ""

    def is_str_list(v):
        return isinstance(v, list) and len(v) > 0 and all(is_str(x) for x in v)

    def is_str_map(v):
        return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())

    config.id_column = take("id_column", "a column name (text)", is_str) or DEFAULT_ID_COLUMN
    config.period_column = (take("period_column", "a column name (text)", is_str)
                            or DEFAULT_PERIOD_COLUMN)
    for key in ("static_features", "temporal_features"):
        value = take(key, "a non-empty list of column names", is_str_list)
        if value is not None:
            repeated = sorted(c for c, k in Counter(value).items() if k > 1)
            if repeated:
                report.add(CONFIG_FILE, JSON_DUPLICATE_FEATURE.format(
                    file=CONFIG_FILE, key=key, columns=_examples(repeated)), column=key)
            setattr(config, key, list(value))
    config.display_names = dict(take("display_names", "an object {column: text}", is_str_map) or {})
    config.units = dict(take("units", "an object {column: text}", is_str_map) or {})
    config.output_names = take("output_names", "a non-empty list of names", is_str_list)
    config.label_column = take("label_column", "a column name (text) or null", is_str)

    def is_inputs(v):
        return isinstance(v, dict) and v and all(
            isinstance(spec, dict) and set(spec) <= set(INPUT_KEYS)
            and is_str_list(spec.get("features", ["x"]))
            and all(is_str(spec[k]) for k in ("display_name", "role", "table") if k in spec)
            and spec.get("role", "static") in ("static", "temporal") for spec in v.values())

    inputs = take("inputs", "an object {input name: {\"features\": [columns], \"display_name\": text, "
                  "\"role\": \"static\" or \"temporal\", \"table\": file name}}", is_inputs)
    config.inputs = {str(k): dict(v) for k, v in inputs.items()} if inputs else None
    config.temporal_padding = take("temporal_padding", "\"start\" or \"end\"",
                                   lambda v: v in PADDING_SIDES) or "start"
    categories = take("categories", "an object {column: {id or text: display text}}",
                      lambda v: isinstance(v, dict) and all(is_str_map(m) for m in v.values()))
    config.categories = {str(c): dict(m) for c, m in (categories or {}).items()}
    positive = data.get("positive_label")
    if positive is not None and not isinstance(positive, (str, int, float, bool)):
        report.add(CONFIG_FILE, JSON_BAD_TYPE.format(
            file=CONFIG_FILE, key="positive_label", expected="a number or a text",
            found=_json_kind(positive)), column="positive_label")
    else:
        config.positive_label = positive
    return config


def _read_table(folder: Path, kind: str, report: ValidationReport,
                names: tuple[str, str] | None = None) -> _Table | None:
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
    raw = path.read_bytes()
    if not raw.strip():
        report.add(name, EMPTY_FILE.format(file=name, what=what))
        return None
    if name.endswith(".parquet"):
        try:
            frame = pd.read_parquet(io.BytesIO(raw))
        except Exception as error:  # pyarrow raises several types for a damaged file
            report.add(name, UNREADABLE_PARQUET.format(
                file=name, reason=_short(error), csv_name=csv_name))
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
    return _Table(name, path, frame, rows, is_csv, raw)


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
            where=_where(name, True, ragged, ragged_values)), rows=ragged)
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


def _read_model(folder: Path, report: ValidationReport, loader: ModelLoader | None = None) -> _ModelInfo | None:
    path = folder / MODEL_FILE
    if not path.is_file() and (folder / LEGACY_MODEL_FILE).is_file():
        path = folder / LEGACY_MODEL_FILE  # a legacy HDF5 model: the same checks (explain.h5)
    if not path.is_file():
        others = sorted(p.name for p in folder.glob("*.keras")) + sorted(
            p.name for p in folder.glob("*.h5"))
        hint = f" (found {_examples(others)}; rename the Keras 3 file to {MODEL_FILE})" if others else ""
        report.add(MODEL_FILE, MISSING_FILE.format(
            file=MODEL_FILE, folder=folder, accepted=f"{MODEL_FILE} (or {LEGACY_MODEL_FILE}){hint}"))
        return None
    raw = path.read_bytes()
    from explain import safe_load  # imports keras (seconds); only when a model is opened

    try:
        model = (loader or (safe_load.open_model if path.name == LEGACY_MODEL_FILE else safe_load.load_model))(path)
    except UnsafeModelError as error:  # its message names the file and says how to fix it
        report.add(MODEL_FILE, MODEL_REFUSED.format(file=MODEL_FILE, reason=str(error).strip()))
        return None
    except Exception as error:  # UnsafeModelError, a damaged zip, unknown layers, ...
        report.add(MODEL_FILE, MODEL_UNREADABLE.format(file=MODEL_FILE, reason=_short(error)))
        return None
    info = _ModelInfo(model=model, raw=raw)
    roles, shapes, problem = _input_roles(model)
    if problem:
        report.add(MODEL_FILE, problem)
    else:
        info.roles, info.shapes = roles, shapes
    try:
        outputs = [tuple(t.shape) for t in model.outputs]
    except Exception:  # a subclassed model without symbolic outputs
        outputs = []
    if len(outputs) != 1 or len(outputs[0]) != 2 or outputs[0][1] is None:
        report.add(MODEL_FILE, MODEL_OUTPUT.format(
            found=", ".join(str(s) for s in outputs) or "no symbolic output"))
    else:
        info.outputs = int(outputs[0][1])
    return info


def _model_layout_roles(model, roles=None):
    """(roles in model.inputs order, {role: first input shape}, problem text or None)."""
    layout = input_layout(model, roles)
    if not layout.count:
        return None, None, MODEL_INPUTS.format(found="no symbolic inputs (a subclassed model?)")
    found = " and ".join(str(s) for s in layout.shapes)
    problems = [spec.problem for spec in layout.specs if spec.problem]
    if layout.count < 2 or (layout.roles is None and not problems):
        return None, None, MODEL_INPUTS.format(found=f"{layout.count} input(s): {found}")
    if problems:
        return None, None, " ".join(problems)
    shapes: dict = {}
    for spec, shape in zip(layout.specs, layout.shapes):
        shapes.setdefault(spec.role, shape)
    return layout.roles, shapes, None


def _input_roles(model) -> tuple[tuple[str, ...] | None, dict | None, str | None]:
    """(roles in model.inputs order, {role: shape of its first input}, problem text or None)."""
    return _model_layout_roles(model)


def _check_static(table: _Table | None, config: _Config, plan: dict,
                  report: ValidationReport) -> dict | None:
    if table is None:
        return None
    ok = True
    columns = list(table.frame.columns)
    id_col = config.id_column
    if id_col not in columns:
        _missing_column(table, id_col, "the customer id column", config, report)
        ok = False
    label_col = config.label_column
    if label_col is not None and label_col not in columns:
        _missing_column(table, label_col, "the label column ('label_column' in bundle.json)",
                        config, report)
        label_col = None
    specs = [spec for spec in plan["specs"].values() if spec.role == "static"]
    listed = [plan["listed"].get(spec.key) for spec in specs] if specs else [plan["listed"].get("static")]
    listed_all = None if all(x is None for x in listed) else [c for x in listed for c in (x or [])]
    features = _features(table, "static", listed_all,
                         {id_col, config.period_column, config.label_column}, config, report)
    if features is None:
        return None
    values: dict = {}
    if not specs:  # the model could not be checked: every column as a number
        block = _numeric_block(table, features, report, None)
        ok = ok and block is not None
        values["static"] = block
        plan["features"]["static"] = features
    else:
        widths = [int(np.prod(spec.shape)) for spec in specs]
        if len(features) != sum(widths):
            _count_mismatch(table, "static", "S", sum(widths), features, listed_all is not None, report)
            ok = False
        else:
            start = 0
            for spec, width, own in zip(specs, widths, listed):
                part = features[start:start + width]
                start += width
                if own is not None and len(own) != width:
                    report.add(CONFIG_FILE, INPUT_WIDTH.format(
                        input=spec.key, expected=width, shape=(None, *spec.shape), given=len(own),
                        columns=_examples(own)), column="inputs")
                    ok = False
                plan["features"][spec.key] = part
                block = _input_block(table, part, spec, report, None)
                ok = ok and block is not None
                values[spec.key] = block
    if id_col not in columns:
        return None
    ids = _text(table, id_col).to_numpy(dtype=object)
    empty = np.flatnonzero(ids == "")
    if empty.size:
        report.add(table.file, EMPTY_KEYS.format(
            column=id_col, count=empty.size, where=_where(table.file, table.is_csv, table.rows[empty]),
            what="a customer id"), column=id_col, rows=table.rows[empty])
        ok = False
    duplicated = pd.Series(ids).duplicated(keep=False).to_numpy() & (ids != "")
    if duplicated.any():
        dup_ids = list(dict.fromkeys(ids[duplicated]))
        examples = [f"{i!r} (rows {', '.join(str(r) for r in table.rows[ids == i][:3])})"
                    for i in dup_ids[:EXAMPLES_SHOWN]]
        report.add(table.file, DUPLICATE_IDS.format(
            count=len(dup_ids), column=id_col, file=table.file,
            examples=_examples(examples, total=len(dup_ids), quote=False)),
            column=id_col, rows=table.rows[duplicated])
        ok = False
    labels = _labels(table, label_col) if label_col is not None else None
    return {"ids": ids, "values": values if ok else None, "features": features, "labels": labels}


def _input_block(table: _Table, features: list[str], spec, report: ValidationReport, keys) -> np.ndarray | None:
    """(rows, features) as the model input takes them: floats of its dtype, ids or texts."""
    if spec is None or spec.kind == "numeric":
        block = _numeric_block(table, features, report, keys)
        if block is None:
            return None
        return block if spec is not None and spec.dtype == "float64" else block.astype(np.float32)
    labels = None
    if keys is not None:
        def labels(k: int) -> str:
            return f"{_cell_text(table.frame[keys[0]].iat[k])}, {_cell_text(table.frame[keys[1]].iat[k])}"
    high = int(spec.embedding.input_dim) - 1
    columns, ok = [], True
    for column in features:
        if spec.dtype == "string":
            text = _text(table, column).astype(str)
            missing = text.str.lower().isin(MISSING_TOKENS).to_numpy() if spec.mask_zero is False else np.zeros(len(text), bool)
            if missing.any():
                idx = np.flatnonzero(missing)
                report.add(table.file, MISSING_VALUES.format(
                    column=column, count=idx.size, where=_where(table.file, table.is_csv, table.rows[idx])),
                    column=column, rows=table.rows[idx])
                ok = False
            columns.append(text.to_numpy(dtype=object).astype(str))
            continue
        values, ok_column = _numeric_column(table, column, report, labels)
        ok = ok and ok_column
        if not ok_column:
            continue
        bad = values != np.round(values)
        if spec.lookup is None:
            bad |= (values < 0) | (values > high)
        if bad.any():
            idx = np.flatnonzero(bad)
            shown = [repr(v) for v in values[idx[:EXAMPLES_SHOWN]]]
            report.add(table.file, NOT_CATEGORY_IDS.format(
                column=column, input=spec.key, high=high, count=idx.size, fix=CATEGORY_IDS_FIX,
                where=_where(table.file, table.is_csv, table.rows[idx], shown)), column=column, rows=table.rows[idx])
            ok = False
            continue
        columns.append(values.astype(np.int64 if spec.dtype == "int64" else np.int32))
    if not ok:
        return None
    return np.stack(columns, axis=1)


def _check_temporal(table: _Table | None, config: _Config, plan: dict, key: str,
                    report: ValidationReport) -> dict | None:
    if table is None:
        return None
    spec = plan["specs"].get(key)
    listed = plan["listed"].get(key)
    width = None if spec is None else (spec.shape[1] if len(spec.shape) > 1 else 1)
    ok = True
    columns = list(table.frame.columns)
    id_col, period_col = config.id_column, config.period_column
    for key_col, role in ((id_col, "the customer id column"), (period_col, "the period column")):
        if key_col not in columns:
            _missing_column(table, key_col, role, config, report)
            ok = False
    features = _features(table, "temporal", listed,
                         {id_col, period_col, config.label_column}, config, report)
    if features is None:
        return None
    plan["features"][key] = features
    values = _input_block(table, features, spec, report, (id_col, period_col) if ok else None)
    ok = ok and values is not None
    if width is not None and len(features) != width:
        _count_mismatch(table, "temporal", "F", width, features, listed is not None, report)
        ok = False
    if id_col not in columns or period_col not in columns:
        return None

    ids = _text(table, id_col).to_numpy(dtype=object)
    periods = _text(table, period_col).to_numpy(dtype=object)
    for key_col, keys, what in ((id_col, ids, "a customer id"), (period_col, periods, "a period")):
        empty = np.flatnonzero(keys == "")
        if empty.size:
            report.add(table.file, EMPTY_KEYS.format(
                column=key_col, count=empty.size, what=what,
                where=_where(table.file, table.is_csv, table.rows[empty])),
                column=key_col, rows=table.rows[empty])
            ok = False

    pairs = pd.DataFrame({"id": ids, "period": periods})
    duplicated = pairs.duplicated(keep=False).to_numpy()
    if duplicated.any():
        groups = pairs[duplicated].groupby(["id", "period"], sort=False).groups
        examples = [f"{i!r} {p!r} (rows {', '.join(str(table.rows[k]) for k in list(rows)[:3])})"
                    for (i, p), rows in list(groups.items())[:EXAMPLES_SHOWN]]
        report.add(table.file, DUPLICATE_PERIODS.format(
            count=len(groups), examples=_examples(examples, total=len(groups), quote=False)),
            column=period_col, rows=table.rows[duplicated])
        ok = False

    rank = _period_ranks(periods)
    pairs["rank"] = rank
    per_customer = pairs.groupby("id", sort=False)["period"].nunique()
    if spec is not None:
        expected, why = spec.shape[0], f"the model's temporal input {spec.key!r} has T={spec.shape[0]}"
    else:
        expected = int(per_customer.mode().iloc[0]) if len(per_customer) else 0
        why = "the most common count; the model could not be checked"
    if spec is not None and spec.padded_by:  # a masked history may be shorter: padded to T
        wrong = per_customer[(per_customer > expected) | (per_customer < 1)]
        why += f"; shorter histories are padded ({spec.padded_by}), longer ones are not allowed"
    else:
        wrong = per_customer[per_customer != expected]
    if len(wrong):
        examples = [f"{i!r} has {k}" for i, k in list(wrong.items())[:EXAMPLES_SHOWN]]
        bad_rows = table.rows[pairs["id"].isin(wrong.index).to_numpy()]
        report.add(table.file, WRONG_PERIOD_COUNT.format(
            count=len(wrong), expected=expected, why=why,
            examples=_examples(examples, total=len(wrong), quote=False)),
            column=period_col, rows=bad_rows)
        ok = False

    codes = pd.factorize(pairs["id"])[0]
    by_customer = np.argsort(codes, kind="stable")          # file order within a customer
    falls = (np.diff(codes[by_customer]) == 0) & (np.diff(rank[by_customer]) < 0)
    if falls.any():
        names = list(dict.fromkeys(ids[by_customer[1:][falls]]))
        report.notes.append(PERIODS_SORTED_NOTE.format(
            file=table.file, count=len(names), examples=_examples(names), column=period_col))

    if not ok:
        return {"ids": ids, "values": None, "features": features}
    # one label sequence per customer, in period order; the most common one names the periods
    ordered = pairs.sort_values(["id", "rank"], kind="stable")
    sequences = ordered.groupby("id", sort=False)["period"].agg(tuple)
    full = sequences[sequences.map(len) == expected] if spec is not None else sequences
    if len(full) == 0 and len(sequences):  # every history is short: name the periods by position
        full = pd.Series([tuple(f"t{i + 1}" for i in range(expected))])
    common = Counter(full.tolist()).most_common(1)[0][0] if len(full) else ()

    def aligned(seq):  # the part of the common labels a (padded) history occupies
        if len(seq) == len(common):
            return common
        return common[len(common) - len(seq):] if config.temporal_padding == "start" else common[:len(seq)]

    others = sequences[sequences.map(lambda s: s != aligned(s))]
    if len(others):
        report.notes.append(MIXED_PERIODS_NOTE.format(
            file=table.file, count=len(others), first=common[0], last=common[-1],
            examples=_examples([f"{i}: {s[0]}..{s[-1]}" for i, s in others.items()], quote=False)))
    return {"ids": ids, "values": values, "features": features, "period_rank": rank,
            "periods": list(common)}


def _check_same_customers(static: dict, temporal: dict, static_table: _Table,
                          temporal_table: _Table, id_column: str,
                          report: ValidationReport) -> None:
    static_ids, temporal_ids = set(static["ids"]), set(temporal["ids"])
    only_static = [i for i in dict.fromkeys(static["ids"]) if i and i not in temporal_ids]
    only_temporal = [i for i in dict.fromkeys(temporal["ids"]) if i and i not in static_ids]
    for lacking, present, absent in ((only_static, static_table, temporal_table),
                                     (only_temporal, temporal_table, static_table)):
        if lacking:
            report.add(absent.file, IDS_MISSING_FROM.format(
                count=len(lacking), present_file=present.file, absent_file=absent.file,
                examples=_examples(lacking)), column=id_column)


def _check_config_columns(config: _Config, static_table: _Table | None,
                          temporal_table: _Table | None, report: ValidationReport,
                          more_tables: Sequence[_Table] = ()) -> None:
    if not config.present or static_table is None or temporal_table is None:
        return
    known = set(static_table.frame.columns) | set(temporal_table.frame.columns)
    for table in more_tables:
        known |= set(table.frame.columns)
    for key in ("display_names", "units"):
        unknown = [c for c in getattr(config, key) if c not in known]
        if unknown:
            report.add(CONFIG_FILE, JSON_UNKNOWN_COLUMN.format(
                file=CONFIG_FILE, key=key, columns=_examples(unknown),
                found=_examples(sorted(known), limit=20)), column=key)


def _features(table: _Table, kind: str, listed: list[str] | None, reserved: set,
              config: _Config, report: ValidationReport) -> list[str] | None:
    columns = list(table.frame.columns)
    if listed is None:
        features = [c for c in columns if c not in reserved]
        if not features:
            report.add(table.file, NO_FEATURE_COLUMNS.format(
                file=table.file, columns=_examples(columns), role=kind))
            return None
        return features
    missing = [c for c in listed if c not in columns]
    for column in missing:
        _missing_column(table, column, f"a {kind} feature listed in bundle.json "
                        f"'{kind}_features'", config, report)
    extra = [c for c in columns if c not in listed and c not in reserved]
    if extra:
        report.notes.append(EXTRA_COLUMNS_NOTE.format(
            file=table.file, columns=_examples(extra), key=f"{kind}_features"))
    return None if missing else list(listed)


def _missing_column(table: _Table, column: str, role: str, config: _Config,
                    report: ValidationReport) -> None:
    columns = list(table.frame.columns)
    close = [c for c in columns if c.strip().lower() == column.strip().lower()]
    if "bundle.json" in role:
        fix = f"Add the column to {table.file} or fix its name in bundle.json."
    elif config.label_column == column:
        fix = "Add the column or fix 'label_column' in bundle.json."
    else:
        key = "id_column" if column == config.id_column else "period_column"
        fix = (f"Rename your {role.removeprefix('the ')} to {column!r}, or name it in "
               f"bundle.json as \"{key}\".")
    if close:
        fix = f"Column {close[0]!r} differs only in case or spaces: rename it to {column!r}. " + fix
    report.add(table.file, MISSING_COLUMN.format(
        column=column, file=table.file, role=role, found=_examples(columns, limit=20), fix=fix),
        column=column)


def _count_mismatch(table: _Table, kind: str, symbol: str, expected: int, features: list[str],
                    listed: bool, report: ValidationReport) -> None:
    if listed:
        source = f"bundle.json '{kind}_features'"
        fix = f"List exactly {expected} columns in '{kind}_features', in the model's input order."
    else:
        source = f"{table.file} (every column but the id{', period' if kind == 'temporal' else ''}" \
                 f" and label columns)"
        fix = (f"If some columns are not model features (a label, a name), list the {expected} "
               f"features in bundle.json '{kind}_features' (and the label in 'label_column').")
    report.add(table.file, FEATURE_COUNT_MISMATCH.format(
        role=kind, symbol=symbol, expected=expected, source=source, given=len(features),
        columns=_examples(features, limit=20), fix=fix))


def _numeric_block(table: _Table, features: list[str], report: ValidationReport,
                   keys: tuple[str, str] | None) -> np.ndarray | None:
    """(rows, features) float64, or None after reporting every bad cell, column by column."""
    labels = None
    if keys is not None:  # (customer, period) of a row, computed only for rows shown
        def labels(k: int) -> str:
            return f"{_cell_text(table.frame[keys[0]].iat[k])}, {_cell_text(table.frame[keys[1]].iat[k])}"
    block, ok = np.empty((len(table.frame), len(features))), True
    for j, column in enumerate(features):
        values, ok_column = _numeric_column(table, column, report, labels)
        block[:, j] = values
        ok = ok and ok_column
    return block if ok else None


def _numeric_column(table: _Table, column: str, report: ValidationReport,
                    labels) -> tuple[np.ndarray, bool]:
    series = table.frame[column]
    ok = True

    def where(mask, values=None):
        """(row positions, 'rows 3 (C01, 2025-02: 'abc'), ... of file (convention)')."""
        idx = np.flatnonzero(mask)
        first = idx[:EXAMPLES_SHOWN]
        shown = [""] * len(first)
        if values is not None:
            shown = [repr(v) for v in np.asarray(values, dtype=object)[first]]
        if labels is not None:
            shown = [f"{labels(k)}: {v}" if v else labels(k) for k, v in zip(first, shown)]
        return idx, _where(table.file, table.is_csv, table.rows[idx], shown)

    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
    else:
        text = _text(table, column)
        missing = text.str.lower().isin(MISSING_TOKENS).to_numpy()
        values = pd.to_numeric(text.mask(missing, "nan"), errors="coerce").to_numpy(np.float64)
        bad = np.isnan(values) & ~missing
        if bad.any():
            idx, text_where = where(bad, text.to_numpy(dtype=object))
            comma = text.iloc[idx].str.fullmatch(r"[-+]?\d+(\.\d{3})*,\d+").any()
            report.add(table.file, NON_NUMERIC.format(
                column=column, count=idx.size, where=text_where,
                fix=DECIMAL_COMMA_FIX if comma else NON_NUMERIC_FIX),
                column=column, rows=table.rows[idx])
            ok = False
    if missing.any():
        idx, text_where = where(missing)
        report.add(table.file, MISSING_VALUES.format(column=column, count=idx.size, where=text_where),
                   column=column, rows=table.rows[idx])
        ok = False
    infinite = np.isinf(values)
    if infinite.any():
        idx, text_where = where(infinite, values)
        report.add(table.file, INFINITE_VALUES.format(column=column, count=idx.size, where=text_where),
                   column=column, rows=table.rows[idx])
        ok = False
    return values, ok


def _labels(table: _Table, column: str) -> np.ndarray:
    """The label column: numbers when every non-missing cell is one, else text."""
    series = table.frame[column]
    if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        values = series.to_numpy()
    else:
        text = _text(table, column)
        missing = text.str.lower().isin(MISSING_TOKENS)
        numbers = pd.to_numeric(text.mask(missing, "nan"), errors="coerce")
        if numbers[~missing].notna().all():
            values = numbers.to_numpy(np.float64)
        else:
            return text.to_numpy(dtype=object)
    values = np.asarray(values)
    if values.dtype.kind == "f" and np.all(np.isfinite(values)) and np.all(values == np.round(values)):
        return values.astype(np.int64)
    return values


def _period_ranks(periods: np.ndarray) -> np.ndarray:
    """Sort key of each period label: numeric if all are numbers, else dates, else text."""
    unique = pd.unique(pd.Series(periods, dtype=object))
    key: Any = None
    numbers = pd.to_numeric(pd.Series(unique), errors="coerce")
    if len(unique) and numbers.notna().all():
        key = numbers.to_numpy()
    else:
        try:
            key = pd.to_datetime(pd.Series(unique), format="mixed").to_numpy()
        except (ValueError, TypeError):
            key = np.asarray(unique, dtype=str)
    order = np.argsort(key, kind="stable")
    rank_of = {unique[k]: r for r, k in enumerate(order)}
    return pd.Series(periods, dtype=object).map(rank_of).to_numpy(dtype=np.int64)


# ---- small helpers ----------------------------------------------------------------------

def _where(file: str, is_csv: bool, rows: Sequence[int], shown: Sequence[str] | None = None) -> str:
    """'rows 5 ('12,5'), 9 ('abc') and 3 more of static.csv (row 1 is the first data row ...)'."""
    rows = [int(r) for r in rows]
    items = [str(r) if not shown or not shown[k] else f"{r} ({shown[k]})"
             for k, r in enumerate(rows[:EXAMPLES_SHOWN])]
    more = f" and {len(rows) - EXAMPLES_SHOWN} more" if len(rows) > EXAMPLES_SHOWN else ""
    word = "row" if len(rows) == 1 else "rows"
    if is_csv and len(rows) == 1:
        convention = f"line {rows[0] + 1} counting the header"
    else:
        convention = ROW_CONVENTION_CSV if is_csv else ROW_CONVENTION_PARQUET
    return f"{word} {', '.join(items)}{more} of {file} ({convention})"


def _text(table: _Table, column: str) -> pd.Series:
    """The cells of a column as stripped text ("" for a missing Parquet cell)."""
    series = table.frame[column]
    if table.is_csv:
        return series.str.strip()
    return series.map(_cell_text).astype(object)


def _cell_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value).strip()


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "a text", bool: "true/false",
             int: "a number", float: "a number", type(None): "null"}
    return f"{kinds.get(type(value), type(value).__name__)} ({json.dumps(value)[:60]})"


def _short(error: BaseException, limit: int = 300) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _default_output_names(k: int | None) -> list[str]:
    k = k or 1
    return ["output"] if k == 1 else [f"output_{i}" for i in range(k)]


def _output_width(model) -> int:
    try:
        return int(model.outputs[0].shape[-1])
    except Exception:
        return 1


def _content_hash(*parts: bytes) -> str:
    """sha256 of model.keras, the static table, the temporal table and bundle.json bytes."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


def _upload_target(base: str) -> str | None:
    lower = base.lower()
    stem, dot, ext = lower.rpartition(".")
    if not dot:
        return None
    if ext == "keras":
        return MODEL_FILE
    if ext == "json":
        return CONFIG_FILE if "bundle" in stem else None
    if ext in ("csv", "parquet", "pq"):
        kinds = [kind for kind in TABLE_FILES if kind in stem]
        if len(kinds) == 1:
            return f"{kinds[0]}.{'csv' if ext == 'csv' else 'parquet'}"
    return None


def _write_atomic(path: Path, data: bytes) -> None:
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
