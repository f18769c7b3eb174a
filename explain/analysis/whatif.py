"""What-if scenarios for one customer: edits, their URL form and checks, and their attributions.

No streamlit. A **scenario** is a list of edits to one customer's inputs, applied in order:

* ``set``: a static feature, or months A..B of a monthly feature, to a value;
* ``baseline``: to the baseline's values (the baseline of the IG settings);
* ``median``: to the median of all customers, or of a cohort (customers with one label),
  month by month for a monthly feature;
* ``scale``: multiplied by k.

Values a user types must lie in the range observed in the data (and, for a feature with a
few integer values such as 0/1, be one of the observed categories); values an edit derives
(a baseline, a median, a scaled value) are clipped into that range (or moved to the nearest
category), with a note saying so. Months that are padding in the customer (a ``Masking``
layer's mask value in every feature) are never edited.

The URL form (``Scenario.text()`` / ``parse_scenario``) is compact: edits separated by ``,``;
``s{j}`` is static feature j, ``t{j}@{a}-{b}`` months a..b (0-based, inclusive) of monthly
feature j (``t{j}@{a}`` one month); then ``={value}``, ``=b`` (baseline), ``=med`` (median
of all customers), ``=med:{label}`` (median of a cohort) or ``*{k}`` (scale)::

    s0=36,t1@9-11=b,t0@9-11*1.5,t3@4=2

:mod:`explain.analysis.counterfactual` searches for a small scenario that brings the prediction below a
threshold.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings
import weakref
from dataclasses import dataclass, field

import numpy as np

from explain.analysis.diagnostics import shown_baseline
from explain.analysis.explainer import attribute, baseline_for
from explain.core import labels
from explain.core.engine import StopCheck, engine_for
from explain.core.errors import ExplainError
from explain.core.ig import Attribution
from explain.core.settings import Settings

KINDS = ("set", "baseline", "median", "scale")
ROLES = ("static", "temporal")
MAX_CATEGORIES = 10  # a static feature with at most this many distinct integer values is a category
MAX_EDITS = 200  # edits in one scenario (the data editor makes one per changed cell)
MAX_TEXT = 4000  # characters of a scenario's URL form
MAX_SCALE = 100.0
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)  # observed quantiles: the values the search tries for a static number

# Message templates (tests import them).
BAD_SCENARIO = ("The what-if scenario {text!r} was not used: {problem}. A scenario is a list of edits separated "
                "by commas, such as 's0=36' (static feature 0 set to 36), 't1@9-11=b' (months 9 to 11 of monthly "
                "feature 1 set to the baseline), 't1@9-11=med' (to the median), 't0@0-11*0.5' (scaled by 0.5).")
BAD_EDIT = "the edit {edit!r} {problem}"
UNKNOWN_FEATURE = "names {role} feature {index}, but the bundle has {count} ({first} to {last})"
BAD_PERIODS = "names periods {a} to {b}, but the history has periods 0 to {last} (first period first)"
OUT_OF_RANGE = "sets {feature} to {value:g}, outside the range observed in the data ({low:g} to {high:g})"
NOT_A_CATEGORY = "sets {feature} to {value:g}, which is not one of the values observed in the data ({values})"
BAD_SCALE = f"scales by {{k}}; the factor must be a number from 0 to {MAX_SCALE:g}"
SCALE_CATEGORY = "scales {feature}, a feature with a few observed values ({values}); set one of them instead"
UNKNOWN_COHORT = "takes the median of the customers whose {label} is {value!r}, but no customer has that label"
NO_LABELS = "takes the median of a cohort, but this bundle has no label column (use '=med' for all customers)"
PADDED = ("edits period {period} of customer {customer}, which is padding (no data; the model skips it). Edit "
          "the customer's real periods only")
TOO_MANY = f"has {{count}} edits; at most {MAX_EDITS} are allowed"
TOO_LONG = f"is {{count}} characters long; at most {MAX_TEXT} are allowed"
_EDIT = re.compile(r"^(?P<role>[st])(?P<feature>\d+)(?:@(?P<a>\d+)(?:-(?P<b>\d+))?)?"
                   r"(?:=(?P<arg>.*)|\*(?P<k>.*))$")


class ScenarioError(ExplainError):
    """A what-if scenario (its URL form or one of its edits) cannot be used."""


# ----------------------------------------------------------------------------- edits and scenarios


@dataclass(frozen=True)
class Edit:
    """One change to a customer's inputs.

    ``feature``: index into the bundle's static or temporal features; ``periods``: (first,
    last) month index, inclusive (temporal only); ``value``: the value (``set``) or the factor
    (``scale``); ``cohort``: the label whose customers' median is used (``median``; None: all).
    """

    role: str
    feature: int
    kind: str
    value: float | None = None
    periods: tuple[int, int] | None = None
    cohort: str | None = None

    def text(self) -> str:
        """The URL form: ``s0=36``, ``t1@9-11=b``, ``t0@9-11*1.5``, ``t1@0-11=med:0``."""
        head = f"{self.role[0]}{self.feature}"
        if self.periods is not None:
            a, b = self.periods
            head += f"@{a}" if a == b else f"@{a}-{b}"
        if self.kind == "scale":
            return f"{head}*{_number(self.value)}"
        if self.kind == "baseline":
            return f"{head}=b"
        if self.kind == "median":
            return f"{head}=med" + (f":{self.cohort}" if self.cohort is not None else "")
        return f"{head}={_number(self.value)}"

    def cells(self) -> int:
        """How many input values the edit changes."""
        return 1 if self.periods is None else self.periods[1] - self.periods[0] + 1

    def describe(self, bundle, values: dict | None = None) -> str:
        """In words: 'Support calls, 2025-10 to 2025-12: set to the baseline'; with the
        customer's ``values`` (static (S,), temporal (T, F)) it adds what they were."""
        if self.role == "static":
            where = str(bundle.static_labels[self.feature])
        else:
            a, b = self.periods
            months = bundle.periods[a] if a == b else f"{bundle.periods[a]} to {bundle.periods[b]}"
            where = f"{bundle.temporal_labels[self.feature]}, {months}"
        had = None  # the lowest and the highest of the customer's values the edit changes
        if values is not None:
            if self.role == "static":
                had = (float(values["static"][self.feature]),) * 2
            else:
                cells = np.asarray(values["temporal"])[self.periods[0]:self.periods[1] + 1, self.feature]
                had = (float(cells.min()), float(cells.max()))
        if self.kind == "set":
            what = f"set to {_readable(self.value, *(had or ()))}"
        elif self.kind == "scale":
            what = f"multiplied by {_readable(self.value)}"
        elif self.kind == "baseline":
            what = "set to the baseline"
        else:
            what = "set to the median of " + ("all customers" if self.cohort is None
                                              else f"the customers with {bundle.label_name} = {self.cohort}")
        if had is not None:
            low, high = had
            edit = () if self.kind != "set" else (self.value,)
            was = _readable(low, *edit) if low == high else f"{_readable(low, *edit)} to {_readable(high, *edit)}"
            what += f" (the customer has {was})"
        return f"{where}: {what}"


@dataclass(frozen=True)
class Scenario:
    """Edits applied in order to one customer's inputs."""

    edits: tuple[Edit, ...] = ()

    def text(self) -> str:
        return ",".join(edit.text() for edit in self.edits)

    def __bool__(self) -> bool:
        return bool(self.edits)

    def plus(self, *edits: Edit) -> "Scenario":
        return Scenario(self.edits + tuple(edits))

    def with_value(self, role: str, feature: int, value: float, period: int | None = None,
                   original: float | None = None) -> "Scenario":
        """A value typed into one input: a static feature (replacing every earlier edit of it;
        none at all when ``value`` is the customer's ``original``) or one month's cell
        (replacing an earlier value typed into the same cell; it applies last)."""
        if role == "static":
            kept = tuple(e for e in self.edits if not (e.role == "static" and e.feature == feature))
            same = original is not None and float(value) == float(original)
            return Scenario(kept if same else kept + (Edit("static", feature, "set", float(value)),))
        cell = (int(period), int(period))
        kept = tuple(e for e in self.edits if not (e.role == "temporal" and e.feature == feature
                                                   and e.periods == cell and e.kind == "set"))
        return Scenario(kept + (Edit("temporal", feature, "set", float(value), cell),))


def _number(value) -> str:
    """A short exact-enough text for a value (7 significant digits: float32's precision)."""
    text = f"{float(value):.7g}"
    return text[:-2] if text.endswith(".0") else text


def _readable(value, *others) -> str:
    """``value`` for a reader: 3 significant digits and every digit before the point ("12346", "-1.66", "0.000123"),
    more where fewer would show it equal to one of ``others`` (what it is compared with) without being equal; whole
    numbers as they are ("set to 2", not "2.00")."""
    value = float(value)
    whole = len(str(int(abs(value)))) if math.isfinite(value) and abs(value) >= 1 else 0
    for digits in range(max(3, whole), max(8, whole + 1)):
        text = _number(float(f"{value:.{digits}g}"))
        if all(float(other) == value or text != _number(float(f"{float(other):.{digits}g}")) for other in others):
            return text
    return _number(value)


# ----------------------------------------------------------------------------- what the data allows


@dataclass(frozen=True)
class Observed:
    """The ranges and category sets observed in a bundle's data (real months only)."""

    static_min: np.ndarray  # (S,)
    static_max: np.ndarray
    static_categories: tuple  # per static feature: a tuple of the observed values, or None (numeric)
    static_integer: np.ndarray  # (S,) bool: every observed value is an integer
    static_quantiles: np.ndarray  # (len(QUANTILES), S)
    temporal_min: np.ndarray  # (F,)
    temporal_max: np.ndarray
    temporal_integer: np.ndarray  # (F,) bool
    mask_value: float | None  # the model's Masking value, None without a Masking layer

    _medians: dict = field(default_factory=dict, repr=False, compare=False)  # cohort -> medians (Context.median)

    @classmethod
    def of(cls, bundle) -> "Observed":
        """The ranges of ``bundle``'s data, read by blocks of customers in the history's own dtype (a memory-mapped
        365-day history is never copied whole; the answers are those of the whole history in float64)."""
        static = np.asarray(bundle.static, np.float64)
        mask_value = masking_value(bundle.model)
        low, high, integer = _temporal_ranges(bundle.temporal, mask_value)
        categories = []
        for j in range(static.shape[1]):
            values = np.unique(static[:, j])
            small = values.size <= MAX_CATEGORIES and np.all(values == np.round(values))
            categories.append(tuple(float(v) for v in values) if small else None)
        integer_static = np.all(static == np.round(static), axis=0)
        quantiles = np.quantile(static, QUANTILES, axis=0)
        return cls(
            static_min=static.min(axis=0), static_max=static.max(axis=0), static_categories=tuple(categories),
            static_integer=integer_static,
            static_quantiles=np.where(integer_static, np.round(quantiles), quantiles),
            temporal_min=low, temporal_max=high, temporal_integer=integer, mask_value=mask_value,
        )

    def limits(self, role: str, feature: int) -> tuple[float, float]:
        if role == "static":
            return float(self.static_min[feature]), float(self.static_max[feature])
        return float(self.temporal_min[feature]), float(self.temporal_max[feature])

    def fit(self, role: str, feature: int, values: np.ndarray) -> np.ndarray:
        """``values`` clipped into the observed range (a category feature: the nearest category)."""
        values = np.clip(np.asarray(values, np.float64), *self.limits(role, feature))
        categories = self.static_categories[feature] if role == "static" else None
        if categories is not None:
            grid = np.asarray(categories)
            values = grid[np.abs(values[..., None] - grid).argmin(axis=-1)]
        return values


BLOCK_CELLS = 2_000_000  # history values read at once by Observed.of (8 MB of float32)
MEDIAN_BLOCK_CELLS = 8_000_000  # by the medians: months of every customer (each block touches every customer's pages)


def _as_float(block: np.ndarray) -> np.ndarray:
    """A block of the history as floats (its own float dtype; anything else as float64)."""
    block = np.asarray(block)
    return block if block.dtype.kind == "f" else block.astype(np.float64)


def _real_months(block: np.ndarray, mask_value: float | None) -> np.ndarray:
    """(n, T) bool: the months of a (n, T, F) block that are not padding (every feature the mask value). Compared in
    the block's dtype, which gives the same answer as float64 (a mask value the dtype cannot hold matches nothing)."""
    if mask_value is None:
        return np.ones(block.shape[:2], bool)
    mask = block.dtype.type(mask_value)
    if float(mask) != float(mask_value):
        return np.ones(block.shape[:2], bool)
    return ~np.all(block == mask, axis=2)


def _temporal_ranges(temporal, mask_value: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per monthly feature: min, max and 'every value is an integer' over the real months of all customers (all
    months where no customer has a real one), by blocks of customers."""
    n, periods, width = temporal.shape
    rows = max(1, BLOCK_CELLS // max(1, periods * width))
    for use_mask in ((True, False) if mask_value is not None else (False,)):
        low, high = np.full(width, np.inf), np.full(width, -np.inf)
        integer, seen = np.ones(width, bool), False
        for start in range(0, n, rows):
            block = _as_float(temporal[start:start + rows])
            cells = block[_real_months(block, mask_value if use_mask else None)]  # (cells, F)
            if not cells.size:
                continue
            seen = True
            low, high = np.minimum(low, cells.min(axis=0)), np.maximum(high, cells.max(axis=0))
            integer &= np.all(cells == np.round(cells), axis=0)
        if seen or n == 0:
            break
    return low, high, integer


def monthly_medians(temporal, rows: np.ndarray | None, mask_value: float | None) -> np.ndarray:
    """(T, F) float64: each month's median of each feature over the customers ``rows`` (None: all) that have a real
    month there (NaN where none has), read by blocks of months; the same numbers as ``np.nanmedian`` of the whole
    history in float64 with padding as NaN, without that copy."""
    n, periods, width = temporal.shape
    count = n if rows is None else len(rows)
    step = max(1, MEDIAN_BLOCK_CELLS // max(1, count * width))
    out = np.full((periods, width), np.nan)
    for t0 in range(0, periods, step):
        block = _as_float(temporal[:, t0:t0 + step] if rows is None else temporal[rows, t0:t0 + step])
        real = _real_months(block, mask_value)
        for k in range(block.shape[1]):
            cells = block[real[:, k], k]  # (customers with a real month t0 + k, F)
            if len(cells):
                out[t0 + k] = _column_medians(cells)
    return out


def _column_medians(cells: np.ndarray) -> np.ndarray:
    """(F,) float64: ``np.median`` of each column of (c, F) ``cells`` in float64 (``np.nanmedian`` where a value is
    NaN), found by partitioning each column in its own dtype: the middle values are the same, and the mean of two
    is taken in float64 as numpy's median does."""
    if np.isnan(cells).any():
        with warnings.catch_warnings():  # a feature with no value in this month: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmedian(np.asarray(cells, np.float64), axis=0)
    columns = np.ascontiguousarray(cells.T)  # (F, c): each column's values side by side
    lo, hi = (columns.shape[1] - 1) // 2, columns.shape[1] // 2
    part = np.partition(columns, sorted({lo, hi}), axis=-1)
    low, high = part[:, lo].astype(np.float64), part[:, hi].astype(np.float64)
    return low if lo == hi else (low + high) / 2


def masking_value(model) -> float | None:
    """The ``mask_value`` of the model's ``Masking`` layer (top level), or None."""
    for layer in getattr(model, "layers", []) or []:
        if type(layer).__name__ == "Masking":
            return float(layer.mask_value)
    return None


# ----------------------------------------------------------------------------- parsing


def _feature_name(bundle, role: str, j: int) -> str:
    return str((bundle.static_labels if role == "static" else bundle.temporal_labels)[j])


def parse_edit(text: str, bundle, observed: Observed) -> Edit:
    """One edit from its URL form, checked against the bundle and the observed ranges."""
    def fail(problem):
        raise ScenarioError(BAD_EDIT.format(edit=text, problem=problem))

    match = _EDIT.match(text.strip())
    if match is None:
        fail("is not of the form s{feature}=..., t{feature}@{first}-{last}=... or ...*{factor}")
    role = "static" if match["role"] == "s" else "temporal"
    j = int(match["feature"])
    names = bundle.static_labels if role == "static" else bundle.temporal_labels
    if j >= len(names):
        fail(UNKNOWN_FEATURE.format(role=role, index=j, count=len(names), first=0, last=len(names) - 1))
    periods = None
    if role == "temporal":
        if match["a"] is None:
            fail("names a history feature without its periods (add @first-last, for example @9-11)")
        a = int(match["a"])
        b = int(match["b"]) if match["b"] is not None else a
        if not 0 <= a <= b < bundle.n_periods:
            fail(BAD_PERIODS.format(a=a, b=b, last=bundle.n_periods - 1))
        periods = (a, b)
    elif match["a"] is not None:
        fail("gives periods for a static feature")
    name = names[j]
    categories = observed.static_categories[j] if role == "static" else None
    if match["k"] is not None:
        k = _finite(match["k"])
        if k is None or not 0 <= k <= MAX_SCALE:
            fail(BAD_SCALE.format(k=match["k"]))
        if categories is not None:
            fail(SCALE_CATEGORY.format(feature=name, values=", ".join(_number(v) for v in categories)))
        return Edit(role, j, "scale", k, periods)
    arg = match["arg"]
    if arg == "b":
        return Edit(role, j, "baseline", None, periods)
    if arg == "med" or arg.startswith("med:"):
        cohort = arg[4:] if arg.startswith("med:") else None
        if cohort is not None:
            if bundle.labels is None:
                fail(NO_LABELS)
            if not labels.mask(bundle.labels, cohort).any():
                fail(UNKNOWN_COHORT.format(label=bundle.label_name, value=cohort))
        return Edit(role, j, "median", None, periods, cohort)
    value = _finite(arg)
    if value is None:
        fail("does not give a number, 'b' (the baseline), 'med' or 'med:LABEL' (a median) after '='")
    low, high = observed.limits(role, j)
    if categories is not None and value not in categories:
        fail(NOT_A_CATEGORY.format(feature=name, value=value, values=", ".join(_number(v) for v in categories)))
    if not low - 1e-9 * max(1.0, abs(low)) <= value <= high + 1e-9 * max(1.0, abs(high)):
        fail(OUT_OF_RANGE.format(feature=name, value=value, low=low, high=high))
    return Edit(role, j, "set", value, periods)


def _finite(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def parse_scenario(text: str | None, bundle, observed: Observed | None = None) -> Scenario:
    """A scenario from its URL form; ``ScenarioError`` naming the text and the bad edit."""
    text = "" if text is None else str(text)
    observed = observed or Observed.of(bundle)
    try:
        if len(text) > MAX_TEXT:
            raise ScenarioError(TOO_LONG.format(count=len(text)))
        parts = [part for part in text.split(",") if part.strip()]
        if len(parts) > MAX_EDITS:
            raise ScenarioError(TOO_MANY.format(count=len(parts)))
        return Scenario(tuple(parse_edit(part, bundle, observed) for part in parts))
    except ScenarioError as error:
        shown = text if len(text) <= 120 else text[:117] + "..."
        raise ScenarioError(BAD_SCENARIO.format(text=shown, problem=str(error))) from None


# ----------------------------------------------------------------------------- applying a scenario


@dataclass(frozen=True)
class Context:
    """One customer and what edits refer to: the data's ranges, the baseline, the padded months."""

    bundle: object
    customer: str
    settings: Settings
    observed: Observed
    original: dict  # static (S,), temporal (T, F) float64
    baseline: dict  # the baseline's static (S,), temporal (T, F) (the mean of a sampled baseline)
    padded: np.ndarray  # (T,) bool
    def median(self, cohort: str | None) -> dict:
        """Per feature (and per month) median of all customers, or of the cohort with label ``cohort``:
        :func:`bundle_medians`, computed once per bundle (kept with ``observed``, which every customer's context of
        the bundle shares)."""
        return bundle_medians(self.bundle, self.observed, cohort)


def bundle_medians(bundle, observed: Observed, cohort: str | None = None) -> dict:
    """{"static": (S,), "temporal": (T, F)} float64: the median of all customers (or of those with label ``cohort``)
    per static feature, and per month and monthly feature over the customers with a real month there (padding is no
    data); computed on the first call for a bundle's arrays and kept while they live (:func:`_kept_medians`), so
    that every customer's context shares them and a server can compute them ahead (about 3 s for 20,000 x 365 x 24)."""
    kept = _kept_medians(bundle, observed)
    if cohort not in kept:
        rows = None if cohort is None else np.flatnonzero(labels.mask(bundle.labels, cohort))
        static = np.asarray(bundle.static if rows is None else bundle.static[rows], np.float64)
        kept[cohort] = {"static": np.median(static, axis=0),
                        "temporal": monthly_medians(bundle.temporal, rows, observed.mask_value)}
    return kept[cohort]


_MEDIANS: dict = {}  # id(history) -> _Kept; at most MAX_KEPT bundles
MAX_KEPT = 8


@dataclass
class _Kept:
    """The medians of one bundle's arrays, which it refers to weakly (nothing kept alive; the history's id is only
    reused once it is gone), so that a bundle with other arrays never gets them."""

    history: object  # each a weakref.ref (or a function giving an object that takes no weak reference)
    static: object
    labels: object
    mask_value: float | None
    medians: dict = field(default_factory=dict)

    def of(self, bundle, mask_value) -> bool:
        return (self.history() is bundle.temporal and self.static() is bundle.static
                and self.labels() is bundle.labels and self.mask_value == mask_value)


def _weak(value):
    """A weak reference to ``value``, or (None, a list: no weak reference) a function that gives it."""
    try:
        return weakref.ref(value)
    except TypeError:
        return lambda: value


def _kept_medians(bundle, observed: Observed) -> dict:
    """The medians kept for ``bundle``'s arrays ({cohort: medians}, filled by :func:`bundle_medians`): the same
    dictionary for every context of the bundle, however its ``Observed`` was copied (a cache that pickles it)."""
    try:
        history = weakref.ref(bundle.temporal)
    except TypeError:  # an array that takes no weak reference: kept with this Observed only
        return observed._medians
    kept = _MEDIANS.get(id(bundle.temporal))
    if kept is None or not kept.of(bundle, observed.mask_value):
        while len(_MEDIANS) >= MAX_KEPT:
            _MEDIANS.pop(next(iter(_MEDIANS)))
        kept = _MEDIANS[id(bundle.temporal)] = _Kept(history, _weak(bundle.static), _weak(bundle.labels),
                                                     observed.mask_value)
    return kept.medians


def context(bundle, customer: str, settings: Settings = Settings(), *, observed: Observed | None = None,
            baseline: dict | None = None) -> Context:
    """The context of ``customer``; ``baseline`` (static (S,), temporal (T, F)) if already at hand
    (else the one the Customer page shows: the mean of a sampled baseline)."""
    inputs = bundle.inputs_for([customer])
    original = {role: np.asarray(inputs[role][0], np.float64) for role in ROLES}
    settings = settings.for_bundle(bundle)
    if baseline is None:
        baseline = shown_baseline(bundle, customer, settings)
    observed = observed or Observed.of(bundle)
    padded = (np.all(original["temporal"] == observed.mask_value, axis=1) if observed.mask_value is not None
              else np.zeros(bundle.n_periods, bool))
    return Context(bundle, str(customer), settings, observed, original,
                   {role: np.asarray(baseline[role], np.float64) for role in ROLES}, padded)


def _target_values(ctx: Context, edit: Edit, current: np.ndarray) -> np.ndarray:
    """The new values of the cells ``edit`` changes, before fitting into the observed range."""
    if edit.kind == "set":
        return np.full(current.shape, float(edit.value))
    if edit.kind == "scale":
        return current * float(edit.value)
    source = ctx.baseline if edit.kind == "baseline" else ctx.median(edit.cohort)
    values = source[edit.role]
    return values[edit.feature] if edit.role == "static" else values[edit.periods[0]:edit.periods[1] + 1, edit.feature]


def apply(ctx: Context, scenario: Scenario) -> tuple[dict, list[str]]:
    """The customer's inputs after the scenario: ({"static": (1, S), "temporal": (1, T, F)}, notes).

    ``ScenarioError`` if an edit touches a padded month. Derived values (a baseline, a median,
    a scaled value) outside the observed range are clipped, and a note says so.
    """
    static, temporal = ctx.original["static"].copy(), ctx.original["temporal"].copy()
    notes = []
    for edit in scenario.edits:
        if edit.role == "static":
            current = static[edit.feature:edit.feature + 1]
        else:
            a, b = edit.periods
            if ctx.padded[a:b + 1].any():
                month = a + int(np.flatnonzero(ctx.padded[a:b + 1])[0])
                raise ScenarioError(BAD_EDIT.format(edit=edit.text(), problem=PADDED.format(
                    period=ctx.bundle.periods[month], customer=ctx.customer)))
            current = temporal[a:b + 1, edit.feature]
        wanted = np.atleast_1d(_target_values(ctx, edit, current)).astype(np.float64)
        wanted = np.where(np.isnan(wanted), current, wanted)  # a month no other customer has data for: kept
        fitted = ctx.observed.fit(edit.role, edit.feature, wanted)
        if edit.kind != "set" and not np.allclose(fitted, wanted, rtol=0, atol=1e-9):
            low, high = ctx.observed.limits(edit.role, edit.feature)
            notes.append(f"{edit.describe(ctx.bundle)}: values outside what the data shows were moved into its "
                         f"range ({low:g} to {high:g})" + (" and onto its observed values" if edit.role == "static"
                                                           and ctx.observed.static_categories[edit.feature] else ""))
        current[:] = fitted
    return {"static": static[None], "temporal": temporal[None]}, notes


def edited_cells(ctx: Context, inputs: dict) -> dict:
    """Which values differ from the customer's: static (S,) and temporal (T, F) bool."""
    return {role: ~np.isclose(np.asarray(inputs[role][0], np.float64), ctx.original[role], rtol=0, atol=1e-9)
            for role in ROLES}


# ----------------------------------------------------------------------------- model calls


def explain_inputs(bundle, inputs: dict, settings: Settings, ids=None, should_stop: StopCheck = None) -> Attribution:
    """IG of in-memory inputs (n, S), (n, T, F) under ``settings``; data-wide baselines come from
    the bundle (the same as :func:`explain.analysis.explainer.explain_customers` would use)."""
    settings = settings.for_bundle(bundle)
    baseline = baseline_for(bundle, inputs, settings.baseline, settings.seed, settings.categorical, ids=ids)
    return attribute(bundle, inputs, baseline, settings, ids=ids, should_stop=should_stop)


@dataclass(frozen=True)
class Outcome:
    """The original customer and the scenario, explained in one batched call."""

    scenario: Scenario
    inputs: dict  # the edited inputs, (1, S) and (1, T, F)
    attribution: Attribution  # row 0: original, row 1: edited
    edited: dict  # static (S,), temporal (T, F) bool: cells the scenario changed
    notes: list

    @property
    def predictions(self) -> tuple[float, float]:
        return float(self.attribution.prediction[0]), float(self.attribution.prediction[1])

    @property
    def change(self) -> float:
        return self.predictions[1] - self.predictions[0]


def evaluate(ctx: Context, scenario: Scenario, should_stop: StopCheck = None) -> Outcome:
    """Apply ``scenario`` and explain the original and the edited customer together."""
    edited, notes = apply(ctx, scenario)
    both = {role: np.concatenate([ctx.original[role][None], edited[role]]).astype(np.float32) for role in ROLES}
    attribution = explain_inputs(ctx.bundle, both, ctx.settings, ids=scenario_ids(ctx.customer),
                                 should_stop=should_stop)
    cells = edited_cells(ctx, edited)
    if not (cells["static"].any() or cells["temporal"].any()):
        attribution = _first_row_twice(attribution)  # no change: no last-bit noise between the rows
    return Outcome(scenario, edited, attribution, cells, notes)


def _first_row_twice(attribution: Attribution) -> Attribution:
    """``attribution`` with row 1 replaced by row 0 (the same inputs give the same numbers)."""
    def twice(array):
        return np.repeat(np.asarray(array)[:1], 2, axis=0)

    per_input = None if attribution.per_input is None else {
        role: {name: twice(value) for name, value in values.items()} for role, values in attribution.per_input.items()}
    return dataclasses.replace(
        attribution, static=twice(attribution.static), temporal=twice(attribution.temporal),
        prediction=twice(attribution.prediction), baseline_prediction=twice(attribution.baseline_prediction),
        delta=twice(attribution.delta), steps=twice(attribution.steps), per_input=per_input)


def predict(bundle, static: np.ndarray, temporal: np.ndarray, target: int, batch_size: int = 1024,
            should_stop: StopCheck = None) -> np.ndarray:
    """The model's output column ``target`` for many inputs, (n,), in batched compiled calls."""
    engine = engine_for(bundle.model)
    static = np.ascontiguousarray(static, dtype=engine.dtypes["static"].as_numpy_dtype)
    temporal = np.ascontiguousarray(temporal, dtype=engine.dtypes["temporal"].as_numpy_dtype)
    return engine.forward(static, temporal, "output", batch_size, should_stop)[:, target]


# ----------------------------------------------------------------------------- downloads


def scenario_ids(customer: str) -> list[str]:
    """The ids of the two rows of an :class:`Outcome` in downloads: the customer and the what-if."""
    return [str(customer), f"{customer} (what-if)"]


def report_bundle(bundle, customer: str, outcome: Outcome):
    """A two-customer bundle (the original and the what-if rows) for :mod:`explain.analysis.report`:
    its downloads then hold the edited values next to their attributions, like a customer's."""
    inputs = bundle.inputs_for([customer])
    return dataclasses.replace(
        bundle, ids=np.array(scenario_ids(customer), dtype=object), labels=None,
        static=np.concatenate([inputs["static"], outcome.inputs["static"]]).astype(np.float32),
        temporal=np.concatenate([inputs["temporal"], outcome.inputs["temporal"]]).astype(np.float32))


def report_json(bundle, customer: str, outcome: Outcome, settings: Settings) -> bytes:
    """The JSON (UTF-8 bytes) of a customer's attributions (both rows) with the scenario: its URL form, its
    edits in words and the notes of applying it."""
    from explain.analysis import report

    data = report.to_json_dict(outcome.attribution, report_bundle(bundle, customer, outcome),
                               scenario_ids(customer), settings)
    data["scenario"] = {"customer": str(customer), "whatif": outcome.scenario.text(),
                        "edits": [edit.describe(bundle, {r: v[0] for r, v in bundle.inputs_for([customer]).items()})
                                  for edit in outcome.scenario.edits],
                        "notes": list(outcome.notes), "prediction_change": outcome.change}
    return (json.dumps(data, indent=1) + "\n").encode("utf-8")
