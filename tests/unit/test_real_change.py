"""Why did it change, on real data (carData's Rossi: weekly employment behind Masking(-1), padded at the end): a
history cannot be shifted there (previous is refused with a pointer to --baseline-bundle), and an earlier export
one week shorter for every man explains the change, the week that arrived included, in the analyst's words."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

import explain
from explain.analysis import words
from explain.analysis.explainer import PREVIOUS_NEEDS_END_ALIGNED, explain_customers
from explain.core.errors import ExplainError
from explain.core.settings import Settings
from tests.support import real_data

IDS = ["R001", "R002", "R005", "R010"]


@pytest.fixture(scope="module")
def rossi(tmp_path_factory):
    now = real_data.rossi(tmp_path_factory)
    then = tmp_path_factory.mktemp("rossi_then") / "then"
    shutil.copytree(now, then)
    weeks = pd.read_csv(now / "temporal.csv")
    kept = weeks[weeks["week"] < weeks.groupby("person_id")["week"].transform("max")]  # each man's last week gone
    kept.to_csv(then / "temporal.csv", index=False)
    static = pd.read_csv(now / "static.csv")
    static[static["person_id"].isin(set(kept["person_id"]))].to_csv(then / "static.csv", index=False)
    return explain.load_bundle(now), explain.load_bundle(then), then


def test_previous_is_refused_where_histories_are_padded_at_the_end(rossi):
    bundle, _, _ = rossi
    with pytest.raises(ExplainError) as error:
        explain_customers(bundle, IDS[:1], Settings(baseline="previous"))
    assert str(error.value) == PREVIOUS_NEEDS_END_ALIGNED.format(spec="previous")


def test_an_earlier_export_explains_the_change_and_the_week_that_arrived(rossi):
    bundle, then, folder = rossi
    settings = Settings(baseline=f"bundle:{folder}", steps="auto")
    result = explain_customers(bundle, IDS, settings)
    expected = then.predict(then.inputs_for(IDS))[:, 0]  # the model on the earlier export itself
    np.testing.assert_allclose(result.baseline_prediction, expected, atol=1e-6)
    change = result.prediction - result.baseline_prediction
    np.testing.assert_allclose(result.total(), change, atol=max(1e-4, 0.005 * np.abs(change).max()))
    assert result.arrival is not None and np.all(result.arrival != 0.0)  # every man gained his last week
    for i, cid in enumerate(IDS):
        assert np.all(result.temporal[i][result.padding["temporal"][i]] == 0.0)  # weeks after the arrest: none
        story = words.story(result, bundle, i, cid, settings=settings)
        assert story.headline.startswith(f"{cid}'s risk ") and "since the earlier snapshot" in story.headline
        assert "from -1 " not in story.headline  # the mask value is never said as a value then
    said = " ".join(words.story(result, bundle, i, cid, settings=settings).headline for i, cid in enumerate(IDS))
    assert "(no data then)" in said
