"""explain.drivers' words on real data (``tests/support/real_data.py``): carData's Rossi, 432 men,
7 static features and up to 52 weeks of employment padded at the end (a history ends at the arrest),
a Masking(-1) + LSTM model trained once per session, a store made with ``--steps auto``.

What is checked against numbers computed here from the package's own table, not from the tool:
the two employment features move together (a group found from the data), no segment is named after
a negligible effect, every "high"/"low" word agrees with the segment's mean against everyone's mean,
the ranking says what it is relative to, and the time profile's colours agree with its words."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

import explain
from explain.analysis import drivers as D
from explain.batch.local import run_batch_job
from explain.core.settings import Settings
from explain.plots import drivers as plots
from tests.support import real_data


@pytest.fixture(scope="module")
def rossi(tmp_path_factory):
    folder = real_data.rossi(tmp_path_factory)
    bundle = explain.load_bundle(folder)
    store = tmp_path_factory.mktemp("rossi-drivers") / "auto"
    run_batch_job(bundle, store, Settings(steps="auto"), progress=False)
    return bundle, explain.drivers(bundle, store, cache=False)


def test_the_employment_features_form_one_group_found_from_the_data(rossi):
    bundle, d = rossi
    table = real_data.rossi_table()
    employed = table[[f"emp{k}" for k in range(1, 53)]].apply(lambda c: c.map({"yes": 1.0, "no": 0.0}))
    mean_employed = employed.mean(axis=1, skipna=True).to_numpy()  # over the real weeks only
    share = (employed.cumsum(axis=1, skipna=True) / employed.notna().cumsum(axis=1)).where(employed.notna())
    rho = spearmanr(mean_employed, share.mean(axis=1, skipna=True).to_numpy()).statistic
    assert abs(rho) >= 0.7, rho  # measured from the package's table: they move together
    grouped = [g for g in d.groups if {f.name for f in g.members} >= {"employed", "employed_share"}]
    assert len(grouped) == 1 and grouped[0].found
    group = grouped[0]
    shares = {r.feature.name: r.share for r in d.ranking}
    assert group.share == pytest.approx(sum(shares[f.name] for f in group.members))
    doc = d.to_dict(customers=False)
    assert any(g["found"] and set(g["features"]) == {f.name for f in group.members} for g in doc["groups"])
    for g in d.groups:  # every group found: each pair of its members correlates that much on the data
        assert len(g.members) >= 2


def test_segments_are_named_after_their_main_effects_in_words_that_agree_with_their_values(rossi):
    bundle, d = rossi
    for s in d.segments:
        largest = np.max(np.abs(s.mean_attributions))
        assert s.drivers and all(abs(x.mean_attribution) >= D.NAME_SHARE * largest for x in s.drivers), s.name
        named = s.name.lower()
        for j, f in enumerate(d.features):  # a feature under a quarter of the largest never names it
            if abs(s.mean_attributions[j]) < D.NAME_SHARE * largest:
                assert all(x.feature != f for x in s.drivers)
        prefix, namers = D.segment_namers(s.drivers, D.NEGLIGIBLE * np.nanmax(np.nanmean(np.abs(d.attributions), 0)))
        for x in namers[:D.NAME_DRIVERS]:  # named by raising effects (or "Lower risk: ..." by lowering ones)
            assert x.words in named and (x.raises or named.startswith("lower risk: "))
        for x in s.drivers:  # an effect that names nothing is not in the name
            if x not in namers[:D.NAME_DRIVERS] and x.words not in {n.words for n in namers[:D.NAME_DRIVERS]}:
                assert not named.startswith(x.words) and f", {x.words}" not in named, (s.name, x.words)
        members = d.segment_of == d.segments.index(s)
        for x in s.drivers:
            column = d.values[:, d.column(x.feature)]
            if x.measure == "mean":  # recomputed here: the segment's mean against everyone's mean
                here, everyone = np.nanmean(column[members]), np.nanmean(column)
                assert x.segment_value == pytest.approx(here) and x.everyone_value == pytest.approx(everyone)
                if x.words.startswith("high "):
                    assert here >= everyone, (s.name, x.words)
                if x.words.startswith("low "):
                    assert here < everyone, (s.name, x.words)
            text = D.reason_text(x)
            assert ("raises the risk" in text) == (x.mean_attribution > 0)


def test_the_ranking_says_what_it_is_relative_to(rossi):
    bundle, d = rossi
    assert d.reference == "the average customer"
    assert "relative to the average customer (the baseline)" in d.sentence
    age = next(r for r in d.ranking if r.feature.name == "age")
    # the younger a man is released, the higher his score (measured from the store's attributions)
    rho = spearmanr(d.values[:, d.column("age")], d.attributions[:, d.column("age")]).statistic
    assert age.value_effect == pytest.approx(rho, abs=1e-9)
    if abs(rho) >= D.RELATION_RHO:
        way = "higher" if rho > 0 else "lower"
        assert f"{way} than the average customer raises it" in D.direction_words(age, d.baseline)


def test_the_time_profile_colours_agree_with_its_words_at_52_weeks(rossi):
    bundle, d = rossi
    (profile,) = d.time_profiles
    fig = plots.time_profile(profile)
    (bars,) = fig.data
    y, dark = np.asarray(bars.y, float), np.asarray(bars.marker.color) == "#54278f"
    assert len(y) == 52 and dark.sum() == profile.recent_periods and dark[-profile.recent_periods:].all()
    assert y[dark].sum() >= 90 - 1e-9  # the dark bars hold the 90 % the words say
    if profile.recent_periods > 1:
        assert y[dark][1:].sum() < 90  # and no fewer recent weeks do
    tallest = int(np.argmax(y))
    if not dark[tallest]:  # a light bar that is the tallest: said in the words and the title
        assert str(profile.periods[tallest]) in D.profile_sentence(profile)
        assert "the tallest bar" in fig.layout.title.text
