"""Champion against challenger: does a retrained model still score customers for the same reasons?

:func:`compare_models` explains one seeded sample of a bundle's customers with both models, under the same
settings and against the same baseline arrays (the champion's: a baseline built from the data is the same for any
model; a mean embedding, which depends on a model's own embedding, is built for each), and measures:

* **Scores and disagreements**: each model's score of every customer (the explained output, in the space
  explained) and the customers one model flags (score >= the threshold) and the other does not, each with both
  models' top-3 reasons side by side. The threshold: the caller's, else ``DEFAULT_THRESHOLD`` (0.5) for a
  probability, 0 for a logit / log-odds (the same decision for a sigmoid): bundles hold no decision threshold.
* **Global rankings**: each model's features by mean |attribution| over the sample, a history's feature summed
  over its periods first; ``share`` = a feature's mean |attribution| / the sum over features. The ranking and the
  summing are those of the "What drives churn" summary (``explain.analysis.drivers.rank`` and its reading of
  rows), so the two pages never rank differently.
* **Kendall's tau-b** between the two models' mean |attribution| per feature (ties counted as tau-b counts them),
  with a percentile bootstrap interval over customers (``RESAMPLES`` seeded resamples of the customers, both models'
  means from the same resampled customers; ``LEVEL`` = 95 %: the 2.5th and 97.5th percentiles).
* **Top-3 overlap**: per customer, how many of the champion's three largest effects (by |attribution|, features
  with a non-zero effect only) are among the challenger's three; reported as the mean overlap (out of 3), the share
  of customers with at least 2 of 3 in common (the headline: "their top reasons overlap") and with all 3.
* **Changed**: every feature by |challenger share - champion share|, largest first, in words ("Tenure no
  longer matters: 13 % -> 0 %", "Support calls matter more: 5 % -> 20 %").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from explain.analysis import drivers
from explain.analysis.cohort import sample_ids
from explain.analysis.explainer import explain_customers
from explain.core.engine import StopCheck
from explain.core.errors import ExplainError, UnsafeModelError
from explain.core.inputs import input_layout
from explain.core.settings import Settings
from explain.core.text import first_line
from explain.modelfile.limits import DEFAULT_LIMITS, Limits

DEFAULT_CUSTOMERS = 200
DEFAULT_THRESHOLD = 0.5  # a probability; 0.0 in logit / log-odds space
RESAMPLES = 200          # bootstrap resamples of the customers
LEVEL = 0.95             # the bootstrap interval's level (percentiles 2.5 and 97.5)
SEED = 0
TOP_REASONS = 3          # reasons per customer compared and listed
OVERLAP_HEADLINE = 2     # "their top reasons overlap": at least this many of the TOP_REASONS in common
AGREE_TAU = 0.8          # tau from which the two models "agree on the order of the drivers"
NO_LONGER = 0.005        # a share under this (it prints as 0 %) "no longer matters" / did not matter before
SAID_CHANGE = 0.01       # changes of at least this (1 percentage point) are said in words
WORDS_CHANGES = 3        # changes said in the sentence

OTHER_INPUTS = ("The challenger {name} does not take the inputs of the bundle's model, so it cannot be compared "
                "with it: {differences}. A challenger must read the same data: the same inputs in the same order, "
                "with the same shapes (and, for a model called with a dict, the same input names), and the same "
                "output width. To fix: retrain the challenger on the bundle's features, or build a bundle for it.")
NO_INPUTS = ("The challenger {name} has no symbolic inputs (a subclassed model that was never built): it cannot be "
             "checked against the bundle's inputs. To fix: save a functional or Sequential Keras model.")
CHALLENGER_MISSING = ("The challenger model {path} is not a file. Give a Keras model file: model.keras (Keras 3) or "
                      "model.h5 (legacy HDF5), taking the same inputs as the bundle's model.")
CHALLENGER_UNREADABLE = ("The challenger model {path} could not be opened: {reason}. Save it from Keras 3 with "
                         "model.save('challenger.keras') (or give a legacy .h5 file).")
CHALLENGER_REFUSED = "The challenger model {path} was refused before loading: {reason}"
BAD_CUSTOMERS = "customers={value!r} must be a whole number of at least 2 (the customers sampled and explained)."
BAD_THRESHOLD = "threshold={value!r} must be a finite number (the score from which a model flags a customer)."


class Reason(NamedTuple):
    """One of a customer's largest effects under one model."""

    label: str           # the feature's display name
    attribution: float   # its effect (a history's summed over its periods): > 0 raises the score


@dataclass(frozen=True)
class Disagreement:
    """A customer one model flags and the other does not, with both models' reasons."""

    customer: str
    champion_score: float
    challenger_score: float
    champion_reasons: tuple   # (Reason, ...) largest |effect| first
    challenger_reasons: tuple

    @property
    def flagged_by(self) -> str:
        """"champion" or "challenger": the model that flags the customer."""
        return "champion" if self.champion_score > self.challenger_score else "challenger"

    def to_dict(self) -> dict:
        return {"customer": self.customer, "flagged_by": self.flagged_by,
                "champion_score": self.champion_score, "challenger_score": self.challenger_score,
                "champion_reasons": [_reason_dict(r) for r in self.champion_reasons],
                "challenger_reasons": [_reason_dict(r) for r in self.challenger_reasons]}


@dataclass(frozen=True)
class ShareChange:
    """One feature's share of the attribution under each model."""

    feature: drivers.Feature
    champion_share: float
    challenger_share: float

    @property
    def change(self) -> float:
        return self.challenger_share - self.champion_share

    @property
    def words(self) -> str:
        """"Tenure (months) no longer matters: 13 % -> 0 %" and the like."""
        before, after = _percent(self.champion_share), _percent(self.challenger_share)
        label = self.feature.label
        verb = "matter" if _plural(label) else "matters"  # "Support calls matter more", "Tenure matters less"
        if abs(self.change) < SAID_CHANGE:
            how = f"{verb} as much"
        elif self.challenger_share < NO_LONGER:
            how = f"no longer {verb}"
        elif self.champion_share < NO_LONGER:
            how = f"now {verb}"
        else:
            how = f"{verb} more" if self.change > 0 else f"{verb} less"
        return f"{label} {how}: {before} -> {after}"

    def to_dict(self) -> dict:
        return {"feature": self.feature.name, "label": self.feature.label, "input": self.feature.input,
                "champion_share": self.champion_share, "challenger_share": self.challenger_share,
                "change": self.change, "words": self.words}


class Interval(NamedTuple):
    """A statistic and its bootstrap interval (NaN where undefined: a model without any effect)."""

    value: float
    low: float
    high: float

    def to_dict(self) -> dict:
        return {"value": _float(self.value), "low": _float(self.low), "high": _float(self.high),
                "level": LEVEL, "resamples": RESAMPLES}


class Overlap(NamedTuple):
    """How the customers' top-3 reasons overlap between the two models."""

    mean: float           # mean count in common, out of TOP_REASONS
    at_least_two: float   # share of customers with at least OVERLAP_HEADLINE in common (the headline)
    all_three: float      # share with all TOP_REASONS in common

    def to_dict(self) -> dict:
        return {"mean": self.mean, "share": self.at_least_two, "all": self.all_three,
                "defined": f"share: customers with at least {OVERLAP_HEADLINE} of their {TOP_REASONS} largest "
                           f"effects (by |attribution|) in common; mean: features in common, out of {TOP_REASONS}; "
                           f"all: customers with all {TOP_REASONS} in common"}


@dataclass(frozen=True)
class ModelComparison:
    """The champion (the bundle's model) against a challenger on one seeded sample of customers."""

    customers: tuple           # (id, ...) the sample, in table order
    champion_scores: np.ndarray    # (n,) the explained output, in ``space``
    challenger_scores: np.ndarray
    threshold: float
    space: str
    champion_ranking: tuple    # (drivers.Ranked, ...) largest mean |attribution| first
    challenger_ranking: tuple
    changed: tuple             # (ShareChange, ...) largest |change| first
    kendall_tau: Interval
    top3_overlap: Overlap
    disagreements: tuple       # (Disagreement, ...) largest score gap first
    settings: Settings
    challenger_name: str = "the challenger"

    @property
    def agreement(self) -> str:
        """The ranking's agreement in plain words, from tau and its interval."""
        tau = self.kendall_tau
        if not np.isfinite(tau.value):
            return "the order of the drivers cannot be compared (a model without any effect on these customers)"
        said = f"Kendall's tau {tau.value:.2f}, {_percent(LEVEL)} interval {tau.low:.2f} to {tau.high:.2f}"
        if tau.low >= AGREE_TAU:
            return f"the two models agree on the order of the drivers ({said})"
        if tau.high < AGREE_TAU:
            return f"the two models do not agree on the order of the drivers ({said})"
        return f"the two models partly agree on the order of the drivers ({said}; the interval spans {AGREE_TAU})"

    @property
    def change_words(self) -> list[str]:
        """The changes of at least ``SAID_CHANGE`` in words, largest first (at most ``WORDS_CHANGES``)."""
        return [c.words for c in self.changed if abs(c.change) >= SAID_CHANGE][:WORDS_CHANGES]

    @property
    def sentence(self) -> str:
        n, flags = len(self.customers), len(self.disagreements)
        by_champion = sum(d.flagged_by == "champion" for d in self.disagreements)
        changes = "; ".join(self.change_words) or "No feature's share changed by 1 percentage point or more"
        who = "the challenger" + ("" if self.challenger_name == "the challenger" else f" ({self.challenger_name})")
        return (f"Against the bundle's model (the champion), on {n:,} sampled customers, {who}: {self.agreement}. "
                f"{changes}. Their top-{TOP_REASONS} reasons overlap (at least "
                f"{OVERLAP_HEADLINE} in common) for {_percent(self.top3_overlap.at_least_two)} of the customers. "
                f"They disagree on {flags} of the {n:,} customers at the threshold {self.threshold:g} "
                f"({by_champion} flagged by the champion only, {flags - by_champion} by the challenger only).")

    def to_dict(self) -> dict:
        return {
            "customers": len(self.customers), "ids": list(self.customers), "threshold": self.threshold,
            "space": self.space, "settings": self.settings.as_dict(), "challenger": self.challenger_name,
            "sentence": self.sentence, "agreement": self.agreement,
            "kendall_tau": self.kendall_tau.to_dict(), "top3_overlap": self.top3_overlap.to_dict(),
            "changed": [c.to_dict() for c in self.changed],
            "disagreements": [d.to_dict() for d in self.disagreements],
            "champion_ranking": [_ranked_dict(r) for r in self.champion_ranking],
            "challenger_ranking": [_ranked_dict(r) for r in self.challenger_ranking],
            "scores": {"champion": [float(v) for v in self.champion_scores],
                       "challenger": [float(v) for v in self.challenger_scores]}}


# ----------------------------------------------------------------------------- the comparison


def open_challenger(path, *, loader=None, limits: Limits = DEFAULT_LIMITS):
    """The challenger model file at ``path``, opened by the rules of a bundle's model
    (``explain.bundle.load``): ``loader(path)`` when given (the owner's ``--trust-code`` loader, under the owner's
    limits), else ``safe_load.open_model`` under ``limits`` (safe mode; ``.h5``/``.hdf5``: a legacy HDF5 model).
    ``ExplainError`` naming the file: missing, refused before loading (``UnsafeModelError``), or unreadable."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ExplainError(CHALLENGER_MISSING.format(path=path))
    from explain.modelfile import safe_load  # imports keras (seconds); only when a model is opened

    try:
        return loader(path) if loader is not None else safe_load.open_model(path, limits=limits)
    except UnsafeModelError as error:  # its message names the file and says how to fix it
        raise ExplainError(CHALLENGER_REFUSED.format(path=path, reason=str(error).strip())) from None
    except ExplainError:
        raise
    except Exception as error:  # noqa: BLE001 - a damaged zip, unknown layers, ...
        raise ExplainError(CHALLENGER_UNREADABLE.format(path=path, reason=first_line(error))) from None



def compare_models(bundle, challenger, *, customers: int = DEFAULT_CUSTOMERS, settings: Settings | None = None,
                   seed: int = SEED, threshold: float | None = None, batch_size: int | None = None,
                   should_stop: StopCheck = None, name: str = "the challenger") -> ModelComparison:
    """The bundle's model (the champion) against ``challenger`` (a Keras model taking the same inputs) on
    ``customers`` customers sampled with ``seed``, both explained under ``settings`` (default: ``Settings()``).
    ``threshold``: the score from which a model flags a customer (default: see the module docstring).
    ``name``: how the challenger is called in the words (its file, for the command line).
    ``ExplainError`` when the challenger does not take the bundle's inputs (:func:`check_challenger`)."""
    if isinstance(customers, bool) or not isinstance(customers, (int, np.integer)) or customers < 2:
        raise ExplainError(BAD_CUSTOMERS.format(value=customers))
    if threshold is not None and (isinstance(threshold, bool) or not np.isfinite(_number(threshold))):
        raise ExplainError(BAD_THRESHOLD.format(value=threshold))
    check_challenger(bundle, challenger, name)
    settings = (settings or Settings()).for_bundle(bundle)
    ids = sample_ids(bundle, str(int(customers)), seed)
    first = explain_customers(bundle, ids, settings, batch_size=batch_size, should_stop=should_stop)
    other = challenger_bundle(bundle, challenger)
    same_baseline = first.baselines if bundle.plain else None  # a mean embedding is each model's own
    second = explain_customers(other, ids, settings, batch_size=batch_size, should_stop=should_stop,
                               baseline=same_baseline)
    if threshold is None:
        threshold = DEFAULT_THRESHOLD if first.space_used == "output" else 0.0
    layout = drivers.Layout.of(bundle)
    a, b = feature_attributions(first, bundle, ids, layout), feature_attributions(second, bundle, ids, layout)
    features = layout.features
    champion, chall = drivers.rank(features, a), drivers.rank(features, b)
    return ModelComparison(
        customers=tuple(ids), champion_scores=np.asarray(first.prediction, np.float64),
        challenger_scores=np.asarray(second.prediction, np.float64), threshold=float(threshold),
        space=first.space_used, champion_ranking=champion, challenger_ranking=chall,
        changed=share_changes(champion, chall), kendall_tau=bootstrap_tau(a, b, seed=seed),
        top3_overlap=top_overlap(a, b),
        disagreements=disagreements(ids, (first.prediction, second.prediction), (a, b), features, float(threshold)),
        settings=first.settings, challenger_name=name)


def check_challenger(bundle, challenger, name: str = "the challenger") -> None:
    """``ExplainError`` (OTHER_INPUTS, naming every difference) unless ``challenger`` takes the inputs of the
    bundle's model: as many, in the same order, each with the same role and shape (batch dimension aside), the
    same dict keys for a model called with a dict, the same engine keys (input names where the engine keys its
    inputs by name), and the same output width."""
    champion = bundle.layout if bundle.layout is not None else input_layout(bundle.model)
    other = input_layout(challenger, getattr(bundle, "roles", None) or None)
    if not other.shapes:
        raise ExplainError(NO_INPUTS.format(name=name))
    differences = []
    if len(other.shapes) != len(champion.shapes):
        differences.append(f"it has {len(other.shapes)} input(s), the bundle's model {len(champion.shapes)}")
    for k, (mine, theirs) in enumerate(zip(champion.specs, other.specs)):
        where = f"input {k + 1} ({theirs.name})"
        if tuple(theirs.shape) != tuple(mine.shape):
            differences.append(f"{where} has shape {_shape(theirs.shape)}, the bundle's model {_shape(mine.shape)}")
        if theirs.role != mine.role:
            differences.append(f"{where} is {theirs.role}, the bundle's model's input {k + 1} is {mine.role}")
        elif theirs.key != mine.key:
            differences.append(f"{where} is named {theirs.key!r}, the bundle's model's input {k + 1} {mine.key!r}")
    if (champion.keys is None) != (other.keys is None) or (champion.keys and set(champion.keys) != set(other.keys)):
        differences.append(f"it is called with {_called(other.keys)}, the bundle's model with {_called(champion.keys)}")
    width, wanted = _output_width(challenger), _output_width(bundle.model)
    if width != wanted:
        differences.append(f"its output has shape (None, {width}), the bundle's model's (None, {wanted})")
    if differences:
        raise ExplainError(OTHER_INPUTS.format(name=name, differences="; ".join(differences)))


def challenger_bundle(bundle, challenger):
    """A copy of ``bundle`` holding ``challenger`` as its model (its own input layout, with the bundle's roles);
    no content hash: nothing cached per bundle content is shared with the champion's."""
    layout = input_layout(challenger, getattr(bundle, "roles", None) or None) if bundle.layout is not None else None
    return dataclasses.replace(bundle, model=challenger, layout=layout, content_hash="")


class _Rows(NamedTuple):
    """Explained customers as ``drivers.compute`` reads a store's chunk (``drivers.Chunk``)."""

    ids: np.ndarray
    prediction: np.ndarray
    values: dict
    attributions: dict


def feature_attributions(attribution, bundle, ids, layout=None) -> np.ndarray:
    """(n, p) each customer's effect per feature of ``drivers.Layout.of(bundle)`` (a history's feature summed
    over its periods, padding left out; NaN: no data), read as the "What drives churn" summary reads a store."""
    layout = layout or drivers.Layout.of(bundle)
    attrs = {}
    for key, array in attribution.inputs.items():
        a = np.asarray(array, np.float64)
        pad = attribution.padding.get(key)
        if pad is not None and np.any(pad):  # (n, T) True where the history is padding: no data
            a = np.where(np.asarray(pad, bool).reshape(pad.shape + (1,) * (a.ndim - 2)), np.nan, a)
        attrs[key] = a
    values = {key: np.full(a.shape, np.nan) for key, a in attrs.items()}  # the ranking reads no values
    rows = _Rows(np.asarray(ids, dtype=object), np.asarray(attribution.prediction, np.float64), values, attrs)
    return drivers._stack(drivers._read([rows], layout, None, None).attributions, len(layout.features))


# ----------------------------------------------------------------------------- the measures


def kendall_tau_b(x, y) -> float:
    """Kendall's tau-b of two vectors: (concordant - discordant pairs) / sqrt((pairs - pairs tied in x) *
    (pairs - pairs tied in y)); NaN when either vector is constant."""
    x, y = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    upper = np.triu_indices(x.size, k=1)
    sx = np.sign(x[:, None] - x[None, :])[upper]   # (pairs,)
    sy = np.sign(y[:, None] - y[None, :])[upper]
    denominator = np.sqrt(float(np.count_nonzero(sx)) * float(np.count_nonzero(sy)))
    return float(np.sum(sx * sy) / denominator) if denominator > 0 else float("nan")


def bootstrap_tau(a: np.ndarray, b: np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED,
                  level: float = LEVEL) -> Interval:
    """Kendall's tau-b of the two models' mean |attribution| per feature (``a``, ``b``: (n, p) of the same
    customers), with its percentile bootstrap interval: ``resamples`` resamples of the customers (with
    replacement, drawn with ``seed``), both models' means taken over the same resampled customers."""
    size_a, size_b = np.abs(a), np.abs(b)  # NaN: no data (padding), left out of the means as the ranking does

    def means(rows):
        return tuple(np.nan_to_num(drivers._nanmean(size[rows], 0)) for size in (size_a, size_b))

    value = kendall_tau_b(*means(slice(None)))
    picks = np.random.default_rng(seed).integers(a.shape[0], size=(resamples, a.shape[0]))  # (R, n)
    taus = np.array([kendall_tau_b(*means(rows)) for rows in picks])
    taus = taus[np.isfinite(taus)]
    if not taus.size:
        return Interval(value, float("nan"), float("nan"))
    low, high = np.percentile(taus, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return Interval(value, float(low), float(high))


def top_sets(a: np.ndarray, top: int = TOP_REASONS) -> list[set]:
    """Each customer's ``top`` features (column indices) by |attribution|, features with a non-zero effect only."""
    size = np.nan_to_num(np.abs(a))
    order = np.argsort(-size, axis=1, kind="stable")[:, :top]
    return [{int(j) for j in row if size[i, j] > 0} for i, row in enumerate(order)]


def top_overlap(a: np.ndarray, b: np.ndarray, top: int = TOP_REASONS) -> Overlap:
    """How many of each customer's ``top`` features are the same under both models (see :class:`Overlap`)."""
    common = np.array([len(x & y) for x, y in zip(top_sets(a, top), top_sets(b, top))], np.float64)
    if not common.size:
        return Overlap(float("nan"), float("nan"), float("nan"))
    return Overlap(float(common.mean()), float(np.mean(common >= OVERLAP_HEADLINE)), float(np.mean(common >= top)))


def share_changes(champion: tuple, challenger: tuple) -> tuple:
    """(ShareChange, ...) of every feature, largest |change of share| first (ties: the champion's order)."""
    theirs = {r.feature: r.share for r in challenger}
    rows = [ShareChange(r.feature, r.share, theirs.get(r.feature, 0.0)) for r in champion]
    return tuple(sorted(rows, key=lambda c: -abs(c.change)))


def reasons(a_row: np.ndarray, features, top: int = TOP_REASONS) -> tuple:
    """(Reason, ...) one customer's ``top`` largest effects (``a_row`` (p,)), non-zero ones only."""
    size = np.nan_to_num(np.abs(a_row))
    order = np.argsort(-size, kind="stable")[:top]
    return tuple(Reason(features[j].label, float(a_row[j])) for j in order if size[j] > 0)


def disagreements(ids, scores: tuple, attributions: tuple, features, threshold: float) -> tuple:
    """(Disagreement, ...) of the customers one model flags (score >= ``threshold``) and the other does not,
    largest score gap first. ``scores``, ``attributions``: (champion's, challenger's)."""
    first, second = (np.asarray(s, np.float64) for s in scores)
    differ = np.flatnonzero((first >= threshold) != (second >= threshold))
    differ = differ[np.argsort(-np.abs(first[differ] - second[differ]), kind="stable")]
    return tuple(Disagreement(str(ids[i]), float(first[i]), float(second[i]),
                              reasons(attributions[0][i], features), reasons(attributions[1][i], features))
                 for i in differ)


# ----------------------------------------------------------------------------- helpers


def _plural(label: str) -> bool:
    """Whether a feature's name is a plural noun ("Support calls", "Number of products" is not: its head is
    "Number"): the last word before a unit in brackets and before "of", ending in s but not ss/us/is."""
    words = label.split(" (")[0].split(" of ")[0].split()
    last = words[-1].lower() if words else ""
    return last.endswith("s") and not last.endswith(("ss", "us", "is"))


def _percent(share: float) -> str:
    return f"{100 * share:.0f} %" if np.isfinite(share) else "n/a"


def _float(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _shape(shape) -> str:
    return "(None, " + ", ".join(str(d) for d in shape) + ")"


def _called(keys) -> str:
    return "a list" if keys is None else "a dict of " + ", ".join(repr(k) for k in keys)


def _output_width(model) -> str:
    try:
        return "x".join(str(d) for d in model.outputs[0].shape[1:])
    except Exception:  # noqa: BLE001 - a model without symbolic outputs
        return "unknown"


def _reason_dict(reason: Reason) -> dict:
    return {"feature": reason.label, "attribution": reason.attribution}


def _ranked_dict(r) -> dict:
    return {"feature": r.feature.name, "label": r.feature.label, "input": r.feature.input,
            "mean_abs": r.mean_abs, "mean_signed": r.mean_signed, "share": r.share}
