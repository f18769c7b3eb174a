"""The second load of an uploaded model, in the server process, after its trial child passed (issue 25): it
gets the same limits as the child. The child measures its own load (CPU and wall seconds); a model whose trial
load took more CPU than ``max_load_cpu_s`` is refused before the server starts loading it (the second load
repeats that work on the server's cores); the static checks (sizes, layers, config entries) run again on the
file; and the load holds one of the trial slots, so children and server loads together stay at TRIAL_SLOTS."""

from __future__ import annotations

import hashlib

import pytest

from explain.core.errors import UnsafeModelError
from explain.modelfile import safe_load as sl
from explain.modelfile import trial
from explain.modelfile.limits import DEFAULT_LIMITS
from tests.support.hostile import long_sequential_file, tiny_model_file


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_file(tmp_path_factory.mktemp("second") / "tiny.keras")


@pytest.fixture(scope="module")
def measured(tiny):
    """The verdict of a real trial child on the tiny model."""
    return sl.trial_load(tiny, display_name="tiny.keras")


def never_loaded(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Keras was asked to load the model in the server")

    monkeypatch.setattr(sl, "keras_load", refuse)


def test_the_child_reports_how_long_its_load_took(measured):
    assert measured.cpu_s is not None and 0 < measured.cpu_s < DEFAULT_LIMITS.max_load_cpu_s
    assert measured.wall_s is not None and measured.wall_s > 0
    assert trial.TrialVerdict.of("") == trial.TrialVerdict()  # a child that did not say: no time bound known


def test_a_model_slower_to_load_than_the_limit_is_not_loaded_again(tiny, measured, monkeypatch):
    below = DEFAULT_LIMITS.but(max_load_cpu_s=measured.cpu_s / 2)
    never_loaded(monkeypatch)
    with pytest.raises(UnsafeModelError) as info:
        sl.load_after_trial(tiny, measured, limits=below, display_name="tiny.keras")
    assert str(info.value) == sl.SERVER_LOAD_TOO_SLOW.format(path="tiny.keras", cpu=measured.cpu_s,
                                                             limit=below.max_load_cpu_s)
    assert "max_load_cpu_s" in str(info.value)


def test_a_model_within_the_limit_loads_in_the_server(tiny, measured):
    model = sl.load_after_trial(tiny, measured, display_name="tiny.keras")
    assert model.name == "tiny" and model.count_params() == 5 * 3 + 3


def test_the_second_load_checks_the_file_again(tiny, measured, tmp_path, monkeypatch):
    # the file the server loads is measured again: one over max_layers is refused before Keras sees it
    swapped = long_sequential_file(tmp_path / "tiny.keras", DEFAULT_LIMITS.max_layers + 50)
    never_loaded(monkeypatch)
    with pytest.raises(UnsafeModelError) as info:
        sl.load_after_trial(swapped, measured, display_name="tiny.keras")
    assert "max_layers" in str(info.value)


def test_the_second_load_holds_a_trial_slot(tiny, measured, monkeypatch):
    never_loaded(monkeypatch)
    for _ in range(trial.TRIAL_SLOTS):  # every slot busy (two trial children running)
        assert trial._SLOTS.acquire(timeout=5)
    try:
        with pytest.raises(UnsafeModelError) as info:
            sl.load_after_trial(tiny, measured, limits=DEFAULT_LIMITS.but(timeout_s=0.3), display_name="tiny.keras")
        assert str(info.value) == trial.TRIALS_BUSY.format(path="tiny.keras", slots=trial.TRIAL_SLOTS, wait=0.3)
    finally:
        for _ in range(trial.TRIAL_SLOTS):
            trial._SLOTS.release()


def test_an_upload_of_the_same_bytes_reuses_the_verdict_and_its_bound(tiny, monkeypatch):
    from ui import uploads

    digest = hashlib.sha256(tiny.read_bytes()).hexdigest()
    slow = trial.TrialVerdict(cpu_s=DEFAULT_LIMITS.max_load_cpu_s + 10, wall_s=60.0)
    monkeypatch.setattr(uploads, "_TRIAL_PASSED", uploads.OrderedDict({digest: slow}))
    monkeypatch.setattr(sl, "trial_load", lambda *a, **k: pytest.fail("a second trial child"))
    never_loaded(monkeypatch)
    with pytest.raises(UnsafeModelError) as info:
        uploads.load_upload_model(tiny, "tiny.keras", limits=DEFAULT_LIMITS)
    assert "max_load_cpu_s" in str(info.value)
