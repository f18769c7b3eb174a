"""The URL leg of the settings round trip (ui/url.py): every setting the dashboard offers goes
through encode -> decode unchanged, with the same cache key as the settings' own parsers give
(the CLI's and the store's form); every bad value is dropped with a warning naming it."""

from types import SimpleNamespace

import numpy as np
import pytest

from explain.core.settings import Baseline, Settings
from ui import options, url

OUTPUTS = ["stay", "churn"]  # two outputs: a target by name is not always column 0


def fake_bundle(with_labels=True):
    ids = np.array([f"C{i:05d}" for i in range(1, 21)] + ["007", "a:b"], dtype=object)
    row_labels = np.array([0.0, 1.0] * 11) if with_labels else None
    return SimpleNamespace(ids=ids, n_customers=len(ids), labels=row_labels, positive_label=1 if with_labels else None,
                           output_names=OUTPUTS)


BUNDLE = fake_bundle()
BASELINES = ([Baseline(kind) for kind in ("zero", "mean", "median", "flat")]
             + [Baseline("customer", i) for i in ("C00003", "007", "a:b")]
             + [Baseline("cohort", v) for v in ("0", "1")]
             + [Baseline("blur", w) for w in options.BLUR_WIDTHS]
             + [Baseline("sample", k) for k in options.SAMPLE_KS])
SETTINGS = ([Settings(baseline=b) for b in BASELINES]
            + [Settings(steps=s) for s in options.STEP_OPTIONS]
            + [Settings(method=m, steps=8) for m in options.METHODS]
            + [Settings(target=t) for t in range(len(OUTPUTS))]
            + [Settings(space=s) for s in options.SPACES]
            + [Settings(path=p) for p in options.PATHS]
            + [Settings(baseline=Baseline("sample", 8), steps="auto", method="trapezoid", target=1, space="logit",
                        path="per-input")])
COMPARES = [Baseline("cohort", "0"), Baseline("cohort", "1"), Baseline("customer", "C00002"),
            Baseline("customer", "007")]


def link(settings=Settings(), compare=Baseline("cohort", "0"), sample="200", customer="C00001"):
    return url.Link(customer=customer, settings=settings.resolved(OUTPUTS), compare=compare, sample=sample)


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "&".join(f"{k}={v}" for k, v in s.to_strings().items()
                                                                      if Settings().to_strings()[k] != v) or "default")
def test_every_setting_round_trips_through_the_url_with_the_same_key(settings):
    original = link(settings)
    params = url.encode(original, OUTPUTS)
    assert all(isinstance(v, str) for v in params.values())
    decoded, warnings = url.decode(params, BUNDLE, default_customer="C00009")
    assert not warnings
    assert decoded == original and decoded.settings.key() == original.settings.key()
    # the URL's strings are the settings' own string forms: the CLI and the store read the same settings
    cli = Settings.from_strings({name: params[name] for name in url.SETTING_NAMES}).resolved(OUTPUTS)
    assert cli.key() == original.settings.key()
    assert url.encode(decoded, OUTPUTS) == params


@pytest.mark.parametrize("compare", COMPARES, ids=str)
@pytest.mark.parametrize("sample", options.SAMPLE_OPTIONS)
def test_the_pages_values_round_trip_too(compare, sample):
    original = link(compare=compare, sample=sample, customer="a:b")
    decoded, warnings = url.decode(url.encode(original, OUTPUTS), BUNDLE, default_customer="C00009")
    assert not warnings and decoded == original


def test_the_target_is_written_by_name_and_read_by_name_or_index():
    assert url.encode(link(Settings(target=1)), OUTPUTS)["target"] == "churn"
    for text in ("churn", "1"):
        decoded, warnings = url.decode({"target": text}, BUNDLE, default_customer="C00009")
        assert not warnings and decoded.settings.target == 1


def test_blur_without_a_width_is_read_as_the_sidebar_holds_it():
    decoded, _ = url.decode({"baseline": "blur"}, BUNDLE, default_customer="C00009")
    widget = Settings(baseline=Baseline("blur", 2.0)).resolved(OUTPUTS)  # a link holds the target resolved
    assert decoded.settings.baseline == widget.baseline and decoded.settings.key() == widget.key()


def test_no_parameters_give_the_defaults():
    decoded, warnings = url.decode({}, BUNDLE, default_customer="C00009")
    assert not warnings
    assert decoded == url.Link(customer="C00009", settings=Settings().resolved(OUTPUTS),
                               compare=Baseline("cohort", "0"), sample="200")
    unlabelled = fake_bundle(with_labels=False)
    assert url.decode({}, unlabelled, default_customer="C00009")[0].compare == Baseline("customer", "C00002")


@pytest.mark.parametrize("name, value", [
    ("customer", "NOPE"), ("baseline", "customer:ghost"), ("baseline", "cohort:7"), ("baseline", "blur:2.5"),
    ("baseline", "blur:-1"), ("baseline", "sample:5"), ("baseline", "sample:x"), ("baseline", "average"),
    ("baseline", "mean:3"), ("steps", "13"), ("steps", "many"), ("steps", "4"), ("method", "simpson"),
    ("target", "upsell"), ("target", "2"), ("space", "prob"), ("path", "alone"), ("compare", "cohort:9"),
    ("compare", "ghost"), ("sample", "300"),
])
def test_a_bad_value_is_dropped_with_a_warning_naming_it(name, value):
    good = url.encode(link(Settings(baseline=Baseline("sample", 32), steps=16, method="left", target=1,
                                    space="logit", path="per-input"), compare=Baseline("customer", "C00002"),
                           sample="all", customer="C00004"), OUTPUTS)
    decoded, warnings = url.decode({**good, name: value}, BUNDLE, default_customer="C00009")
    assert len(warnings) == 1 and f"{name}={value!r}" in warnings[0], warnings
    defaults, _ = url.decode({k: v for k, v in good.items() if k != name}, BUNDLE, default_customer="C00009")
    assert decoded == defaults  # that value alone falls back to its default; the others are kept


def test_a_cohort_needs_labels():
    decoded, warnings = url.decode({"baseline": "cohort:0", "compare": "cohort:0"}, fake_bundle(with_labels=False),
                                   default_customer="C00009")
    assert len(warnings) == 2 and decoded.settings.baseline == Settings().baseline
