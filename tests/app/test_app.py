"""The dashboard through Streamlit's own test client (AppTest), on the demo bundle.

Caches (the bundle, attributions) are process-wide, so only the first test pays for
importing TensorFlow and opening the bundle.
"""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explain.analysis import report
from tests.support.apptest import (
    DEMO,
    app,
    array,
    bundle_files,
    charts,
    choose_customer,
    customer_heading,
    errors,
    heatmap,
    plain,
    upload,
)
from tests.support.hostile import small_bundle
from tests.unit.batch.test_batch import CHUNK_ATOL

PAGES = ["pages/customer.py", "pages/compare.py", "pages/cohort.py", "pages/diagnostics.py", "pages/data.py"]
EVIL = "<img src=x onerror=alert(1)>"

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


@pytest.fixture(autouse=True)
def _demo_bundle(monkeypatch):
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)


def changed(a, b) -> bool:
    return a.shape != b.shape or not np.allclose(a, b, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- every page


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_the_demo_bundle(page):
    at = app(page=page if page != "pages/customer.py" else None)
    assert not errors(at)
    if page != "pages/data.py":
        assert charts(at), "the page shows no figure"


def test_customer_page_shows_prediction_badge_words_and_downloads():
    at = app()
    labels = [m.label for m in at.metric]
    assert any(label.startswith("Predicted") for label in labels) and "Baseline prediction" in labels
    assert any("badge[" in m.value and "fine" in m.value for m in at.markdown)  # st.badge
    # the answer in words first (explain.analysis.words): the customer's values against the average customer's
    assert any("likely to churn" in plain(m.value) and "mainly because" in plain(m.value)
               and "(the average customer: " in plain(m.value) and "raising the risk by " in plain(m.value)
               for m in at.markdown)
    assert not any("gausslegendre" in c.value for c in at.caption)  # the IG settings are closed: no jargon
    assert {"static_bars", "temporal_heatmap", "history"} <= set(charts(at))
    downloads = at.get("download_button")
    assert len(downloads) == 3


def test_engineers_settings_stay_in_their_section_and_a_link_that_sets_them_opens_it():
    at = app()
    assert not at.session_state["ig_settings_open"]
    assert at.select_slider(key="steps").value == "64"  # drawn (closed): the value and the URL are kept
    linked = app({"customer": "C00010", "steps": "16", "method": "trapezoid"})
    assert linked.session_state["ig_settings_open"]
    assert any("16 steps" in c.value and "trapezoid" in c.value for c in linked.caption)


def test_heatmap_is_centred_on_zero_with_symmetric_limits():
    spec = charts(app())["temporal_heatmap"]
    heat = heatmap(spec)
    z = heat["z"]
    assert heat["zmid"] == 0
    assert heat["zmin"] == pytest.approx(-heat["zmax"]) and heat["zmax"] == pytest.approx(np.abs(z).max())
    assert "raises" in heat["colorbar"]["title"]["text"]
    # the hover is built in the browser (issue 42): the value and baseline of each cell sent as numbers
    assert "baseline: %{customdata[1]:.4g}" in heat["hovertemplate"] and "attribution: %{z" in heat["hovertemplate"]
    assert all(set(row) == {row[0]} and not any(c.isdigit() for c in row[0]) for row in heat["text"])  # units only


# ----------------------------------------------------------------------------- pickers change the view


def test_changing_customer_baseline_and_steps_changes_the_figure():
    at = app()
    z0 = heatmap(charts(at)["temporal_heatmap"])["z"]
    first = at.session_state["customer"]
    other = "C00002" if first != "C00002" else "C00003"

    choose_customer(at, other).run()
    assert not at.exception
    z1 = heatmap(charts(at)["temporal_heatmap"])["z"]
    assert changed(z1, z0) and at.query_params["customer"] == other
    assert other in customer_heading(at)

    at.selectbox(key="baseline_kind").set_value("median").run()
    z2 = heatmap(charts(at)["temporal_heatmap"])["z"]
    assert changed(z2, z1) and at.query_params["baseline"] == "median"

    at.select_slider(key="steps").set_value("8").run()
    z3 = heatmap(charts(at)["temporal_heatmap"])["z"]
    assert changed(z3, z2) and at.query_params["steps"] == "8"
    assert not at.exception


def test_highest_risk_picker_and_random_churner_set_the_customer():
    at = app()
    top = at.selectbox(key="_top_pick").options[3].split()[0]
    at.selectbox(key="_top_pick").set_value(top).run()
    assert at.session_state["customer"] == top and at.query_params["customer"] == top
    assert at.selectbox(key="_top_pick").value is None  # ready for the next pick
    assert at.button(key="_random").label == "…or a random churner"
    at.button(key="_random").click().run()
    assert not at.exception
    churned = pd.read_csv(DEMO / "static.csv", dtype={"customer_id": str}).set_index("customer_id")["churned"]
    assert churned[at.session_state["customer"]] == 1
    assert at.query_params["customer"] == at.session_state["customer"]


def test_every_baseline_kind_runs():
    at = app()
    for kind in ("zero", "mean", "median", "customer", "cohort", "flat", "blur", "sample"):
        at.selectbox(key="baseline_kind").set_value(kind).run()
        assert not at.exception, kind
        assert not errors(at), (kind, errors(at))
        assert at.query_params["baseline"].startswith(kind)


def test_query_params_open_the_chosen_view():
    params = {"customer": "C00010", "baseline": "cohort:0", "steps": "16", "method": "trapezoid",
              "space": "logit", "path": "per-input"}
    at = app(params)
    assert at.session_state["customer"] == "C00010"
    assert at.select_slider(key="steps").value == "16"
    assert at.selectbox(key="baseline_kind").value == "cohort"
    assert at.selectbox(key="baseline_cohort").value == "0"
    assert at.radio(key="space").value == "logit" and at.radio(key="path").value == "per-input"
    assert "C00010" in customer_heading(at)
    caption = plain(at.caption[0].value)
    assert "cohort:0" in caption and "16 steps" in caption and "trapezoid" in caption
    assert not at.warning


def test_bad_query_params_are_dropped_with_a_warning():
    at = app({"customer": "NOPE", "steps": "13", "baseline": "customer:ghost"})
    assert not at.exception
    assert len(at.warning) == 3
    assert at.select_slider(key="steps").value == "64"
    assert at.query_params["steps"] == "64"


def test_a_page_opens_from_its_link_with_the_settings():
    at = app({"customer": "C00020", "compare": "C00021", "steps": "32"}, page="pages/compare.py")
    assert at.session_state["customer"] == "C00020"
    assert at.session_state["_compare"] == "C00021"
    assert at.query_params["compare"] == "C00021"


# ----------------------------------------------------------------------------- compare, cohort, diagnostics


def test_compare_page_shares_one_colour_scale():
    at = app({"customer": "C00005", "compare": "C00007"}, page="pages/compare.py")
    figs = charts(at)
    a, b, diff = heatmap(figs["compare_a"]), heatmap(figs["compare_b"]), heatmap(figs["compare_diff"])
    assert (a["zmin"], a["zmax"]) == (b["zmin"], b["zmax"])
    m = max(np.abs(a["z"]).max(), np.abs(b["z"]).max())
    assert a["zmax"] == pytest.approx(m) and a["zmid"] == b["zmid"] == diff["zmid"] == 0
    np.testing.assert_allclose(diff["z"], a["z"] - b["z"], atol=1e-12)
    assert a["x"] == b["x"] == diff["x"]  # aligned by period

    at.selectbox(key="w_compare").set_value("cohort:0").run()
    assert not at.exception and at.query_params["compare"] == "cohort:0"
    a, b = heatmap(charts(at)["compare_a"]), heatmap(charts(at)["compare_b"])
    assert (a["zmin"], a["zmax"]) == (b["zmin"], b["zmax"])


def test_cohort_page_explains_a_sample_in_batches_with_filters():
    at = app(page="pages/cohort.py")
    assert at.get("progress")
    job = at.session_state["cohort_job"]
    assert sorted(job["parts"]) == [0, 1]  # 200 customers, 100 per batch
    figs = charts(at)
    assert {"cohort_abs", "cohort_signed", "cohort_ranking", "cohort_periods"} <= set(figs)
    signed = heatmap(figs["cohort_signed"])
    assert signed["zmid"] == 0 and signed["zmin"] == pytest.approx(-signed["zmax"])
    assert heatmap(figs["cohort_abs"])["zmin"] == 0

    before = heatmap(figs["cohort_signed"])["z"]
    at.multiselect[1].set_value(["1"]).run()  # churners only
    assert not at.exception
    assert changed(heatmap(charts(at)["cohort_signed"])["z"], before)


def test_cohort_job_stopped_halfway_keeps_partial_results_and_continues():
    at = app(page="pages/cohort.py")
    job = at.session_state["cohort_job"]
    del job["parts"][1]  # as if Stop was pressed after the first batch
    job["stopped"] = True
    at.run()
    assert not at.exception
    assert any("Stopped after 100 of 200" in w.value for w in at.warning)
    assert any("100** of 100 explained" in m.value for m in at.markdown)
    assert charts(at)  # figures from the partial results
    next(b for b in at.button if b.label == "Continue").click().run()
    assert not at.exception and sorted(at.session_state["cohort_job"]["parts"]) == [0, 1]
    assert any("200** of 200 explained" in m.value for m in at.markdown)


def test_cohort_page_reads_a_matching_batch_store_instead_of_computing(tmp_path, monkeypatch):
    from explain.batch.local import run_batch_job
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings

    # the demo's first 400 customers: more than the page's default sample of 200, so that the sample and "all"
    # differ (the 3,000 of the whole demo prove nothing more, and a store of them cost 7 times the model calls)
    folder = small_bundle(DEMO, tmp_path / "demo", customers=400)
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    at = app(page="pages/cohort.py")  # no store yet: computed in batches
    assert at.session_state["cohort_job"]["parts"] and not at.success
    assert any("No precomputed batch store matches" in plain(c.value) for c in at.caption)
    computed = heatmap(charts(at)["cohort_signed"])["z"]

    # the page's default settings, precomputed for every customer, as a nightly job would
    # in parts of 100 customers (4 parts: the damaged part-00003 below holds customers of the sample)
    run_batch_job(load_bundle(folder), folder / "attributions" / "nightly", Settings(), chunk_size=100,
                  progress=False)
    del at.session_state["cohort_job"]
    at.run()  # the new store is found at the next rerun
    assert not at.exception and "cohort_job" not in at.session_state  # nothing computed
    notes = [plain(m.value) for m in at.success]
    assert len(notes) == 1 and "precomputed batch store nightly" in notes[0] and "200 customers" in notes[0]
    np.testing.assert_allclose(heatmap(charts(at)["cohort_signed"])["z"], computed, rtol=0, atol=CHUNK_ATOL)
    at.segmented_control(key="w_sample").set_value("all").run()  # every customer: from the store too
    assert not at.exception and "cohort_job" not in at.session_state
    assert any("400** of 400 explained" in m.value for m in at.markdown)

    # other settings do not match the store: computed again
    at.selectbox(key="method").set_value("trapezoid").run()
    assert not at.exception and not at.success and at.session_state["cohort_job"]["parts"]

    at.selectbox(key="method").set_value("gausslegendre").run()
    assert at.success  # back to the stored settings
    part = folder / "attributions" / "nightly" / "part-00003.parquet"
    part.write_bytes(part.read_bytes()[:100])  # damaged on disk: said, then computed here
    at.segmented_control(key="w_sample").set_value("200").run()
    assert not at.exception and not at.success
    warnings = [plain(w.value) for w in at.warning]
    assert any("cannot be used, so the attributions are computed here" in w and "part-00003.parquet" in w
               for w in warnings), warnings
    np.testing.assert_allclose(heatmap(charts(at)["cohort_signed"])["z"], computed, rtol=0, atol=CHUNK_ATOL)


def test_diagnostics_page_shows_convergence_path_inputs_and_timings():
    at = app({"customer": "C00003"}, page="pages/diagnostics.py")
    figs = charts(at)
    delta = figs["diag_delta"]
    assert delta["layout"]["xaxis"]["type"] == "log"
    assert {t["name"] for t in delta["data"]} == {"gausslegendre", "trapezoid", "left", "right", "middle"}
    assert len(figs["diag_path"]["data"]) == 3
    frames = at.dataframe
    assert len(frames) >= 4 and len(frames[2].value) >= 1  # roles, outputs, timings, model summary
    summary = frames[3].value
    assert list(summary.columns) == ["layer", "type", "output shape", "params"]
    assert "LSTM" in set(summary["type"]) and summary["params"].sum() > 0
    assert any("parameters" in c.value and "trainable" in c.value for c in at.caption)


# ----------------------------------------------------------------------------- uploads


_upload = upload


def _demo_files() -> dict:
    return bundle_files(DEMO)


def test_invalid_upload_shows_every_problem_and_no_exception():
    files = _demo_files()
    lines = files["static.csv"].decode().splitlines()
    header = lines[0].split(",")
    drop = header.index("age")
    rows = [",".join(v for k, v in enumerate(line.split(",")) if k != drop) for line in lines]
    rows[3] = rows[3].replace(rows[3].split(",")[1], "lots", 1)  # tenure_months: not a number
    files["static.csv"] = ("\n".join(rows) + "\n").encode()
    at = _upload(app(page="pages/data.py"), files)
    assert not at.exception
    messages = " ".join(errors(at))
    assert "column 'age' is missing" in messages and "tenure_months" in messages
    assert len(errors(at)) >= 3  # a heading + one st.error per problem
    assert "upload_active" not in at.session_state or not at.session_state["upload_active"]
    assert not any("Traceback" in m for m in messages.split("\n"))


def test_unknown_upload_name_is_refused_clearly():
    at = _upload(app(page="pages/data.py"), {"notes.json": b"{}", "model.keras": b"not a zip"})
    assert not at.exception
    assert any("notes.json" in e for e in errors(at))


def test_valid_upload_becomes_this_sessions_bundle_and_back():
    at = _upload(app(page="pages/data.py"), _demo_files())
    assert not at.exception and not errors(at)
    active = at.session_state["upload_active"]
    assert active and Path(active).is_dir() and "explain-upload-" in active
    assert any("this session's upload" in m.value for m in at.markdown)
    next(b for b in at.button if b.label == "Back to the startup bundle").click().run()
    assert not at.exception and not at.session_state["upload_active"]
    assert any("from the startup bundle" in m.value for m in at.markdown)


# ----------------------------------------------------------------------------- untrusted names


def test_untrusted_feature_names_are_escaped(tmp_path, monkeypatch):
    bundle = tmp_path / "evil"
    shutil.copytree(DEMO, bundle)
    config = json.loads((bundle / "bundle.json").read_text())
    config["display_names"]["data_usage_gb"] = EVIL
    config["display_names"]["tenure_months"] = "[click](http://example.com) ![x](http://example.com/x.png) :red[x]"
    (bundle / "bundle.json").write_text(json.dumps(config))
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(bundle))
    at = app({"customer": "C00001"})
    for spec in charts(at).values():
        text = json.dumps(spec)
        assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text or "data_usage" not in text
    assert "&lt;img" in json.dumps(charts(at)["temporal_heatmap"])
    for element in [*at.markdown, *at.info, *at.caption]:
        assert not re.search(r"(?<!\\)<img", element.value), element.value
        assert not re.search(r"(?<!\\)\]\(http", element.value), element.value


# ----------------------------------------------------------------------------- speed, bundles without labels


def test_switching_customer_is_fast_and_keeps_the_compiled_function():
    from streamlit.runtime.scriptrunner import script_runner

    at = app()
    assert getattr(script_runner._clean_problem_modules, "keeps_kernel_cache", False)
    for cid in ("C00031", "C00032", "C00033"):
        choose_customer(at, cid).run()
        assert not at.exception
        timing = at.session_state["timings"][0]
        assert timing["what"] == "customer" and not timing["from cache"]
        # one batched gradient pass for one customer: milliseconds, unless TF re-optimises the
        # function after every rerun (Streamlit's keras.backend.clear_session(): ~0.2-0.3 s)
        assert timing["computed in (s)"] < 0.15, timing


def test_a_bundle_without_labels_runs_every_page(tmp_path, monkeypatch):
    bundle = small_bundle(DEMO, tmp_path / "nolabels", customers=30)  # labels or none: not a matter of size
    static = pd.read_csv(bundle / "static.csv", dtype={"customer_id": str}).drop(columns="churned")
    static.to_csv(bundle / "static.csv", index=False)
    config = json.loads((DEMO / "bundle.json").read_text())
    config.pop("label_column"), config.pop("positive_label", None)
    (bundle / "bundle.json").write_text(json.dumps(config))
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(bundle))
    at = app({"baseline": "cohort:0"})  # no cohort without labels: dropped with a warning
    assert len(at.warning) == 1 and "cohort" not in at.selectbox(key="baseline_kind").options
    assert at.button(key="_random").label == "…or a random high-risk customer"
    at.button(key="_random").click().run()
    assert not at.exception
    for page in PAGES[1:]:
        at.switch_page(page).run()
        assert not at.exception and not errors(at), (page, errors(at))


# ----------------------------------------------------------------------------- issue 17: what the page says first


def _buttons(at) -> dict:
    return {b.label: b.disabled for b in at.button if b.label in ("Stop", "Compute", "Continue")}


def test_cohort_buttons_say_what_they_will_do():
    at = app(page="pages/cohort.py")  # the sample is explained on the first visit
    assert sorted(at.session_state["cohort_job"]["parts"]) == [0, 1]
    assert _buttons(at) == {"Stop": True}  # finished: nothing to stop, nothing to continue or compute
    assert any("200 of 200 customers explained" in (p.proto.text or "") for p in at.get("progress"))

    job = at.session_state["cohort_job"]
    del job["parts"][1]  # as if Stop was pressed after the first batch
    job["stopped"] = True
    at.run()
    assert _buttons(at) == {"Stop": True, "Continue": False}  # stopped halfway: only Continue

    job["parts"].clear()  # as if Stop was pressed before the first batch finished
    at.run()
    assert _buttons(at) == {"Stop": True, "Compute": False}  # nothing done yet: Compute, not Continue
    next(b for b in at.button if b.label == "Compute").click().run()
    assert not at.exception and sorted(at.session_state["cohort_job"]["parts"]) == [0, 1]
    assert _buttons(at) == {"Stop": True}


def test_cohort_buttons_while_a_run_is_under_way():
    from ui import jobs

    running = jobs.button_states({"parts": {0: None}, "stopped": False}, n_batches=2)
    assert running == {"stop": True, "play": ("Continue", False), "running": True}  # Stop works, Continue waits
    assert jobs.button_states({"parts": {}, "stopped": False}, n_batches=2)["play"] == ("Compute", False)


def _scores(folder) -> dict:
    """Every customer's model score, computed here from the bundle (independent of the app)."""
    from explain.bundle.load import load_bundle

    bundle = load_bundle(folder)
    inputs = {"static": bundle.static, "temporal": bundle.temporal}
    scores = np.asarray(bundle.model([inputs[role] for role in bundle.input_roles]))[:, 0]
    return dict(zip(bundle.ids.tolist(), scores.astype(float).tolist()))


def _headline(at) -> str:
    return next(plain(m.value) for m in at.markdown if m.value.startswith("### :"))


def test_customer_page_says_the_verdict_in_words_and_the_delta_as_a_quiet_badge():
    scores = _scores(DEMO)
    ranked = sorted(scores, key=scores.get)
    middle = next(c for c in ranked if 0.3 <= scores[c] < 0.6)
    for cid, words, colour in ((ranked[-1], "High risk: likely to churn", "red"),
                               (middle, "Medium risk: may churn", "orange"),
                               (ranked[0], "Low risk: unlikely to churn", "green")):
        at = app({"customer": cid})
        assert _headline(at) == f"### :{colour}[{words}]", cid
        badge = next(m.value for m in at.markdown if "badge[" in m.value)
        assert re.search(r"adds up to (\d+\.\d|over 99\.9) %", badge) and "e-0" not in badge  # plain percent
        popover = next(p for p in at.get("popover")  # the badge's Details: the delta in full, for engineers
                       if any("Gap left over" in plain(m.value) for m in p.markdown))
        assert any("Gap left over (delta)" in plain(m.value) and "e-" in plain(m.value) for m in popover.markdown)
        assert any("64 gradient evaluations and 2 model calls" in plain(m.value) for m in popover.markdown)
        assert not any("delta" in m.label.lower() for m in at.metric)  # no longer a headline number


def test_risk_bands_come_from_bundle_json(tmp_path, monkeypatch):
    folder = small_bundle(DEMO, tmp_path / "bands", customers=30)  # scores on both sides of 0.5 (checked below)
    config = json.loads((folder / "bundle.json").read_text())
    config["risk_bands"] = [{"name": "calm", "from": 0}, {"name": "act now", "from": 0.5, "says": "call within a week"}]
    (folder / "bundle.json").write_text(json.dumps(config))
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    scores = _scores(folder)
    high = next(c for c in scores if scores[c] >= 0.5)
    low = next(c for c in scores if scores[c] < 0.5)
    assert _headline(app({"customer": high})) == "### :red[Act now: call within a week]"
    assert _headline(app({"customer": low})) == "### :green[Calm]"
    cohort_page = app(page="pages/cohort.py")
    assert cohort_page.multiselect[0].options == ["calm (< 0.5)", "act now (>= 0.5)"]


def test_texts_are_words_not_raw_values():
    import explain.bundle.load

    bundle = explain.bundle.load.load_bundle(DEMO)
    config = json.loads((DEMO / "bundle.json").read_text())
    at = app({"customer": "C00001"})
    bars = next(t for t in charts(at)["static_bars"]["data"] if t["type"] == "bar")
    row = bundle.index_of("C00001")
    for j, feature in enumerate(bundle.static_features):  # the unit once: in the name or after the value
        label, unit = bundle.static_labels[j], config["units"].get(feature, "")
        tick = next(t for t in bars["y"] if t.startswith(f"{label} = "))
        value = f"{float(bundle.static[row, j]):.4g}"
        named = unit == "0/1" or unit.lower() in label.lower()
        assert tick == (f"{label} = {value}" if named else f"{label} = {value} {unit}"), tick

    diagnostics = app(page="pages/diagnostics.py")
    cells = [str(v) for frame in diagnostics.dataframe for v in frame.value.to_numpy().ravel()]
    assert not any(c.startswith("{") for c in cells), cells  # no Python dict

    data = app(page="pages/data.py")
    note = next(plain(i.value) for i in data.info if "Planted drivers" in i.value)
    assert "Support calls" in note and "support_calls" not in note and "Tenure (months)" in note

    cohort = app(page="pages/cohort.py")
    ranking = charts(cohort)["cohort_ranking"]["data"]
    signed = next(t for t in ranking if t["name"].startswith("signed mean") and t["type"] == "bar")
    values = np.asarray(signed["x"] if isinstance(signed["x"], list) else array(signed["x"]))
    colours = signed["marker"]["color"]
    legend = {t["name"]: t["marker"]["color"] for t in ranking if t.get("showlegend", True)}
    raises = next(c for v, c in zip(values, colours) if v > 0)
    lowers = next(c for v, c in zip(values, colours) if v < 0)
    assert legend["signed mean > 0 (raises)"] == raises and legend["signed mean < 0 (lowers)"] == lowers

    compare = app({"customer": "C00001", "compare": "cohort:0"}, page="pages/compare.py")
    retained = int(sum(1 for v in bundle.labels if int(v) == 0))
    label = next(m.label for m in compare.metric if "cohort" in m.label)
    assert f"mean of 100 of {retained:,}" in plain(label)
    assert any(f"100 of the {retained:,} customers with churned = 0" in plain(c.value) for c in compare.caption)


def test_how_to_read_and_the_history_table_are_sent_only_when_opened():
    at = app()
    labels = [e.label for e in at.expander]
    assert "How to read this" in labels and "History as a table" in labels
    assert not any(report.HOW_TO_READ[:40] in plain(m.value) for m in at.markdown)  # closed: nothing sent
    assert not at.dataframe
    at.session_state["how_to_read"] = True  # opened, as the browser's click sets it (on_change="rerun")
    at.session_state["history_table"] = True
    at.run()
    assert any(report.HOW_TO_READ[:40] in plain(m.value) for m in at.markdown)
    assert len(at.dataframe) == 1 and at.dataframe[0].value.shape == (12, 6)
