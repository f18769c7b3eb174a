"""The dashboard on a padded bundle unlike the demo (64 weeks behind Masking(0) + an LSTM with hand-set
weights, a third of the customers padded at the start; tests/support/padded.py): the Cohort page,
computed and read from a batch store, draws every temporal feature with no NaN and ranks the planted
driver first (AppTest)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support import padded
from tests.support.apptest import app, array, charts, errors, heatmap, plain


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return padded.write(tmp_path_factory.mktemp("padded") / "bundle")


def ranking(spec) -> list[tuple[str, float]]:
    """(label, mean |attribution|) of the Feature ranking, largest first."""
    bars = spec["data"][0]
    return sorted(zip(bars["y"], array(bars["x"])), key=lambda pair: -pair[1])


def check_cohort(at):
    figs = charts(at)
    for key in ("cohort_abs", "cohort_signed"):
        z = heatmap(figs[key])["z"]
        assert z.shape == (len(padded.TEMPORAL), padded.T) and np.isfinite(z).all(), key
    ranked = ranking(figs["cohort_ranking"])
    assert all(np.isfinite(value) for _, value in ranked) and len(ranked) == 5
    assert ranked[0][0] == f"{padded.PLANTED} (all periods)"
    assert dict(ranked)[f"{padded.IGNORED} (all periods)"] == 0.0
    profile = figs["cohort_periods"]["data"]
    assert all(np.isfinite(array(trace["y"])).all() for trace in profile if "y" in trace and trace["y"] is not None
               and trace.get("type") in ("scatter", "bar") and len(array(trace["y"])) == padded.T)
    return ranked


def test_cohort_page_computed_and_from_a_store_no_nan_planted_driver_first(folder, monkeypatch):
    from explain.analysis.explainer import Request
    from explain.batch.local import run_batch_job
    from explain.bundle.load import load_bundle

    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    at = app({"sample": "all"}, page="pages/cohort.py")
    assert not errors(at), errors(at)
    assert at.session_state["cohort_job"]["parts"] and not at.success  # computed here
    computed = check_cohort(at)

    run_batch_job(load_bundle(folder), folder / "attributions" / "nightly", Request(), progress=False)
    del at.session_state["cohort_job"]
    at.run()
    assert not at.exception and "cohort_job" not in at.session_state
    assert any("precomputed batch store nightly" in plain(m.value) for m in at.success)
    stored = check_cohort(at)
    assert [name for name, _ in stored] == [name for name, _ in computed]
    np.testing.assert_allclose([v for _, v in stored], [v for _, v in computed], rtol=1e-6)
