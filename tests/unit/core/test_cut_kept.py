"""The padding cut's verdict kept beside a big bundle's array cache (explain.core.cut.remember,
explain.bundle.load._remember_cut): checked once, read by a later open of the same model file and software, checked
again when the kept verdict is not for this software, and the attributions the same either way."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explain.bundle import cache
from explain.bundle.load import load_bundle
from explain.core import cut
from explain.core.engine import cut_notes
from explain.core.settings import Settings
from tests.support import padded

pytest.importorskip("keras")
IDS = ["W000", "W003", "W006"]  # padded at the start (their calls share the padding: cut)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)
    monkeypatch.setattr(cache, "MIN_BYTES", 0)  # this small bundle gets an array cache, as a big one does
    return padded.write(tmp_path / "weeks")


def attribute(bundle):
    from explain.analysis.explainer import explain_customers

    return explain_customers(bundle, IDS, Settings(steps=32).for_bundle(bundle))


def kept_file(folder):
    found = list((folder / cache.CACHE_DIR).glob("kept-cut.json"))
    return json.loads(found[0].read_text()) if found else None


def test_checked_once_then_read_and_the_same_attributions(folder, monkeypatch):
    first = load_bundle(folder)
    assert kept_file(folder) is None
    checked = attribute(first)
    assert "calls cut" in cut_notes(first.model)
    kept = kept_file(folder)
    assert kept["value"][0] is True and "calls cut" in kept["value"][1]
    assert kept["key"]["format"] == cut.VERDICT_FORMAT and kept["key"]["keras"]

    def no_check(*args, **kwargs):
        raise AssertionError("checked again although the verdict was kept for this model and software")
    monkeypatch.setattr(cut.Cut, "_check", no_check)
    again = load_bundle(folder)  # a new model object: as a new process sees it
    assert again.model is not first.model
    read = attribute(again)
    assert "calls cut" in cut_notes(again.model)
    for name in ("static", "temporal", "prediction", "baseline_prediction", "delta"):
        np.testing.assert_allclose(getattr(read, name), getattr(checked, name), rtol=0, atol=1e-7)


def test_a_verdict_of_other_software_is_checked_again(folder, monkeypatch):
    attribute(load_bundle(folder))
    calls = []
    real = cut.Cut._check

    def counted(self, engine, probe):
        calls.append(1)
        return real(self, engine, probe)
    monkeypatch.setattr(cut.Cut, "_check", counted)
    monkeypatch.setattr(cut, "VERDICT_FORMAT", cut.VERDICT_FORMAT + 1)  # a later version checks something else
    attribute(load_bundle(folder))
    assert calls == [1]
    assert kept_file(folder)["key"]["format"] == cut.VERDICT_FORMAT  # and keeps its own verdict


def test_a_refused_cut_is_kept_as_refused_and_full_calls_give_the_same_numbers(folder, monkeypatch):
    full = attribute(load_bundle(folder))  # checked: cut (the numbers of the cut calls)
    data = kept_file(folder)
    data["value"] = [False, cut.REFUSED_GRADIENTS]  # a kept refusal: full calls, no check
    (folder / cache.CACHE_DIR / "kept-cut.json").write_text(json.dumps(data))
    monkeypatch.setattr(cut.Cut, "_check", lambda *a: (_ for _ in ()).throw(AssertionError("checked again")))
    bundle = load_bundle(folder)
    refused = attribute(bundle)
    assert cut_notes(bundle.model) == cut.REFUSED_GRADIENTS
    for name in ("static", "temporal", "delta"):  # full calls: the same attributions within float32 rounding
        np.testing.assert_allclose(getattr(refused, name), getattr(full, name), rtol=0, atol=1e-6)


def test_check_makes_the_cut_check_once_for_the_dashboard(folder, capsys, monkeypatch):
    from explain.cli import main

    assert main(["check", "--bundle", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Model calls on padded histories: calls cut to the periods after the padding" in out
    assert kept_file(folder)["value"][0] is True
    monkeypatch.setattr(cut.Cut, "_check", lambda *a: (_ for _ in ()).throw(AssertionError("checked again")))
    from explain.modelfile.limits import OWNER_LIMITS

    bundle = load_bundle(folder, limits=OWNER_LIMITS)  # as the dashboard opens its startup bundle (ui.startup.limits)
    attribute(bundle)  # the dashboard's process: the kept verdict, no check
    assert "calls cut" in cut_notes(bundle.model)
