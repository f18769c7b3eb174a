"""Open, validate and hold a bundle: a Keras model and the customers' tables.

A bundle is a folder (docs/bundles.md)::

    model.keras                      one 2-D input (None, S) and one 3-D input (None, T, F)
    static.csv | static.parquet      one row per customer: id column + S features
    temporal.csv | temporal.parquet  long format: id column, period column, F features;
                                     exactly T rows per customer
      or temporal.npy                the array layout: (n, T, F) as the model takes it, memory-mapped
                                     (bundle.json "layout": "arrays"; explain.bundle.arrays)
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

Where things are: the report and file names in ``explain.bundle.problems``, ``bundle.json`` in
``explain.bundle.config``, reading the tables in ``explain.bundle.tables``, the tables' checks in
``explain.bundle.checks``; this module opens the model, puts it all together and holds the
``Bundle``. Every message template is importable from here too (tests and callers use
``explain.bundle.load.MISSING_COLUMN`` and the like).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from explain.bundle import arrays as array_io
from explain.bundle import cache as array_cache
from explain.bundle import many, objects
from explain.bundle.checks import (  # noqa: F401 (re-exported)
    CATEGORY_IDS_FIX,
    DECIMAL_COMMA_FIX,
    DUPLICATE_IDS,
    DUPLICATE_PERIODS,
    EMPTY_KEYS,
    EXTRA_COLUMNS_NOTE,
    FEATURE_COUNT_MISMATCH,
    IDS_MISSING_FROM,
    INFINITE_VALUES,
    INPUT_WIDTH,
    MISSING_COLUMN,
    MISSING_VALUES,
    MIXED_PERIODS_NOTE,
    NO_FEATURE_COLUMNS,
    NO_PAD_TOKEN,
    NON_NUMERIC,
    NON_NUMERIC_FIX,
    NOT_CATEGORY_IDS,
    PERIODS_PADDED_NOTE,
    PERIODS_SORTED_NOTE,
    WRONG_PERIOD_COUNT,
    check_config_columns,
    check_same_customers,
    check_static,
    check_temporal,
    history_array,
)
from explain.bundle.config import (  # noqa: F401 (re-exported)
    CONFIG_KEYS,
    DEFAULT_ID_COLUMN,
    DEFAULT_PERIOD_COLUMN,
    INPUT_KEYS,
    INPUTS_INCOMPLETE,
    INVALID_JSON,
    JSON_BAD_TYPE,
    JSON_DUPLICATE_FEATURE,
    JSON_NOT_OBJECT,
    JSON_UNKNOWN_COLUMN,
    JSON_UNKNOWN_KEY_NOTE,
    PADDING_SIDES,
    UNKNOWN_TARGET,
    Config,
    check_groups,
    default_target,
    input_plan,
    read_config,
)
from explain.bundle.problems import (  # noqa: F401 (re-exported)
    BUNDLE_FILES,
    CONFIG_FILE,
    EXAMPLES_SHOWN,
    LEGACY_MODEL_FILE,
    MISSING_TOKENS,
    MODEL_FILE,
    ROW_CONVENTION_CSV,
    ROW_CONVENTION_PARQUET,
    TABLE_FILES,
    Problem,
    ValidationReport,
)
from explain.bundle.roles import (  # noqa: F401 (re-exported)
    MODEL_INPUTS,
    MODEL_OUTPUT,
    OUTPUT_NAMES_COUNT,
    OUTPUT_PERIODS,
    default_output_names,
    head_width,
    input_roles,
    model_roles,
    output_check,
    output_width,
)
from explain.bundle.tables import (  # noqa: F401 (re-exported)
    AMBIGUOUS_FILE,
    MISSING_FILE,
    UNREADABLE_PARQUET,
    UnreadableTable,
    oversized_table,
    read_table,
)
from explain.core import labels as label_values
from explain.core import outputs
from explain.core.baselines import release_pages
from explain.core.errors import BundleError, ExplainError, UnsafeModelError
from explain.core.files import write_bytes_atomic
from explain.core.inputs import input_layout
from explain.core.periods import unit_of
from explain.core.text import examples as _examples
from explain.core.text import first_line
from explain.modelfile import savedmodel as saved
from explain.modelfile.limits import DEFAULT_LIMITS, Limits

if TYPE_CHECKING:  # annotations only: the module is imported before TensorFlow is needed
    import keras

# opens model.keras / model.h5: safe_load.open_model or load_model_isolated; a savedmodel.TrustModel also opens a
# SavedModel folder (--trust-model)
ModelLoader = Callable[[Path], "keras.Model"]
SAVEDMODEL_DIR = saved.FOLDER   # a TensorFlow SavedModel in place of model.keras (opened only with --trust-model)

NOT_A_FOLDER = "{folder} is not a folder. A bundle is a folder holding {files}."
MODEL_UNREADABLE = ("{file} could not be opened: {reason}. Save the model from Keras 3 with "
                    "model.save('model.keras').")
MODEL_REFUSED = "{file} was refused before loading: {reason}"
MODEL_INPUT_PROBLEM = "{problem}"
INPUTS_UNKNOWN = ("'inputs' names {names}, which the model does not have; its inputs are {known}. "
                  "Use the model's input names (or its dict keys).")
SIZES_FIRST_NOTE = ("The model and the tables' contents were not checked: a file is over a size limit, and nothing "
                    "is read or built from a bundle until every file is within the limits.")
POSITIVE_LABEL_NOTE = "{file}: positive_label {label!r} does not occur in label column '{column}'."
UNKNOWN_UPLOAD = ("cannot tell what the uploaded file '{name}' is. Expected a model '*.keras', "
                  "tables whose names contain 'static' or 'temporal' ending in .csv or .parquet, "
                  "and optionally 'bundle.json'. Rename the file.")
DUPLICATE_UPLOAD = "the uploaded files {names} would all be {target}; upload only one of them."
UNKNOWN_ID = ("unknown customer id(s): {unknown}. Ids are text and case-sensitive; this bundle "
              "has {n} customers, for example {examples}.")


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
    groups: dict[str, list[str]] = field(default_factory=dict)  # bundle.json 'groups': name -> feature columns
    periods: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    labels: np.ndarray | None = None     # (n,) true outcome, never fed to the model
    label_name: str | None = None
    positive_label: Any = None
    risk_bands: tuple | None = None      # explain.core.verdict bands from bundle.json, None: the defaults
    target: int = 0                      # the output explained by default (bundle.json 'target', see default_target)
    period_unit: str = ""                # day | week | month | ... (bundle.json 'period_unit', else read from periods)
    content_hash: str = ""
    notes: list[str] = field(default_factory=list)
    input_roles: tuple[str, ...] = ("static", "temporal")   # roles in model.inputs order
    # Every model input by the engine's key ("static"/"temporal" for two-input models, else
    # input names): arrays as the model takes them (floats, ids or texts; padded histories
    # padded), their columns, display names and periods. Empty for a plain two-input bundle.
    input_arrays: dict = field(default_factory=dict)
    layout: Any = None                   # explain.core.inputs.InputLayout
    input_features: dict = field(default_factory=dict)
    input_labels: dict = field(default_factory=dict)
    feature_labels: dict = field(default_factory=dict)   # column -> display name, every input
    input_periods: dict = field(default_factory=dict)
    temporal_padding: str = "start"
    categories: dict = field(default_factory=dict)   # column -> {id or text: display text}
    roles: dict = field(default_factory=dict)        # bundle.json 'inputs' roles, for the engine
    # Data-wide means stored at the first open (explain.bundle.cache): {key: {"mean": (F,), "mask_value": ...}};
    # the mean baseline takes them instead of reading every history again. Empty: computed from the arrays.
    statistics: dict = field(default_factory=dict)
    # A model with several outputs or a prediction per period (explain.core.outputs): ``model`` is the view of the
    # head ``output`` (bundle.json 'output'; None: the first) at the period ``output_period`` (its number, 1 = first;
    # bundle.json 'output_period' by number or label; None: the last); ``outputs.source_of(model)`` is the model.
    output: str | None = None
    output_period: int | str | None = None
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
        if not self.period_unit:
            object.__setattr__(self, "period_unit", unit_of(self.periods))
        if outputs.source_of(self.model) is self.model:  # the output view the bundle explains by default
            try:
                view, head, period = outputs.opened(self.model, self.output, self.output_period, self.periods)
            except ExplainError as error:  # bundle.json 'output' / 'output_period' (or the fields given)
                raise BundleError(f"{CONFIG_FILE}: {error} Fix 'output' / 'output_period' in {CONFIG_FILE}.",
                                  []) from None
            for name, value in (("model", view), ("output", head), ("output_period", period)):
                object.__setattr__(self, name, value)
        if not self.output_names:
            object.__setattr__(self, "output_names", default_output_names(output_width(self.model)))
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
            spec.embedding is None and spec.padded_by is None for spec in self.layout.specs))

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
        """An in-memory bundle (no files): names default to ``static_0``, ``temporal_0``, ...; the model's padding
        (Masking, mask_zero) is read as ``load_bundle`` reads it, so the baselines follow the same rules."""
        static = np.asarray(static, dtype=np.float32)
        temporal = np.asarray(temporal, dtype=np.float32)
        roles, shapes, problem = input_roles(model)
        if problem:
            raise ExplainError(problem)
        if static.shape[1:] != shapes["static"][1:] or temporal.shape[1:] != shapes["temporal"][1:]:
            raise ExplainError(
                f"The arrays do not fit the model: static {static.shape}, temporal "
                f"{temporal.shape}; the model expects {shapes['static']} and {shapes['temporal']}.")
        n = static.shape[0]
        static_features = list(static_features or [f"static_{j}" for j in range(static.shape[1])])
        temporal_features = list(temporal_features or [f"temporal_{j}" for j in range(temporal.shape[2])])
        periods = list(periods or [f"t{i + 1}" for i in range(temporal.shape[1])])
        layout = {"input_roles": roles, **objects.layout_fields(
            model, static, temporal, static_features=static_features, temporal_features=temporal_features,
            periods=periods, feature_labels={})}
        return cls(
            path=None, model=model,
            ids=np.array([str(i) for i in (ids if ids is not None else range(n))], dtype=object),
            static=static, temporal=temporal, static_features=static_features,
            temporal_features=temporal_features, periods=periods, output_names=list(output_names or []),
            **layout)

    @classmethod
    def from_objects(cls, model: "keras.Model", static, temporal=None, *, trust_code=None, **names) -> "Bundle":
        """An in-memory bundle from a model, a DataFrame or (n, S) array and an (n, T, F) array
        or long DataFrame, every argument checked (see :mod:`explain.bundle.objects`); or from
        ``(model, inputs)`` for any model (:mod:`explain.bundle.many`: a dict {input name: array
        or DataFrame} or a list in the model's input order), read back as ``load_bundle`` reads
        the folder ``save_bundle`` writes (through a temporary folder), holding ``model`` itself."""
        if temporal is None and many.is_inputs(static):
            return _from_inputs(model, static, trust_code, names)
        extra = {key: names.pop(key) for key in ("target", "period_unit") if names.get(key) is not None}
        fields = objects.fields(model, static, temporal, **names)
        target, problem = default_target(fields["output_names"], extra.get("target"))
        if problem:
            raise BundleError(f"target: {problem}", [])
        return cls(path=None, target=target, period_unit=extra.get("period_unit", ""), **fields)

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

    def release(self, ids: Iterable[str]) -> None:
        """Give back to the page cache the pages of these customers' rows of a memory-mapped bundle (the
        rows from the first to the last of them), once read: a job that reads every customer a chunk at a
        time then holds one chunk of the file, not every page it has read (they are read again from the
        page cache if needed). Nothing for arrays in memory."""
        rows = self._indices(list(ids))
        if not rows:
            return
        first, last = min(rows), max(rows)
        for values in self.arrays.values():
            if isinstance(values, np.memmap):
                release_pages(values, values[first:last + 1])

    def model_inputs(self, inputs: Mapping[str, np.ndarray]) -> Any:
        """The structure the model is called with, from arrays keyed like ``data()``."""
        layout = self.layout if self.layout is not None else input_layout(self.model)
        return layout.feed(inputs)

    def predict(self, inputs: Mapping[str, np.ndarray] | None = None,
                batch_size: int = 1024, *, should_stop=None) -> np.ndarray:
        """Model outputs (k, K) for ``inputs`` (default: every customer), in batches
        (``explain.core.engine.predict``: the model's lock held per batch, ``should_stop`` asked before each)."""
        from explain.core.engine import predict

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


def _from_inputs(model, inputs, trust_code, names: dict) -> Bundle:
    """``Bundle.from_objects(model, inputs)``: the folder ``many.write_folder`` writes, loaded, with
    ``model`` itself (and its input layout) in place of the copy read back; no path, no content hash."""
    import tempfile

    loader = trusted_loader(trust_code)
    with tempfile.TemporaryDirectory(prefix="explain-objects-") as folder:
        many.write_folder(Path(folder), model, inputs, "parquet", **names)
        bundle = load_bundle(folder, loader=loader)
    layout = input_layout(model, bundle.roles or None)
    return dataclasses.replace(bundle, path=None, model=model, layout=layout, content_hash="")


def trusted_loader(trust_code) -> ModelLoader | None:
    """The model loader for the owner's trusted file ``trust_code`` (``--trust-code``; it is imported and
    runs), or None without one. Never for uploads."""
    if not trust_code:
        return None
    import functools

    from explain.modelfile import safe_load, trust

    return functools.partial(safe_load.open_model, trusted=trust.load_trusted_code(trust_code))


def validate_bundle(path: str | os.PathLike, *, loader: ModelLoader | None = None,
                    limits: Limits = DEFAULT_LIMITS, trust_model: bool = False) -> ValidationReport:
    """Check a bundle folder and return every problem and note found (never raises for data)."""
    report, _ = _inspect(Path(path), _trusting(loader, limits, trust_model), limits)
    return report


def inspect_bundle(path: str | os.PathLike, *, loader: ModelLoader | None = None, limits: Limits = DEFAULT_LIMITS,
                   trust_model: bool = False) -> tuple[ValidationReport, Bundle | None]:
    """(every problem and note, the bundle when there is no problem): ``check`` then looks at the model."""
    return _inspect(Path(path), _trusting(loader, limits, trust_model), limits)


def _trusting(loader: ModelLoader | None, limits: Limits, trust_model: bool) -> ModelLoader | None:
    """``loader``, made able to open a SavedModel (``savedmodel.TrustModel``) when the owner trusts the model."""
    if not trust_model or saved.trusts_model(loader):
        return loader
    return saved.TrustModel(loader, limits)


def load_bundle(path: str | os.PathLike, *, loader: ModelLoader | None = None,
                limits: Limits = DEFAULT_LIMITS, trust_model: bool = False) -> Bundle:
    """Open a bundle folder; ``BundleError`` (text = the report, cut to a few KB) if it has any problem.

    ``loader(path) -> keras.Model`` opens model.keras or model.h5 (default ``safe_load.load_model`` / ``open_model``
    under ``limits``; the dashboard passes ``safe_load.load_model_isolated`` for uploads). ``limits``: the sizes of
    the tables and bundle.json (``explain.modelfile.limits``), each measured before the file is read.
    ``trust_model=True`` (``--trust-model``): the owner trusts the model, and a TensorFlow SavedModel folder
    ``savedmodel/`` is opened too (``explain.modelfile.savedmodel``: a program; refused without it).
    """
    report, parts = _inspect(Path(path), _trusting(loader, limits, trust_model), limits)
    if not report.ok or parts is None:
        raise BundleError(report.format(), report.problems)
    return parts


def load_bundle_from_uploads(files: Mapping[str, bytes], workdir: str | os.PathLike, *,
                             loader: ModelLoader | None = None, limits: Limits = DEFAULT_LIMITS) -> Bundle:
    """Write uploaded files into ``workdir`` under the bundle's own names, then load it.

    Names are matched loosely: one ``*.keras`` model, tables whose names contain ``static`` /
    ``temporal`` (``.csv``, ``.parquet`` or ``.pq``) and ``bundle.json``. Any other name is
    refused (``BundleError``) before anything is written, and so is any part of a TensorFlow SavedModel (never
    opened from an upload, whatever ``loader``). The bundle files already in ``workdir`` (model.keras,
    static.csv, ...) are replaced; other files there are left alone. ``loader`` and ``limits`` as in
    :func:`load_bundle`.
    """
    report = ValidationReport(path=Path(workdir))
    loader = saved.untrusted(loader)
    targets: dict[str, list[str]] = {}
    for name in files:
        base = PurePath(str(name).replace("\\", "/")).name
        target = _upload_target(base)
        if saved.is_savedmodel_part(str(name)):
            report.add(SAVEDMODEL_DIR, saved.FROM_UPLOAD.format(name=str(name)))
        elif target is None:
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
        write_bytes_atomic(folder / target, bytes(files[names[0]]), readable=False)  # the server's copy: private
    return load_bundle(folder, loader=loader, limits=limits)


@dataclass
class _ModelInfo:
    model: Any
    roles: tuple[str, ...] | None = None
    shapes: dict[str, tuple] | None = None       # role -> input shape
    outputs: int | None = None                    # K
    layout: Any = None                            # explain.core.inputs.InputLayout
    path: Path | None = None                      # model.keras, model.h5 or the folder savedmodel
    files: list = field(default_factory=list)     # its files, relative to the bundle (the content hash's order)


def _inspect(folder: Path, loader: ModelLoader | None = None,
             limits: Limits = DEFAULT_LIMITS) -> tuple[ValidationReport, Bundle | None]:
    if not folder.is_dir():
        report = ValidationReport(path=folder)
        report.add(str(folder), NOT_A_FOLDER.format(
            folder=folder, files=", ".join((MODEL_FILE, "static.csv", "temporal.csv"))))
        return report, None
    cached = array_cache.read(folder, _table_limits(limits))
    opened = _open_cached(folder, cached, loader, limits) if cached is not None else None
    report, bundle = opened if opened is not None else _check(folder, loader, limits)
    if bundle is not None:
        _remember_cut(bundle)
    return report, bundle


def _remember_cut(bundle: Bundle) -> None:
    """A big bundle's padding-cut verdict (``explain.core.cut``: whether the model's calls may leave out the padding
    at the start of the histories, checked on the first attribution) kept beside its array cache for this model file
    and software, and given to the engine: a later process does not check it again."""
    if not array_cache.holds(bundle.path, bundle.content_hash):
        return
    from explain.core import backend, cut

    name = backend.name()
    versions = {package: getattr(sys.modules.get(package), "__version__", None) for package in ("keras", name)}
    if None in versions.values():  # the model was opened, so Keras and its backend are imported: not expected
        return
    key = {"format": cut.VERDICT_FORMAT, "backend": name, **versions}
    kept = array_cache.read_kept(bundle.path, bundle.content_hash, "cut", key)
    verdict = (bool(kept[0]), str(kept[1])) if isinstance(kept, list) and len(kept) == 2 else None

    def keep(enabled: bool, note: str) -> None:
        array_cache.write_kept(bundle.path, bundle.content_hash, "cut", key, [bool(enabled), str(note)])

    cut.remember(bundle.model, verdict, keep)


def _table_limits(limits: Limits) -> dict:
    """The limits a table is measured against: a cache built under them serves opens under these or looser ones."""
    return {name: getattr(limits, name) for name in ("max_table_cells", "max_table_columns", "max_table_bytes")}


def _open_cached(folder: Path, cached: array_cache.Checked, loader: ModelLoader | None, limits: Limits
                 ) -> tuple[ValidationReport, Bundle] | None:
    """(report, bundle) from the array cache (:mod:`explain.bundle.cache`): bundle.json and the model are
    read again, the tables not at all. None when the model or bundle.json now has a problem: then
    everything is checked again, and the report lists every problem."""
    report = ValidationReport(path=folder)
    config = read_config(folder, report, limits)
    if config.oversized:
        return None
    model_info = _read_model(folder, report, loader, limits)
    layout = _model_layout(model_info, config, report)
    plan = input_plan(config, layout, report)
    target = _outputs(config, model_info, report)
    if not report.ok or layout is None or set(cached.arrays) != set(layout.engine_keys):
        return None
    plan["features"] = dict(cached.features)
    _check_groups(config, layout, plan, report)
    if not report.ok:
        return None
    report.notes[:] = cached.notes
    return report, _assemble(_Parts(folder, config, model_info, layout, plan, report), cached, target)


def _outputs(config: Config, model_info: _ModelInfo | None, report: ValidationReport) -> int:
    """The output explained by default (bundle.json 'target'); 'output_names' and 'target' checked against
    the model's outputs."""
    target = 0
    if model_info and model_info.outputs is not None and config.output is not None:  # bundle.json 'output'
        model_info.outputs, problem = head_width(model_info.model, config.output)
        if problem:
            report.add(CONFIG_FILE, problem, column="output")
    if model_info and model_info.outputs is not None and config.output_names is not None:
        if len(config.output_names) != model_info.outputs:
            report.add(CONFIG_FILE, OUTPUT_NAMES_COUNT.format(
                file=CONFIG_FILE, given=len(config.output_names), expected=model_info.outputs))
    if model_info and model_info.outputs is not None:
        names = list(config.output_names or default_output_names(model_info.outputs))
        if len(names) == model_info.outputs:
            target, problem = default_target(names, config.target, config.positive_label)
            if problem:
                report.add(CONFIG_FILE, problem, column="target")
    return target


def _check(folder: Path, loader: ModelLoader | None, limits: Limits) -> tuple[ValidationReport, Bundle | None]:
    """Every check of bundle.json, the tables and the model; the bundle when there is no problem (its arrays
    then go to the array cache)."""
    report = ValidationReport(path=folder)
    config = read_config(folder, report, limits)
    oversized = [(path.name, problem) for path in sorted(folder.iterdir())  # every table, before the model
                 if path.is_file() and path.suffix.lower() in (".csv", ".parquet")
                 for problem in [oversized_table(path, limits)[0]] if problem]
    if oversized or config.oversized:
        for name, problem in oversized:
            report.add(name, problem)
        report.notes.append(SIZES_FIRST_NOTE)
        return report, None
    static_table = read_table(folder, "static", report, limits=limits)
    model_info = _read_model(folder, report, loader, limits)
    layout = _model_layout(model_info, config, report)
    plan = input_plan(config, layout, report)
    if config.layout == "arrays":
        return _check_arrays(_Parts(folder, config, model_info, layout, plan, report), static_table, limits)
    temporal_tables = {key: read_table(folder, "temporal", report, names, limits)
                       for key, names in plan["tables"].items()}

    static = _checked(check_static, static_table, config, plan, report)
    temporal = {key: _checked(check_temporal, table, config, plan, key, report)
                for key, table in temporal_tables.items()}
    first_temporal = next(iter(temporal_tables.values()), None)
    check_config_columns(config, static_table, first_temporal, report,
                          [t for t in temporal_tables.values() if t is not None])
    _check_groups(config, layout, plan, report)
    for key, checked in temporal.items():
        if static and checked:
            check_same_customers(static, checked, static_table, temporal_tables[key],
                                  config.id_column, report)
    target = _outputs(config, model_info, report)

    complete = static and temporal and all(temporal.values()) and model_info and layout is not None
    if not report.ok or not complete:
        if report.ok:  # cannot happen, but never hand back a half-checked bundle
            report.add(str(folder), "the bundle could not be checked completely.")
        return report, None

    histories = {}
    for key, checked in temporal.items():
        histories[key] = history_array(checked, layout.spec(key), static["ids"], config.temporal_padding,
                                       temporal_tables[key], report)
        if histories[key] is None:
            return report, None
    periods = {key: list(temporal[key]["periods"]) for key in temporal}
    files = [t.path.name for t in temporal_tables.values()]
    absent = [name for table in temporal_tables.values() for name in _formats(table.path.name)
              if name != table.path.name]
    return _finish(_Parts(folder, config, model_info, layout, plan, report), static, static_table,
                   _Histories(histories, periods, files, absent, None, {}), target, limits)


def _check_arrays(parts: _Parts, static_table, limits: Limits) -> tuple[ValidationReport, Bundle | None]:
    """The rest of :func:`_check` for a bundle of the array layout: the static table as usual, each history a
    memory-mapped ``.npy`` file checked by :mod:`explain.bundle.arrays` (one read of every value)."""
    folder, config, model_info, layout, plan, report = parts
    static = _checked(check_static, static_table, config, plan, report)
    first = [*(model_info.files if model_info else []), *([static_table.path.name] if static_table else [])]
    digest = array_io.new_digest(folder, first) if model_info and static_table else None
    found = array_io.histories(array_io.Source(folder, config, plan, report),
                               static, static_table.file if static_table else None, digest)
    if found is not None:
        plan["features"].update(found["features"])
        check_config_columns(config, static_table, _Columns(found["features"]), report)
        _check_groups(config, layout, plan, report)
    target = _outputs(config, model_info, report)
    if not report.ok or not (static and static["values"] is not None and found and model_info and layout):
        if report.ok:
            report.add(str(folder), "the bundle could not be checked completely.")
        return report, None
    stems = [name.rsplit(".", 1)[0] for name in found["files"]]
    absent = [f"{stem}.{ext}" for stem in stems for ext in ("csv", "parquet")]
    if config.present:
        digest.update((folder / CONFIG_FILE).read_bytes())
    histories = _Histories(found["arrays"], found["periods"], found["files"], absent, digest.hexdigest(),
                           found["statistics"])
    return _finish(parts, static, static_table, histories, target, limits)


def _check_groups(config: Config, layout, plan: dict, report: ValidationReport) -> None:
    """bundle.json 'groups' against every input's feature columns, once the checks have found them all."""
    keys = layout.engine_keys if layout is not None else ("static", "temporal")
    if config.groups and all(plan["features"].get(key) for key in keys):
        check_groups(config, [c for key in keys for c in plan["features"][key]], report)


class _Columns:
    """The feature names of the histories, where ``check_config_columns`` asks a table for its columns."""

    def __init__(self, features: dict) -> None:
        self.columns = [c for names in features.values() for c in names]


class _Parts(NamedTuple):
    """What every step after reading bundle.json and the model works from: the folder, bundle.json, the model,
    the model's input layout, the input plan (:func:`explain.bundle.config.input_plan`) and the report that the
    problems and notes go to."""

    folder: Path
    config: Config
    model_info: _ModelInfo | None                 # None when the model could not be read
    layout: Any                                   # explain.core.inputs.InputLayout
    plan: dict
    report: ValidationReport


class _Histories(NamedTuple):
    """The checked histories of a bundle, whichever layout they were read from."""

    arrays: dict                                  # input key -> (n, T, F) array
    periods: dict                                 # input key -> its period labels
    files: list                                   # the files they were read from
    absent: list                                  # the other accepted names of those files
    content: str | None                           # the content hash already computed (array layout), else None
    statistics: dict                              # means already computed while reading (array layout)


def _finish(parts: _Parts, static: dict, static_table, histories: _Histories, target: int, limits: Limits
            ) -> tuple[ValidationReport, Bundle]:
    """The checked bundle from its static table's and its histories' arrays; the arrays go to the array cache
    (an array-layout bundle's histories are its own files: the cache only records that they were checked)."""
    folder, config, model_info, layout, plan, report = parts
    arrays = {**static["values"], **histories.arrays}
    used = [*model_info.files, static_table.path.name, *histories.files,
            *([CONFIG_FILE] if config.present else [])]
    absent = [*histories.absent, *[name for name in _formats(static_table.path.name)
                                   if name != static_table.path.name]]
    absent += {MODEL_FILE: [], LEGACY_MODEL_FILE: [MODEL_FILE]}.get(model_info.path.name,
                                                                    [MODEL_FILE, LEGACY_MODEL_FILE])
    absent += [] if config.present else [CONFIG_FILE]
    mapped = dict(zip(histories.arrays, histories.files)) if config.layout == "arrays" else {}
    statistics = histories.statistics
    if array_cache.worth_writing(folder, used):  # a long layout's means from the checked arrays, once
        statistics = array_cache.statistics(layout, arrays, statistics)
    checked = array_cache.Checked(
        ids=np.asarray(static["ids"], dtype=object), arrays=arrays, labels=static["labels"],
        periods=histories.periods, features=dict(plan["features"]), notes=list(report.notes),
        content_hash=histories.content or array_cache.content_hash(folder, used), mapped=mapped,
        statistics=statistics)
    if array_cache.write(folder, array_cache.Sources(used, absent), checked, _table_limits(limits)) is not None:
        # the arrays just written, memory-mapped as any later open's: this process then holds the rows it reads,
        # not the whole history for as long as the bundle lives (0.7 GB at 20,000 x 365 x 24: a batch job's peak)
        checked = array_cache.read(folder, _table_limits(limits)) or checked
    return report, _assemble(parts, checked, target)


def _formats(name: str) -> tuple[str, str]:
    """A table's two accepted file names (CSV and Parquet)."""
    stem = name.rsplit(".", 1)[0]
    return f"{stem}.csv", f"{stem}.parquet"


def _assemble(parts: _Parts, checked: array_cache.Checked, target: int) -> Bundle:
    """The Bundle from checked arrays (just checked, or memory-mapped from the array cache)."""
    config, report = parts.config, parts.report
    if checked.labels is not None and config.positive_label is not None:
        if not label_values.occurs(checked.labels, config.positive_label):  # as text and as numbers
            report.notes.append(POSITIVE_LABEL_NOTE.format(
                file=CONFIG_FILE, label=config.positive_label, column=config.label_column))
    bundle = _bundle_of(parts, checked, target)
    report.summary = _summary(bundle, parts.layout, config, checked.arrays)
    return bundle


def _bundle_of(parts: _Parts, checked: array_cache.Checked, target: int) -> Bundle:
    """The Bundle's fields: the static inputs side by side, the first history, names and labels by column."""
    folder, config, model_info, layout, plan, report = parts
    arrays, labels, names = checked.arrays, checked.labels, {**config.display_names}
    static_keys, temporal_keys = layout.keys_of("static"), layout.keys_of("temporal")
    first = temporal_keys[0]
    features = {key: list(plan["features"][key]) for key in layout.engine_keys}
    all_columns = [c for key in layout.engine_keys for c in features[key]]
    return Bundle(
        path=folder,
        model=model_info.model,
        ids=checked.ids,
        static=_side_by_side([arrays[key] for key in static_keys]),
        temporal=arrays[first] if arrays[first].ndim == 3 else arrays[first][..., None],
        static_features=[c for key in static_keys for c in features[key]],
        temporal_features=list(features[first]),
        static_labels=[names.get(c, c) for key in static_keys for c in features[key]],
        temporal_labels=[names.get(c, c) for c in features[first]],
        units={c: u for c, u in config.units.items() if c in all_columns},
        groups={name: list(members) for name, members in config.groups.items()},
        periods=list(checked.periods[first]),
        output_names=list(config.output_names or default_output_names(model_info.outputs)),
        labels=labels,
        label_name=config.label_column if labels is not None else None,
        positive_label=config.positive_label,
        risk_bands=config.risk_bands,
        target=target,
        output=config.output,
        output_period=config.output_period,
        period_unit=config.period_unit or "",
        content_hash=checked.content_hash,
        notes=list(report.notes),
        input_roles=tuple(spec.role for spec in layout.specs),
        input_arrays={} if _plain(layout) else arrays,
        layout=layout,
        input_features=features,
        input_labels={key: plan["labels"][key] for key in layout.engine_keys},
        feature_labels={c: names.get(c, c) for c in all_columns},
        input_periods={key: list(checked.periods[key]) for key in temporal_keys},
        temporal_padding=config.temporal_padding,
        categories={c: dict(m) for c, m in config.categories.items() if c in all_columns},
        roles={key: spec["role"] for key, spec in (config.inputs or {}).items() if "role" in spec},
        statistics=dict(checked.statistics),
    )


def _plain(layout) -> bool:
    """Whether the model takes one static and one temporal input, with no embedding and no padding."""
    return set(layout.engine_keys) == {"static", "temporal"} and all(
        spec.embedding is None and spec.padded_by is None for spec in layout.specs)


def _summary(bundle: Bundle, layout, config: Config, arrays: dict) -> str:
    """The report's one line about the bundle; a model of more inputs says which, and how they differ."""
    summary = (f"{bundle.n_customers} customers, {bundle.n_static} static features, "
               f"{bundle.n_periods} periods x {bundle.n_temporal} temporal features, "
               f"{len(bundle.output_names)} output(s)")
    if _plain(layout):
        return summary
    temporal_keys = layout.keys_of("temporal")
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
    return summary + " (" + "; ".join(parts) + ")"


def _side_by_side(parts: list[np.ndarray]) -> np.ndarray:
    """(n, S_total) of every static input: float32 (float64 stays), or object when texts occur."""
    flat = [p.reshape(len(p), -1) for p in parts]
    if all(p.dtype.kind == "f" for p in flat):
        return np.concatenate(flat, axis=1) if len(flat) > 1 else flat[0]
    if all(p.dtype.kind in "fiub" for p in flat):
        return np.concatenate([p.astype(np.float64) for p in flat], axis=1).astype(np.float32)
    return np.concatenate([p.astype(object) for p in flat], axis=1)


def _model_layout(model_info: _ModelInfo | None, config: Config, report: ValidationReport):
    """The model's input layout with the roles of bundle.json 'inputs' (None if unusable)."""
    if model_info is None or model_info.roles is None:
        return None
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


def _model_path(folder: Path, report: ValidationReport) -> Path | None:
    """model.keras, else model.h5, else the folder savedmodel; None (and the problem said) when there is none, or
    both a model file and savedmodel/."""
    path = folder / MODEL_FILE
    if not path.is_file() and (folder / LEGACY_MODEL_FILE).is_file():
        path = folder / LEGACY_MODEL_FILE  # a legacy HDF5 model: the same checks (explain.modelfile.h5)
    if (folder / SAVEDMODEL_DIR).is_dir():
        if path.is_file():
            report.add(path.name, saved.BOTH_MODELS.format(file=path.name))
            return None
        return folder / SAVEDMODEL_DIR
    if not path.is_file():
        others = sorted(p.name for p in folder.glob("*.keras")) + sorted(
            p.name for p in folder.glob("*.h5"))
        hint = f" (found {_examples(others)}; rename the Keras 3 file to {MODEL_FILE})" if others else ""
        report.add(MODEL_FILE, MISSING_FILE.format(
            file=MODEL_FILE, folder=folder, accepted=f"{MODEL_FILE} (or {LEGACY_MODEL_FILE}, or a TensorFlow "
            f"SavedModel folder {SAVEDMODEL_DIR}/ with --trust-model){hint}"))
        return None
    return path


def _open_savedmodel(path: Path, report: ValidationReport, loader: ModelLoader | None, limits: Limits):
    """(the SavedModel as a Keras model, its files) when the owner trusts it (``loader`` a ``TrustModel``),
    under Keras' TensorFlow backend and within ``limits``; else None, the refusal said."""
    if not saved.trusts_model(loader):
        report.add(SAVEDMODEL_DIR, saved.NOT_TRUSTED)
        return None
    try:
        files = saved.check_folder(path, limits).files
        return saved.open_savedmodel(path, limits=limits), list(files)
    except UnsafeModelError as error:
        report.add(SAVEDMODEL_DIR, str(error).strip())
    return None


def _read_model(folder: Path, report: ValidationReport, loader: ModelLoader | None = None,
                limits: Limits = DEFAULT_LIMITS) -> _ModelInfo | None:
    path = _model_path(folder, report)
    if path is None:
        return None
    if path.name == SAVEDMODEL_DIR:
        opened = _open_savedmodel(path, report, loader, limits)
        if opened is None:
            return None
        model, files = opened
    else:
        model, files = _open_model_file(path, report, loader, limits), [path.name]
        if model is None:
            return None
    info = _ModelInfo(model=model, path=path, files=files)
    roles, shapes, problem = input_roles(model)
    if problem:
        report.add(MODEL_FILE, problem)
    else:
        info.roles, info.shapes = roles, shapes
    info.outputs, problem = output_check(model)  # (None, K), per period (None, T, K), several heads (a SavedModel's
    if problem:                                  # outputs are heads named as in its signature)
        info.outputs = None
        report.add(MODEL_FILE, problem)
    return info


def _open_model_file(path: Path, report: ValidationReport, loader: ModelLoader | None, limits: Limits):
    """model.keras or model.h5 opened by ``loader`` (default ``safe_load``'s, under ``limits``); None, the problem
    said, when it is refused or cannot be read."""
    from explain.modelfile import safe_load  # imports keras (seconds); only when a model is opened

    try:
        default = safe_load.open_model if path.name == LEGACY_MODEL_FILE else safe_load.load_model
        return loader(path) if loader is not None else default(path, limits=limits)
    except UnsafeModelError as error:  # its message names the file and says how to fix it
        report.add(MODEL_FILE, MODEL_REFUSED.format(file=MODEL_FILE, reason=str(error).strip()))
    except Exception as error:  # UnsafeModelError, a damaged zip, unknown layers, ...
        report.add(MODEL_FILE, MODEL_UNREADABLE.format(file=MODEL_FILE, reason=first_line(error)))
    return None


def _checked(check, table, *args):
    """``check(table, *args)``, or None after saying that a Parquet column could not be decoded."""
    try:
        return check(table, *args)
    except UnreadableTable as error:
        csv_name = error.table.file.rsplit(".", 1)[0] + ".csv"
        args[-1].add(error.table.file, UNREADABLE_PARQUET.format(file=error.table.file, reason=str(error),
                                                                 csv_name=csv_name))
        return None


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
