"""The dashboard's one-customer calls on XLA for long histories (``explain.core.engine.xla_wanted`` /
``warm_up_xla``, ``explain.core.xla``): once the bucket is compiled, a customer padded at the start is explained by the
whole history compiled instead of a cut graph call, with the graph's numbers (exact zeros on the padding); which
models get it; and TensorFlow's own cache of XLA executables on disk (``xla.keep_compiled``), set before TensorFlow is
imported, in a fresh process. On a padded weekly bundle unlike the demo (64 weeks, Masking + an LSTM with weights set
by hand, tests/support/padded.py)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core import xla
from explain.core.engine import engine_for, warm_up_xla, xla_wanted
from explain.core.settings import Settings
from tests.support import padded
from tests.support.apptest import DEMO

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def weekly(tmp_path_factory):
    return load_bundle(padded.write(tmp_path_factory.mktemp("weekly") / "weekly", n=12))


def padding(bundle, cid: str) -> np.ndarray:
    return np.all(bundle.inputs_for([cid])["temporal"][0] == 0, axis=1)


def test_a_padded_customer_on_the_compiled_bucket_gets_the_graphs_numbers(weekly, monkeypatch):
    """Compiled: a customer padded less than ``xla.WHOLE_HISTORY_BELOW`` of the weeks, and one not padded; the
    padding cut's graph call: one padded more (a compiled call of the whole history would cost more)."""
    monkeypatch.delenv(xla.ENV, raising=False)
    share = {str(i): padding(weekly, str(i)).mean() for i in weekly.ids}
    some = next(c for c, p in share.items() if 0 < p < xla.WHOLE_HISTORY_BELOW)
    most = next(c for c, p in share.items() if p >= xla.WHOLE_HISTORY_BELOW)
    full = next(c for c, p in share.items() if p == 0)
    settings = Settings(steps=64)
    engine = engine_for(weekly.model)
    xla.disable(engine)
    graph = {cid: explain_customers(weekly, [cid], settings) for cid in (some, most, full)}  # graph (and cut) calls
    try:
        assert warm_up_xla(weekly.model, background=False)  # compiled here, now
        state = xla.state_of(engine)
        calls = {}
        compiled = {}
        for cid in (some, full, most):
            before = state.calls
            compiled[cid] = explain_customers(weekly, [cid], settings)
            calls[cid] = state.calls - before
    finally:
        xla.disable(engine)
    assert calls == {some: 1, full: 1, most: 0}  # on the compiled bucket (no cut), and on the cut graph call
    for cid in (some, most, full):
        a, b = graph[cid], compiled[cid]
        scale = max(float(np.abs(a.temporal).max()), float(np.abs(a.static).max()))
        tolerance = xla.COMPILED_TOLERANCE * scale  # float32 rounding, as a batch job's compiled calls are checked
        assert np.abs(a.temporal - b.temporal).max() <= tolerance
        assert np.abs(a.static - b.static).max() <= tolerance
        np.testing.assert_allclose(b.prediction, a.prediction, rtol=0, atol=1e-7)
        assert abs(float(b.delta[0])) <= abs(float(a.delta[0])) + 1e-6  # completeness as good as the graph's
        assert np.all(b.temporal[0][padding(weekly, cid)] == 0.0)  # the padded weeks: exactly nothing


def test_long_histories_get_it_by_default_and_the_owner_decides(weekly, monkeypatch):
    monkeypatch.delenv(xla.ENV, raising=False)
    assert weekly.n_periods >= xla.LONG_HISTORY and xla_wanted(weekly.model)
    if (DEMO / "model.keras").is_file():
        demo = load_bundle(DEMO)
        assert demo.n_periods < xla.LONG_HISTORY and not xla_wanted(demo.model)  # 12 months: no compile
        monkeypatch.setenv(xla.ENV, "1")
        assert xla_wanted(demo.model)
    monkeypatch.setenv(xla.ENV, "0")
    assert not xla_wanted(weekly.model)


KEPT = """
import json, os, sys
sys.path.insert(0, {root!r})
os.environ["XDG_CACHE_HOME"] = {cache!r}
os.environ.pop("TF_XLA_FLAGS", None)
from explain.core import xla
spaced = xla.keep_compiled(os.path.join({cache!r}, "with space"))  # TF_XLA_FLAGS is split at spaces: not set
unset = "TF_XLA_FLAGS" not in os.environ
folder = xla.keep_compiled()
again = xla.keep_compiled()  # the flag is set already: nothing more
import tensorflow as tf
@tf.function(jit_compile=True)
def f(x):
    return tf.reduce_sum(tf.tanh(x @ tf.ones((8, 8))))
value = float(f(tf.ones((2, 8))))
late = xla.keep_compiled()  # TensorFlow imported: too late
print(json.dumps({{"spaced": spaced, "unset": unset, "kept": xla.kept_folder(),
                   "folder": folder, "again": again, "late": late, "flags": os.environ["TF_XLA_FLAGS"],
                   "value": value, "files": sorted(os.listdir(folder))}}))
"""


def test_xla_executables_are_kept_on_disk_and_read_by_the_next_process(tmp_path):
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", KEPT.format(root=str(ROOT), cache=str(tmp_path))], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["spaced"] is None and first["unset"]
    assert first["folder"] == str(tmp_path / "explain" / "xla") and first["again"] is None and first["late"] is None
    assert first["kept"] == first["folder"]
    assert first["flags"] == f"{xla.CACHE_FLAG}={first['folder']}"
    assert first["value"] == pytest.approx(16 * np.tanh(8.0)) and second["value"] == first["value"]
    assert first["files"] and second["files"] == first["files"]  # the second process found it: nothing new written


@pytest.mark.parametrize("xla_setting", ["", "0"])
def test_check_compiles_the_dashboards_bucket_of_a_long_bundle_once(xla_setting, weekly, tmp_path, monkeypatch,
                                                                     capsys):
    """`explain check` of a big bundle (one with an array cache) of long histories compiles the dashboard's
    one-customer bucket where TensorFlow keeps XLA executables (the flag ``keep_compiled`` sets); EXPLAIN_XLA=0: not."""
    from explain.bundle import cache
    from explain.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)
    monkeypatch.setattr(cache, "MIN_BYTES", 0)  # every bundle gets an array cache
    monkeypatch.setenv("TF_XLA_FLAGS", f"{xla.CACHE_FLAG}={tmp_path / 'xla'}")
    monkeypatch.setenv(xla.ENV, xla_setting)
    assert main(["check", "--bundle", str(weekly.path)]) == 0
    out = capsys.readouterr().out
    said = "Compiled the dashboard's one-customer calls with XLA"
    if xla_setting == "0":
        assert said not in out
    else:
        assert said in out and f"({weekly.n_periods} periods" in out and str(tmp_path / "xla") in out


def test_the_dashboards_background_work_compiles_a_long_bundles_bucket_first(weekly, monkeypatch):
    """``ui.cache.warm_background`` (after the first page, ``ui/launch.py``): the one-customer bucket of a long
    history compiled before the rest (the store job, the what-if card's medians), so that the next switches use it."""
    from ui import cache, stores

    monkeypatch.delenv(xla.ENV, raising=False)
    order = []
    monkeypatch.setattr(stores, "start", lambda *args, **kwargs: order.append(
        ("store", xla.state_of(engine_for(bundle.model)) is not None)))
    bundle = cache.open_bundle(weekly.path)
    engine = engine_for(bundle.model)
    xla.disable(engine)
    try:
        cache.warm_background(bundle)
        state = xla.state_of(engine)
        assert state is not None and state.compiles == 1 and list(state.ready.values())[0] is not None
    finally:
        xla.disable(engine)
    assert order in ([], [("store", True)])  # a store job, if one starts, after the compile
