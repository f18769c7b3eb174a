"""The figure cache and the compact figures (ui/speed.py): never a stale figure, same look."""

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from explain.analysis.explainer import explain_customers
from explain.bundle import load as bundle_io
from explain.core.settings import Baseline, Settings
from explain.plots import figures
from tests.support.apptest import DEMO, app, array, chart_places, charts, choose_customer, customer_heading, heatmap
from ui import cache, speed


@pytest.fixture(scope="module")
def demo():
    return bundle_io.load_bundle(DEMO)


def expected_z(bundle, customer, kind, steps):
    settings = Settings(baseline=Baseline(kind), steps=steps).resolved(bundle.output_names)
    return explain_customers(bundle, [customer], settings).temporal[0].T  # (F, T), as the heatmap draws it


def test_the_heatmap_follows_every_change_of_customer_and_settings_back_and_forth(demo):
    at = app()
    first = at.session_state["customer"]
    other = "C00002" if first != "C00002" else "C00003"
    # each view twice, out of order: the second visit is served from the cache and must still match
    views = [(first, "mean", "64"), (other, "mean", "64"), (other, "median", "64"), (first, "median", "64"),
             (first, "median", "16"), (first, "mean", "64"), (other, "median", "64"), (other, "median", "16")]
    for customer, kind, steps in views:
        choose_customer(at, customer)
        at.selectbox(key="baseline_kind").set_value(kind)
        at.select_slider(key="steps").set_value(steps).run()
        assert not at.exception
        assert customer in customer_heading(at)
        z = heatmap(charts(at)["temporal_heatmap"])["z"]
        np.testing.assert_allclose(z, expected_z(demo, customer, kind, int(steps)), rtol=1e-6, atol=1e-7,
                                   err_msg=f"the heatmap of {customer}, {kind}, {steps} steps")


def test_compact_spec_keeps_the_figure_and_only_the_template_it_uses():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 3))
    fig = figures.temporal_panel(["p1", "p2", "p3", "p4", "p5"], ["x", "y", "z"], a, title="t")
    full, compact = fig.to_dict(), speed.spec(fig)
    sent = json.loads(pio.to_json(speed.Spec(compact).to_dict(), validate=False))
    kinds = {t["type"] for t in full["data"]}
    assert kinds == {"heatmap", "bar"}
    assert set(sent["layout"]["template"]["data"]) == kinds & set(full["layout"]["template"]["data"])
    assert not {"polar", "geo", "scene", "ternary"} & set(sent["layout"]["template"]["layout"])
    assert len(pio.to_json(compact, validate=False)) < len(pio.to_json(full, validate=False))
    assert len(json.dumps(sent["layout"]["template"])) < len(json.dumps(full["layout"]["template"]))
    for mine, theirs in zip(sent["data"], json.loads(pio.to_json(full, validate=False))["data"]):
        assert set(mine) == set(theirs)  # every property still there
    np.testing.assert_allclose(heatmap(sent)["z"], a.T, rtol=1e-6)  # float32: within float32 rounding
    bars = [t for t in sent["data"] if t["type"] == "bar"]
    per_period = [array(b["y"]) for b in bars if isinstance(b["y"], dict)]  # numbers: a typed array
    assert len(per_period) == 1 and np.allclose(per_period[0], a.sum(axis=1), rtol=1e-6)
    again = go.Figure(compact)  # a valid Plotly figure: the browser gets nothing Plotly would refuse
    assert again.data[0].type == "heatmap"


def test_speed_off_builds_every_time(monkeypatch, demo):
    monkeypatch.setenv(speed.SPEED_ENV, "off")
    calls = []

    def build():
        calls.append(1)
        return (go.Figure(),)

    settings = Settings().resolved(demo.output_names)
    for _ in range(2):
        built, shown = cache.figures(demo, "test", "C00001", settings, build)
        assert shown == built
    assert len(calls) == 2


def test_the_page_style_is_sent_before_tensorflow_is_imported():
    """app.py sends the page style (with the script that loads the chart library) before the imports
    that bring TensorFlow: the first visit after a server start loads Plotly while the server imports.
    Fails if a module app.py imports first starts importing TensorFlow, or the order in app.py changes."""
    import ast
    import subprocess
    import sys

    from tests.support.apptest import ROOT

    tree = ast.parse((ROOT / "app.py").read_text())
    early = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "ui"]
    style = next(n for n in tree.body if "page_style" in ast.unparse(n))
    late = next(n for n in early if "cache" in {a.name for a in n.names})
    assert style.lineno < late.lineno, "show.page_style() must come before `from ui import ... cache`"
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno < style.lineno]
    others = [ast.unparse(n) for n in imports if not (n in early or ast.unparse(n) == "import streamlit as st")]
    assert not others, f"imports before the page style that this test does not probe: {others}"
    before = sorted({a.name for n in early if n.lineno < style.lineno for a in n.names})
    assert before and "cache" not in before
    probe = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); import streamlit\n"
             f"from ui import {', '.join(before)}\n"
             "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"importing ui.{before} imported {out.stdout.strip()}"


def test_the_chart_library_script_names_the_plotly_chunk_of_this_streamlit():
    """A Streamlit upgrade that renames or splits its Plotly chunk fails here (the script would be empty)."""
    from pathlib import Path

    import streamlit

    from ui import show

    script = show.chart_library_script()
    chunk = json.loads(script.split("new URL(", 1)[1].split(", main.src", 1)[0])
    assert (Path(streamlit.__file__).parent / "static" / "static" / "js" / chunk).is_file()
    assert chunk.startswith("PlotlyChart.") and script.startswith("<script>") and script.endswith("</script>")


def test_find_customer_takes_an_id_in_any_case_a_pasted_label_or_a_part_only_one_id_has():
    from ui.pickers import find_customer

    ids = ["C00017", "C00170", "C00171", "c9", "X-1", "x-1"]
    assert find_customer(ids, "C00017") == ("C00017", [], None)
    assert find_customer(ids, "  c00017 ") == ("C00017", [], None)            # any case, spaces
    assert find_customer(ids, "C00017  ·  churn 0.42") == ("C00017", [], None)  # the box's label pasted
    assert find_customer(ids, "C00017 · churn 0.42") == ("C00017", [], None)    # as the browser copies it
    assert find_customer(["A", "A·B"], "A·B") == ("A·B", [], None)               # an id with the dot itself
    assert find_customer(["A", "A·B"], "A·B  ·  churn 0.1") == ("A·B", [], None)
    assert find_customer(ids, "0017")[0] is None                              # part of three ids
    found, matches, note = find_customer(ids, "0017")
    assert matches == ["C00017", "C00170", "C00171"] and "part of 3 customer ids; they are listed" in note
    assert find_customer(ids, "171") == ("C00171", [], None)                  # a part only one id has
    assert find_customer(ids, "x-1") == ("x-1", [], None)                     # exact beats the other case
    assert find_customer(ids, "X-1") == ("X-1", [], None)
    found, matches, note = find_customer(ids, "Z99")
    assert found is None and matches == [] and "No customer id contains 'Z99'" in note and "C00017" in note
    assert find_customer(ids, "") == (None, [], None) and find_customer(ids, None) == (None, [], None)
    many = [f"C{i:05d}" for i in range(1, 3001)]
    found, matches, note = find_customer(many, "C0")
    assert found is None and len(matches) == 20 and "part of 3000 customer ids; the first 20" in note


def test_the_customer_box_lists_a_few_customers_and_takes_any_id_typed():
    """3,000 customers: the box lists the customers this session looked at (newest first) and the
    matches of a search, not all ids (a long list slowed every switch in the browser); any id can
    be typed, a part that names no single id keeps the customer shown and says why."""
    at = app({"customer": "C00042"})
    box = at.selectbox(key="customer")
    assert box.value == "C00042" and len(box.options) == 1 and box.proto.accept_new_options
    assert len(box.proto.SerializeToString()) < 2_000
    for typed, expected in [("C00017", "C00017"), ("c00003", "C00003"), ("2999", "C02999"), ("C00017", "C00017")]:
        choose_customer(at, typed).run()
        assert not at.exception and not at.warning
        assert at.session_state["customer"] == expected and f"Customer {expected}" in customer_heading(at)
        assert at.query_params["customer"] == expected
    assert [o.split()[0] for o in at.selectbox(key="customer").options] == ["C00017", "C02999", "C00003", "C00042"]

    heatmap_before = heatmap(charts(at)["temporal_heatmap"])["z"]
    choose_customer(at, "0017").run()  # part of several ids: the customer stays, the matches are listed
    assert not at.exception and at.session_state["customer"] == "C00017"
    assert "part of" in at.warning[0].value and "0017" in at.warning[0].value
    listed = [o.split()[0] for o in at.selectbox(key="customer").options]
    assert listed[:4] == ["C00017", "C02999", "C00003", "C00042"] and "C00170" in listed and len(listed) <= 4 + 20
    assert np.array_equal(heatmap(charts(at)["temporal_heatmap"])["z"], heatmap_before)
    choose_customer(at, "C00170").run()  # one of the matches
    assert at.session_state["customer"] == "C00170" and not at.warning

    choose_customer(at, "nobody").run()
    assert at.session_state["customer"] == "C00170" and "No customer id contains 'nobody'" in at.warning[0].value
    at.selectbox(key="baseline_kind").set_value("median").run()  # the note is said once
    assert not at.exception and at.session_state["customer"] == "C00170" and not at.warning


def test_every_chart_keeps_its_place_whatever_the_customer_has(demo):
    """A customer with the close-baseline warning, one with the what-if card and one with neither: the charts are
    at the same places in the page (the browser then updates them instead of drawing them anew: pages/customer.py)."""
    from ui import keep

    scores = cache.predictions(demo)
    ids = [str(i) for i in demo.ids]
    settings = Settings().resolved(demo.output_names)
    fb = float(explain_customers(demo, [ids[0]], settings).baseline_prediction[0])  # the same for every customer
    close = ids[int(np.argmin(np.abs(scores - fb)))]
    high, low = ids[int(np.argmax(scores))], ids[int(np.argmin(scores))]
    assert abs(scores[ids.index(close)] - fb) <= 0.02 and scores[ids.index(high)] >= keep.THRESHOLD
    at = app()
    places, warned = {}, {}
    for customer in (high, close, low, close, high):
        choose_customer(at, customer).run()
        assert not at.exception and customer in customer_heading(at)
        places.setdefault(customer, chart_places(at.main))
        warned[customer] = any(w.value.startswith("The comparison's prediction") for w in at.warning)
        assert chart_places(at.main) == places[customer]
    assert warned == {close: True, high: False, low: False}  # the pages differ above the charts ...
    assert len(places[high]) >= 2 and places[high] == places[close] == places[low]  # ... the charts' places do not
