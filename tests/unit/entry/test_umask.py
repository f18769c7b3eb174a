"""Files and folders the user asks for get the user's umask (as ``open`` and ``mkdir`` give them), not the
0600 / 0700 of the private temporary files they are written through: ``attribute --out``, ``batch``,
``save_bundle``. The server's copies of uploaded files stay private."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from explain import cli
from explain.bundle.save import save_bundle
from explain.core.files import write_atomic, write_bytes_atomic
from tests.support.apptest import DEMO

UMASK = 0o027  # unlike the usual 0o022: group may read, others nothing


@pytest.fixture
def umask():
    old = os.umask(UMASK)
    try:
        yield UMASK
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_attribute_and_batch_outputs_follow_the_umask(tmp_path, umask):
    for suffix in (".json", ".csv", ".parquet"):
        out = tmp_path / f"a{suffix}"
        assert cli.main(["attribute", "--bundle", str(DEMO), "--customer", "C00001", "--steps", "8",
                         "--out", str(out)]) == 0
        assert mode(out) == 0o666 & ~umask, suffix
    store = tmp_path / "store"
    assert cli.main(["batch", "--bundle", str(DEMO), "--out", str(store), "--steps", "8", "--batch-size", "2000"]) == 0
    assert mode(store) == 0o777 & ~umask
    assert {mode(p) for p in store.rglob("*") if p.is_file()} == {0o666 & ~umask}


def test_save_bundle_folder_and_files_follow_the_umask(tmp_path, umask):
    keras = pytest.importorskip("keras")
    s_in, t_in = keras.Input((2,)), keras.Input((3, 1))
    model = keras.Model([s_in, t_in], keras.layers.Dense(1)(keras.layers.Concatenate()(
        [s_in, keras.layers.Flatten()(t_in)])))
    rng = np.random.default_rng(0)
    path = save_bundle(tmp_path / "saved", model, rng.normal(size=(4, 2)), rng.normal(size=(4, 3, 1)))
    assert mode(path) == 0o777 & ~umask
    assert {mode(p) for p in path.iterdir()} == {0o666 & ~umask}


def test_private_writes_stay_private(tmp_path, umask):
    private = write_bytes_atomic(tmp_path / "upload.csv", b"x", readable=False)
    assert mode(private) == 0o600
    assert mode(write_atomic(tmp_path / "public.txt", lambda p: p.write_text("x"))) == 0o640
