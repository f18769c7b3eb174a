"""The standalone HTML report of a champion-against-challenger comparison (``python -m explain compare-models
--out report.html``): the answer in words, the two models' shares side by side, the biggest changes, and the
customers the models disagree on with both models' reasons; opens offline (plotly.js inline)."""

from __future__ import annotations

from html import escape

import plotly.io as pio

from explain.plots import models as model_plots
from explain.plots.html import _HTML_STYLE

CHANGES_LISTED = 15
DISAGREEMENTS_LISTED = 200


def _reasons(reasons) -> str:
    return "<br>".join(f"{escape(r.label)} {r.attribution:+.3f}" for r in reasons) or "no effect"


def _settings(result) -> str:
    items = "; ".join(f"{escape(str(k))} {escape(str(v))}" for k, v in result.settings.as_dict().items())
    return (f"<p class='muted'>{len(result.customers):,} customers sampled; both models explained with the same "
            f"settings and baseline: {items}. Flagged: score &gt;= {result.threshold:g} ({escape(result.space)}).</p>")


def _changes(result) -> list[str]:
    parts = ["<h2>What changed most</h2><table><tr><th>feature</th><th>champion share</th>"
             "<th>challenger share</th><th>in words</th></tr>"]
    parts += [f"<tr><td>{escape(c.feature.label)}</td><td class='num'>{100 * c.champion_share:.1f} %</td>"
              f"<td class='num'>{100 * c.challenger_share:.1f} %</td><td>{escape(c.words)}</td></tr>"
              for c in result.changed[:CHANGES_LISTED]]
    parts.append("</table>")
    return parts


def _disagreements(result) -> list[str]:
    shown = result.disagreements[:DISAGREEMENTS_LISTED]
    more = len(result.disagreements) - len(shown)
    parts = [f"<h2>Customers the models disagree on ({len(result.disagreements)})</h2>"]
    if not shown:
        return parts + [f"<p>None: at the threshold {result.threshold:g} both models flag the same customers.</p>"]
    parts.append("<table><tr><th>customer</th><th>flagged by</th><th>champion score</th><th>challenger score</th>"
                 "<th>champion's top reasons</th><th>challenger's top reasons</th></tr>")
    parts += [f"<tr><td>{escape(d.customer)}</td><td>{d.flagged_by} only</td>"
              f"<td class='num'>{d.champion_score:.3f}</td><td class='num'>{d.challenger_score:.3f}</td>"
              f"<td>{_reasons(d.champion_reasons)}</td><td>{_reasons(d.challenger_reasons)}</td></tr>" for d in shown]
    parts.append("</table>" + (f"<p class='muted'>... and {more} more (all of them in the JSON report).</p>"
                               if more else ""))
    return parts


def models_report(result, *, title: str = "Champion against challenger") -> str:
    """A standalone HTML page of a ``ModelComparison``; every name and id is HTML-escaped."""
    overlap = result.top3_overlap
    figure = pio.to_html(model_plots.shares(result), full_html=False, include_plotlyjs=True,
                         config={"displaylogo": False, "responsive": True})
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>", f"<title>{escape(title)}</title>",
             f"<style>{_HTML_STYLE}</style></head><body>", f"<h1>{escape(title)}</h1>",
             f"<p class='muted'>The champion is the bundle's model; the challenger {escape(result.challenger_name)}."
             "</p>", _settings(result), "<h2>In words</h2>", f"<p>{escape(result.sentence)}</p>",
             f"<p>Top-3 reasons: {overlap.mean:.2f} of 3 in common on average; all 3 in common for "
             f"{overlap.all_three:.0%} of the customers.</p>",
             "<h2>Share of each feature under each model</h2>", figure, *_changes(result), *_disagreements(result),
             "<p class='muted'>Written by the IG explainer (python -m explain compare-models).</p></body></html>"]
    return "\n".join(parts)
