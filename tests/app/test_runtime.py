"""ui/runtime.py, the one module on Streamlit's private API: the version check and the parts
that can be checked outside a script run (the app's own tests cover the rest)."""

import logging

import streamlit as st
from streamlit.runtime.scriptrunner import script_runner

from ui import runtime


def test_another_streamlit_version_is_logged_with_what_to_recheck(monkeypatch, caplog):
    monkeypatch.setattr(st, "__version__", "9.9.9")
    with caplog.at_level(logging.WARNING, logger="explain.app"):
        assert runtime.check_version() is False
    [record] = [r for r in caplog.records if r.name == "explain.app"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == runtime.VERSION_WARNING.format(found="9.9.9", tested=runtime.TESTED_VERSION)
    assert "ui/runtime.py" in record.getMessage()


def test_the_tested_version_logs_nothing(monkeypatch, caplog):
    monkeypatch.setattr(st, "__version__", runtime.TESTED_VERSION)
    with caplog.at_level(logging.WARNING, logger="explain.app"):
        assert runtime.check_version() is True
    assert not [r for r in caplog.records if r.name == "explain.app"]


def test_outside_a_script_run_should_stop_says_go_on():
    assert runtime.should_stop() is False


def test_the_kernel_cache_patch_is_applied_once_and_keeps_the_keras_session(monkeypatch):
    import keras

    patched = script_runner._clean_problem_modules
    assert getattr(patched, "keeps_kernel_cache", False)
    runtime.keep_kernel_cache()
    assert script_runner._clean_problem_modules is patched  # a second call changes nothing
    cleared = []
    monkeypatch.setattr(keras.backend, "clear_session", lambda *a, **k: cleared.append(1))
    patched()
    assert not cleared
