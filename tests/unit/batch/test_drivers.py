"""explain.drivers from batch stores of a bundle built here with two known churn mechanisms.

The model (temporal input first, Flatten + Dense, no LSTM, names unlike the demo's) scores
sigmoid(1.6 * price_hike + 1.2 * (outages in the last two weeks) - 3); a third of the customers
get a price hike, a third an outage burst in the last two weeks, a third neither. IG with the
mean baseline then gives each group one reason: the segments must find them, name them, and
report the churn rate of the labels drawn here; drift must be found when the mix of reasons
changes and not between two samples of one population.
"""

from __future__ import annotations

import keras
import numpy as np
import pandas as pd
import pytest

import explain
from explain.batch.drivers import NO_STORE
from explain.batch.local import run_batch_job
from explain.batch.store import Rows, open_store
from explain.bundle.load import load_bundle
from explain.bundle.save import save_bundle
from explain.core.errors import ExplainError
from explain.core.settings import Settings

WEEKS = [f"2026-W{w:02d}" for w in range(1, 9)]
SETTINGS = Settings(steps=16)


def churn_model():
    history = keras.Input((8, 2), name="weekly")
    account = keras.Input((3,), name="account")
    on_history = keras.layers.Dense(1, use_bias=False, name="history_weights")
    on_account = keras.layers.Dense(1, use_bias=True, name="account_weights")
    logit = keras.layers.Add()([on_history(keras.layers.Flatten()(history)), on_account(account)])
    model = keras.Model([history, account], keras.layers.Activation("sigmoid", name="churn")(logit))
    w = np.zeros((8, 2))
    w[6:, 0] = 1.2  # outages of the last two weeks
    on_history.set_weights([w.reshape(16, 1)])
    on_account.set_weights([np.array([[1.6], [0.0], [0.0]]), np.array([-3.0])])  # price_hike only
    return model


def build(folder, n=(200, 200, 200), seed=0, age_from_logins=False):
    """A bundle of n = (price hike, outage burst, neither) customers; returns (path, group per customer).
    ``age_from_logins``: the age column follows each customer's mean logins (a pair of features that
    move together, for the groups found from the data)."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.array(["price", "outage", "calm"]), n)
    total = group.size
    static = pd.DataFrame({
        "customer_id": [f"A{seed}-{i:04d}" for i in range(total)],
        "price_hike": np.where(group == "price", rng.uniform(1.5, 2.5, total), rng.uniform(-0.2, 0.2, total)),
        "fibre": rng.integers(0, 2, total).astype(float),
        "age_years": rng.uniform(20, 70, total).round(),
    })
    temporal = np.stack([rng.poisson(0.3, (total, 8)), rng.poisson(5.0, (total, 8))], axis=2).astype(float)
    temporal[group == "outage", 6:, 0] += rng.integers(2, 4, ((group == "outage").sum(), 2))
    if age_from_logins:
        static["age_years"] = 20 + 5 * temporal[:, :, 1].mean(axis=1) + rng.normal(0, 0.5, total)
    logit = 1.6 * static["price_hike"].to_numpy() + 1.2 * temporal[:, 6:, 0].sum(axis=1) - 3.0
    labels = (rng.uniform(size=total) < 1 / (1 + np.exp(-logit))).astype(int)
    static["left"] = labels
    path = save_bundle(folder, churn_model(), static, temporal, periods=WEEKS, temporal_features=["outages", "logins"],
                       labels="left", display_names={"price_hike": "Price hike", "outages": "Outages",
                                                     "logins": "App logins", "fibre": "Fibre line"})
    return path, group


@pytest.fixture(scope="module")
def june(tmp_path_factory):
    path, group = build(tmp_path_factory.mktemp("june") / "bundle")
    bundle = load_bundle(path)
    run_batch_job(bundle, path / "attributions" / "run", SETTINGS, chunk_size=128, progress=False)
    return bundle, group


def store_of(tmp_path, n, seed):
    path, _ = build(tmp_path / f"bundle-{seed}", n=n, seed=seed)
    out = tmp_path / f"store-{seed}"
    run_batch_job(load_bundle(path), out, SETTINGS, chunk_size=128, progress=False)
    return out


def test_store_rows_are_the_bundles_values_and_the_stores_attributions(june):
    bundle, _ = june
    store = open_store(bundle.path / "attributions" / "run")
    chunks = list(store.rows(bundle))
    assert [len(c.ids) for c in chunks] == [128, 128, 128, 128, 88]
    ids = np.concatenate([c.ids for c in chunks]).tolist()
    assert ids == [str(i) for i in bundle.ids]
    arrays = store.arrays(bundle, ids)
    inputs = bundle.inputs_for(ids)
    for key, attributions in (("static", arrays.static), ("temporal", arrays.temporal)):
        assert np.array_equal(np.concatenate([c.attributions[key] for c in chunks]), attributions)
        assert np.allclose(np.concatenate([c.values[key] for c in chunks]), inputs[key])
    assert np.array_equal(np.concatenate([c.prediction for c in chunks]), arrays.prediction)
    assert all(isinstance(c, Rows) for c in chunks)


def test_segments_find_the_two_planted_mechanisms_with_their_churn_rates(june):
    bundle, group = june
    d = explain.drivers(bundle)  # the store under <bundle>/attributions/
    assert d.n_customers == 600 and sum(s.size for s in d.segments) == 600
    assert [r.feature.name for r in d.ranking[:2]] in (["price_hike", "outages"], ["outages", "price_hike"])
    label = np.array([bundle.labels[bundle.index_of(c)] for c in d.customers])
    ids = [str(c) for c in d.customers]
    for planted, words in (("price", "high price hike"), ("outage", "rising outages")):
        segment = max(d.segments, key=lambda s: np.sum(group[[ids.index(c) for c in s.customers]] == planted))
        members = group[[ids.index(c) for c in segment.customers]]
        # most of the planted group, and few others (a calm customer with an outage has that reason too)
        assert np.mean(members == planted) >= 0.85 and np.sum(members == planted) >= 160, (planted, segment)
        assert segment.name.lower().startswith(words), segment.name
        assert segment.drivers[0].mean_attribution > 0
        assert segment.churn_rate == pytest.approx(label[segment.rows].mean())
        assert segment.mean_prediction > 0.5
    assert d.segments[-1].mean_prediction < 0.2  # the calm customers: the lowest risk, last
    assert "Price hike" in d.sentence and "Outages" in d.sentence
    (profile,) = d.time_profiles
    assert profile.recent_periods == 2  # only the last two weeks move the prediction


def test_drift_is_found_when_the_mix_of_reasons_changes_and_not_between_two_samples(june, tmp_path):
    bundle, _ = june
    june_store = bundle.path / "attributions" / "run"
    outage_month = store_of(tmp_path, n=(60, 400, 140), seed=1)
    d = explain.drivers(bundle, june_store, against=outage_month)
    changed = {r.feature.name: r.change for r in d.drift.changed}
    # June has fewer outage customers and more price hikes than the earlier month
    assert changed.get("outages", 0) < 0 and changed.get("price_hike", 0) > 0, d.drift.sentence
    assert {"fibre", "age_years"}.isdisjoint(changed)
    same_population = store_of(tmp_path, n=(200, 200, 200), seed=2)
    d = explain.drivers(bundle, june_store, against=same_population)
    assert not d.drift.changed, d.drift.sentence
    d = explain.drivers(bundle, june_store, against=june_store)
    assert not d.drift.changed and all(r.change == 0 for r in d.drift.rows)


def test_no_store_says_which_command_computes_it(tmp_path):
    path, _ = build(tmp_path / "fresh", n=(10, 10, 10))
    with pytest.raises(ExplainError) as error:
        explain.drivers(path)
    assert str(error.value) == NO_STORE.format(folder=path / "attributions", bundle=path)
    assert "python -m explain batch --bundle" in str(error.value)


def _same(a, b) -> None:
    """Two Drivers hold the same numbers, words, segments (with their customers) and drift."""
    assert a.to_dict() == b.to_dict()
    for name in ("customers", "prediction", "values", "attributions", "segment_of"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for s, t in zip(a.segments, b.segments):
        np.testing.assert_array_equal(s.rows, t.rows)
        np.testing.assert_array_equal(s.mean_attributions, t.mean_attributions)
    assert [r.feature for r in a.ranking] == [r.feature for r in b.ranking]


def test_the_summary_is_computed_once_next_to_the_store_and_read_back_equal(june, monkeypatch):
    from explain.batch import summary as batch_summary
    from explain.batch.store import Store

    bundle, _ = june
    folder = bundle.path / "attributions"
    for old in folder.glob("run.drivers-*.npz"):
        old.unlink()
    reference = explain.drivers(bundle, cache=False)
    assert not list(folder.glob("run.drivers-*.npz"))  # cache=False writes nothing
    computed = explain.drivers(bundle)
    files = list(folder.glob("run.drivers-*.npz"))
    assert len(files) == 1
    _same(computed, reference)

    def no_reading(*args, **kwargs):
        raise AssertionError("the store was read again")

    with monkeypatch.context() as patch:
        patch.setattr(Store, "rows", no_reading)
        _same(explain.drivers(bundle), reference)  # from the summary alone
        with pytest.raises(AssertionError, match="read again"):
            explain.drivers(bundle, window=2)  # another window: another summary, computed from the store
    files[0].write_bytes(b"not a summary")  # damaged: recomputed and replaced
    _same(explain.drivers(bundle), reference)
    assert batch_summary.read_summary(files[0]) is not None


def test_a_summarys_per_customer_arrays_are_mapped_and_a_compressed_one_is_read(june, tmp_path):
    """The per-customer arrays of a summary are mapped from its file (not copied into memory), equal to the
    computed result; a summary whose members are compressed (not what write_summary writes) is read as well;
    a summary cut short reads as None (computed again)."""
    from explain.batch import summary as batch_summary

    bundle, _ = june
    reference = explain.drivers(bundle, cache=False)
    path = tmp_path / "run.drivers-0000000000000000.npz"
    assert batch_summary.write_summary(path, reference)
    mapped = batch_summary.read_summary(path)
    _same(mapped, reference)
    for name in ("values", "attributions", "prediction", "segment_of"):
        assert isinstance(getattr(mapped, name).base, np.memmap), name
    assert isinstance(mapped.segments[0].rows.base, np.memmap)
    assert mapped.segments[0].customers == tuple(reference.customers[reference.segments[0].rows])
    with np.load(path) as data:
        parts = {k: data[k] for k in data.files}
    squeezed = tmp_path / "run.drivers-1111111111111111.npz"
    np.savez_compressed(squeezed, **parts)
    _same(batch_summary.read_summary(squeezed), reference)
    cut = tmp_path / "run.drivers-2222222222222222.npz"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert batch_summary.read_summary(cut) is None


def test_a_stores_summaries_are_pruned_to_the_most_recent_ones(june):
    """Each seed makes a summary; past KEEP_SUMMARIES the least recently written go, the one just
    written and another store's summaries stay (a name with glob characters too)."""
    import os

    from explain.batch import summary as batch_summary

    bundle, _ = june
    folder = bundle.path / "attributions"
    for old in folder.glob("run.drivers-*.npz"):
        old.unlink()
    other = folder / "run[1].drivers-0123456789abcdef.npz"  # another store's (glob characters in its name)
    other.write_bytes(b"x")
    keep = batch_summary.KEEP_SUMMARIES
    made = []
    for k in range(keep + 2):
        explain.drivers(bundle, seed=k)  # each seed (as each window, each earlier store) its own summary
        new = [f for f in folder.glob("run.drivers-*.npz") if f not in made]
        assert len(new) == 1
        made.append(new[0])
        os.utime(new[0], ns=(10**18 + k * 10**9,) * 2)  # written in this order, a second apart
    left = set(folder.glob("run.drivers-*.npz"))
    assert left == set(made[-keep:])  # the oldest two removed
    assert other.exists()
    assert batch_summary.prune_summaries(made[0].with_name(made[-1].name), keep=1) == made[-keep:-1][::-1]
    assert set(folder.glob("run.drivers-*.npz")) == {made[-1]}
    other.unlink()


def test_drivers_json_and_html_hold_declared_groups_and_the_reference(tmp_path):
    """bundle.json "groups" reach drivers.json (found: false, share = the members' shares together)
    and the HTML report; the ranking says what its directions are relative to."""
    import json

    from explain.cli import main

    path, _ = build(tmp_path / "declared", n=(60, 60, 60))
    config = json.loads((path / "bundle.json").read_text())
    config["groups"] = {"Usage": ["outages", "logins"]}
    (path / "bundle.json").write_text(json.dumps(config))
    bundle = load_bundle(path)
    run_batch_job(bundle, path / "attributions" / "run", SETTINGS, chunk_size=128, progress=False)
    assert main(["drivers", "--bundle", str(path), "--out", str(tmp_path / "drivers.json")]) == 0
    doc = json.loads((tmp_path / "drivers.json").read_text())
    (group,) = doc["groups"]
    shares = {r["feature"]: r["share"] for r in doc["ranking"]}
    assert group["name"] == "Usage" and group["found"] is False and set(group["features"]) == {"outages", "logins"}
    assert group["share"] == pytest.approx(shares["outages"] + shares["logins"])
    assert doc["reference"] == "the average customer"  # SETTINGS' baseline: the mean
    assert "relative to the average customer (the baseline)" in doc["sentence"]
    assert "Usage (group of 2, " in doc["group_sentence"] and "declared in bundle.json" in doc["group_sentence"]
    price = next(r for r in doc["ranking"] if r["feature"] == "price_hike")
    assert price["value_effect"] > 0.7 and "higher than the average customer raises it" in price["direction_words"]
    assert main(["drivers", "--bundle", str(path), "--out", str(tmp_path / "drivers.html")]) == 0
    page = (tmp_path / "drivers.html").read_text()
    assert "Groups of related features" in page and "declared in bundle.json" in page
    assert "relative to the average customer (the baseline)" in page


def test_groups_found_in_a_stores_data(tmp_path):
    """No groups declared: the age column built to follow the mean logins forms a group with it, found
    from the data; the other features stay alone."""
    path, _ = build(tmp_path / "found", n=(60, 60, 60), age_from_logins=True)
    bundle = load_bundle(path)
    run_batch_job(bundle, path / "attributions" / "run", SETTINGS, chunk_size=128, progress=False)
    d = explain.drivers(bundle)
    (group,) = d.groups
    assert {f.name for f in group.members} == {"age_years", "logins"} and group.found
    entry = d.to_dict()["groups"][0]
    assert entry["found"] is True and entry["name"] == group.name
    assert entry["share"] == pytest.approx(sum(r.share for r in d.ranking if r.feature.name in ("age_years", "logins")))
