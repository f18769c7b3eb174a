"""One settings object: every setting survives its string form, the command line and the store key.

(The URL leg of the same round trip is in tests/app/test_url.py.)
"""

from __future__ import annotations

import json
import shlex

import pytest

from explain import Settings as ExportedSettings
from explain.cli import build_parser, settings_from_args
from explain.core.errors import AttributionError
from explain.core.ig import Settings as EngineSettings
from explain.core.settings import (
    BAD_SPEC,
    PARSERS,
    TARGET_OUT_OF_RANGE,
    UNKNOWN_SETTING,
    UNKNOWN_TARGET_NAME,
    Baseline,
    Settings,
)

OUTPUT_NAMES = ["stay", "churn"]

# One case per value a setting can take (every baseline kind, both steps forms, every rule ...).
CASES = [
    {"baseline": "zero"}, {"baseline": "mean"}, {"baseline": "median"}, {"baseline": "customer:C00042"},
    {"baseline": "customer:id with:colon"}, {"baseline": "cohort:0"}, {"baseline": "cohort:yes"},
    {"baseline": "flat"}, {"baseline": "blur"}, {"baseline": "blur:1.5"}, {"baseline": "blur:0.25"},
    {"baseline": "sample:16", "seed": "7"},
    {"steps": "8"}, {"steps": "512"}, {"steps": "auto", "tolerance": "0.01"}, {"steps": "auto", "max_points": "256"},
    {"method": "trapezoid"}, {"method": "left"}, {"method": "right"}, {"method": "middle"},
    {"method": "gausslegendre"}, {"target": "1"}, {"target": "churn"}, {"space": "logit"},
    {"path": "per-input"},
    {"baseline": "cohort:1", "steps": "auto", "method": "trapezoid", "target": "churn", "space": "logit",
     "path": "per-input", "tolerance": "0.002", "seed": "3"},
]


def _cli_words(strings: dict) -> list[str]:
    words = []
    for name, value in strings.items():
        words += [f"--{name.replace('_', '-')}", value]
    return words


@pytest.mark.parametrize("given", CASES, ids=[" ".join(f"{k}={v}" for k, v in c.items()) for c in CASES])
def test_every_setting_round_trips_through_strings_cli_and_store_key(given):
    settings = Settings.from_strings(given).resolved(OUTPUT_NAMES)
    for name, text in given.items():  # what was asked for is what was parsed
        if name == "target":
            assert OUTPUT_NAMES[settings.target] == text or settings.target == int(text)
        else:
            assert settings.to_strings()[name] == str(PARSERS[name](text))
    # string form -> settings
    assert Settings.from_strings(settings.to_strings()).resolved(OUTPUT_NAMES) == settings
    # the command line (through a shell's quoting, as a user types it)
    line = "attribute --bundle B --customer C --out x.json " + shlex.join(_cli_words(settings.to_strings()))
    args = build_parser().parse_args(shlex.split(line))
    assert settings_from_args(args).resolved(OUTPUT_NAMES) == settings
    # the store's identity: written as JSON in the manifest, read back, compared
    stored = json.loads(json.dumps(settings.identity()))
    assert Settings(**stored) == settings
    assert Settings.from_key(settings.key()) == settings
    assert hash(settings.key()) == hash(Settings(**stored).key())


def test_different_settings_have_different_keys():
    keys = {Settings.from_strings(case).resolved(OUTPUT_NAMES).key() for case in CASES}
    # two pairs are the same settings: method=gausslegendre and baseline=mean (both the defaults),
    # target=1 and target=churn (the same output)
    assert len(keys) == len(CASES) - 2


def test_a_target_by_name_and_by_index_share_a_key():
    by_name = Settings(target="churn").resolved(OUTPUT_NAMES)
    assert by_name.key() == Settings(target=1).resolved(OUTPUT_NAMES).key()
    assert by_name.key() == Settings.from_strings({"target": "1"}).resolved(OUTPUT_NAMES).key()
    assert by_name.target_name(OUTPUT_NAMES) == "churn"


def test_typed_and_string_forms_are_the_same_settings():
    assert Settings(baseline="blur:2.0", steps="64") == Settings(baseline=Baseline("blur", 2), steps=64)
    assert str(Baseline.parse("blur:2.0")) == "blur:2"  # one canonical spelling
    assert Baseline.parse(" Customer:C7 ") == Baseline("customer", "C7")
    assert Baseline.parse("sample:8").argument == 8 and Baseline.parse("blur").width == 2.0


def test_one_class_and_no_alias_of_it():
    """``Settings`` is the one request type (issue 39: the ``Request`` alias is gone)."""
    import explain
    from explain.analysis import explainer

    assert EngineSettings is Settings and ExportedSettings is Settings
    assert not hasattr(explainer, "Request") and "Request" not in explain.__all__


@pytest.mark.parametrize("given, message", [
    ({"baseline": "average"}, BAD_SPEC.format(spec="average")),
    ({"baseline": "customer"}, "Unknown baseline 'customer'"),
    ({"baseline": "blur:wide"}, "Blur width 'wide'"),
    ({"baseline": "sample:0"}, "sample:K needs K from 1 to 256"),
    ({"steps": "many"}, "steps='many' is out of range"),
    ({"steps": "0"}, "steps=0 is out of range for method 'gausslegendre'"),
    ({"steps": "1", "method": "trapezoid"}, "steps=1 is out of range for method 'trapezoid'"),
    ({"method": "simpson"}, UNKNOWN_SETTING.format(name="method", value="simpson",
                                                   expected="gausslegendre, trapezoid, left, right, middle")),
    ({"space": "prob"}, "space='prob' is not valid"),
    ({"path": "both"}, "path='both' is not valid"),
    ({"tolerance": "-1"}, "tolerance=-1.0 must be a positive number"),
    ({"tolerance": "tight"}, "tolerance='tight' must be a positive number"),
    ({"seed": "x"}, "seed='x' must be an integer"),
    ({"colour": "red"}, "Unknown setting"),
])
def test_bad_strings_name_the_setting(given, message):
    with pytest.raises(AttributionError) as error:
        Settings.from_strings(given)
    assert message in str(error.value)


@pytest.mark.parametrize("target, message", [
    ("2", TARGET_OUT_OF_RANGE.format(target="2", k=2, last=1, names=" (or a name: stay, churn)")),
    ("-1", "target='-1' is out of range"),
    ("maybe", UNKNOWN_TARGET_NAME.format(target="maybe", names=OUTPUT_NAMES)),
])
def test_a_bad_target_is_refused_when_resolved(target, message):
    settings = Settings.from_strings({"target": target})  # the names are not known yet
    with pytest.raises(AttributionError) as error:
        settings.resolved(OUTPUT_NAMES)
    assert message in str(error.value)


def test_without_tensorflow_the_engine_says_what_to_install():
    """TensorFlow is an extra (pyproject.toml): importing the engine without it names the packages to install."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['tensorflow'] = None\n"
            "try:\n    import explain.core.engine\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert 'pip install "explain[tf-cpu]"' in out and "not installed" in out
