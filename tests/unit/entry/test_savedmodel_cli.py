"""--trust-model on the command line, in serve and in the dashboard's startup: a bundle's SavedModel (savedmodel/) is
refused without it (exit 2, the message names the flag) and gives the .keras bundle's attributions with it."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import explain
from explain.bundle import cache as array_cache
from explain.bundle.load import load_bundle
from explain.cli import TRUST_MODEL_LOCAL_ONLY, main
from explain.modelfile import savedmodel as saved
from explain.serve import command
from tests.support.savedmodel import demo_pair
from ui import startup

IDS = ["C00003", "C00011"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(the demo bundle, the same with its model exported by model.export into savedmodel/, model.keras removed)."""
    return demo_pair(tmp_path_factory.mktemp("savedmodel-cli"))


def _attribute(bundle, out, *flags):
    customers = [a for i in IDS for a in ("--customer", i)]
    return main(["attribute", "--bundle", str(bundle), *customers, "--steps", "32", "--out", str(out), *flags])


def test_attribute_refused_without_the_flag_and_equal_to_keras_with_it(folders, tmp_path, capsys):
    keras_dir, sm_dir = folders
    assert _attribute(sm_dir, tmp_path / "refused.json") == 2
    error = capsys.readouterr().err
    assert "pass --trust-model if you trust it" in error and "savedmodel/" in error and "Traceback" not in error
    assert not (tmp_path / "refused.json").exists()
    assert _attribute(keras_dir, tmp_path / "keras.json") == 0
    assert _attribute(sm_dir, tmp_path / "sm.json", "--trust-model") == 0
    want = json.loads((tmp_path / "keras.json").read_text())["customers"]
    got = json.loads((tmp_path / "sm.json").read_text())["customers"]
    worst = 0.0
    for a, b in zip(got, want):
        assert a["id"] == b["id"] and a["prediction"] == pytest.approx(b["prediction"], abs=1e-6)
        for part in ("static", "temporal"):
            worst = max(worst, float(np.abs(np.subtract(a[part]["values"], b[part]["values"])).max()))
    print(f"attribute: max |savedmodel - keras| = {worst:.3g}")
    assert worst <= 1e-5


def test_check_lists_the_refusal_and_passes_with_the_flag(folders, capsys):
    _, sm_dir = folders
    assert main(["check", "--bundle", str(sm_dir)]) == 1
    assert saved.NOT_TRUSTED in capsys.readouterr().out
    assert main(["check", "--bundle", str(sm_dir), "--trust-model"]) == 0  # the model checks ran on it too
    assert "is valid" in capsys.readouterr().out


def test_ray_engine_refuses_in_words_and_convert_copies_the_savedmodel(folders, tmp_path, capsys, monkeypatch):
    _, sm_dir = folders
    assert main(["batch", "--bundle", str(sm_dir), "--engine", "ray", "--trust-model", "--out", str(tmp_path)]) == 2
    assert TRUST_MODEL_LOCAL_ONLY in capsys.readouterr().err
    out = tmp_path / "arrays"
    assert main(["convert", "--bundle", str(sm_dir), "--trust-model", "--out", str(out)]) == 0
    assert (out / "savedmodel" / "saved_model.pb").is_file() and not (out / "model.keras").exists()
    source, copy = load_bundle(sm_dir, trust_model=True), load_bundle(out, trust_model=True)
    ids = [str(i) for i in source.ids[:3]]
    np.testing.assert_array_equal(copy.predict(copy.inputs_for(ids)), source.predict(source.inputs_for(ids)))
    monkeypatch.setattr(array_cache, "MIN_BYTES", 0)  # the demo is below the size a cache is written for
    long = tmp_path / "long"
    assert main(["convert", "--bundle", str(out), "--trust-model", "--layout", "long", "--out", str(long)]) == 0
    load_bundle(long, trust_model=True)  # the first open writes the array cache
    assert array_cache.read(long) is not None  # and it is fresh: savedmodel/'s files are recorded by their names in
    # the bundle (savedmodel/variables/..., not 'variables' alone, which would never match)


def test_serve_passes_the_flag_to_the_app_which_trusts_the_startup_bundle_only(folders):
    _, sm_dir = folders
    argv = command(sm_dir, trust_model=True)
    app_args = argv[argv.index("--") + 1:]
    assert "--trust-model" in app_args and "--trust-model" not in command(sm_dir)
    assert isinstance(startup.model_loader(app_args), saved.TrustModel)
    assert startup.model_loader(["--bundle", str(sm_dir)]) is None
    bundle = explain.load_bundle(sm_dir, loader=startup.model_loader(app_args), limits=startup.limits(app_args))
    assert bundle.n_customers > 0


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_under_the_jax_backend_check_says_tensorflow_only(folders):
    _, sm_dir = folders
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-m", "explain", "check", "--bundle", str(sm_dir), "--trust-model"],
                          capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[3],
                          timeout=300)
    assert done.returncode == 1
    assert saved.NOT_TENSORFLOW.format(backend="jax") in done.stdout
