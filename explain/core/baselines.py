"""Baseline builders: each returns ``{"static": ..., "temporal": ...}`` arrays for the engine.

A baseline is the reference an explanation is measured against: attributions add up to
f(customer) - f(baseline). Shapes: ``(1, S)`` and ``(1, T, F)`` for one baseline shared by
all customers, ``(n, S)`` and ``(n, T, F)`` for one per customer, and ``(1, K, S)`` and
``(1, K, T, F)`` for a distribution of K baselines (expected gradients).

``data`` is the whole data set, ``inputs`` the customers being explained, both
``{"static": (n, S), "temporal": (n, T, F)}``; with ``layout`` (``explain.core.inputs.input_layout``)
any model's inputs, keyed as the engine keys them, with two more rules:

- **Categorical inputs** (ids into an Embedding) get the ``categorical`` rule wherever a
  numeric input gets zero, a mean or a median: ``"mode"`` (the most frequent category, the
  default), ``"mean-embedding"`` (the frequency-weighted mean of the categories' embedding
  vectors) or ``"category:FEATURE=VALUE;..."`` (chosen categories; unnamed ones: the mode).
  ``customer``, ``cohort`` and ``sample`` take the categories of those customers
  (a cohort: its most frequent ones), ``flat`` and ``blur`` the customer's own.
- **Padded histories** (a Masking layer, or ``mask_zero`` ids): statistics use real months
  only, a baseline customer's padded months are filled with that customer's own mean, and no
  real month of a baseline equals the mask value: one that would (every feature at the mask
  value, as zero with ``Masking(0)``) is moved off it by ``MASK_OFFSET`` (1e-6, times the
  mask value's size if above 1). The customer's own padded months stay padding (the engine
  sets the baseline to the customer's values there).
"""

from __future__ import annotations

import mmap
from typing import NamedTuple

import numpy as np

from explain.core.errors import AttributionError
from explain.core.inputs import MeanEmbedding
from explain.core.labels import mask as cohort_mask
from explain.core.labels import text as labels_text
from explain.core.periods import Words
from explain.core.settings import (  # noqa: F401
    BAD_CATEGORICAL,
    BAD_PREVIOUS,
    BAD_SAMPLES,
    BAD_WIDTH,
    DEFAULT_BLUR_WIDTH,
    DEFAULT_SAMPLES,
    MAX_PREVIOUS,
    MAX_SAMPLES,
    Baseline,
)
from explain.core.settings import parse_categorical as parse_rule

MASK_OFFSET = 1e-6
CHUNK_VALUES = 1 << 22  # values read and converted to float64 at a time for data-wide means and medians

UNKNOWN_CUSTOMER = "Baseline customer {customer!r} is not in the data set. Some valid ids: {examples}."
EMPTY_COHORT = (
    "The cohort {value!r} has no customers: the label column holds {present}. Pick one of "
    "those values, or a bundle with a label column."
)
SNAPSHOT_ONLY_WITH_BUNDLE = (
    "{spec}: an earlier snapshot is a bundle folder read by customer id; build it with "
    "explain.analysis.explainer.baseline_for (the CLI's --baseline-bundle DIR), not from arrays."
)
NO_LABELS = "A cohort baseline needs a label column in the bundle (bundle.json 'label_column'); this bundle has none."
UNKNOWN_CATEGORY_FEATURE = "category:{feature}=...: {feature!r} is not a categorical input; they are {names}."
CATEGORICAL_WORDS = {
    "mode": "Categorical features ({names}) are at their most frequent category.",
    "mean-embedding": "Categorical features ({names}) are at the mean embedding of their categories, each "
                      "category weighted by its frequency in the data (no single category).",
    "category": "Categorical features ({names}) are at chosen categories: {chosen} (the others at their most "
                "frequent one).",
}
MASK_WORDS = (
    "{Units} that are padding for the customer ({padded_by}) stay padding along the whole path and get no "
    "attribution; the baseline's real {units} never equal the mask value {value:g} (a {unit} that would, every "
    "feature at {value:g}, is moved off it by {offset:g}), so the model never reads a real {unit} as padding."
)
SHORT_HISTORY_WORDS = (
    "For a customer with a short history the baseline is as short: {where} on the customer's own real {units}, "
    "and the padded ones stay padding. So the baseline's prediction also comes from a short history, and the "
    "attributions explain the customer's values, not how long the history is."
)
NO_DATA_WORDS = {  # by the side a bundle pads its short histories on (bundle.json 'temporal_padding')
    "start": ("{Units} before a customer's first {unit} are no data yet: they count for nothing, in the customer "
              "and in what the customer is compared with."),
    "end": ("{Units} after a customer's last {unit} are no data: they count for nothing, in the customer and in what "
            "the customer is compared with."),
}
SHORT_HISTORY_ANALYST = (
    "For a customer with a short history the comparison is as short: {where} on the customer's own {units} with "
    "data. So its score also comes from a short history, and the effects explain the customer's values, not how "
    "long the history is."
)
SHORT_HISTORY_WHERE = {
    "zero": "0 is placed", "mean": "each feature's mean over every customer's real {units} is placed",
    "median": "each feature's median over every customer's real {units} is placed",
    "cohort": "the cohort's mean over its customers' real {units} is placed",
    "customer": "the other customer's values (their padded {units} at their own mean) are placed",
    "sample": "each sampled customer's values (padded {units} at their own mean) are placed",
}

DESCRIPTIONS = {
    "zero": "every feature at 0 (in the model's raw units): 'nothing at all'. Simple, but 0 may "
            "be an unrealistic customer (zero tenure, zero charge).",
    "mean": "the average customer: each static feature at its mean, each {adjective} feature at its "
            "mean over all customers and {units}. The effects say how this customer differs from average.",
    "median": "the typical customer: each feature at its median, robust to outliers.",
    "customer": "another real customer: the effects explain the difference between the two scores.",
    "cohort": "the average of a group of customers sharing a label (for example customers who stayed): "
              "the effects explain why this customer scores differently from that group.",
    "flat": "the customer's own data with each {adjective} feature held flat at its own average: "
            "static features get no effect; the heatmap shows which {units}' ups and downs matter.",
    "blur": "the customer's own history smoothed over time: static features get no effect; "
            "the effects show what sudden changes do, not overall levels.",
    "sample": "K customers drawn at random (expected gradients): the effects are averaged over K "
              "comparisons, so no single reference point dominates.",
    "previous": "the same customer {back} earlier: the history as it was then (each {unit} compared with "
                "{before}), static features unchanged. The effects add up to the change of the "
                "score since then: they say why it rose or fell.",
    "bundle": "the same customer in an earlier snapshot of the data (matched by customer id): every feature as it "
              "was then. The effects add up to the change of the score since that snapshot.",
}


def zero(data: dict) -> dict:
    return {"static": np.zeros((1, *data["static"].shape[1:])),
            "temporal": np.zeros((1, *data["temporal"].shape[1:]))}


def mean(data: dict, statistics: dict | None = None) -> dict:
    """Per-feature mean; temporal: per feature over customers and periods, same every period. ``statistics``:
    means stored with the bundle (``stored_statistic``), used instead of reading the data again."""
    return _per_feature(data, "mean", statistics)


def median(data: dict, statistics: dict | None = None) -> dict:
    return _per_feature(data, "median", statistics)


def _per_feature(data, kind, statistics=None):
    out = {}
    for key in ("static", "temporal"):
        values = data[key]
        found = stored_statistic(statistics, key, kind, None, values.shape[-1])
        found = feature_statistic(values, kind) if found is None else found
        out[key] = found[None] if key == "static" else np.broadcast_to(found, values.shape[1:])[None].copy()
    return out


def feature_statistic(values, kind: str, mask_value: float | None = None) -> np.ndarray:
    """(F,) float64: the ``kind`` ("mean" or "median") of each feature (the last axis) over every customer and
    period, leaving out padded periods (every feature at ``mask_value``). The same numbers as
    ``numpy.mean``/``median`` of the float64 cells, read a chunk of customers at a time: a memory-mapped
    array is never converted whole (the median holds the cells in their own dtype, one feature at a time
    in float64)."""
    width = values.shape[-1]
    step = max(1, CHUNK_VALUES // max(1, int(np.prod(values.shape[1:]))))
    sums, kept = FeatureSums(width), []
    for start in range(0, len(values), step):
        part = np.asarray(values[start:start + step])
        if kind == "mean":
            sums.add(part, mask_value)
        else:
            cells = part.reshape(-1, width) if mask_value is None else part[~np.all(part == mask_value, axis=-1)]
            kept.append(cells.copy() if isinstance(values, np.memmap) and cells.base is not None else cells)
        release_pages(values, part)
    if kind == "mean":
        return sums.mean()
    cells = np.concatenate(kept) if kept else np.zeros((0, width))
    return np.array([np.median(cells[:, j].astype(np.float64)) if len(cells) else np.nan for j in range(width)])


class FeatureSums:
    """The float64 sum and count of each feature's real cells, fed a chunk of customers at a time: what
    :func:`feature_statistic` adds up for a mean, row after row (numpy sums an axis-0 reduction in that order),
    so the same cells read in any chunks give the same bits. The bundle's first-open check feeds it the values it
    reads anyway, and stores the mean (``stored_statistic``)."""

    def __init__(self, width: int) -> None:
        self.total, self.count = np.zeros((1, width)), 0

    def add(self, part: np.ndarray, mask_value: float | None = None, padded: np.ndarray | None = None) -> None:
        """Add the cells of ``part`` ((rows, ..., F)), less padded periods (every feature at ``mask_value``;
        ``padded``: that (rows, T) test, already made)."""
        width = self.total.shape[1]
        if mask_value is None:
            cells = part.reshape(-1, width)
        else:
            cells = part[~(np.all(part == mask_value, axis=-1) if padded is None else padded)]
        self.count += len(cells)
        self.total = np.add.reduce(np.concatenate([self.total, cells.astype(np.float64)]), axis=0, keepdims=True)

    def mean(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.total[0] / self.count if self.count else np.full(self.total.shape[1], np.nan)


def stored_statistic(statistics: dict | None, key: str, kind: str, mask_value: float | None,
                     width: int) -> np.ndarray | None:
    """The ``kind`` of input ``key`` from ``statistics`` (``{key: {"mean": (F,), "mask_value": value}}``, what a
    bundle's array cache stored from its first open), if it was computed with this ``mask_value`` for ``width``
    features; else None (then it is computed from the data)."""
    entry = (statistics or {}).get(key)
    if not entry or kind not in entry or entry.get("mask_value") != mask_value:
        return None
    found = np.asarray(entry[kind], np.float64)
    return found if found.shape == (width,) else None


def release_pages(values, part: np.ndarray) -> None:
    """Drop from this process the pages of ``part``, rows of the read-only memory-mapped ``values`` just read: they
    stay in the page cache (a later read maps them again), and the process holds one chunk of a 7 GB history at a
    time instead of every page it has read. Nothing for arrays in memory."""
    handle = getattr(values, "_mmap", None)
    if handle is None or getattr(values, "mode", None) != "r" or not part.size or not hasattr(handle, "madvise"):
        return
    base = np.frombuffer(handle, np.uint8).ctypes.data
    first = part.ctypes.data - base
    if not 0 <= first < len(handle):
        return
    start = first - first % mmap.PAGESIZE
    handle.madvise(mmap.MADV_DONTNEED, start, min(len(handle), first + part.nbytes) - start)


def customer(data: dict, index: int) -> dict:
    return {"static": np.asarray(data["static"][index:index + 1], np.float64),
            "temporal": np.asarray(data["temporal"][index:index + 1], np.float64)}


def cohort(data: dict, mask) -> dict:
    """Mean of the rows selected by ``mask`` (temporal: per period and feature)."""
    rows = np.flatnonzero(np.asarray(mask, bool))
    return {"static": np.asarray(data["static"][rows], np.float64).mean(axis=0)[None],
            "temporal": np.asarray(data["temporal"][rows], np.float64).mean(axis=0)[None]}


def flat(inputs: dict) -> dict:
    """Each customer's own history held at its mean over periods; static at its own values."""
    temporal = np.asarray(inputs["temporal"], np.float64)
    return {"static": np.asarray(inputs["static"], np.float64),
            "temporal": np.broadcast_to(temporal.mean(axis=1, keepdims=True), temporal.shape).copy()}


def blur(inputs: dict, width: float = DEFAULT_BLUR_WIDTH) -> dict:
    """Each customer's history smoothed along time by a Gaussian of ``width`` periods (sigma).

    The edges are reflected (scipy's mode "reflect"), so a constant history stays constant
    and a very wide blur tends to the customer's own mean. Static at its own values.
    """
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not width > 0:
        raise AttributionError(BAD_WIDTH.format(width=width))
    temporal = np.asarray(inputs["temporal"], np.float64)
    periods = temporal.shape[1]
    radius = int(min(np.ceil(4.0 * width), 50 * periods))  # truncated at 4 sigma, as scipy's gaussian_filter
    offsets = np.arange(-radius, radius + 1)
    kernel = np.exp(-0.5 * (offsets / width) ** 2)
    # weights[t, u]: contribution of period u to smoothed period t, with reflection at the ends
    weights = np.zeros((periods, periods))
    for t in range(periods):
        for o, w in zip(offsets, kernel):
            u = t + o
            while u < 0 or u >= periods:
                u = -u - 1 if u < 0 else 2 * periods - u - 1
            weights[t, u] += w
    weights /= weights.sum(axis=1, keepdims=True)
    return {"static": np.asarray(inputs["static"], np.float64),
            "temporal": np.einsum("tu,nuf->ntf", weights, temporal)}


def sample(data: dict, k: int = DEFAULT_SAMPLES, seed: int = 0) -> dict:
    """K customers drawn without replacement (seeded): ``(1, K, S)`` and ``(1, K, T, F)``."""
    n = data["static"].shape[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_SAMPLES:
        raise AttributionError(BAD_SAMPLES.format(high=MAX_SAMPLES, k=k))
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(k, n), replace=False))
    return {"static": np.asarray(data["static"][rows], np.float64)[None],
            "temporal": np.asarray(data["temporal"][rows], np.float64)[None]}


def previous(inputs: dict, k: int = 1, layout=None) -> dict:
    """The customers as they were ``k`` periods earlier (``previous:K``): each history shifted ``k`` periods later,
    its first ``k`` periods, which the data does not hold, repeating the first period held, or padding for a
    history the model reads padding in (a Masking layer: the mask value; ``mask_zero`` ids: the padding id);
    static inputs unchanged. One baseline per customer: ``(n, ...)`` arrays in the inputs' dtypes.

    With padding the earlier history is ``k`` periods shorter, as it was then: the periods it did not have yet
    are padding in the baseline and real in the customer (``explain.core.change`` explains them)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise AttributionError(BAD_PREVIOUS.format(high=MAX_PREVIOUS, k=k))
    if layout is None:
        return {"static": np.asarray(inputs["static"]).copy(),
                "temporal": _shift_later(np.asarray(inputs["temporal"]), int(k), None)}
    out = {}
    for spec in layout.specs:
        values = np.asarray(inputs[spec.key])
        out[spec.key] = values.copy() if spec.role == "static" else _shift_later(values, int(k), _padding_value(spec))
    return out


def _padding_value(spec):
    """What a padded period of ``spec``'s history holds (None: the model reads no padding)."""
    if spec.kind != "categorical":
        return spec.mask_value
    if not spec.mask_zero:
        return None
    return getattr(spec.lookup, "mask_token", None) if spec.lookup is not None else 0


def _shift_later(values: np.ndarray, k: int, pad) -> np.ndarray:
    """(n, T, ...) -> the same shape: period t holds period t - k; the first k hold ``pad``, or period 0
    when ``pad`` is None."""
    out = np.empty_like(values)
    periods = values.shape[1]
    if k < periods:
        out[:, k:] = values[:, :periods - k]
    out[:, :min(k, periods)] = values[:, :1] if pad is None else pad
    return out


def parse_spec(spec: str | Baseline) -> tuple[str, str | float | int | None]:
    """'customer:C00042' -> ('customer', 'C00042'); 'mean' -> ('mean', None) (``Baseline.parse``)."""
    parsed = Baseline.parse(spec)
    return parsed.kind, parsed.argument


def from_spec(spec: str | Baseline, data: dict, inputs: dict, *, ids=None, labels=None, seed: int = 0,
              layout=None, categorical: str = "mode", statistics: dict | None = None) -> dict:
    """Build the baseline named by ``spec`` (a ``Baseline`` or its text, the CLI's ``--baseline``).

    ``layout`` (``explain.core.inputs.input_layout(model)``): build it for every input of that model,
    categorical and padded ones included, with the ``categorical`` rule (module docstring).
    ``statistics``: data-wide means stored with the bundle (``stored_statistic``): the mean baseline takes them
    instead of reading every customer's history again.
    """
    spec = Baseline.parse(spec)
    kind, arg = spec.kind, spec.argument
    if layout is not None and kind == "previous":
        return previous(inputs, spec.periods_back, layout)
    if layout is not None and kind != "bundle":
        return _for_layout(spec, data, inputs, layout, _Source(ids, labels, seed, categorical, statistics))
    if kind == "zero":
        return zero(data)
    if kind in ("mean", "median"):
        return {"mean": mean, "median": median}[kind](data, statistics)
    if kind == "customer":
        return customer(data, _customer_index(arg, ids, _n_rows(data)))
    if kind == "cohort":
        return cohort(data, _cohort_rows(arg, labels))
    if kind == "flat":
        return flat(inputs)
    if kind == "blur":
        return blur(inputs, spec.width)
    if kind == "previous":
        return previous(inputs, spec.periods_back)
    if kind == "bundle":
        raise AttributionError(SNAPSHOT_ONLY_WITH_BUNDLE.format(spec=spec))
    return sample(data, arg, seed)


def _n_rows(data: dict) -> int:
    return int(len(next(iter(data.values()))))


def _customer_index(arg, ids, n) -> int:
    id_list = [str(i) for i in (ids if ids is not None else range(n))]
    if arg not in id_list:
        raise AttributionError(UNKNOWN_CUSTOMER.format(customer=arg, examples=", ".join(id_list[:5])))
    return id_list.index(arg)


def _cohort_rows(arg, labels) -> np.ndarray:
    if labels is None:
        raise AttributionError(NO_LABELS)
    mask = cohort_mask(labels, arg)
    if not mask.any():
        present = ", ".join(sorted({labels_text(v) for v in labels}))
        raise AttributionError(EMPTY_COHORT.format(value=arg, present=present))
    return mask


# ---- any model's inputs: categorical and padded ones ------------------------------------

def parse_categorical(rule: str, layout=None) -> tuple[str, dict]:
    """'mode' -> ('mode', {}); 'category:plan=basic;contract=0' -> ('category', {'plan': 'basic', ...}).

    With ``layout``, every named feature must be a categorical input of the model."""
    kind, _, arg = parse_rule(rule or "mode").partition(":")
    chosen = {}
    for item in filter(None, arg.split(";")):
        feature, _, value = item.partition("=")
        chosen[feature.strip()] = value.strip()
    if layout is not None:
        names = [s.key for s in layout.specs if s.kind == "categorical"]
        for feature in chosen:
            if feature not in names:
                raise AttributionError(UNKNOWN_CATEGORY_FEATURE.format(feature=feature,
                                                                       names=", ".join(names) or "none"))
    return kind, chosen


class _Source(NamedTuple):
    """What a baseline reads besides the data and the customers' inputs: the customers' ``ids`` and ``labels``
    (customer:ID, cohort:LABEL), the ``seed`` of sample:K, the ``categorical`` rule and the stored
    ``statistics``."""

    ids: object
    labels: object
    seed: int
    categorical: str
    statistics: dict | None


class _Pick(NamedTuple):
    """Which customers of the data set a baseline reads: the spec's ``kind``, its ``rows`` (customer, cohort,
    sample; else None) and the blur ``width`` (blur only)."""

    kind: str
    rows: np.ndarray | None
    width: float | None


def _for_layout(spec, data, inputs, layout, source: _Source) -> dict:
    kind, arg = spec.kind, spec.argument
    rule, chosen = parse_categorical(source.categorical, layout)
    n = _n_rows(data)
    rows = None
    if kind == "customer":
        rows = np.array([_customer_index(arg, source.ids, n)])
    elif kind == "cohort":
        rows = np.flatnonzero(_cohort_rows(arg, source.labels))
    elif kind == "sample":
        rows = np.sort(np.random.default_rng(source.seed).choice(n, size=min(arg, n), replace=False))
    pick = _Pick(kind, rows, spec.width if kind == "blur" else None)
    out = {}
    for item in layout.specs:
        if item.kind == "categorical":
            out[item.key] = _categorical(pick, item, data[item.key], inputs[item.key], rule, chosen)
        else:
            out[item.key] = _numeric(pick, item, data[item.key], inputs[item.key], source.statistics)
    return out


def _numeric(pick: _Pick, spec, values, own, statistics=None):
    kind, rows, width = pick
    # only the rows used are read (values may be memory-mapped): data-wide statistics stored, or a chunk at a time
    if kind in ("mean", "median"):
        mask_value = None if spec.role == "static" else spec.mask_value
        found = stored_statistic(statistics, spec.key, kind, mask_value, values.shape[-1])
        found = feature_statistic(values, kind, mask_value) if found is None else found
        if spec.role == "static":
            return found[None]
        return _off_mask(np.broadcast_to(found, values.shape[1:])[None].copy(), spec.mask_value)  # (T, F)
    if spec.role == "static":
        if kind == "zero":
            return np.zeros((1, *values.shape[1:]))
        if kind in ("flat", "blur"):
            return np.asarray(own, np.float64)
        chosen = np.asarray(values[rows], np.float64)
        return chosen.mean(axis=0)[None] if kind == "cohort" else (chosen if kind == "customer" else chosen[None])
    if kind == "zero":
        b = np.zeros((1, *values.shape[1:]))
    elif kind == "flat":
        own = np.asarray(own, np.float64)
        b = np.broadcast_to(_own_mean(own, _real_months(spec, own))[:, None], own.shape).copy()
    elif kind == "blur":
        own = np.asarray(own, np.float64)
        b = blur({"static": np.zeros((len(own), 0)), "temporal": _fill_padded(own, _real_months(spec, own))},
                 width)["temporal"]
    elif kind == "cohort":
        chosen = np.asarray(values[rows], np.float64)
        ok = _real_months(spec, chosen)
        count = ok.sum(axis=0)[:, None]  # (T, 1): cohort customers with data in each period
        overall = chosen[ok].mean(axis=0)  # (F,)
        b = np.where(count > 0, (chosen * ok[..., None]).sum(axis=0) / np.maximum(count, 1), overall)[None]
    else:  # customer, sample: those customers, their padded months at their own mean
        chosen = np.asarray(values[rows], np.float64)
        b = _fill_padded(chosen, _real_months(spec, chosen))
        b = b if kind == "customer" else b[None]
    return _off_mask(b, spec.mask_value)


def _real_months(spec, values) -> np.ndarray:
    padded = spec.padding(values)
    return np.ones(values.shape[:2], bool) if padded is None else ~padded


def _own_mean(values, real) -> np.ndarray:
    """(n, F): each customer's mean over its real months (0 for a customer without any)."""
    return (values * real[..., None]).sum(axis=1) / np.maximum(real.sum(axis=1), 1)[:, None]


def _fill_padded(values, real) -> np.ndarray:
    return np.where(real[..., None], values, _own_mean(values, real)[:, None])


def _off_mask(b, mask_value):
    """No real month equal to the mask value in every feature: move such months off it."""
    if mask_value is None:
        return b
    at_mask = np.all(b == mask_value, axis=-1)
    if at_mask.any():
        b = b.copy()
        b[at_mask] = mask_value + MASK_OFFSET * max(1.0, abs(mask_value))
    return b


def _categorical(pick: _Pick, spec, values, own, rule, chosen):
    kind, rows = pick.kind, pick.rows
    values = np.asarray(values)
    real = ~_padded_ids(spec, values)
    if kind in ("flat", "blur"):
        return np.asarray(own)  # the customer's own categories: no attribution
    if kind in ("customer", "sample"):
        picked = np.where(real[rows], values[rows], _mode(spec, values, real)[0])
        return picked if kind == "customer" else picked[None]
    if kind == "cohort":
        values, real = values[rows], real[rows]
    if rule == "mean-embedding":
        return MeanEmbedding(values)
    mode = _mode(spec, values, real)
    if rule == "category" and spec.key in chosen:
        value = chosen[spec.key]
        if spec.dtype != "string":
            try:
                value = int(value)
            except ValueError:
                raise AttributionError(BAD_CATEGORICAL.format(rule=f"category:{spec.key}={value}")) from None
        return np.full_like(mode, value)
    return mode


def _padded_ids(spec, values) -> np.ndarray:
    if not spec.mask_zero:
        return np.zeros(values.shape, bool)
    token = getattr(spec.lookup, "mask_token", None) if spec.lookup is not None else 0
    return values == token if token is not None else np.zeros(values.shape, bool)


def _mode(spec, values, real) -> np.ndarray:
    """The most frequent real category: per column (static), or over every real cell (history)."""
    def most_frequent(cells):
        found, counts = np.unique(cells, return_counts=True)
        return found[np.argmax(counts)] if found.size else values.reshape(-1)[0]

    if spec.role == "static":
        return np.array([[most_frequent(values[real[:, j], j]) for j in range(values.shape[1])]], dtype=values.dtype)
    return np.full((1, *values.shape[1:]), most_frequent(values[real]), dtype=values.dtype)


def describe(spec: str | Baseline, *, layout=None, categorical: str = "mode", unit: str = "month",
             analyst: bool = False, padding: str = "start") -> str:
    """What the baseline is, for the 'how to read this' text; with ``layout`` also what its
    categorical features are set to and how padded periods are handled. ``unit``: the history's
    period (``explain.core.periods``: day, week, month, ...), as the words say it. ``analyst``: the
    Customer page's words, padding said as "no data yet" (no layer names, mask values or offsets:
    the engineers' pages keep those); ``padding``: the side short histories are padded on ("start", "end")."""
    spec = Baseline.parse(spec)
    said = Words(unit)
    period = {"adjective": said.adjective, "unit": said.unit, "units": said.units, "Units": said.units.capitalize()}
    back = spec.periods_back if spec.kind == "previous" else 1
    before = f"the {said.unit} before it" if back == 1 else f"the {said.unit} {back} {said.units} before it"
    text = DESCRIPTIONS[spec.kind].format(back=f"one {said.unit}" if back == 1 else f"{back} {said.units}",
                                          before=before, **period)
    if spec.argument is not None and spec.kind != "previous":
        text = f"({spec.kind} {str(spec).partition(':')[2]}) " + text
    if layout is None:
        return text
    names = [s.key for s in layout.specs if s.kind == "categorical"]
    if names and spec.kind not in ("flat", "blur", "customer", "sample"):
        rule, chosen = parse_categorical(categorical, layout)
        shown = ", ".join(f"{k}={v}" for k, v in chosen.items())
        text += " " + CATEGORICAL_WORDS[rule].format(names=", ".join(names), chosen=shown)
    padded = any(s.padded_by for s in layout.specs)
    if analyst and padded:
        text += " " + NO_DATA_WORDS.get(padding, NO_DATA_WORDS["start"]).format(**period)
    for s in layout.specs if not analyst else ():
        if s.mask_value is not None:
            text += " " + MASK_WORDS.format(padded_by=s.padded_by, value=s.mask_value,
                                             offset=MASK_OFFSET * max(1.0, abs(s.mask_value)), **period)
        elif s.mask_zero:
            text += (f" {period['Units']} that are padding for the customer (id 0 of {s.key}, {s.padded_by}) stay "
                     "padding and get no attribution; the mask value is never a baseline category.")
    if spec.kind in SHORT_HISTORY_WHERE and padded:
        words = SHORT_HISTORY_ANALYST if analyst else SHORT_HISTORY_WORDS
        text += " " + words.format(where=SHORT_HISTORY_WHERE[spec.kind].format(**period), **period)
    return text
