"""What would change the outcome: a greedy search for a small edit that brings one customer's
prediction below a threshold. No streamlit.

Each round explains the current inputs (one IG call), ranks every candidate edit by the fall
its attributions predict and scores the best of them in one batched model call; see
:func:`search`. The result is an :class:`explain.analysis.whatif.Scenario` (so the What-if page can show
it) and comes with :data:`CAUTION`: it is what the model does, not what the customer will do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from explain.analysis.whatif import ROLES, Context, Edit, Scenario, apply, explain_inputs, predict
from explain.core.engine import StopCheck
from explain.core.errors import ExplainError
from explain.core.ig import Attribution

SEARCH_WINDOWS = (1, 2, 3, 6)  # month window lengths tried by the search (and the whole history)
SEARCH_CANDIDATES = 128  # candidates evaluated per round (the best ranked by attribution)

# Message templates (tests import them).
UNKNOWN_LOCKED = "Cannot lock {names}: not a feature of this bundle. The features are: {features}."
BAD_THRESHOLD = "threshold={value!r} must be a number between 0 and 1 (the prediction to get below)."
BAD_LIMIT = "{name}={value!r} must be a positive number."

CAUTION = ("This is what the model does, not what the customer will do. The search changes the model's inputs "
           "until its score falls below {threshold:g}; it does not know which changes are possible, what they "
           "would cost, or what else would change with them (a customer who calls support less may also use "
           "less data), and the model has learnt associations in past data, not causes. Use the edits as "
           "questions to ask, not as a plan.")


@dataclass(frozen=True)
class SearchResult:
    """What :func:`search` found: the edits (a scenario), the predictions before and after."""

    scenario: Scenario
    original_prediction: float
    prediction: float
    threshold: float
    reached: bool
    rounds: int
    evaluated: int  # candidate inputs evaluated by the model
    seconds: float
    stopped: str  # why the search ended, in words
    caution: str


def candidate_edits(ctx: Context, current: dict, attribution: Attribution, row: int, locked: set, used: set, *,
                    deadline: float | None = None):
    """(edit, estimated fall of the prediction, change for :func:`with_change`) for the current inputs.

    The estimate is first order: the average gradient along the IG path (attribution / (x - b))
    times the change of each cell; exact for a linear model. None when ``deadline`` (a
    ``time.perf_counter()`` value) passes while they are listed.
    """
    pool = _Pool.of(ctx, current, attribution, row, locked, used, deadline=deadline)
    return None if pool is None else pool.static + [w.item(k) for w in pool.windows for k in range(len(w.starts))]


@dataclass(frozen=True)
class _Windows:
    """The windows of one monthly feature set to a target: ``starts`` (first months) of length ``length``, their
    estimated falls and the (T,) target values."""

    feature: int
    kind: str
    length: int
    starts: np.ndarray
    falls: np.ndarray
    target: np.ndarray

    def item(self, k: int):
        start, f = int(self.starts[k]), self.feature
        cells = slice(start, start + self.length)
        edit = Edit("temporal", f, self.kind, None, (start, start + self.length - 1))
        return edit, float(self.falls[k]), {"temporal": (cells, f, self.target[cells])}


@dataclass(frozen=True)
class _Pool:
    """Every candidate edit, in the order the search has always listed them (static ones as tuples, the windows of
    monthly features as arrays): ranked and made into edits only for the best (:meth:`best`)."""

    static: list
    windows: list  # of _Windows

    @property
    def size(self) -> int:
        return len(self.static) + sum(len(w.starts) for w in self.windows)

    @classmethod
    def of(cls, ctx: Context, current: dict, attribution: Attribution, row: int, locked: set, used: set, *,
           deadline: float | None = None) -> "_Pool | None":
        slopes = {}
        for role in ROLES:
            x = current[role]
            a = (attribution.static if role == "static" else attribution.temporal)[row]
            gap = x - ctx.baseline[role]
            safe = np.where(np.abs(gap) > 1e-12, gap, 1.0)
            slopes[role] = np.where(np.abs(gap) > 1e-12, a / safe, 0.0)  # average gradient along the path
        static = _static_candidates(ctx, current["static"], slopes["static"], locked | used)
        windows = []
        for f in range(current["temporal"].shape[1]):
            if deadline is not None and time.perf_counter() > deadline:
                return None
            if ("temporal", f) not in locked:
                windows += _feature_windows(ctx, current["temporal"][:, f], slopes["temporal"][:, f], f)
        return cls(static, windows)

    def items(self, order) -> list:
        """The candidates at positions ``order`` of the listing, as (edit, fall, change)."""
        offsets = np.cumsum([len(self.static)] + [len(w.starts) for w in self.windows])
        out = []
        for k in order:
            k = int(k)
            if k < len(self.static):
                out.append(self.static[k])
                continue
            block = int(np.searchsorted(offsets, k, side="right")) - 1
            out.append(self.windows[block].item(k - int(offsets[block])))
        return out

    def best(self, count: int) -> list:
        """The ``count`` candidates with the largest estimated falls, ties in listing order (what a stable sort of
        the whole list by falling estimate gives)."""
        falls = np.concatenate([np.array([item[1] for item in self.static], np.float64)]
                               + [w.falls for w in self.windows])
        return self.items(np.argsort(-falls, kind="stable")[:int(count)])


def _static_candidates(ctx: Context, x: np.ndarray, slope: np.ndarray, skip: set) -> list:
    """(edit, fall, change) for each static feature not in ``skip``: its categories, or the baseline, the median
    and observed quantiles, each value fitted into the observed range and tried once."""
    out = []
    for j in range(x.shape[0]):
        if ("static", j) in skip:
            continue
        cats = ctx.observed.static_categories[j]
        if cats is not None:  # a category: its observed values (a baseline's 0.43 is no category)
            options = [(Edit("static", j, "set", v), v) for v in cats]
        else:
            options = [(Edit("static", j, "baseline"), ctx.baseline["static"][j]),
                       (Edit("static", j, "median"), ctx.median(None)["static"][j])]
            options += [(Edit("static", j, "set", float(v)), v) for v in ctx.observed.static_quantiles[:, j]]
        seen = set()
        for edit, value in options:
            value = float(ctx.observed.fit("static", j, np.array([value]))[0])
            if abs(value - x[j]) < 1e-9 or value in seen:
                continue
            seen.add(value)
            out.append((edit, float(slope[j] * (x[j] - value)), {"static": (j, value)}))
    return out


def _feature_windows(ctx: Context, x: np.ndarray, slope: np.ndarray, f: int) -> list:
    """The windows of monthly feature ``f`` (each length, then each start) set to the baseline or the median that
    lie in real months and change at least one value, with their estimated falls, for all starts at once."""
    periods = x.shape[0]
    lengths = sorted({w for w in SEARCH_WINDOWS if w < periods} | {periods})
    padded = np.concatenate([[0], np.cumsum(ctx.padded)])
    out = []
    for kind, source in (("baseline", ctx.baseline["temporal"][:, f]), ("median", ctx.median(None)["temporal"][:, f])):
        target = ctx.observed.fit("temporal", f, source)
        fall = slope * (x - target)  # (T,)
        close = (x == target) | (np.abs(x - target) <= 1e-9)  # np.isclose(rtol=0, atol=1e-9): NaN is never close
        differ = np.concatenate([[0], np.cumsum(~close)])
        for w in lengths:
            starts = np.arange(periods - w + 1)
            keep = (padded[starts + w] == padded[starts]) & (differ[starts + w] > differ[starts])
            out.append(_Windows(f, kind, w, starts[keep], _window_sums(fall, w)[keep], target))
    return out


def _window_sums(values: np.ndarray, length: int) -> np.ndarray:
    """The sums of every ``length`` consecutive ``values`` (one per start), equal to the last bit to
    ``values[start:start + length].sum()``: numpy adds fewer than 8 values one after the other, so do these
    (longer windows are summed by numpy one by one)."""
    count = values.shape[0] - length + 1
    if length >= 8:
        return np.array([values[s:s + length].sum() for s in range(count)], np.float64)
    sums = values[:count].astype(np.float64, copy=True)
    for k in range(1, length):
        sums += values[k:k + count]
    return sums


def _size(ctx: Context, before: dict, after: dict) -> float:
    """How far ``after`` moved from ``before``: the sum of |change| / observed range over all values."""
    o = ctx.observed
    spans = {"static": np.maximum(o.static_max - o.static_min, 1e-12),
             "temporal": np.maximum(o.temporal_max - o.temporal_min, 1e-12)}
    return float(sum((np.abs(after[r] - before[r]) / spans[r]).sum() for r in ROLES))


def with_change(current: dict, change: dict) -> dict:
    """``current`` (static (S,), temporal (T, F)) with one candidate's change applied (a copy)."""
    static, temporal = current["static"].copy(), current["temporal"].copy()
    if "static" in change:
        j, value = change["static"]
        static[j] = value
    else:
        cells, f, values = change["temporal"]
        temporal[cells, f] = values
    return {"static": static, "temporal": temporal}


def locked_features(bundle, names) -> set:
    """{("static", j) | ("temporal", j)} for feature names or display labels; ``ExplainError`` naming unknown ones."""
    found, unknown = set(), []
    for name in names or ():
        hits = {(role, j) for role, columns, labels in (
            ("static", bundle.static_features, bundle.static_labels),
            ("temporal", bundle.temporal_features, bundle.temporal_labels))
            for j, (column, label) in enumerate(zip(columns, labels)) if str(name) in (str(column), str(label))}
        if not hits:
            unknown.append(str(name))
        found |= hits
    if unknown:
        features = ", ".join(map(str, [*bundle.static_features, *bundle.temporal_features]))
        raise ExplainError(UNKNOWN_LOCKED.format(names=", ".join(map(repr, unknown)), features=features))
    return found


def search(ctx: Context, *, threshold: float = 0.5, locked=(), max_edits: int = 3, time_limit: float = 10.0,
           candidates: int = SEARCH_CANDIDATES, should_stop: StopCheck = None,
           first: Attribution | None = None) -> SearchResult:
    """Greedy search for a small edit that brings the prediction below ``threshold``.

    Each round explains the current inputs (one IG call), ranks every candidate edit (a static
    feature set to the baseline, the median or an observed value; a window of 1, 2, 3, 6 or all
    months of a monthly feature set to the baseline or the median) by the fall its attributions
    predict, and evaluates the best ``candidates`` in one batched model call. A round that
    reaches the threshold takes the reaching edit that changes the fewest values; otherwise the
    one that lowers the prediction most. At most ``max_edits`` edits, and no new round after
    ``time_limit`` seconds (not counting the bundle's medians, computed once per bundle before the first
    search starts its clock); locked features (names or labels) and padded months are never
    edited, and every value stays in the observed range. Edits that are not needed to stay
    below the threshold are dropped at the end.

    ``first``: the customer's attribution under ``ctx.settings`` where the caller has it (the Customer page's): the
    first round ranks by it, one IG call fewer, unless its prediction is not the model's for these inputs.
    """
    _check_limits(threshold, max_edits=max_edits, time_limit=time_limit, candidates=candidates)
    locked = locked_features(ctx.bundle, locked)
    ctx.median(None)  # the bundle's medians, computed once per bundle: not this customer's search time
    start = time.perf_counter()
    current = {role: ctx.original[role].copy() for role in ROLES}
    chosen: list[Edit] = []
    used: set = set()
    evaluated = rounds = 0
    attribution, goal, original = _start(ctx, current, threshold, first, should_stop)
    prediction = original
    stopped = ""
    while prediction >= threshold:
        stopped = _limit_reached(len(chosen), max_edits, time.perf_counter() - start, time_limit)
        if stopped:
            break
        if rounds:
            attribution = explain_inputs(ctx.bundle, _one(current), ctx.settings, should_stop=should_stop)
        rounds += 1
        pool = _Pool.of(ctx, current, attribution, 0, locked, used, deadline=start + time_limit)
        if pool is None:
            stopped = f"reached the time limit of {time_limit:g} s"
            break
        if not pool.size:
            stopped = "no edit is left to try (every feature is locked, edited or already at its value)"
            break
        step = _best_step(ctx, current, pool.best(candidates), prediction, goal)
        evaluated += step.evaluated
        if step.edit is None:
            stopped = "no single edit lowers the prediction further"
            break
        chosen.append(step.edit)
        used.add((step.edit.role, step.edit.feature))
        current = with_change(current, step.change)
        prediction = step.prediction
    if prediction < threshold:
        chosen, prediction, extra = _prune(ctx, chosen, prediction, goal)
        evaluated += extra
        stopped = "the prediction is below the threshold"
    return SearchResult(Scenario(tuple(chosen)), original, prediction, float(threshold), prediction < threshold,
                        rounds, evaluated, time.perf_counter() - start, stopped,
                        CAUTION.format(threshold=threshold))


def _start(ctx: Context, current: dict, threshold: float, first: Attribution | None, should_stop: StopCheck):
    """The first round's attribution (``first`` where it explains these inputs: its prediction is the model's), the
    goal and the original prediction."""
    attribution = first if first is not None else explain_inputs(ctx.bundle, _one(current), ctx.settings,
                                                                 should_stop=should_stop)
    goal, original = _goal(ctx, current, threshold, attribution, should_stop)
    if attribution is first and not np.isclose(float(first.prediction[0]), original, rtol=1e-5, atol=1e-6):
        attribution = explain_inputs(ctx.bundle, _one(current), ctx.settings, should_stop=should_stop)
        goal, original = _goal(ctx, current, threshold, attribution, should_stop)
    return attribution, goal, original


def _goal(ctx: Context, current: dict, threshold: float, attribution: Attribution, should_stop: StopCheck):
    """The goal of explaining output ``attribution.settings.target``, and the model's prediction of it now."""
    goal = _Goal(threshold, attribution.settings.target, should_stop)
    return goal, float(predict(ctx.bundle, current["static"][None], current["temporal"][None], goal.target,
                               should_stop=should_stop)[0])


@dataclass(frozen=True)
class _Goal:
    """What the search aims at: a prediction of output ``target`` below ``threshold``; ``should_stop`` asked
    between model calls."""

    threshold: float
    target: int
    should_stop: StopCheck = None


@dataclass(frozen=True)
class _Step:
    """A round's chosen edit (None when no edit lowers the prediction), its change, the prediction with it, and
    the candidate inputs evaluated to find it."""

    edit: Edit | None
    change: dict | None
    prediction: float
    evaluated: int


def _check_limits(threshold, *, max_edits, time_limit, candidates) -> None:
    """``ExplainError`` unless the threshold is in (0, 1) and every limit a positive number."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold < 1:
        raise ExplainError(BAD_THRESHOLD.format(value=threshold))
    for name, value in (("max_edits", max_edits), ("time_limit", time_limit), ("candidates", candidates)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ExplainError(BAD_LIMIT.format(name=name, value=value))


def _limit_reached(edits: int, max_edits: int, seconds: float, time_limit: float) -> str:
    """Why no new round starts, in words; "" while the limits allow one."""
    if edits >= max_edits:
        return f"reached the limit of {max_edits} edit(s)"
    if seconds > time_limit:
        return f"reached the time limit of {time_limit:g} s"
    return ""


def _one(current: dict) -> dict:
    """The current inputs as a batch of one customer, as the explainer takes them."""
    return {r: current[r][None].astype(np.float32) for r in ROLES}


def _best_step(ctx: Context, current: dict, pool: list, prediction: float, goal: _Goal) -> _Step:
    """The round's edit among the ranked ``pool``, all scored in one batched call ((k, S) and (k, T, F)): the
    smallest that reaches the threshold (fewest values, then the smallest change; a numeric static value then
    moved as close to the customer's as still reaches), else the one that lowers the prediction most."""
    trials = [with_change(current, change) for _, _, change in pool]
    scores = predict(ctx.bundle, np.stack([t["static"] for t in trials]),
                     np.stack([t["temporal"] for t in trials]), goal.target, should_stop=goal.should_stop)
    below = np.flatnonzero(scores < goal.threshold)
    if below.size:
        best = min(below, key=lambda i: (pool[i][0].cells(), _size(ctx, current, trials[i]), scores[i]))
    else:
        best = int(np.argmin(scores))
        if scores[best] >= prediction - 1e-9:
            return _Step(None, None, prediction, len(trials))
    edit, _, change = pool[best]
    if below.size and edit.role == "static" and ctx.observed.static_categories[edit.feature] is None:
        edit, change, score, extra = _closest_static(ctx, current, edit, change, goal)
        return _Step(edit, change, score, len(trials) + extra)
    return _Step(edit, change, float(scores[best]), len(trials))


def _closest_static(ctx: Context, current: dict, edit: Edit, change: dict, goal: _Goal, *, points: int = 16):
    """The value between the customer's and the edit's, closest to the customer's, that still
    gets below the threshold (one batched call over ``points`` values; the edit's own value,
    known to get below, is the last of them)."""
    j, value = change["static"]
    x = current["static"][j]
    grid = np.linspace(x, value, points + 1)[1:-1]
    if ctx.observed.static_integer[j]:
        grid = np.round(grid)
    grid = np.append(np.unique(grid[np.abs(grid - x) > 1e-9]), value)
    grid = grid[np.argsort(np.abs(grid - x), kind="stable")]
    trials = [with_change(current, {"static": (j, float(v))}) for v in grid]
    scores = predict(ctx.bundle, np.stack([t["static"] for t in trials]), np.stack([t["temporal"] for t in trials]),
                     goal.target, should_stop=goal.should_stop)
    k = int(np.flatnonzero(scores < goal.threshold)[0]) if (scores < goal.threshold).any() else len(grid) - 1
    value = float(grid[k])
    return Edit("static", j, "set", value), {"static": (j, value)}, float(scores[k]), len(trials)


def _prune(ctx: Context, chosen: list, prediction: float, goal: _Goal):
    """Drop edits the result does not need (each leave-one-out set evaluated in one batched call)."""
    evaluated = 0
    while len(chosen) > 1:
        subsets = [chosen[:k] + chosen[k + 1:] for k in range(len(chosen))]
        inputs = [apply(ctx, Scenario(tuple(s)))[0] for s in subsets]
        scores = predict(ctx.bundle, np.concatenate([i["static"] for i in inputs]),
                         np.concatenate([i["temporal"] for i in inputs]), goal.target,
                         should_stop=goal.should_stop)
        evaluated += len(subsets)
        k = int(np.argmin(scores))
        if scores[k] >= goal.threshold:
            break
        chosen, prediction = subsets[k], float(scores[k])
    return chosen, prediction, evaluated
