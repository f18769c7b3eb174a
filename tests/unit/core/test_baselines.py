import numpy as np
import pytest

from explain.core import baselines
from explain.core.errors import AttributionError

RNG = np.random.default_rng(0)
DATA = {"static": RNG.normal(size=(20, 4)), "temporal": RNG.normal(size=(20, 6, 3))}
IDS = [f"C{i:03d}" for i in range(20)]
LABELS = np.array([0, 1] * 10)


def test_zero():
    b = baselines.from_spec("zero", DATA, DATA)
    assert b["static"].shape == (1, 4) and b["temporal"].shape == (1, 6, 3)
    assert not b["static"].any() and not b["temporal"].any()


@pytest.mark.parametrize("kind, reduce", [("mean", np.mean), ("median", np.median)])
def test_mean_and_median_per_feature_same_every_period(kind, reduce):
    b = baselines.from_spec(kind, DATA, DATA)
    np.testing.assert_allclose(b["static"][0], reduce(DATA["static"], axis=0))
    expected = reduce(DATA["temporal"].reshape(-1, 3), axis=0)
    for period in range(6):
        np.testing.assert_allclose(b["temporal"][0, period], expected)


def test_customer_and_cohort():
    b = baselines.from_spec("customer:C007", DATA, DATA, ids=IDS)
    np.testing.assert_array_equal(b["static"][0], DATA["static"][7])
    c = baselines.from_spec("cohort:1", DATA, DATA, ids=IDS, labels=LABELS)
    np.testing.assert_allclose(c["temporal"][0], DATA["temporal"][LABELS == 1].mean(axis=0))
    float_labels = LABELS.astype(float)  # a label column read as 0.0 / 1.0 still matches "1"
    np.testing.assert_allclose(baselines.from_spec("cohort:1", DATA, DATA, labels=float_labels)["static"], c["static"])


def test_flat_keeps_each_customers_mean_and_static():
    b = baselines.from_spec("flat", DATA, DATA)
    np.testing.assert_allclose(b["temporal"].mean(axis=1), DATA["temporal"].mean(axis=1))
    assert np.allclose(b["temporal"], b["temporal"][:, :1])  # flat over periods
    np.testing.assert_array_equal(b["static"], DATA["static"])  # static gets no attribution


def test_blur_smooths_and_keeps_constants():
    const = {"static": DATA["static"][:2], "temporal": np.full((2, 6, 3), 4.0)}
    np.testing.assert_allclose(baselines.blur(const, 1.5)["temporal"], 4.0)
    b = baselines.blur(DATA, 1.0)["temporal"]
    roughness = lambda a: np.abs(np.diff(a, axis=1)).mean()  # noqa: E731
    assert roughness(b) < 0.6 * roughness(DATA["temporal"])
    wide = baselines.blur(DATA, 1000.0)["temporal"]  # very wide: close to each customer's mean
    np.testing.assert_allclose(wide, np.broadcast_to(DATA["temporal"].mean(axis=1, keepdims=True), wide.shape),
                               atol=1e-2)


def test_sample_is_seeded_and_distinct():
    a = baselines.from_spec("sample:5", DATA, DATA, seed=3)
    b = baselines.from_spec("sample:5", DATA, DATA, seed=3)
    assert a["static"].shape == (1, 5, 4) and a["temporal"].shape == (1, 5, 6, 3)
    np.testing.assert_array_equal(a["static"], b["static"])
    assert len({tuple(r) for r in a["static"][0]}) == 5


@pytest.mark.parametrize("spec, kwargs, message", [
    ("average", {}, "Unknown baseline 'average'"),
    ("customer", {}, "Unknown baseline 'customer'"),
    ("mean:3", {}, "Unknown baseline 'mean:3'"),
    ("customer:Z99", {"ids": IDS}, "Baseline customer 'Z99' is not in the data set. Some valid ids: C000"),
    ("cohort:2", {"labels": LABELS}, "The cohort '2' has no customers: the label column holds 0, 1"),
    ("cohort:1", {}, "needs a label column"),
    ("blur:-1", {}, "Blur width -1.0 must be a positive number"),
    ("blur:wide", {}, "Blur width 'wide'"),
    ("sample:0", {}, "sample:K needs K from 1 to 256"),
    ("sample:x", {}, "sample:K needs K"),
])
def test_bad_specs(spec, kwargs, message):
    with pytest.raises(AttributionError, match=message):
        baselines.from_spec(spec, DATA, DATA, **kwargs)


@pytest.mark.parametrize("spec", ["zero", "mean", "median", "customer:C001", "cohort:0", "flat", "blur", "blur:3",
                                  "sample:8"])
def test_every_kind_is_described(spec):
    assert len(baselines.describe(spec)) > 40
