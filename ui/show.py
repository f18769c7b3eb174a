"""Small Streamlit render helpers shared by the pages: safe text, errors, the delta badge, figures,
the model summary, file names and units."""

from __future__ import annotations

import functools
import html
import json
import logging
import re
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from explain.core.errors import BundleError, ExplainError
from explain.core.text import capped, hide_paths, listing
from ui import startup

LOG = logging.getLogger("explain.app")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=])")
# What GFM turns into a link even when every character is escaped (its autolink literals are found in the
# text after the escapes are resolved): "http://", "https://", "www." and "name@domain". A WORD JOINER
# (U+2060, invisible, zero width) after ":", "www" and "@" breaks each pattern; the text reads the same.
_AUTOLINK = re.compile(r"(:(?=\\?/)|www(?=\\?\.)|@)", re.IGNORECASE)
WORD_JOINER = "\u2060"
BADGE_COLOURS = {"fine": "green", "check": "orange", "too few steps": "red"}
BADGE_ICONS = {"fine": ":material/check_circle:", "check": ":material/warning:", "too few steps": ":material/error:"}


# Resolved against Streamlit's own main module, as its lazy import of the chunk is (any base URL path).
CHART_LIBRARY = """<script>(() => {
  const main = document.querySelector('script[type=module][src*="static/js/index"]');
  if (main) import(new URL(CHUNK, main.src).href).catch(() => {});
})();</script>"""
NARROW_NOTE = ("On a narrow screen the charts keep a readable width and scroll sideways; turn the phone or use a "
               "wider screen to see them whole.")
# Less space above the title (so a laptop sees the heatmap on its first screen); below 640 px the
# charts keep a readable width and scroll sideways, and NARROW_NOTE shows.
PAGE_STYLE = """<style>
[data-testid=stMainBlockContainer] {padding-top: 1.5rem;}
.narrow-note {display: none;}
@media (max-width: 640px) {
  [data-testid=stMainBlockContainer] {padding-top: 3.5rem;}
  [class*="st-key-plot-"] {overflow-x: auto;}
  [class*="st-key-plot-"] > [data-testid=stElementContainer] {min-width: 680px;}
  .narrow-note {display: block; font-size: 0.9rem; color: #555;}
}
</style>"""


def page_style() -> None:
    """The frame's CSS (see PAGE_STYLE), the note that narrow screens see and, in the same element
    (no extra space on the page), the script that loads the chart library (:func:`chart_library_script`)."""
    st.html(PAGE_STYLE)
    note = f"<div class='narrow-note'>{html.escape(NARROW_NOTE)}</div>"
    script = chart_library_script()
    st.html(note + script, unsafe_allow_javascript=bool(script))


@functools.cache
def chart_library_script() -> str:
    """A script that makes the browser load Streamlit's Plotly chunk (plotly.js, about 4.7 MB) now,
    the same module the first chart would load (the same URL, so it is loaded once), or "" when this
    Streamlit has no single such chunk.

    Why: the first chart of a browser tab waited for the chunk to be fetched and compiled, 1.2-1.8 s
    on 2 cores, and on the first visit after a server start that came on top of TensorFlow's import.
    Sent with the page style, before the app imports TensorFlow, the chunk loads while the server
    imports (``bench/latency.py``: server start to first heatmap 10.5 -> 8.7 s, p50 of 6 interleaved
    starts); later charts find it loaded."""
    import streamlit

    found = sorted((Path(streamlit.__file__).parent / "static" / "static" / "js").glob("PlotlyChart.*.js"))
    if len(found) != 1 or not re.fullmatch(r"[\w.-]+", found[0].name, re.ASCII):
        LOG.info("no single Plotly chunk in Streamlit's static files (%d found): the chart library is not "
                 "preloaded", len(found))
        return ""
    return CHART_LIBRARY.replace("CHUNK", json.dumps(found[0].name))


def md(text) -> str:
    """Text from a bundle, a file or a URL made inert for Streamlit markdown (widget labels, warnings,
    captions): no links (automatic ones included), images, HTML, colours, icons or maths, without the
    server's absolute paths (``plain``), on one line and at most a few KB (``capped``). The one escaping
    function of the app's text; Plotly's is ``explain.plots.style.esc``."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", capped(plain(text))).replace("\n", " ")
    return _AUTOLINK.sub(lambda m: m.group() + WORD_JOINER, escaped)


def plain(text) -> str:
    """``text`` as a visitor may see it: paths inside the startup bundle relative to its parent
    folder (``demo/model.keras``), other absolute paths cut to their last part."""
    return hide_paths(text, startup.bundle_path())


def error(exc: BaseException) -> None:
    """Show an error as plain text: every problem of a ``BundleError``, else its message."""
    problems = getattr(exc, "problems", None) if isinstance(exc, BundleError) else None
    if problems:
        shown = listing((str(problem) for problem in problems), total=len(problems),
                        more="... and {count:,} more problems (fix these first, then check again)")
        st.error(md(f"The bundle has {len(problems):,} problem(s); " + (
            "each is listed below." if len(shown) == len(problems) else "the first are listed below.")),
            icon=":material/error:")
        for line in shown:
            st.error(md(line))
    elif isinstance(exc, ExplainError):
        st.error(md(str(exc)), icon=":material/error:")
    else:
        LOG.exception("unexpected error in the app")
        st.error(md(f"Something went wrong ({type(exc).__name__}). The details are in the server log; "
                    "try other settings or reload the page."), icon=":material/error:")


@contextmanager
def guard():
    """Run a page body: errors become ``st.error`` messages, never a traceback."""
    try:
        yield
    except Exception as exc:  # st.stop / st.rerun raise BaseException subclasses and pass through
        error(exc)


def delta_badge(status: str, advice: str) -> None:
    """The completeness badge (fine / check / too few steps); its advice (the gap in numbers) behind Details, so
    that pages with two badges do not say it twice in the main area."""
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.badge(status, icon=BADGE_ICONS.get(status), color=BADGE_COLOURS.get(status, "gray"), help=QUALITY_HELP)
        with st.popover("Details", icon=":material/engineering:", type="tertiary"):
            st.markdown(md(advice))


VERDICT_COLOURS = ("green", "orange", "red")  # lowest band, middle bands, highest band
QUALITY_HELP = ("How much of the difference between the prediction and the baseline's the attributions "
                "account for (100 % minus |delta| as a share of that difference).")


def verdict_headline(verdict) -> None:
    """The verdict in words ("High risk: likely to churn"), large and coloured by its band."""
    colour = (VERDICT_COLOURS[0] if verdict.index == 0 else
              VERDICT_COLOURS[2] if verdict.index == verdict.of - 1 else VERDICT_COLOURS[1])
    st.markdown(f"### :{colour}[{md(verdict.headline)}]")


def quality_badge(status: str, advice: str, share: str, details: dict) -> None:
    """The attributions' completeness as a quiet badge ('fine · adds up to 99.9 %') and, beside
    it, a popover with the advice and the numbers for engineers (``details``: {name: text})."""
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.badge(f"{status} · adds up to {share}", icon=BADGE_ICONS.get(status),
                 color=BADGE_COLOURS.get(status, "gray"), help=QUALITY_HELP)
        with st.popover("Details", icon=":material/engineering:", type="tertiary",
                        help="for engineers: the gap left over (delta) and the steps"):
            st.markdown(md(advice))
            for name, value in details.items():
                st.markdown(f"**{md(name)}**: {md(value)}")


def file_stem(customer: str) -> str:
    """A safe download file name for one customer's files: ``ig_<id>``."""
    return "ig_" + (re.sub(r"[^A-Za-z0-9_-]+", "_", customer)[:40] or "customer")


def units(bundle, columns) -> list:
    """The display unit of each table column (None where the bundle gives none)."""
    return [bundle.units.get(c) for c in columns]


def plot(fig, key: str | None = None) -> None:
    """A Plotly figure in its own container (``plot-KEY``: PAGE_STYLE lets it scroll sideways on a phone)."""
    with st.container(key=f"plot-{key}" if key else None):
        st.plotly_chart(fig, key=key, config={"displaylogo": False}, theme=None)


def pair_and_difference(first, second, difference, keys: tuple[str, str, str]) -> None:
    """Two heatmaps side by side (one shared colour scale) and their difference below, full width:
    the layout of Compare and What-if; ``keys``: the three charts' element keys."""
    left, right = st.columns(2)
    with left:
        plot(first, key=keys[0])
    with right:
        plot(second, key=keys[1])
    plot(difference, key=keys[2])


def model_summary(layers, totals: dict) -> None:
    """The model's layers as a table that fits its column, and the parameter totals."""
    st.dataframe(layers, hide_index=True, width="stretch",
                 column_config={"params": st.column_config.NumberColumn("params", format="localized")})
    st.caption(md(f"Model {totals['name']}: {totals['total']:,} parameters ({totals['trainable']:,} trainable, "
                  f"{totals['non-trainable']:,} non-trainable)."))
