"""Trust metrics of an attribution: cumulative prediction difference and preservation, comprehensiveness
and sufficiency, infidelity, sensitivity-max, and the precision and recall of planted drivers.

Every function here works on flat arrays: a customer is the row of its S static values and T x F temporal
cells (``explain.analysis.faithfulness.flatten``), x (n, D) the customers, b (n, D) the baseline a cell is
"removed" to, a (n, D) a signed attribution. The model comes in as a callable ``predict(z)`` (rows, D) ->
(rows,) and an explainer as ``attribute(z, bz)`` (rows, D) inputs and baselines -> (rows, D) attributions;
each is called once per metric and comparator with every row at once (the engine batches them).

Ranking: cells by |attribution|, largest first (ties in cell order). ``s_i`` = sign(f(x_i) - f(b_i)).

* **CPD** (cumulative prediction difference; Jang et al., "TIMING", ICML 2025): remove (set to the baseline)
  the top-ranked cells one rank at a time, k = 1 .. K, and add up |f(x^(k)) - f(x^(k-1))|; the mean over
  customers. K = ``Options.ranks`` (20: a quarter of the demo's 81 cells). Larger is better: the ranking
  finds the cells that move the prediction, whatever their sign (signed cells cannot cancel).
* **CPP** (cumulative prediction preservation, same source): the same sum removing the bottom-ranked cells
  first. Smaller is better: the cells called unimportant should not move the prediction.
* **Comprehensiveness** (DeYoung et al. 2020, ERASER): s_i (f(x) - f(x with the top q cells at the
  baseline)), averaged over the fractions q in ``Options.fractions`` (1, 5, 10, 20, 50 %: k = max(1,
  round(q D)) cells) and customers. Larger is better.
* **Sufficiency** (same source): s_i (f(x) - f(only the top q cells kept, the rest at the baseline)),
  averaged the same way. Smaller is better.
* **Infidelity** (Yeh et al. 2019): E[(sum_j I_j a_j / (x_j - b_j) - (f(x) - f(x - I)))^2] with I_j ~
  Normal(0, (noise x the feature's standard deviation)^2), ``noise_samples`` draws per customer; the mean over
  customers, in squared output units. a_j / (x_j - b_j) is the slope the attribution claims (Captum's
  ``multiply_by_inputs`` rule for attributions of the form (x - b) x gradient); cells where x_j = b_j carry
  no slope and are not perturbed. Exact IG of a linear model has infidelity 0. Smaller is better.
* **Sensitivity-max** (Yeh et al. 2019): max over ``radius_samples`` draws delta (each cell uniform within
  +/- radius x |x_j|, so radius 0.01 is "a 1 % change of every input") of ||a(x + delta) - a(x)||_2, absolute,
  in output units, the baseline held; the mean over customers. Smaller is better.
* **AUP and AUR** (as tint/time_interpret reports them, Crabbe and van der Schaar 2021): each customer's
  |attribution| divided by its largest; as the threshold t sweeps (0, 1], the cells with score >= t are
  "found"; precision and recall of the planted cells among them, integrated exactly over t (step
  functions); the mean over customers (customers whose attributions are all 0 left out). 1 is perfect.

Comparators: ``random`` is IG's own values in a seeded random order per customer (``random_orders``
of them, averaged): the ranking metrics see a random order, infidelity a right-sized attribution in the wrong
places; its sensitivity-max equals IG's (a fixed reordering moves exactly as much), so it says nothing there.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from explain.bundle.config import read_config
from explain.bundle.problems import ValidationReport
from explain.core.errors import ExplainError

CHUNK_VALUES = 4_000_000  # perturbed input values built at once (32 MB of float64)
FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)
BETTER = {"cpd": "higher", "cpp": "lower", "comprehensiveness": "higher", "sufficiency": "lower",
          "infidelity": "lower", "sensitivity_max": "lower"}
METRICS = tuple(BETTER)
AGAINST_RANDOM = METRICS[:5]  # sensitivity-max of a fixed reordering of IG equals IG's: no contest
NAMES = {"cpd": "cumulative prediction difference", "cpp": "cumulative prediction preservation",
         "comprehensiveness": "comprehensiveness", "sufficiency": "sufficiency", "infidelity": "infidelity",
         "sensitivity_max": "sensitivity-max"}
COMPARATORS = {"random": "random order", "gradient_x_input": "gradient x input"}
BAD_OPTION = "{name}={value!r} must be {what} (a setting of the trust metrics)."
PLANTED_UNKNOWN = ("{source}: the planted driver {feature!r} is not a feature of the model's inputs "
                   "(features: {known}). Use the table column names (they are case-sensitive).")
PLANTED_PERIODS = ("{source}: the planted driver {feature!r} names period(s) {periods} that the bundle does not have "
                   "(periods: {known}). Give period labels of the temporal table or numbers (1 = the first), or "
                   "leave 'periods' out for every period.")
PLANTED_STATIC = "{source}: the planted driver {feature!r} is a static feature, which has no periods: remove 'periods'."
DEMO_METRICS = "demo_metrics.json"
MAX_METRICS_BYTES = 1_000_000  # demo_metrics.json is read only when it is this small


@dataclass(frozen=True)
class Options:
    """How much of each measure: ranks for CPD/CPP, fractions, the infidelity noise (x each feature's standard
    deviation) and draws, the sensitivity radius (x each cell's |value|) and draws, random orders, seed."""

    ranks: int = 20
    fractions: tuple = FRACTIONS
    noise: float = 0.1
    noise_samples: int = 64
    radius: float = 0.01
    radius_samples: int = 16
    random_orders: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("ranks", "noise_samples", "radius_samples", "random_orders"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ExplainError(BAD_OPTION.format(name=name, value=value, what="a positive integer"))
        for name in ("noise", "radius"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 10:
                raise ExplainError(BAD_OPTION.format(name=name, value=value, what="a number above 0 and below 10"))
        if not self.fractions or not all(0 < q <= 1 for q in self.fractions):
            raise ExplainError(BAD_OPTION.format(name="fractions", value=self.fractions,
                                                 what="fractions of the cells above 0 and at most 1"))

    def as_dict(self) -> dict:
        return {**asdict(self), "fractions": list(self.fractions)}


@dataclass(frozen=True)
class Problem:
    """The customers, their baseline, each feature's spread, and how to call the model and the explainers."""

    x: np.ndarray  # (n, D)
    b: np.ndarray  # (n, D)
    spread: np.ndarray  # (D,) standard deviation of each cell's feature, 1 where constant
    predict: object  # (rows, D) -> (rows,)
    attribute: dict  # {method: (z (rows, D), bz (rows, D)) -> (rows, D)}; methods without one skip sensitivity
    planted: np.ndarray | None = None  # (D,) bool: the cells a planted driver lives in


@dataclass(frozen=True)
class TrustMetrics:
    values: dict  # {metric: {method: float}}
    random_runs: dict  # {metric: [one value per random order]}
    planted: dict | None  # {method: {"aup": float, "aur": float}}
    options: Options
    seconds: float

    def wins(self, against: str = "random") -> tuple:
        """(metrics on which IG is better than ``against``, metrics compared)."""
        names = AGAINST_RANDOM if against == "random" else METRICS
        won = [m for m in names if _better(m, self.values[m]["ig"], self.values[m][against])]
        return won, list(names)


def _better(metric, mine, theirs) -> bool:
    if not (np.isfinite(mine) and np.isfinite(theirs)):
        return False
    return mine > theirs if BETTER[metric] == "higher" else mine < theirs


def fraction_sizes(fractions, cells: int) -> np.ndarray:
    """The number of cells of each fraction: max(1, round(q x cells))."""
    return np.array([max(1, int(round(q * cells))) for q in fractions], np.int64)


def positions(score) -> np.ndarray:
    """Each cell's rank (0 = largest score; ties in cell order): (n, D)."""
    score = np.asarray(score, np.float64)
    order = np.argsort(-score, axis=1, kind="stable")
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(score.shape[1])[None].repeat(score.shape[0], 0), axis=1)
    return position


def masked_predictions(predict, x, b, masks) -> np.ndarray:
    """(n, m) predictions with the cells where ``masks`` (n, m, D) is True at the baseline, in big calls."""
    n, m, d = masks.shape
    per = max(1, CHUNK_VALUES // (m * d))
    out = np.empty((n, m))
    for start in range(0, n, per):
        rows = slice(start, start + per)
        z = np.where(masks[rows], b[rows, None], x[rows, None]).reshape(-1, d)
        out[rows] = np.asarray(predict(z), np.float64).reshape(-1, m)
    return out


def ranking_metrics(problem: Problem, score, options: Options) -> dict:
    """CPD, CPP, comprehensiveness and sufficiency of the ranking by ``score`` (n, D): means over customers."""
    x, b = problem.x, problem.b
    d = x.shape[1]
    position = positions(score)[:, None, :]
    k = np.arange(min(options.ranks, d) + 1)[None, :, None]
    size = fraction_sizes(options.fractions, d)[None, :, None]
    masks = np.concatenate([position < k, position >= d - k, position < size, position >= size,
                            np.ones_like(position, bool)], axis=1)  # the last: every cell at the baseline
    p = masked_predictions(problem.predict, x, b, masks)
    K, q = k.shape[1], size.shape[1]
    fx, fb = p[:, :1], p[:, -1:]
    sign = np.sign(fx - fb)
    return {"cpd": float(np.abs(np.diff(p[:, :K], axis=1)).sum(axis=1).mean()),
            "cpp": float(np.abs(np.diff(p[:, K:2 * K], axis=1)).sum(axis=1).mean()),
            "comprehensiveness": float((sign * (fx - p[:, 2 * K:2 * K + q])).mean()),
            "sufficiency": float((sign * (fx - p[:, 2 * K + q:2 * K + 2 * q])).mean())}


def moved_cells(x, b) -> np.ndarray:
    """(n, D) True where the customer differs from the baseline (an attribution there claims a slope)."""
    return np.abs(x - b) > 1e-12 * (1.0 + np.abs(x))


def infidelity_draws(problem: Problem, options: Options, rng) -> tuple:
    """The perturbations I (n, N, D) and the prediction changes f(x) - f(x - I) (n, N), shared by every method."""
    x = problem.x
    n, d = x.shape
    scale = options.noise * problem.spread[None, None, :] * moved_cells(x, problem.b)[:, None, :]
    noise = rng.normal(size=(n, options.noise_samples, d)) * scale
    fx = np.asarray(problem.predict(x), np.float64)
    shifted = np.asarray(problem.predict((x[:, None] - noise).reshape(-1, d)), np.float64)
    return noise, fx[:, None] - shifted.reshape(n, -1)


def infidelity(problem: Problem, attribution, draws) -> float:
    """Mean over customers and draws of (I . a / (x - b) - (f(x) - f(x - I)))^2."""
    noise, change = draws
    diff = problem.x - problem.b
    slope = np.divide(attribution, diff, out=np.zeros_like(diff), where=moved_cells(problem.x, problem.b))
    return float((((noise * slope[:, None]).sum(axis=-1) - change) ** 2).mean())


def ball(x, radius: float, samples: int, rng) -> np.ndarray:
    """(n, samples, D) perturbations, each cell uniform within +/- radius x |x|."""
    return rng.uniform(-1.0, 1.0, size=(x.shape[0], samples, x.shape[1])) * radius * np.abs(x)[:, None, :]


def sensitivity_max(attribute, x, b, delta) -> np.ndarray:
    """Per customer: max over the draws ``delta`` (n, N, D) of ||a(x + delta) - a(x)||_2 (one attribute call)."""
    n, samples, d = delta.shape
    z = np.concatenate([x[:, None], x[:, None] + delta], axis=1).reshape(-1, d)
    bz = np.repeat(b, samples + 1, axis=0)
    a = np.asarray(attribute(z, bz), np.float64).reshape(n, samples + 1, d)
    return np.linalg.norm(a[:, 1:] - a[:, :1], axis=-1).max(axis=1)


def precision_recall_area(score, planted) -> tuple:
    """(AUP, AUR): the mean over customers of the areas under precision and recall of the ``planted`` (D,)
    cells as the threshold on score / max(score) sweeps (0, 1] (module docstring)."""
    planted = np.asarray(planted, bool)
    aup, aur = [], []
    for row in np.abs(np.asarray(score, np.float64)):
        top = row.max()
        if not top > 0 or not planted.any():
            continue
        row = row / top
        levels = np.unique(row[row > 0])  # ascending; the last is 1
        found = row[None, :] >= levels[:, None]  # (m, D): cells at or above each level
        hits = (found & planted[None]).sum(axis=1)
        widths = np.diff(np.concatenate([[0.0], levels]))
        aup.append(float((widths * hits / found.sum(axis=1)).sum()))
        aur.append(float((widths * hits / planted.sum()).sum()))
    return (float(np.mean(aup)) if aup else float("nan")), (float(np.mean(aur)) if aur else float("nan"))


def random_reorders(attribution, options: Options) -> np.ndarray:
    """(R, n, D): each customer's attribution values in ``random_orders`` seeded random orders."""
    rng = np.random.default_rng(options.seed)
    n, d = attribution.shape
    orders = [rng.permuted(np.tile(np.arange(d), (n, 1)), axis=1) for _ in range(options.random_orders)]
    return np.stack([np.take_along_axis(attribution, order, axis=1) for order in orders])


def measure(problem: Problem, attributions: dict, options: Options = Options()) -> TrustMetrics:
    """Every metric for each method in ``attributions`` ({"ig": (n, D), ...}, signed) and for random orders."""
    started = time.perf_counter()
    rng = np.random.default_rng(options.seed + 1)
    draws = infidelity_draws(problem, options, rng)
    delta = ball(problem.x, options.radius, options.radius_samples, rng)
    values = {m: {} for m in METRICS}
    for method, a in attributions.items():
        a = np.asarray(a, np.float64)
        for name, value in ranking_metrics(problem, np.abs(a), options).items():
            values[name][method] = value
        values["infidelity"][method] = infidelity(problem, a, draws)
        attribute = problem.attribute.get(method)
        values["sensitivity_max"][method] = (float(sensitivity_max(attribute, problem.x, problem.b, delta).mean())
                                             if attribute is not None else float("nan"))
    runs = {m: [] for m in METRICS}
    for a in random_reorders(np.asarray(attributions["ig"], np.float64), options):
        for name, value in ranking_metrics(problem, np.abs(a), options).items():
            runs[name].append(value)
        runs["infidelity"].append(infidelity(problem, a, draws))
        runs["sensitivity_max"].append(values["sensitivity_max"]["ig"])  # a fixed reordering: IG's own
    for name in METRICS:
        values[name]["random"] = float(np.mean(runs[name]))
    return TrustMetrics(values=values, random_runs=runs, planted=_planted(problem, attributions, options),
                        options=options, seconds=time.perf_counter() - started)


def _planted(problem: Problem, attributions: dict, options: Options) -> dict | None:
    if problem.planted is None:
        return None
    out = {}
    for method, a in attributions.items():
        out[method] = dict(zip(("aup", "aur"), precision_recall_area(a, problem.planted)))
    runs = [precision_recall_area(a, problem.planted) for a in random_reorders(np.asarray(attributions["ig"]), options)]
    out["random"] = {"aup": float(np.mean([r[0] for r in runs])), "aur": float(np.mean([r[1] for r in runs]))}
    return out


def verdict(metrics: TrustMetrics, randomisation_passed: bool | None = None) -> str:
    """The report in one sentence: 'IG beats random order on 5 of 5 measures; the randomised-model check passed'."""
    won, compared = metrics.wins("random")
    words = f"IG beats random order on {len(won)} of {len(compared)} measures"
    lost = [NAMES[m] for m in compared if m not in won]
    if lost:
        words += f" (not on {', '.join(lost)})"
    won_g, compared_g = metrics.wins("gradient_x_input") if "gradient_x_input" in metrics.values["cpd"] else ([], [])
    if compared_g:
        words += f", and gradient x input on {len(won_g)} of {len(compared_g)}"
    if randomisation_passed is not None:
        words += "; the randomised-model check " + ("passed" if randomisation_passed else "FAILED")
    if metrics.planted is not None and "ig" in metrics.planted:
        p = metrics.planted["ig"]
        words += (f"; on the planted drivers' cells IG's areas under precision and recall are {p['aup']:.2f} and "
                  f"{p['aur']:.2f} (random order {metrics.planted['random']['aup']:.2f} and "
                  f"{metrics.planted['random']['aur']:.2f})")
    return words + "."


def definitions(options: Options) -> dict:
    """Each metric's definition in one line, with the sizes ``options`` gives it."""
    percents = ", ".join(f"{100 * q:g}" for q in options.fractions)
    return {
        "cpd": f"sum of |prediction change| removing the top {options.ranks} cells one rank at a time (TIMING)",
        "cpp": f"the same removing the bottom {options.ranks} cells first (TIMING)",
        "comprehensiveness": f"prediction drop with the top {percents} % of cells removed, averaged (DeYoung 2020)",
        "sufficiency": f"prediction drop with only the top {percents} % of cells kept, averaged (DeYoung 2020)",
        "infidelity": (f"mean squared error of the attribution's slopes on Gaussian noise of {options.noise:g} x each "
                       f"feature's standard deviation, {options.noise_samples} draws per customer (Yeh 2019)"),
        "sensitivity_max": (f"largest change of the attributions (Euclidean length) over {options.radius_samples} "
                            f"draws with every input within {100 * options.radius:g} % of its value (Yeh 2019)"),
    }


def table(metrics: TrustMetrics) -> list:
    """One row per metric: its name, IG, random order, gradient x input, which is better, and IG's result."""
    rows = []
    for name in METRICS:
        values = metrics.values[name]
        against = [m for m in ("random", "gradient_x_input") if m in values and (name != "sensitivity_max"
                                                                                 or m != "random")]
        won = [m for m in against if _better(name, values["ig"], values[m])]
        rows.append({"measure": NAMES[name], "IG": values["ig"], "random order": values.get("random"),
                     "gradient x input": values.get("gradient_x_input"), "better": BETTER[name],
                     "IG better than": ", ".join(COMPARATORS[m] for m in won) or "neither"})
    return rows


def metric_lines(metrics: TrustMetrics) -> list:
    """One line per metric for the command line: IG, random order (+/- over orders), gradient x input."""
    lines = []
    for row, name in zip(table(metrics), METRICS):
        spread = np.std(metrics.random_runs[name]) if name != "sensitivity_max" else 0.0
        lines.append(f"{row['measure']} ({row['better']} is better): IG {row['IG']:.4g}, random order "
                     f"{row['random order']:.4g} (+/- {spread:.2g}), gradient x input {row['gradient x input']:.4g}")
    if metrics.planted is not None:
        lines.append("planted drivers (AUP / AUR): " + ", ".join(
            f"{method.replace('_', ' ')} {pr['aup']:.3f} / {pr['aur']:.3f}" for method, pr in metrics.planted.items()))
    lines.append(f"trust metrics: {metrics.seconds:.1f} s")
    return lines


def stability_words(stability: dict, what: str) -> str:
    """One customer's sensitivity-max in words (``stability``: ``faithfulness.customer_stability``'s result;
    ``what``: the output explained, e.g. "churn")."""
    radius, norm, size = 100 * stability["radius"], stability["norm"], stability["size"]
    share = f" ({100 * norm / size:.1f} % of their size, {size:.3g})" if size > 0 else ""
    return (f"A {radius:g} % change in this customer's inputs moves the effects by at most {norm:.3g}{share}, "
            f"and any one effect by at most {stability['largest']:.3g}, in units of the predicted {what} "
            f"(sensitivity-max: the largest of {stability['samples']} draws with every input moved by up to "
            f"{radius:g} % of its value, the baseline held).")


def declared_planted(bundle) -> tuple:
    """(entries [{"feature", "periods"?}], source): bundle.json 'planted', else the demo's demo_metrics.json
    'planted_drivers' (static and temporal feature lists: every period of each), else (None, None)."""
    folder = getattr(bundle, "path", None)
    if folder is None or not Path(folder).is_dir():
        return None, None
    folder = Path(folder)
    config = read_config(folder, ValidationReport(path=folder))
    if config.planted:
        return config.planted, "bundle.json 'planted'"
    path = folder / DEMO_METRICS
    if not path.is_file() or path.stat().st_size > MAX_METRICS_BYTES:
        return None, None
    try:
        drivers = json.loads(path.read_text(encoding="utf-8")).get("planted_drivers")
    except (ValueError, OSError, AttributeError):
        return None, None
    if not isinstance(drivers, dict):
        return None, None
    names = [*drivers.get("static", []), *drivers.get("temporal", [])]
    return [{"feature": str(name)} for name in names], f"{DEMO_METRICS} 'planted_drivers'"


def _period_rows(wanted, periods: list, feature: str, source: str) -> list:
    if wanted is None:
        return list(range(len(periods)))
    rows, unknown = [], []
    for period in wanted:
        if isinstance(period, int) and 1 <= period <= len(periods):
            rows.append(period - 1)
        elif str(period) in periods and not isinstance(period, int):
            rows.append(periods.index(str(period)))
        else:
            unknown.append(period)
    if unknown:
        raise ExplainError(PLANTED_PERIODS.format(source=source, feature=feature, periods=unknown,
                                                  known=", ".join(periods)))
    return rows


def planted_mask(bundle) -> tuple:
    """(cells (S + T * F,) bool, source) of the declared planted drivers (:func:`declared_planted`), laid out as
    :func:`flatten` lays out a customer, or (None, None). A name or period the bundle lacks: ``ExplainError``."""
    entries, source = declared_planted(bundle)
    if entries is None:
        return None, None
    static_names, temporal_names = list(bundle.static_features), list(bundle.temporal_features)
    periods = [str(p) for p in bundle.periods]
    static, temporal = np.zeros(len(static_names), bool), np.zeros((len(periods), len(temporal_names)), bool)
    for entry in entries:
        feature, wanted = entry["feature"], entry.get("periods")
        if feature in static_names:
            if wanted:
                raise ExplainError(PLANTED_STATIC.format(source=source, feature=feature))
            static[static_names.index(feature)] = True
        elif feature in temporal_names:
            temporal[_period_rows(wanted, periods, feature, source), temporal_names.index(feature)] = True
        else:
            raise ExplainError(PLANTED_UNKNOWN.format(source=source, feature=feature,
                                                      known=", ".join(static_names + temporal_names)))
    return np.concatenate([static, temporal.ravel()]), source
