"""Every file the project writes follows the umask (0666 minus it; folders 0777 minus it), as ``open`` and ``mkdir``
would, whatever writes it: atomic writes, bundle folders from ``save_bundle``, the array cache and its stored scores,
the drivers summaries (issue 38: they were 0600 whatever the umask) and the CLI's output. The server's copies of
uploaded files stay private (0600)."""

from __future__ import annotations

import os
import stat
import tempfile

import numpy as np
import pytest

from explain.core.files import make_readable, umask, write_atomic, write_bytes_atomic


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(params=[0o022, 0o027])
def process_umask(request):
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def test_umask_is_read_without_changing_it(process_umask):
    assert umask() == process_umask
    assert umask() == process_umask  # reading twice changes nothing


def test_atomic_writes_and_folders_follow_the_umask(tmp_path, process_umask):
    file_mode, folder_mode = 0o666 & ~process_umask, 0o777 & ~process_umask
    written = write_bytes_atomic(tmp_path / "out.json", b"{}")
    assert mode(written) == file_mode == {0o022: 0o644, 0o027: 0o640}[process_umask]
    assert mode(write_atomic(tmp_path / "x.parquet", lambda tmp: tmp.write_bytes(b"1"))) == file_mode
    assert mode(make_readable(tempfile.mkdtemp(dir=tmp_path))) == folder_mode == {0o022: 0o755,
                                                                                  0o027: 0o750}[process_umask]
    private = write_bytes_atomic(tmp_path / "upload.keras", b"x", readable=False)  # the server's copy of an upload
    assert mode(private) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]  # no temporary file left


def test_drivers_summaries_follow_the_umask(tmp_path, process_umask, monkeypatch):
    from explain.batch import summary as batch_summary

    monkeypatch.setattr(batch_summary, "to_parts", lambda d: ({"ranking": np.arange(3.0)}, {"version": 1}))
    path = tmp_path / "store.drivers-abc.npz"
    assert batch_summary.write_summary(path, object())
    assert mode(path) == 0o666 & ~process_umask
    with np.load(path) as data:  # written whole, as np.savez writes it
        np.testing.assert_array_equal(data["ranking"], [0.0, 1.0, 2.0])


def test_a_saved_bundle_its_cache_scores_and_the_cli_output_follow_the_umask(tmp_path, process_umask, monkeypatch):
    keras = pytest.importorskip("keras")
    import explain
    from explain import cli
    from explain.bundle import cache

    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)
    s_in, t_in = keras.Input((2,)), keras.Input((3, 1))
    model = keras.Model([s_in, t_in], keras.layers.Dense(1, activation="sigmoid")(
        keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])))
    rng = np.random.default_rng(0)
    folder = explain.save_bundle(tmp_path / "bundle", model, rng.normal(size=(4, 2)), rng.normal(size=(4, 3, 1)))
    file_mode, folder_mode = 0o666 & ~process_umask, 0o777 & ~process_umask
    assert mode(folder) == folder_mode
    for name in ("model.keras", "static.parquet", "temporal.parquet", "bundle.json"):
        assert mode(folder / name) == file_mode, name
    bundle = explain.load_bundle(folder)
    place = folder / cache.CACHE_DIR
    assert mode(place) == folder_mode and all(mode(p) == file_mode for p in place.iterdir())
    assert cache.write_scores(folder, bundle.content_hash, np.zeros((4, 1))) == place
    assert mode(place / cache.SCORES) == file_mode
    np.testing.assert_array_equal(cache.read_scores(folder, bundle.content_hash, (4, 1)), np.zeros((4, 1)))
    out = tmp_path / "a.json"
    assert cli.main(["attribute", "--bundle", str(folder), "--customer", "0", "--steps", "8", "--out", str(out)]) == 0
    assert mode(out) == file_mode
