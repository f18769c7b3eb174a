"""The dashboard on a bundle whose model is a TensorFlow SavedModel (savedmodel/): opened only when the server was
started with --trust-model (the same heatmap as the .keras bundle), refused in words without it, never uploaded."""

import sys

import numpy as np
import pytest

import explain
from explain.modelfile import savedmodel as saved
from tests.conftest import private_copy
from tests.support.apptest import DEMO, app, charts, errors, heatmap, upload

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """(the demo bundle, two copies with the model exported into savedmodel/: one to trust, one not)."""
    root = tmp_path_factory.mktemp("savedmodel-app")
    keras_dir = private_copy(DEMO, root / "keras")
    copies = []
    for name in ("trusted", "untrusted"):
        folder = private_copy(DEMO, root / name)
        explain.load_bundle(keras_dir).model.export(str(folder / "savedmodel"), verbose=False)
        (folder / "model.keras").unlink()
        copies.append(folder)
    return keras_dir, *copies


def test_the_customer_page_with_trust_model_equals_the_keras_bundles(folders, monkeypatch):
    keras_dir, trusted, _ = folders
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(keras_dir))
    want = heatmap(charts(app())["temporal_heatmap"])["z"]
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(trusted))
    monkeypatch.setattr(sys, "argv", ["app.py", "--trust-model"])
    at = app()
    assert not errors(at)
    got = heatmap(charts(at)["temporal_heatmap"])["z"]
    assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5


def test_without_trust_model_the_page_says_which_flag(folders, monkeypatch):
    _, _, untrusted = folders
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(untrusted))
    monkeypatch.setattr(sys, "argv", ["app.py"])
    shown = " ".join(errors(app()))
    assert "pass --trust-model if you trust it" in shown and "Traceback" not in shown


def test_an_uploaded_savedmodel_is_refused(folders, monkeypatch):
    keras_dir, trusted, _ = folders
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(keras_dir))
    monkeypatch.setattr(sys, "argv", ["app.py", "--trust-model"])  # the server's trust is not the upload's
    at = upload(app(page="pages/data.py"), {"saved_model.pb": (trusted / "savedmodel" / "saved_model.pb").read_bytes(),
                                            "static.csv": (keras_dir / "static.csv").read_bytes()})
    assert not at.exception
    shown = " ".join(errors(at))
    assert saved.FROM_UPLOAD.format(name="saved_model.pb") in shown
