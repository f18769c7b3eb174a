"""The standalone HTML report of one customer: finished attributions and figures -> one page that opens offline."""

from __future__ import annotations

from html import escape

import plotly.io as pio

from explain.analysis.drivers import profile_sentence, reason_text
from explain.analysis.report import HOW_TO_READ, delta_status, settings_dict, summary_text
from explain.core import baselines, verdict
from explain.core.errors import ExplainError
from explain.core.periods import words as periods_words
from explain.core.text import unit_after
from explain.plots import drivers as driver_plots
from explain.plots import over_runs as over_runs_plots

_HTML_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2em auto;
     padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
.metrics{display:flex;gap:2em;flex-wrap:wrap;margin:1em 0}
.metric{background:#f6f6f6;border-radius:6px;padding:.6em 1em} .metric b{display:block;font-size:1.4em}
.badge{display:inline-block;padding:.2em .7em;border-radius:1em;font-weight:600}
.fine{background:#e3f4e6;color:#1b5e20} .check{background:#fff3d6;color:#7a5300}
.too-few-steps{background:#fde3e1;color:#8b1a10}
table{border-collapse:collapse;font-size:.92em} td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left}
.verdict{font-size:1.3em;font-weight:600;margin:.3em 0} td.num{text-align:right;font-variant-numeric:tabular-nums} \
.muted{color:#666;font-size:.9em}
"""


def html_report(attribution, bundle, ids, i: int = 0, request=None, figures=(), *, title: str | None = None,
                story=None) -> str:
    """A standalone HTML page about customer ``ids[i]`` (row ``i`` of ``attribution``) that opens offline.

    ``figures``: (heading, plotly Figure or figure dict) pairs; plotly.js is embedded inline once (with the
    first figure), so the file needs no network. ``story``: the Customer page's words
    (``explain.figures.customer_story``), written under "In words" as the page says them; without one, a summary
    of the largest effects. Every name and id is HTML-escaped.
    """
    cid = str(list(ids)[i])
    settings = settings_dict(attribution, request)
    settings["space used"] = attribution.space_used
    target_name = bundle.output_names[attribution.settings.target]
    settings["target"] = target_name  # by name, as the page says it (the JSON download keeps the index)
    fx, fb, delta = (float(attribution.prediction[i]), float(attribution.baseline_prediction[i]),
                     float(attribution.delta[i]))
    status, advice = delta_status(delta, fx, fb)
    try:
        baseline_text = baselines.describe(settings.get("baseline", ""), unit=periods_words(bundle).unit)
    except ExplainError:
        baseline_text = ""
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(title or f'Explanation of customer {cid}')}</title>",
        f"<style>{_HTML_STYLE}</style></head><body>",
        f"<h1>{escape(title or f'Why customer {cid} scores {fx:.2f}')}</h1>",
        f"<p class='muted'>Target: {escape(str(target_name))} ({escape(attribution.space_used)}); "
        f"bundle content hash {escape(str(getattr(bundle, 'content_hash', ''))[:12])}</p>",
        "<div class='metrics'>",
        f"<div class='metric'>prediction<b>{fx:.4f}</b></div>",
        f"<div class='metric'>baseline prediction<b>{fb:.4f}</b></div>",
        f"<div class='metric'>difference explained<b>{fx - fb:+.4f}</b></div>",
        f"<div class='metric'>delta (gap)<b>{delta:+.2g}</b></div></div>",
        *([f"<p class='verdict'>{escape(verdict.verdict(fx, verdict.bands_of(bundle), target_name).headline)}</p>"]
          if attribution.space_used == "output" else []),
        f"<p><span class='badge {escape(status.replace(' ', '-'))}'>{escape(status)} · adds up to "
        f"{escape(verdict.quality(delta, fx, fb))}</span> {escape(advice)}</p>",
        "<h2>In words</h2>", *_in_words(attribution, bundle, i, story),
        f"<h2>How to read this</h2><p>{escape(HOW_TO_READ)}</p>",
        f"<p><b>Baseline</b> ({escape(str(settings.get('baseline', '')))}): {escape(baseline_text)}</p>",
    ]
    for k, (heading, fig) in enumerate(figures):
        parts.append(f"<h2>{escape(str(heading))}</h2>")
        parts.append(pio.to_html(fig, full_html=False, include_plotlyjs=(k == 0),  # a Figure or a figure dict
                                 config={"displaylogo": False, "responsive": True}))
    inputs = bundle.inputs_for([cid])
    rows = sorted(range(attribution.static.shape[1]), key=lambda j: -abs(attribution.static[i, j]))
    parts.append("<h2>Static attributions</h2><table><tr><th>feature</th><th>value</th><th>attribution</th></tr>")
    for j in rows:
        unit = bundle.units.get(bundle.static_features[j], "") if getattr(bundle, "units", None) else ""
        unit = unit_after(bundle.static_labels[j], unit)
        parts.append(f"<tr><td>{escape(str(bundle.static_labels[j]))}</td>"
                     f"<td class='num'>{float(inputs['static'][0, j]):.4g} {escape(str(unit or ''))}</td>"
                     f"<td class='num'>{float(attribution.static[i, j]):+.4g}</td></tr>")
    parts.append("</table><h2>Settings</h2><table>")
    for key, value in settings.items():
        parts.append(f"<tr><th>{escape(str(key))}</th><td>{escape(str(value))}</td></tr>")
    parts.append("</table><p class='muted'>Written by the IG explainer. Attributions add up to "
                 "prediction minus baseline prediction, up to the delta shown above.</p></body></html>")
    return "\n".join(parts)


def _in_words(attribution, bundle, i: int, story) -> list[str]:
    """The Customer page's words as HTML paragraphs (the story's), else the summary of the largest effects."""
    if story is None:
        return [f"<p>{escape(summary_text(attribution, bundle, i))}</p>"]
    parts = [f"<p>{escape(text)}</p>" for text in (story.headline, story.outcome, story.history) if text]
    if story.reasons:
        parts.append(f"<p>The largest effects (compared with {escape(story.reference)}):</p><ul>"
                     + "".join(f"<li>{escape(r)}</li>" for r in story.reasons) + "</ul>")
    if story.keep:
        parts.append(f"<p class='muted'>{escape(story.keep)}</p>")
    return parts


# ----------------------------------------------------------------------------- drivers


def drivers_report(d, *, title: str = "What drives the prediction across customers", over_runs=None,
                   movers=None) -> str:
    """A standalone HTML page of a ``Drivers`` (``explain.drivers``): its sentences, figures and
    segments; opens offline (plotly.js inline once). Every name and id is HTML-escaped. ``over_runs``: drivers
    over runs (``explain.analysis.over_runs.Series``); ``movers``: the biggest movers
    (``explain.analysis.movers.Movers``): their words join the others, then a section each."""
    figs = driver_plots.figures(d)
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>", f"<title>{escape(title)}</title>",
             f"<style>{_HTML_STYLE}</style></head><body>", f"<h1>{escape(title)}</h1>",
             f"<p class='muted'>{d.n_customers:,} customers from the store {escape(str(d.source.get('store', '')))} "
             f"(finished {escape(str(d.source.get('completed', '')))}).</p>",
             f"<h2>In words</h2><p>{escape(d.sentence)}</p>",
             *([f"<p>{escape(d.group_sentence)}</p>"] if d.groups else []),
             *(f"<p>{escape(profile_sentence(p))}</p>" for p in d.time_profiles),
             *([f"<p>{escape(d.drift.sentence)}</p>"] if d.drift is not None else []),
             *(f"<p>{escape(x.sentence)}</p>" for x in (over_runs, movers) if x is not None)]
    shown = [("Ranking", figs.ranking), ("Every customer", figs.beeswarm),
             *((f"Time profile: {p.input}", fig) for p, fig in zip(d.time_profiles, figs.time_profiles)),
             ("Segments", figs.segments), ("Segment sizes", figs.segment_sizes),
             *([("Drift", figs.drift)] if figs.drift is not None else [])]
    for k, (heading, fig) in enumerate(shown):
        parts.append(f"<h2>{escape(heading)}</h2>")
        parts.append(pio.to_html(fig, full_html=False, include_plotlyjs=(k == 0),
                                 config={"displaylogo": False, "responsive": True}))
    parts.extend(_over_runs_part(over_runs) + _movers_part(movers))
    if d.groups:
        parts.append("<h2>Groups of related features</h2><table><tr><th>group</th><th>how</th><th>share</th>"
                     "<th>members</th></tr>")
        parts.extend(f"<tr><td>{escape(g.name)}</td><td>{escape(g.how)}</td><td class='num'>{g.share:.0%}</td>"
                     f"<td>{escape(', '.join(f.label for f in g.members))}</td></tr>" for g in d.groups)
        parts.append("</table>")
    parts.append("<h2>Segments</h2><table><tr><th>segment</th><th>customers</th><th>share</th>"
                 "<th>mean prediction</th><th>churn rate</th><th>main effects</th><th>highest risk</th></tr>")
    for s in d.segments:
        drivers = "; ".join(reason_text(x) for x in s.drivers)
        churn = "" if s.churn_rate is None else f"{s.churn_rate:.0%}"
        parts.append(f"<tr><td>{escape(s.name)}</td><td class='num'>{s.size:,}</td><td class='num'>{s.share:.0%}</td>"
                     f"<td class='num'>{s.mean_prediction:.3f}</td><td class='num'>{churn}</td>"
                     f"<td>{escape(drivers)}</td><td>{escape(s.highest_risk)}</td></tr>")
    parts.append("</table><p class='muted'>Written by the IG explainer (python -m explain drivers).</p></body></html>")
    return "\n".join(parts)


def _over_runs_part(series) -> list[str]:
    """Drivers over runs: its words, its figure (plotly.js already on the page) and each run's store."""
    if series is None:
        return []
    runs = "".join(f"<tr><td>{escape(r.label)}</td><td>{escape(r.store)}</td><td class='num'>{r.customers:,}</td>"
                   f"<td>{escape(r.completed)}</td></tr>" for r in series.runs)
    return [f"<h2>Drivers over runs</h2><p>{escape(series.sentence)}</p>",
            pio.to_html(over_runs_plots.shares(series), full_html=False, include_plotlyjs=False,
                        config={"displaylogo": False, "responsive": True}),
            f"<table><tr><th>run</th><th>store</th><th>customers</th><th>finished</th></tr>{runs}</table>"]


def _movers_part(movers) -> list[str]:
    """The biggest movers: their words and the table (id, risk then, risk now, rise, first reason)."""
    if movers is None:
        return []
    rows = "".join(f"<tr><td>{escape(m.customer)}</td><td class='num'>{m.then:.3f}</td><td class='num'>{m.now:.3f}"
                   f"</td><td class='num'>{m.rise:+.3f}</td><td>{escape(m.reason)}</td></tr>" for m in movers.rows)
    return [f"<h2>Biggest movers since {escape(movers.since)}</h2><p>{escape(movers.sentence)}</p>",
            f"<table><tr><th>customer</th><th>risk then</th><th>risk now</th><th>rise</th><th>first reason</th></tr>"
            f"{rows}</table><p class='muted'>From the store {escape(movers.store)} (baseline "
            f"{escape(movers.baseline)}: each customer as it was then).</p>"]
