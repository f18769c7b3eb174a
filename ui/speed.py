"""What keeps a rerun short: figures sent compact (their caches are in ``ui.cache``: ``figures``, ``ranking``,
``DriversView``).

* :func:`spec`: a figure as the dict the browser gets, smaller and without its data twice:
  Plotly's default template (about 7 KB a figure) keeps only the trace types the figure draws
  and drops the subplot kinds it has none of (polar, geo, 3-D, ...). The look is unchanged. A
  builder may return figure dicts instead of ``go.Figure`` (``explain.plots.figures.*_spec``, what the
  Customer page does): they get the trimmed default template (made once per set of trace types)
  and their float64 arrays are sent as typed float32 arrays (colours and bar lengths; every hover
  number is formatted text or 4 significant digits), without a ``go.Figure`` being built or
  validated. (A ``go.Figure``'s ``to_dict()`` with Plotly 7 already encodes its arrays as typed
  float64: those are sent as they are.) :class:`Spec`: such a dict that ``st.plotly_chart`` takes.
* :func:`heatmap_first`: a short pause right after the Customer page's heatmap, so that the
  browser draws it before the charts below it arrive (see ``HEATMAP_FIRST_S``).
* ``EXPLAIN_SPEED=off`` in the server's environment switches them off (figures rebuilt on every
  rerun and sent as Plotly makes them, ``ui.cache`` keeping none): ``bench/latency.py`` measures the
  two side by side.
"""

from __future__ import annotations

import base64
import functools
import os
import threading
import time

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from _plotly_utils.utils import plotlyjsShortTypes, to_typed_array_spec

SPEED_ENV = "EXPLAIN_SPEED"
# The browser draws the elements that arrive together in one go: sent right behind the heatmap, the
# static bars and the history (6 small charts) held the heatmap back until all three were drawn.
# A pause this long after the heatmap lets the browser draw it first (customer switch, p50 of 14
# in one interleaved run: 0.53 -> 0.31-0.40 s with 0.04-0.12 s). With the charts kept in their places
# (pages/customer.py), 0.2 s against 0.08 s, 16 switches each, two alternated runs in Chromium: heatmap
# p50 / worst 0.310-0.336 / 0.374-0.378 s against 0.337-0.344 / 0.446-0.470 s (20,000 x 365 days),
# 0.203 / 0.301-0.485 s against 0.236-0.249 / 0.408-0.566 s (demo); the page's last chart 0.05-0.06 s later.
HEATMAP_FIRST_S = 0.2
UNUSED_SUBPLOTS = ("polar", "ternary", "scene", "geo", "mapbox", "map", "smith")
UNTYPED = ("geojson", "layer", "layers", "range")  # keys whose arrays to_dict() leaves as they are


def enabled() -> bool:
    """False when the server runs with ``EXPLAIN_SPEED=off`` (the old behaviour, for the benchmark)."""
    return os.environ.get(SPEED_ENV, "on").strip().lower() != "off"


def _typed(array: np.ndarray):
    """``array`` as Plotly's typed array {"dtype", "bdata" (base64), "shape"}, as ``to_dict()``
    makes it (64-bit integers and empty arrays: by Plotly's own code)."""
    short = plotlyjsShortTypes.get(str(array.dtype))
    if short is None or not array.size:
        return to_typed_array_spec(array)
    out = {"dtype": short, "bdata": base64.b64encode(np.ascontiguousarray(array)).decode("ascii")}
    if array.ndim > 1:
        out["shape"] = str(array.shape)[1:-1]
    return out


def _compact(value, typed: bool = False):
    """float64 arrays as float32 (in dicts, and lists of dicts or arrays); ``typed``: a dict's
    arrays also as typed arrays (a figure dict's traces: what ``to_dict()`` would have encoded)."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        value = value.astype(np.float32)
    if isinstance(value, dict):
        out = {k: _compact(v, typed) for k, v in value.items()}
        if typed:
            out.update({k: _typed(v) for k, v in out.items() if isinstance(v, np.ndarray) and k not in UNTYPED})
        return out
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (dict, np.ndarray)):
        return [_compact(v, typed) for v in value]
    return value


def _kinds(data) -> frozenset:
    return frozenset(trace.get("type", "scatter") for trace in data)


def _trimmed(template: dict, kinds) -> dict:
    """A figure dict's template with the trace types ``kinds`` only and no unused subplot kinds."""
    return {
        "data": {k: v for k, v in template.get("data", {}).items() if k in kinds},
        "layout": {k: v for k, v in template.get("layout", {}).items() if k not in UNUSED_SUBPLOTS},
    }


@functools.lru_cache(maxsize=64)
def _default_template(name, kinds: frozenset) -> dict | None:
    """Plotly's default template (``name``: ``pio.templates.default``) as ``go.Figure().to_dict()``
    holds it, trimmed to ``kinds``; made once per pair, shared: not to be changed."""
    template = go.Figure().to_dict().get("layout", {}).get("template")
    return _trimmed(template, kinds) if isinstance(template, dict) else None


def spec(fig) -> dict:
    """``fig`` (a ``go.Figure`` or a figure dict) as a compact figure dict (see the module text);
    a figure dict given is not changed (the result may share its strings and lists)."""
    if isinstance(fig, dict):
        data = [_compact(trace, typed=True) for trace in fig.get("data", [])]
        layout = dict(fig.get("layout", {}))
        template = _default_template(pio.templates.default, _kinds(data))
        if template is not None and "template" not in layout:
            layout["template"] = template
        return {"data": data, "layout": layout}
    out = fig.to_dict()
    layout = out.get("layout", {})
    template = layout.get("template")
    if isinstance(template, dict):
        layout["template"] = _trimmed(template, _kinds(out.get("data", [])))
    out["data"] = [_compact(trace) for trace in out.get("data", [])]
    return out


class Spec(go.Figure):
    """A ready figure dict that ``st.plotly_chart`` takes as a figure: Streamlit asks a Plotly
    figure only for ``to_dict()`` (a plain dict it would validate again, trace by trace)."""

    def __init__(self, figure_dict: dict):  # no go.Figure.__init__: nothing is rebuilt or validated
        self._ready = figure_dict

    def to_dict(self) -> dict:
        return self._ready


# set once a session has sent a heatmap, or finished a script run (a first visitor on another page, ui.frame.timed):
# the launcher's cue that the first page has something to show (ui/launch.py)
FIRST_SHOWN = threading.Event()


def heatmap_first() -> None:
    """Call right after plotting the heatmap when more charts follow: a short pause
    (``HEATMAP_FIRST_S``) so that the browser draws the heatmap before the rest arrives; the process's first heatmap
    is then out (:data:`FIRST_SHOWN`)."""
    if enabled():
        time.sleep(HEATMAP_FIRST_S)
    FIRST_SHOWN.set()
