"""Label values as text (explain/core/labels.py): the same customers whatever the column's dtype."""

from types import SimpleNamespace

import numpy as np
import pytest

from explain.core import labels


def fake_bundle(values, positive=None):
    return SimpleNamespace(labels=None if values is None else np.asarray(values, dtype=object),
                           positive_label=positive)


@pytest.mark.parametrize("value, text", [
    (1, "1"), (1.0, "1"), (np.float64(0.0), "0"), (np.float32(2.0), "2"), (1.5, "1.5"),
    ("yes", "yes"), ("007", "007"), (np.int64(3), "3"),
])
def test_a_value_is_written_as_text_with_whole_floats_as_integers(value, text):
    assert labels.text(value) == text


def test_float_and_integer_columns_select_the_same_rows():
    ints = np.array([0, 1, 1, 0, 2])
    floats = ints.astype(float)
    for value in ("0", "1", "2"):
        np.testing.assert_array_equal(labels.mask(ints, value), ints == int(value))
        np.testing.assert_array_equal(labels.mask(floats, value), ints == int(value))
    assert not labels.mask(floats, "1.0").any()  # one spelling per value: "1"


@pytest.mark.parametrize("column, positive, expected_values, expected_positive", [
    ([1.0, 0.0, 1.0, 0.0, 0.0], 1, ["0", "1"], "1"),
    ([1, 0, 1], None, ["0", "1"], "1"),                        # no positive label: the last value
    (["yes", "no", "yes"], "yes", ["no", "yes"], "yes"),
    (["churned", "stayed", "churned"], "churned", ["stayed", "churned"], "churned"),  # positive last
    (["a", "b", "c"], "a", ["b", "c", "a"], "a"),
])
def test_values_put_the_positive_label_last(column, positive, expected_values, expected_positive):
    bundle = fake_bundle(column, positive)
    assert labels.values(bundle) == expected_values
    assert labels.positive(bundle) == expected_positive
    counts = labels.counts(bundle)
    assert list(counts) == expected_values and sum(counts.values()) == len(column)
    for value, count in counts.items():
        assert count == sum(labels.text(v) == value for v in column)


def test_a_bundle_without_labels_has_no_values():
    bundle = fake_bundle(None)
    assert labels.values(bundle) == [] and labels.positive(bundle) is None and labels.counts(bundle) == {}
