"""Helpers for driving the dashboard with Streamlit's AppTest (shared by the app test files)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
DEMO = ROOT / "bundles" / "demo"
BUNDLE_FILES = ("model.keras", "static.csv", "temporal.csv", "bundle.json")


def app(params: dict | None = None, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def choose_customer(at, text: str):
    """Type ``text`` into the sidebar's customer box and press Enter, as the browser sends it: an
    id's box label when it is one (as if picked from the list), else the text itself. (AppTest sets
    only values among a box's options: the text is added to this copy of them first.)"""
    box = at.selectbox(key="customer")
    if box.format_func(text) not in box.options:
        box.options.append(box.format_func(text))
    return box.set_value(text)


def charts(at) -> dict:
    """{key: plotly spec} of every chart on the page."""
    return {c.proto.id.split("-", 2)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def array(value) -> np.ndarray:
    """A plotly JSON array: a list, or a typed array {"dtype", "bdata" (base64), "shape"}."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = [int(n) for n in str(value.get("shape", len(flat))).split(",")]
        return flat.reshape(shape).astype(float)
    return np.asarray(value, dtype=float)


def heatmap(spec) -> dict:
    """The heatmap trace, with z decoded to a numpy array."""
    trace = dict(next(t for t in spec["data"] if t["type"] == "heatmap"))
    trace["z"] = array(trace["z"])
    return trace


def plain(text: str) -> str:
    """Markdown text without its backslash escapes and word joiners (``ui.show.md`` escapes untrusted text)."""
    return re.sub(r"\\(.)", r"\1", text).replace("\u2060", "")


def errors(at) -> list[str]:
    return [plain(e.value) for e in at.error]


def upload(at: AppTest, files: dict) -> AppTest:
    """Put ``files`` ({name: bytes}) in the Data & model page's uploader and press Check and open."""
    at.file_uploader[0].set_value([(name, data, "application/octet-stream") for name, data in files.items()]).run()
    next(b for b in at.button if b.label == "Check and open").click().run()
    return at


def bundle_files(folder: Path) -> dict:
    """{name: bytes} of the bundle files in ``folder``."""
    return {name: (folder / name).read_bytes() for name in BUNDLE_FILES if (folder / name).is_file()}


def customer_heading(at) -> str:
    """The Customer page's heading ("Customer C00042"), a small markdown heading above the sentence that says why."""
    return next(m.value for m in at.markdown if m.value.startswith("#### Customer "))


def chart_places(node, path=()) -> list[tuple]:
    """The place (index path in the page's main area) of every Plotly chart under ``node``, in order."""
    places = []
    for index, child in getattr(node, "children", {}).items():
        if type(child).__name__ == "PlotlyChart" or getattr(child, "type", None) == "plotly_chart":
            places.append((*path, index))
        places += chart_places(child, (*path, index))
    return places
