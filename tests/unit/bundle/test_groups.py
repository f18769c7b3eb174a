"""Feature groups, display names and units (issue 38): declared in bundle.json or given to ``save_bundle`` /
``Bundle.from_objects``, checked (every member a feature column, a feature in one group at most) with messages that
name the file or argument, the group and the column, and read back as ``Bundle.groups`` in declared order."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import explain
from explain.bundle.config import GROUP_FEATURE_TWICE, GROUP_UNKNOWN_COLUMN, group_problems
from explain.bundle.load import Bundle, load_bundle, validate_bundle
from explain.core.errors import BundleError

keras = pytest.importorskip("keras")

N, T = 5, 4
STATIC = ["tenure", "orders", "items", "spend"]
TEMPORAL = ["calls", "visits"]
GROUPS = {"Purchases": ["spend", "orders", "items"], "Contact": ["calls", "visits"]}


def model():
    s_in, t_in = keras.Input((len(STATIC),)), keras.Input((T, len(TEMPORAL)))
    both = keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])
    return keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(both))


def tables():
    rng = np.random.default_rng(3)
    static = pd.DataFrame(rng.uniform(1, 9, size=(N, len(STATIC))), columns=STATIC,
                          index=[f"C{k}" for k in range(N)])
    static["churned"] = [0, 1, 0, 1, 1]
    return static, rng.uniform(0, 5, size=(N, T, len(TEMPORAL))).astype("float32")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    static, temporal = tables()
    folder = tmp_path_factory.mktemp("groups") / "bundle"
    explain.save_bundle(folder, model(), static, temporal, temporal_features=TEMPORAL, labels="churned",
                        display_names={"spend": "Amount spent", "calls": "Support calls"},
                        units={"spend": "EUR", "tenure": "months"}, groups=GROUPS)
    return folder


def test_save_bundle_writes_groups_names_and_units_and_load_reads_them_back(saved):
    config = json.loads((saved / "bundle.json").read_text())
    assert config["groups"] == GROUPS and list(config["groups"]) == ["Purchases", "Contact"]
    assert config["display_names"] == {"spend": "Amount spent", "calls": "Support calls"}
    assert config["units"] == {"spend": "EUR", "tenure": "months"}
    bundle = load_bundle(saved)
    assert bundle.groups == GROUPS and list(bundle.groups["Purchases"]) == ["spend", "orders", "items"]
    assert bundle.static_labels == ["tenure", "orders", "items", "Amount spent"]
    assert bundle.temporal_labels == ["Support calls", "visits"]
    assert bundle.feature_labels["spend"] == "Amount spent" and bundle.units == {"spend": "EUR", "tenure": "months"}


def test_from_objects_and_the_notebook_take_the_same_names():
    static, temporal = tables()
    bundle = Bundle.from_objects(model(), static, temporal, temporal_features=TEMPORAL, labels="churned",
                                 display_names={"spend": "Amount spent"}, units={"spend": "EUR"}, groups=GROUPS)
    assert bundle.groups == GROUPS and bundle.static_labels[3] == "Amount spent" and bundle.units == {"spend": "EUR"}
    assert bundle.feature_labels["spend"] == "Amount spent"
    a = explain.explain(model(), [static.drop(columns="churned"), temporal], baseline="zero", steps=8,
                        temporal_features=TEMPORAL, groups={"Purchases": ["orders", "spend"]})
    assert a.bundle.groups == {"Purchases": ["orders", "spend"]}
    assert Bundle.from_objects(model(), static.drop(columns="churned"), temporal).groups == {}


def test_a_bundle_without_groups_has_none(tmp_path):
    static, temporal = tables()
    folder = explain.save_bundle(tmp_path / "b", model(), static.drop(columns="churned"), temporal)
    assert "groups" not in json.loads((folder / "bundle.json").read_text())
    assert load_bundle(folder).groups == {}


@pytest.mark.parametrize("groups, words", [
    ({"Purchases": ["orders", "oders"]}, ["bundle.json", "'groups'", "group 'Purchases'", "'oders'",
                                          "is not a feature column", "'tenure'"]),
    ({"Purchases": ["orders", "items"], "Volume": ["items", "spend"]},
     ["bundle.json", "the feature 'items' is in 2 groups", "'Purchases', 'Volume'"]),
    ({"Outcome": ["churned", "customer_id"]}, ["group 'Outcome'", "'churned', 'customer_id'", "are not a feature"]),
    ({"Purchases": ["orders", "orders"]}, ["group 'Purchases'", "'orders' more than once"]),
    ({"Purchases": "orders"}, ["bundle.json", "group 'Purchases' must be a non-empty list", "it is a text"]),
    (["orders"], ["'groups' must be an object", "it is a list"]),
])
def test_bundle_json_groups_are_checked(saved, tmp_path, groups, words):
    folder = tmp_path / "copy"
    folder.mkdir()
    for path in saved.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    config = json.loads((saved / "bundle.json").read_text())
    (folder / "bundle.json").write_text(json.dumps({**config, "groups": groups}))
    report = validate_bundle(folder)
    text = report.format()
    assert not report.ok and all(word in text for word in words), text
    assert [p.column for p in report.problems] == ["groups"]
    with pytest.raises(BundleError, match="groups"):
        load_bundle(folder)


def test_every_problem_of_the_folder_at_once(saved, tmp_path):
    """A group problem is listed with a table problem, not instead of it."""
    folder = tmp_path / "two"
    folder.mkdir()
    for path in saved.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    config = json.loads((saved / "bundle.json").read_text())
    (folder / "bundle.json").write_text(json.dumps({**config, "groups": {"G": ["nope"]},
                                                    "units": {"missing_column": "x"}}))
    columns = {p.column for p in validate_bundle(folder).problems}
    assert columns == {"groups", "units"}


@pytest.mark.parametrize("groups, words", [
    ({"Purchases": ["orders", "oders"]}, ["groups:", "group 'Purchases'", "'oders'"]),
    ({"A": ["orders"], "B": ["orders", "calls"]}, ["groups:", "the feature 'orders' is in 2 groups"]),
    ({"A": []}, ["groups must be a dict {group name: [feature names]}"]),
    ("Purchases", ["groups must be a dict"]),
])
def test_save_bundle_names_the_groups_argument(tmp_path, groups, words):
    static, temporal = tables()
    with pytest.raises(BundleError) as caught:
        explain.save_bundle(tmp_path / "b", model(), static.drop(columns="churned"), temporal,
                            temporal_features=TEMPORAL, groups=groups)
    assert all(word in str(caught.value) for word in words), str(caught.value)
    assert not (tmp_path / "b").exists()


def test_save_bundle_of_any_model_writes_and_checks_groups(tmp_path):
    profile, history = keras.Input((2,), name="profile"), keras.Input((T, 1), name="history")
    extra = keras.Input((1,), name="extra")
    h = keras.layers.Concatenate()([profile, extra, keras.layers.Flatten()(history)])
    many_model = keras.Model([profile, history, extra], keras.layers.Dense(1, activation="sigmoid")(h))
    rng = np.random.default_rng(4)
    inputs = {"profile": rng.normal(size=(N, 2)), "history": rng.normal(size=(N, T, 1)), "extra": rng.normal(size=N)}
    features = {"profile": ["orders", "spend"], "history": ["calls"]}
    folder = explain.save_bundle(tmp_path / "m", many_model, inputs, features=features,
                                 groups={"Money": ["spend", "extra"]}, units={"spend": "EUR"})
    bundle = load_bundle(folder)
    assert bundle.groups == {"Money": ["spend", "extra"]} and bundle.units == {"spend": "EUR"}
    with pytest.raises(BundleError, match="group 'Money' lists 'profit'"):
        explain.save_bundle(tmp_path / "n", many_model, inputs, features=features, groups={"Money": ["profit"]})


def test_group_problems_words():
    problems = group_problems({"A": ["x", "y"], "B": ["y", "z"]}, ["x", "y"])
    assert problems == [
        GROUP_UNKNOWN_COLUMN.format(group="B", columns="'z'", verb="is", found="'x', 'y'"),
        GROUP_FEATURE_TWICE.format(column="y", count=2, groups="'A', 'B'"),
    ]


def test_groups_come_back_from_the_array_cache_and_an_edit_is_checked(saved, tmp_path, monkeypatch):
    from explain.bundle import cache

    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)
    folder = tmp_path / "cached"
    folder.mkdir()
    for path in saved.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    assert load_bundle(folder).groups == GROUPS
    assert (folder / cache.CACHE_DIR).is_dir()
    monkeypatch.setattr("explain.bundle.load.read_table", lambda *a, **k: pytest.fail("the cache was not used"))
    assert load_bundle(folder).groups == GROUPS  # mapped from the cache, bundle.json read again
    monkeypatch.undo()
    config = json.loads((folder / "bundle.json").read_text())
    (folder / "bundle.json").write_text(json.dumps({**config, "groups": {"Purchases": ["orders", "nope"]}}))
    with pytest.raises(BundleError, match="group 'Purchases' lists 'nope'"):
        load_bundle(folder)
