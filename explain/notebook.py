"""Three lines in a notebook::

    import explain
    a = explain.explain(model, [static, temporal])   # IG of every customer against the data's mean
    a.heatmap(0)                                      # or a.bars(0), a.to_frame(), a.delta, ...

``explain`` takes the model and its inputs as the model takes them (a list in the model's input order, or a dict by
input name or by ``"static"`` / ``"temporal"``), as arrays or DataFrames; names are optional keyword arguments
(``ids``, ``static_features``, ``temporal_features``, ``periods``, ``output_names``, ``display_names``, ``units``,
``groups``). It builds an in-memory bundle (every argument checked, every problem reported at once, as
``Bundle.from_objects`` does) and returns an :class:`Explanation`: the :class:`~explain.core.ig.Attribution` together
with the customers, features and periods it is about, so that its figures and tables need nothing more.

The bundle reads the model's padding as ``load_bundle`` reads a folder's (a ``Masking`` layer, ``mask_zero`` ids), so
the notebook and ``python -m explain attribute`` on the folder ``save_bundle`` writes from the same data give the
same baselines and attributions: padded periods stay padding, means leave them out, and no real period of a
baseline sits on the mask value (docs/method.md, "Padded histories").
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from explain import figures
from explain.analysis.explainer import explain_customers
from explain.analysis.report import long_frame
from explain.bundle.load import Bundle
from explain.core.change import integrated_change
from explain.core.errors import ExplainError
from explain.core.ig import Attribution, integrated_gradients
from explain.core.settings import Settings

NOT_TWO_INPUTS = ("explain() takes the model's inputs as a list in the model's input order or a dict; for this model "
                  "that is one (n, S) static array or DataFrame and one (n, T, F) temporal array. Got {found}. "
                  "For models with more inputs, build a bundle (explain.save_bundle) and use explain_customers.")
BASELINE_ARRAYS = ("baseline as arrays must give both inputs: a list [static, temporal] or a dict with 'static' and "
                   "'temporal', each one customer (S,) / (T, F), or a background sample (K, S) / (K, T, F); "
                   "got {found}.")
BASELINE_SAMPLE_SIZES = ("baseline: the static sample has {s} row(s) and the temporal sample {t}: a background sample "
                         "gives one static row and one history per baseline customer.")


@dataclass(frozen=True)
class Explanation:
    """Integrated Gradients of some customers, with their ids, feature names and periods.

    ``attribution``: the engine's result (``static`` (n, S), ``temporal`` (n, T, F), ``prediction``,
    ``baseline_prediction``, ``delta``, ...; also reachable directly: ``a.delta``). ``bundle``: the in-memory bundle
    it was computed on (model, values, names). A customer is a row number (0, 1, ...) or an id.
    """

    attribution: Attribution
    bundle: Bundle

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.attribution, name)

    @property
    def ids(self) -> list[str]:
        return [str(i) for i in self.bundle.ids]

    @property
    def static_features(self) -> list[str]:
        return list(self.bundle.static_labels)

    @property
    def temporal_features(self) -> list[str]:
        return list(self.bundle.temporal_labels)

    @property
    def periods(self) -> list[str]:
        return [str(p) for p in self.bundle.periods]

    def to_frame(self) -> pd.DataFrame:
        """The long format: ``customer_id, input, period, feature, value, attribution`` (one row per value)."""
        return long_frame(self.attribution, self.bundle, self.ids)

    def heatmap(self, customer=0):
        """The period x feature heatmap of one customer's history (a Plotly figure)."""
        return figures.heatmap(self.attribution, self.bundle, customer, ids=self.ids)

    def bars(self, customer=0):
        """One customer's static attributions as bars (a Plotly figure)."""
        return figures.static(self.attribution, self.bundle, customer, ids=self.ids)

    def summary(self) -> pd.DataFrame:
        """One row per customer: prediction, baseline prediction, the sum of the attributions and the gap left."""
        a = self.attribution
        return pd.DataFrame({"customer_id": self.ids, "prediction": a.prediction,
                             "baseline_prediction": a.baseline_prediction, "attributions": a.total(),
                             "delta": a.delta})

    def __repr__(self) -> str:
        a = self.attribution
        shape = f"{len(self.static_features)} static features"
        if a.temporal is not None:
            shape += f", {len(self.periods)} periods x {len(self.temporal_features)} temporal features"
        baseline = a.settings.baseline or "given as arrays"
        return (f"Explanation({a.n_customers} customer(s), {shape}; baseline {baseline}, "
                f"largest |delta| {float(np.max(np.abs(a.delta))):.2g})")

    def _repr_html_(self) -> str:
        rows = self.summary().head(10)
        table = rows.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0)
        more = f"<p>... and {len(self.ids) - 10} more customers</p>" if len(self.ids) > 10 else ""
        return (f"<p><b>{html.escape(repr(self))}</b></p>{table}{more}"
                "<p>Draw one: <code>.heatmap(customer)</code>, <code>.bars(customer)</code>; "
                "every value: <code>.to_frame()</code>.</p>")


def explain(model, inputs, baseline="mean", *, ids=None, static_features=None, temporal_features=None, periods=None,
            output_names=None, steps: int | str = 64, method: str = "gausslegendre", target=0,
            space: str = "output", path: str = "joint", earlier=None, output=None, output_period=None,
            **names) -> Explanation:
    """Integrated Gradients of every customer in ``inputs`` for a model with a static and a temporal input.

    ``inputs``: ``[static, temporal]`` in the model's input order (either order is read by rank), or a dict.
    ``baseline``: ``"mean"`` (default: each feature's mean over the data given), ``"zero"``, ``"median"``, any
    spec the CLI takes (``"sample:50"``, ``"cohort:0"`` with ``labels=``, ...), or arrays: one baseline customer
    ``[(S,), (T, F)]``, or a background sample ``[(K, S), (K, T, F)]`` (expected gradients: IG averaged over the
    K baselines). ``steps``, ``method``, ``target``, ``space``, ``path``: as in ``integrated_gradients``.
    Other keyword arguments (``labels``, ``display_names``, ``units``, ``groups``) as ``Bundle.from_objects``.
    A baseline given as arrays is used as it is: with a ``Masking`` model none of its real periods may equal the
    mask value in every feature (the engine refuses it); the named baselines follow the padding rules by themselves.

    Why did it change? ``baseline="previous"`` (or ``"previous:K"``) compares each customer with their own history K
    periods earlier; ``earlier=[static, temporal]`` with the same customers' inputs at an earlier time (last month's
    export, one row per customer in the same order): the attributions add up to f(now) - f(then), static features
    included, periods that were padding then and hold data now included (``explain.core.change``).

    A model with several outputs: ``output="churn"`` names the head explained (default: the first). A model with a
    prediction per period ((None, T, K)): ``output_period`` the period explained, its number (1 the first, T the
    last) or its label (``"2025-05"``); default: the last (``explain.core.outputs``).
    """
    from explain.bundle.heads import viewed

    static, temporal = _split(model, inputs)
    bundle = Bundle.from_objects(model, static, temporal, ids=ids, static_features=static_features,
                                 temporal_features=temporal_features, periods=periods, output_names=output_names,
                                 **names)
    ids = [str(i) for i in bundle.ids]
    chosen = {"output": output, "output_period": output_period}
    if isinstance(baseline, str) and earlier is None:
        bundle, settings = viewed(bundle, Settings(baseline=baseline, steps=steps, method=method, target=target,
                                                   space=space, path=path, **chosen))
        return Explanation(explain_customers(bundle, ids, settings), bundle)
    bundle, settings = viewed(bundle, Settings(baseline=None, steps=steps, method=method, target=target, space=space,
                                               path=path, **chosen))  # the head and period explained
    if earlier is not None:
        then_static, then_temporal = _split(model, earlier)
        attribution = integrated_change(bundle.model, bundle.inputs_for(ids), {"static": then_static,
                                        "temporal": then_temporal}, settings, ids=ids, output_names=bundle.output_names)
        return Explanation(attribution, bundle)
    arrays = _baseline_arrays(baseline)
    attribution = integrated_gradients(bundle.model, bundle.inputs_for(ids), arrays, settings, ids=ids,
                                       output_names=bundle.output_names)
    return Explanation(attribution, bundle)


def compare_models(bundle_or_path, challenger_model_or_path, *, customers: int = 200, baseline: str = "mean",
                   steps: int | str = 64, method: str = "gausslegendre", target=None, space: str = "output",
                   path: str = "joint", seed: int = 0, threshold: float | None = None, trust_code=None, limits=None,
                   trust_model: bool = False):
    """The bundle's model (the champion) against a challenger on ``customers`` customers sampled with ``seed``,
    both explained with the same settings (``baseline``, ``steps``, ... as in :func:`explain`): a
    ``explain.analysis.models.ModelComparison`` (``.sentence``, ``.kendall_tau``, ``.changed``,
    ``.disagreements``, ``.to_dict()``; ``explain.plots.models.shares(result)`` draws the shares).

    ``bundle_or_path``: a ``Bundle`` or a bundle folder; ``challenger_model_or_path``: a Keras model, or its
    ``.keras`` / ``.h5`` file, opened by the rules of a bundle's model (safe mode, ``limits``, and ``trust_code``:
    your own custom layers' Python file, for your own files only); ``trust_model=True``: the bundle folder's
    TensorFlow SavedModel (savedmodel/) may be opened (a program: for a model you trust, as ``--trust-model``).
    """
    from explain.analysis import models
    from explain.bundle.load import load_bundle, trusted_loader
    from explain.modelfile.limits import DEFAULT_LIMITS

    loader, limits = trusted_loader(trust_code), limits or DEFAULT_LIMITS
    bundle = bundle_or_path if isinstance(bundle_or_path, Bundle) else load_bundle(bundle_or_path, loader=loader,
                                                                                   limits=limits,
                                                                                   trust_model=trust_model)
    challenger, name = challenger_model_or_path, "the challenger"
    if isinstance(challenger, (str, os.PathLike)):
        challenger, name = models.open_challenger(challenger, loader=loader, limits=limits), str(challenger)
    settings = Settings(baseline=baseline, steps=steps, method=method, target=target, space=space, path=path,
                        seed=seed)
    return models.compare_models(bundle, challenger, customers=customers, settings=settings, seed=seed,
                                 threshold=threshold, name=name)


def _rank(value) -> int:
    return 2 if isinstance(value, pd.DataFrame) else np.ndim(value)


def _split(model, inputs) -> tuple[Any, Any]:
    """(static, temporal) from a list in the model's order or a dict, each told apart by its rank."""
    if isinstance(inputs, Mapping):
        if {"static", "temporal"} <= set(inputs):
            return inputs["static"], inputs["temporal"]
        values = list(inputs.values())
    elif isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
        values = list(inputs)
    else:
        raise ExplainError(NOT_TWO_INPUTS.format(found=type(inputs).__name__))
    ranks = [_rank(v) for v in values]
    if sorted(ranks) != [2, 3]:
        raise ExplainError(NOT_TWO_INPUTS.format(found=f"{len(values)} input(s) of rank(s) {ranks}"))
    return values[ranks.index(2)], values[ranks.index(3)]


def _baseline_arrays(baseline) -> dict:
    """{"static": (1, S) or (1, K, S), "temporal": (1, T, F) or (1, K, T, F)} from one customer or a sample."""
    if isinstance(baseline, Mapping) and {"static", "temporal"} <= set(baseline):
        static, temporal = baseline["static"], baseline["temporal"]
    elif isinstance(baseline, Sequence) and len(baseline) == 2:
        by_rank = {_rank(v): v for v in baseline}
        static, temporal = (by_rank.get(2), by_rank.get(3)) if set(by_rank) == {2, 3} else (by_rank.get(1),
                                                                                              by_rank.get(2))
    else:
        raise ExplainError(BASELINE_ARRAYS.format(found=type(baseline).__name__))
    if static is None or temporal is None:
        raise ExplainError(BASELINE_ARRAYS.format(found=[np.shape(v) for v in baseline]))
    static = np.asarray(static, np.float64)
    temporal = np.asarray(temporal, np.float64)
    if static.ndim == 1 and temporal.ndim == 2:  # one baseline customer
        return {"static": static[None], "temporal": temporal[None]}
    if static.ndim == 2 and temporal.ndim == 3:  # a background sample: expected gradients
        if static.shape[0] != temporal.shape[0]:
            raise ExplainError(BASELINE_SAMPLE_SIZES.format(s=static.shape[0], t=temporal.shape[0]))
        return {"static": static[None], "temporal": temporal[None]}
    raise ExplainError(BASELINE_ARRAYS.format(found=[static.shape, temporal.shape]))
