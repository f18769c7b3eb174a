"""Compute, then draw: the Python API's one-call figures of a bundle's attributions.

``explain.figures.heatmap(a, bundle, customer)`` looks up the customer's row, values and baseline, then calls the
builders of :mod:`explain.plots` (which only draw finished results); ``diagnostics(bundle, customer)`` runs the
Diagnostics page's computations and draws them; ``html(a, bundle, customer)`` writes the standalone report.
This module sits above ``explain.plots`` and ``explain.analysis``: nothing below imports it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import plotly.graph_objects as go

from explain.analysis import cohort as cohorts
from explain.analysis import diagnostics as diag
from explain.analysis import words
from explain.analysis.diagnostics import shown_baseline
from explain.analysis.report import DELTA_FINE
from explain.core.errors import ExplainError
from explain.core.files import write_atomic
from explain.core.periods import words as periods_words
from explain.core.settings import Settings
from explain.plots import html as html_page
from explain.plots.diagnostics import delta_by_steps, integration_points_figure, path_figure
from explain.plots.figures import (
    compare_figures,
    compare_static,
    feature_ranking,
    history_figure,
    history_spec,
    magnitude_heatmap,
    period_profile,
    risk_histogram,
    static_bars,
    static_bars_spec,
    temporal_heatmap,
    temporal_panel,
    temporal_panel_spec,
)
from explain.plots.periods import Plan, compare_plan, heatmap_plan

# ----------------------------------------------------------------------------- from Python
# The dashboard's views for a notebook: an ``Attribution`` and its bundle in, Plotly figures
# out, e.g. ``explain.figures.heatmap(a, bundle, customer=0).show()``. Thin adapters over the
# builders of explain.plots (the same figures the pages draw).
#
# ``customer``: a row of ``a`` (0, 1, ...) or a customer id. ``ids``: the ids of ``a``'s rows,
# in order (default: the bundle's, when ``a`` holds every customer of the bundle).
# ``baseline``: a baseline spec ("mean", "cohort:0", ...; computed as the dashboard does) or
# arrays {"static": (S,), "temporal": (T, F)}, shown in hover text and as the dashed history;
# by default the attribution's own (``explain_customers`` records it; ``integrated_gradients`` does not).

NEEDS_IDS = ("The attribution holds {n} customer(s) and the bundle {m}: pass ids=[...] (the ids the "
             "attribution was computed for, in order) so that each row is matched with its customer's values.")
IDS_COUNT = "ids has {given} id(s) but the attribution holds {n} customer(s); give one id per row, in order."
UNKNOWN_CUSTOMER = ("customer={customer!r} is not one of the attribution's {n} customer(s) (for example "
                    "{examples}): pass a row number from 0 to {last} or one of their ids.")


class CompareFigures(NamedTuple):
    """The Compare page's four figures."""

    first: go.Figure
    second: go.Figure
    difference: go.Figure
    static: go.Figure


class CohortFigures(NamedTuple):
    """The Cohort page's five figures."""

    risk: go.Figure
    magnitude: go.Figure
    signed: go.Figure
    ranking: go.Figure
    periods: go.Figure


def attribution_ids(a, bundle, ids=None) -> list[str]:
    """The customer ids of ``a``'s rows: ``ids``, or the bundle's when ``a`` holds all of them."""
    if ids is None:
        if a.n_customers != bundle.n_customers:
            raise ExplainError(NEEDS_IDS.format(n=a.n_customers, m=bundle.n_customers))
        return [str(i) for i in bundle.ids]
    ids = [str(i) for i in ([ids] if isinstance(ids, str) else ids)]
    if len(ids) != a.n_customers:
        raise ExplainError(IDS_COUNT.format(given=len(ids), n=a.n_customers))
    return ids


def customer_row(a, bundle, customer, ids) -> tuple[int, str]:
    ids = attribution_ids(a, bundle, ids)
    if isinstance(customer, (int, np.integer)) and not isinstance(customer, bool) and 0 <= customer < len(ids):
        return int(customer), ids[int(customer)]
    if str(customer) in ids and not isinstance(customer, (int, np.integer)):
        return ids.index(str(customer)), str(customer)
    raise ExplainError(UNKNOWN_CUSTOMER.format(customer=customer, n=len(ids), last=len(ids) - 1,
                                               examples=", ".join(repr(i) for i in ids[:3])))


def _baseline_of(bundle, cid: str, baseline) -> dict | None:
    """{"static": (S,), "temporal": (T, F)} to show, or None; a spec as the dashboard shows it."""
    if baseline is None:  # the attribution's own baseline, when it says (explain_customers)
        return None
    if not isinstance(baseline, dict):
        return shown_baseline(bundle, cid, Settings(baseline=baseline))  # a spec or a Baseline
    static = np.asarray(baseline["static"], np.float64)
    temporal = np.asarray(baseline["temporal"], np.float64)
    return {"static": static.reshape(-1, bundle.n_static)[0],
            "temporal": temporal.reshape(-1, bundle.n_periods, bundle.n_temporal)[0]}


def _units(bundle, names) -> list:
    return [bundle.units.get(c) for c in names]


class _Customer(NamedTuple):
    """One customer of an attribution as its figures read it: ``a`` and its bundle, the customer's row of ``a``
    and id, and the baseline's values shown beside the customer, by input key ({}: none)."""

    a: object
    bundle: object
    row: int
    cid: str
    reference: dict


def _customer(a, bundle, customer, ids, baseline) -> _Customer:
    """The customer, with ``baseline`` (a spec or arrays, see :func:`heatmap`) or else the attribution's own."""
    row, cid = customer_row(a, bundle, customer, ids)
    return _Customer(a, bundle, row, cid, _baseline_of(bundle, cid, baseline if baseline is not None
                                                       else a.settings.baseline) or {})


def heatmap(a, bundle, customer=0, *, ids=None, baseline=None, title: str | None = "", view=None) -> go.Figure:
    """The Customer page's period x feature heatmap with its totals per period and per feature
    (``title`` "": "Monthly features: effect of each feature in each period", in the bundle's period;
    ``view``: the bin and zoom of a long history, ``explain.plots.periods.View``)."""
    if title == "":
        title = f"{periods_words(bundle).adjective.capitalize()} features: effect of each feature in each period"
    who = _customer(a, bundle, customer, ids, baseline)
    return _panel(who, history_plan(a, bundle, who.row, view), title)


def _panel(who: _Customer, plan: Plan, title: str | None, spec: bool = False):
    """The heatmap panel of a plain bundle's history, drawn as ``plan`` says, the baseline in its hover text."""
    a, bundle = who.a, who.bundle
    build = temporal_panel_spec if spec else temporal_panel
    return build(bundle.periods, bundle.temporal_labels, a.temporal[who.row],
                 values=bundle.inputs_for([who.cid])["temporal"][0], baseline=who.reference.get("temporal"),
                 units=_units(bundle, bundle.temporal_features), title=title, plan=plan)


def history_heatmaps(a, bundle, customer=0, *, ids=None, baseline=None, views=None) -> list[tuple[str, go.Figure]]:
    """(title, heatmap panel) of every temporal input of the customer, padded periods grey
    ("no data"): one for a plain bundle (``heatmap``), one per history for more inputs. ``views``:
    {input key: ``explain.plots.periods.View``}, the bin and zoom of long histories."""
    row, cid = customer_row(a, bundle, customer, ids)
    views = views or {}
    if getattr(bundle, "plain", True):
        title = history_titles(bundle)[0]
        return [(title, heatmap(a, bundle, row, ids=ids, baseline=baseline, title=title,
                                view=views.get("temporal")))]
    return _input_panels(a, bundle, row, cid, views)


def _input_panels(a, bundle, row: int, cid: str, views: dict) -> list[tuple[str, go.Figure]]:
    """(title, heatmap panel) of each history of a bundle with more inputs, each drawn as its own plan says."""
    values = bundle.inputs_for([cid])
    out = []
    for key, title in zip(bundle.layout.keys_of("temporal"), history_titles(bundle)):
        columns = bundle.input_features[key]
        attr = np.asarray(a.inputs[key][row], np.float64).reshape(len(bundle.input_periods[key]), -1)
        own = np.asarray(values[key][0])
        own = own.reshape(attr.shape).astype(np.float64) if own.dtype.kind in "fiub" else None
        names, pad = [bundle.feature_labels.get(c, c) for c in columns], a.padding.get(key)
        pad = None if pad is None else pad[row]
        plan = heatmap_plan(bundle.input_periods[key], names, attr, padding=pad, view=views.get(key))
        out.append((title, temporal_panel(bundle.input_periods[key], names, attr, values=own,
                                          units=_units(bundle, columns), title=title, plan=plan)))
    return out


def history_titles(bundle) -> list[str]:
    """The title of each history's heatmap ("Daily features: effect of each feature in each period";
    "NAME: ..." for a named input of a bundle with more inputs), in the order of ``history_heatmaps``."""
    plain = f"{periods_words(bundle).adjective.capitalize()} features"
    if getattr(bundle, "plain", True):
        return [f"{plain}: effect of each feature in each period"]
    titles = []
    for spec in bundle.layout.specs:
        if spec.role != "temporal":
            continue
        label = bundle.input_labels.get(spec.key, spec.key)
        if label == spec.key == "temporal":  # no display name: the history by its period ("Weekly features")
            label = plain
        title = f"{label}: effect of each feature in each period"
        if spec.kind == "categorical":
            title += " (category ids, summed over the embedding)"
        titles.append(title)
    return titles


STATIC_TITLE = "Static features (label: the customer's value)"


def static_all(a, bundle, customer=0, *, ids=None, baseline=None, title: str | None = STATIC_TITLE,
               top: int | None = None) -> go.Figure:
    """Every static feature together (numeric and categorical inputs side by side), categories
    by their display text; ``top``: more features than that folded (``static_bars``)."""
    if getattr(bundle, "plain", True):
        return static(a, bundle, customer, ids=ids, baseline=baseline, title=title, top=top)
    row, cid = customer_row(a, bundle, customer, ids)
    return _input_bars(a, bundle, row, cid, title=title, top=top)


def _input_bars(a, bundle, row: int, cid: str, *, title, top) -> go.Figure:
    """The static bars of a bundle with more inputs: its numbers, and its categories by their display text."""
    values = bundle.inputs_for([cid])
    shown = []
    for spec in bundle.layout.specs:
        if spec.role != "static":
            continue
        for column, value in zip(bundle.input_features[spec.key], np.ravel(values[spec.key][0])):
            names = bundle.categories.get(column, {})
            if spec.kind == "categorical":
                key = str(int(value)) if not isinstance(value, str) else value
                shown.append(str(names.get(key, key)))
            else:
                shown.append(float(value))
    return static_bars(bundle.static_labels, a.static[row], shown, units=_units(bundle, bundle.static_features),
                       title=title, top=top)


def static(a, bundle, customer=0, *, ids=None, baseline=None, title: str | None = STATIC_TITLE,
           top: int | None = None) -> go.Figure:
    """The Customer page's signed, sorted bars of the static attributions (``top``: see ``static_bars``)."""
    return _bars(_customer(a, bundle, customer, ids, baseline), title=title, top=top)


def _bars(who: _Customer, *, title, top, spec: bool = False):
    """The static bars of a plain bundle's customer, the baseline's values in their hover text."""
    bundle = who.bundle
    build = static_bars_spec if spec else static_bars
    return build(bundle.static_labels, who.a.static[who.row], bundle.inputs_for([who.cid])["static"][0],
                 units=_units(bundle, bundle.static_features), baseline=who.reference.get("static"), title=title,
                 top=top)


def history(a, bundle, customer=0, *, ids=None, baseline=None, columns: int = 2,
            title: str | None = "", view=None) -> go.Figure:
    """The Customer page's raw history of the customer, one small chart per feature (``title`` "":
    "The customer's monthly history (dashed: the baseline)", in the bundle's period). A long history
    is drawn as its heatmap is (``view``: its bin and zoom, ``explain.plots.periods.View``): the mean
    of each bin, the features the heatmap shows on rows of their own; padded periods are gaps."""
    who = _customer(a, bundle, customer, ids, baseline)
    if title == "":
        title = f"The customer's {periods_words(bundle).adjective} history (dashed: the baseline)"
    return _history_lines(who, history_plan(a, bundle, who.row, view),
                          baseline=who.reference.get(cohorts.first_history(bundle)), columns=columns, title=title)


def _history_lines(who: _Customer, plan: Plan, *, baseline, columns: int, title, spec: bool = False):
    """The customer's first history against ``baseline`` (T, F), drawn in ``plan``'s bins and rows."""
    bundle = who.bundle
    values, baseline = history_values(who.a, bundle, who.row, who.cid, baseline)
    build = history_spec if spec else history_figure
    return build(bundle.periods, bundle.temporal_labels, values, baseline=baseline,
                 units=_units(bundle, bundle.temporal_features), columns=columns, title=title, plan=plan)


def history_values(a, bundle, row: int, cid: str, baseline=None) -> tuple[np.ndarray, np.ndarray | None]:
    """The customer's first history (T, F) and ``baseline`` (T, F) as float64, NaN at the customer's
    padded periods (no data: a gap in the lines)."""
    pad = cohorts.padding_of(a)[row][:, None]
    values = np.where(pad, np.nan, np.asarray(bundle.inputs_for([cid])[cohorts.first_history(bundle)][0], np.float64))
    return values, None if baseline is None else np.where(pad, np.nan, np.asarray(baseline, np.float64))


def history_plan(a, bundle, row: int, view=None) -> Plan:
    """The plan of the customer's first history as its heatmap draws it (the same bins, zoom and
    rows: ``explain.plots.periods.heatmap_plan`` of its attributions): what the history lines follow."""
    pad = cohorts.padding_of(a)[row]
    return heatmap_plan(bundle.periods, bundle.temporal_labels, np.asarray(a.temporal[row], np.float64),
                        padding=pad if pad.any() else None, view=view)


def compare(a, bundle, first=0, second=1, *, ids=None) -> CompareFigures:
    """The Compare page for two customers of ``a``: their heatmaps on one shared scale, the
    difference (first minus second, own scale) and their static attributions side by side."""
    i, id_a = customer_row(a, bundle, first, ids)
    j, id_b = customer_row(a, bundle, second, ids)
    values = bundle.inputs_for([id_a, id_b])[cohorts.first_history(bundle)]
    pad = cohorts.padding_of(a)
    plan = compare_plan(bundle.periods, bundle.temporal_labels, a.temporal[i], a.temporal[j], padding=(pad[i], pad[j]))
    figs = compare_figures(bundle.periods, bundle.temporal_labels, a.temporal[i], a.temporal[j],
                           names=(id_a, id_b), values=(values[0], values[1]),
                           units=_units(bundle, bundle.temporal_features), padding=(pad[i], pad[j]), plan=plan)
    return CompareFigures(*figs, compare_static(bundle.static_labels, a.static[i], a.static[j], names=(id_a, id_b)))


def cohort(a, bundle, *, bands=None) -> CohortFigures:
    """The Cohort page over every customer of ``a``: predicted scores, mean |attribution| and
    signed mean heatmaps, the feature ranking and the per-period profile."""
    agg = cohorts.aggregate(np.asarray(a.static, np.float64), np.asarray(a.temporal, np.float64),
                            bundle.static_labels, bundle.temporal_labels, cohorts.padding_of(a))
    cuts = list(cohorts.RISK_CUTS if bands is None else bands)
    periods, features = bundle.periods, bundle.temporal_labels
    return CohortFigures(
        risk_histogram(a.prediction, cuts, title="Predicted scores of the customers shown"),
        magnitude_heatmap(periods, features, agg.mean_abs, plan=heatmap_plan(periods, features, agg.mean_abs),
                          title="How much each cell matters: mean |attribution|"),
        temporal_heatmap(periods, features, agg.signed_mean, plan=heatmap_plan(periods, features, agg.signed_mean),
                         title="Which way on average: signed mean"),
        feature_ranking(agg.feature_names, agg.feature_abs, agg.feature_signed, title="Feature ranking"),
        period_profile(periods, agg.period_abs, agg.period_signed, title="Per-period profile"),
    )


# ----------------------------------------------------------------------------- the Customer page


class Shown(NamedTuple):
    """One figure of the Customer page: its heading, its kind ("heatmap", "static" or "history") and the figure."""

    heading: str
    kind: str
    figure: object  # a go.Figure, or a figure dict (``spec=True``)


class CustomerView(NamedTuple):
    """The Customer page about one customer: its words (``explain.analysis.words.Story``) and its figures."""

    story: words.Story
    figures: list[Shown]


def customer_story(a, bundle, customer=0, *, ids=None, settings=None, reference=None, scores=None,
                   groups=None) -> words.Story:
    """The Customer page's words about one customer of ``a`` (the dashboard, the HTML report and a notebook call
    this): the sentence with the score and the main reasons, each reason with the customer's value, what it is
    compared with and its effect, the known outcome, the history's length. ``settings``: the request (its baseline
    names the reference; default the attribution's); ``reference``: the baseline's values by input key
    (``explain.analysis.words.references``; computed when None); ``scores``: every customer's score; ``groups``:
    the bundle's feature groups (``explain.analysis.groups.of``, found when None): a group's members that push the
    same way are said as one reason with their summed effect, each member still listed with its own."""
    row, cid = customer_row(a, bundle, customer, ids)
    return words.story(a, bundle, row, cid, settings=settings, reference=reference, scores=scores, groups=groups)


PARTS = ("all", "heatmaps", "rest")


def customer_figures(a, bundle, customer=0, *, ids=None, reference=None, views=None, top=None,
                     spec: bool = False, part: str = "all") -> list[Shown]:
    """The Customer page's figures of one customer, in order: each history's heatmap (padded periods grey, "no
    data"), the static bars, and (one history) the customer's history against the baseline in the heatmap's bins.
    ``reference``: the baseline's values by input key (hover text and the dashed history; default the
    attribution's baseline); ``views``: {input key: ``explain.plots.periods.View``}; ``top``: static bars shown
    before the rest fold; ``spec``: plain figure dicts where a builder has them (the dashboard's fast path: a plain
    bundle's three figures); ``part``: "heatmaps" (only those) or "rest" (the others), the page's heatmaps made
    and sent before the rest. The first history's plan is made once: its heatmap and its lines draw the same."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, not {part!r}")
    row, cid = customer_row(a, bundle, customer, ids)
    views, first = views or {}, cohorts.first_history(bundle)
    if reference is None and a.settings.baseline is not None:
        reference = shown_baseline(bundle, cid, a.settings, attribution=a, row=row)
    who = _Customer(a, bundle, row, cid, reference or {})
    plan = history_plan(a, bundle, row, views.get(first)) if a.temporal is not None else None
    shown, with_heatmaps, with_rest = [], part != "rest", part != "heatmaps"
    if getattr(bundle, "plain", True):
        title = history_titles(bundle)[0]
        if with_heatmaps:
            shown.append(Shown(title.split(":")[0], "heatmap", _panel(who, plan, title, spec)))
        if with_rest:
            shown.append(Shown("Static features", "static", _bars(who, title=STATIC_TITLE, top=top, spec=spec)))
    else:
        if with_heatmaps:
            shown += [Shown(title.split(":")[0], "heatmap", fig)
                      for title, fig in _input_panels(a, bundle, row, cid, views)]
        if with_rest:
            shown.append(Shown("Static features", "static",
                               _input_bars(a, bundle, row, cid, title=STATIC_TITLE, top=top)))
    if plan is not None and with_rest:  # one history: the customer's against the baseline, in the heatmap's bins
        gaps = "; gaps: no data" if cohorts.padding_of(a)[row].any() else ""
        said = periods_words(bundle)
        shown.append(Shown("History", "history", _history_lines(
            who, plan, baseline=who.reference.get(first), columns=2, spec=spec,
            title=f"The customer's {said.adjective} history (dashed: the baseline{gaps})")))
    return shown


def customer_view(a, bundle, customer=0, *, ids=None, settings=None, reference=None, scores=None, views=None,
                  top=None, groups=None) -> CustomerView:
    """The Customer page for one customer of ``a``, words and figures: ``explain.figures.customer(a, bundle,
    "C00042").story.text()``; ``.figures``: (heading, kind, go.Figure). Arguments as in :func:`customer_story`
    and :func:`customer_figures`."""
    row, cid = customer_row(a, bundle, customer, ids)
    settings = settings if settings is not None else a.settings
    if reference is None:
        reference = words.references(bundle, cid, settings) if settings.baseline is not None else {}
    return CustomerView(words.story(a, bundle, row, cid, settings=settings, reference=reference, scores=scores,
                                    groups=groups),
                        customer_figures(a, bundle, row, ids=ids, reference=reference, views=views, top=top))


customer = customer_view  # explain.figures.customer(a, bundle, "C00042"): the Customer page, words and figures


# ----------------------------------------------------------------------------- what-if




class DiagnosticsFigures(NamedTuple):
    """The Diagnostics page's two figures."""

    convergence: go.Figure
    path: go.Figure


def diagnostics(bundle, customer, settings=None, *, steps=None, points: int | None = None) -> DiagnosticsFigures:
    """The Diagnostics page for one customer id: |delta| against steps for every rule, and the
    prediction and gradient size along the path from the baseline. Computes attributions
    (5 rules x 7 step counts by default). ``settings``: an ``explain.Settings`` (default: mean baseline)."""
    settings = settings or Settings()
    cid = str(customer)
    sweep = diag.delta_sweep(bundle, cid, settings, steps or diag.SWEEP_STEPS)
    profile = diag.path_profile(bundle, cid, settings, points or diag.PATH_POINTS)
    target = settings.for_bundle(bundle).target
    return DiagnosticsFigures(
        delta_by_steps(sweep["steps"], sweep["deltas"], tolerance=DELTA_FINE * max(abs(sweep["gap"]), 0.01),
                       title=f"Does the integral converge? Customer {cid}"),
        path_figure(profile, y_title=f"{bundle.output_names[target]} ({settings.space})",
                    title="Along the path from baseline to customer"),
    )




def integration_points(bundle, customer, settings=None, *, alphas: int | None = None) -> go.Figure:
    """The Diagnostics page's points chart for one customer id: the prediction along the straight path
    from the baseline (``alphas`` model calls, 257 by default) and the points the engine integrates the
    gradient at under ``settings`` (default: mean baseline, 64 points; ``Settings(steps="auto")``: the
    points placed for this customer, in panels). The numbers: ``explain.analysis.diagnostics.integration_points``."""
    settings = settings or Settings()
    cid = str(customer)
    found = diag.integration_points(bundle, cid, settings, alphas or diag.SWEEP_ALPHAS)
    target = settings.for_bundle(bundle).target
    return integration_points_figure(found, y_title=f"{bundle.output_names[target]} ({settings.space})",
                                     title=f"Where the engine placed its points: customer {cid}")


def html(attribution, bundle, customer=0, path=None, *, ids=None, baseline=None) -> str:
    """The Customer page's HTML report (the dashboard's download) for one customer, as text;
    also written to ``path`` (atomically) when given. Opens offline (plotly.js inline).

    ``customer``, ``ids`` and ``baseline`` as in :func:`heatmap`: a baseline
    spec (such as "mean") is also named in the report's settings; by default the one the
    attribution was computed with (``explain_customers``), if it says.
    ``explain.figures.html(a, bundle, customer="C00042", path="C00042.html")``.
    """
    row, cid = customer_row(attribution, bundle, customer, ids)
    settings = attribution.settings
    if isinstance(baseline, str):
        settings = settings.replace(baseline=baseline)
    reference = _baseline_of(bundle, cid, baseline) if isinstance(baseline, dict) else None
    view = customer_view(attribution, bundle, row, ids=ids, settings=settings, reference=reference)
    text = html_page.html_report(attribution, bundle, attribution_ids(attribution, bundle, ids), row,
                                 settings if settings.baseline is not None else None,
                                 [(shown.heading, shown.figure) for shown in view.figures], story=view.story)
    if path is not None:
        write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return text
