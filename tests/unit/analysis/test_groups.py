"""A bundle's feature groups without a store (explain.analysis.groups, issue 38 item 4): declared in bundle.json, or
found from the bundle's own arrays by the rule of the "What drives churn" summary (explain.analysis.drivers), on
real data padded at the end (carData's Rossi, tests/support/real_data.py) and on arrays read a block at a time."""

from __future__ import annotations

import dataclasses
import json
import shutil

import keras
import numpy as np
import pandas as pd
import pytest

import explain
from explain.analysis import drivers as D
from explain.analysis import groups
from explain.batch.store import Rows
from explain.bundle.load import load_bundle
from tests.support import real_data


@pytest.fixture(scope="module")
def rossi(tmp_path_factory):
    return real_data.rossi(tmp_path_factory)


def test_rossi_customer_values_are_each_mans_mean_over_his_real_weeks(rossi):
    bundle = load_bundle(rossi)
    table = pd.read_csv(rossi / "temporal.csv", dtype={"person_id": str})  # the real weeks only: no padding
    expected = table.groupby("person_id")[real_data.TEMPORAL].mean()
    static = pd.read_csv(rossi / "static.csv", dtype={"person_id": str}).set_index("person_id")
    rows = np.arange(0, len(bundle.ids), 7)
    values = groups.customer_values(bundle, rows)
    ids = [str(bundle.ids[k]) for k in rows]
    columns = [f.name for f in D.Layout.of(bundle).features]
    np.testing.assert_allclose(values[:, columns.index("age")], static.loc[ids, "age"], rtol=1e-6)
    for column in real_data.TEMPORAL:  # padded weeks (-1 behind Masking) never averaged in
        np.testing.assert_allclose(values[:, columns.index(column)], expected.loc[ids, column], rtol=1e-5)


def test_rossi_finds_the_same_group_as_the_drivers_summary_and_names_it_so(rossi):
    bundle = load_bundle(rossi)
    (found,) = groups.find(bundle)
    assert set(found.features) == {"employed", "employed_share"} and found.found
    # independently: Spearman of each man's mean over his real weeks (pandas, from the CSV), the summary's threshold
    table = pd.read_csv(rossi / "temporal.csv", dtype={"person_id": str})
    per_man = table.groupby("person_id")[real_data.TEMPORAL].mean()
    assert abs(per_man.corr(method="spearman").iloc[0, 1]) >= D.GROUP_RHO
    # the summary of a store holding every man: values NaN where padded, any attributions
    ids = [str(i) for i in bundle.ids]
    x = bundle.inputs_for(ids)
    pad = bundle.padding("temporal")
    history = np.where(pad[:, :, None], np.nan, x["temporal"].astype(np.float64))
    rng = np.random.default_rng(0)
    attributions = {"static": rng.normal(size=x["static"].shape),
                    "temporal": np.where(pad[:, :, None], np.nan, rng.normal(size=history.shape))}
    rows = Rows(np.asarray(ids, dtype=object), rng.uniform(size=len(ids)),
                  {"static": x["static"].astype(np.float64), "temporal": history}, attributions)
    summary = D.compute(bundle, rows)
    assert [set(f.name for f in g.members) for g in summary.groups] == [set(found.features)]
    assert summary.groups[0].found and found.name == "Employed and related"  # the name the summary gives it
    named = D._group_name([f for f in D.Layout.of(bundle).features if f.name in found.features])
    assert found.name == named


def test_declared_groups_come_first_and_need_two_of_the_bundles_features(rossi, tmp_path):
    folder = tmp_path / "rossi"
    shutil.copytree(rossi, folder)
    config = json.loads((folder / "bundle.json").read_text())
    config["groups"] = {"Employment": ["employed", "employed_share"], "Record": ["prio"]}
    (folder / "bundle.json").write_text(json.dumps(config))
    assert groups.find(load_bundle(folder)) == (groups.FeatureGroup("Employment", ("employed", "employed_share"),
                                                                    False),)


class Recording(np.ndarray):
    """An array that records how many rows each read by an index array asks for."""

    reads: list = []

    def __getitem__(self, key):
        if isinstance(key, np.ndarray):
            Recording.reads.append(len(key))
        elif not (isinstance(key, tuple) and key == ()):
            Recording.reads.append(-1)  # any other read (a slice, the whole array)
        return np.asarray(np.ndarray.__getitem__(self, key))


def test_a_large_bundle_is_read_a_block_of_sampled_rows_at_a_time_never_whole():
    n, t = 1_200, 5
    rng = np.random.default_rng(4)
    level = rng.normal(size=n)
    static = np.stack([level, rng.normal(size=n)], axis=1).astype("float32")  # s0 moves with the history's h0
    temporal = np.stack([level[:, None] + rng.normal(0, 0.2, (n, t)), rng.normal(size=(n, t))], axis=2)
    s_in, t_in = keras.Input((2,), name="s"), keras.Input((t, 2), name="h")
    model = keras.Model([s_in, t_in], keras.layers.Dense(1)(keras.layers.Concatenate()(
        [s_in, keras.layers.Flatten()(t_in)])))
    bundle = explain.Bundle.from_arrays(model, static, temporal.astype("float32"))
    recorded = dataclasses.replace(bundle, temporal=temporal.astype("float32").view(Recording))
    Recording.reads.clear()
    found = groups.find(recorded, size=700)
    assert Recording.reads and all(0 < k <= groups.READ_ROWS for k in Recording.reads), Recording.reads
    assert sum(Recording.reads) <= 2 * 700  # the sampled rows (and their padding check), not the 1,200
    assert found == (groups.FeatureGroup("static_0 and temporal_0", ("static_0", "temporal_0"), True),)
    # the summary's rule on every customer's values gives the same groups from the same seeded sample
    everyone = groups.customer_values(bundle, np.arange(n))
    assert D.find_groups(everyone, size=700) == [[0, 2]]
