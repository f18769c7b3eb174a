"""The array cache (issue 26): the first open of a bundle writes its checked arrays, later opens
memory-map them without reading the tables; a changed table or a damaged cache is rebuilt, never
trusted; a read-only bundle folder caches in the user's cache directory."""

from __future__ import annotations

import json
import os
import shutil
import stat

import numpy as np
import pandas as pd
import pytest

from explain.bundle import cache
from explain.bundle import load as B
from explain.bundle.load import load_bundle, validate_bundle
from tests.unit.bundle.test_arrow_tables import tables, write

pytest.importorskip("keras")


@pytest.fixture
def bundle(tmp_path, monkeypatch):
    """(folder, reference temporal array): a padded long Parquet bundle, cached whatever its size."""
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)
    static, long, reference = tables(seed=7)
    return write(tmp_path / "bundle", static, long, "parquet"), reference


def tables_not_read(monkeypatch):
    """Opening reads no table from now on (a read fails the test)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a table was read although the cache is fresh")
    monkeypatch.setattr(B, "read_table", refuse)


def tables_counted(monkeypatch) -> list:
    """The tables read from now on (their names), as the loader reads them."""
    read, original = [], B.read_table

    def counting(folder, name, *args, **kwargs):
        read.append(name)
        return original(folder, name, *args, **kwargs)
    monkeypatch.setattr(B, "read_table", counting)
    return read


def manifest(place):
    return json.loads((place / cache.MANIFEST).read_text())


def test_first_open_writes_the_cache_and_the_next_maps_it_without_the_tables(bundle, monkeypatch):
    folder, reference = bundle
    monkeypatch.setenv(cache.ENVIRONMENT, "off")
    first_report = validate_bundle(folder)
    monkeypatch.delenv(cache.ENVIRONMENT)
    assert not (folder / cache.CACHE_DIR).exists()
    read = tables_counted(monkeypatch)
    first = load_bundle(folder)
    assert (folder / cache.CACHE_DIR / cache.MANIFEST).is_file() and read == ["static", "temporal"]
    # the first open's bundle maps the arrays it has just written: the process holds the rows it reads only
    assert isinstance(first.temporal, np.memmap) and not first.temporal.flags.writeable
    np.testing.assert_array_equal(first.temporal, reference)
    tables_not_read(monkeypatch)
    second = load_bundle(folder)
    assert isinstance(second.temporal, np.memmap) and not second.temporal.flags.writeable
    np.testing.assert_array_equal(second.temporal, reference)
    np.testing.assert_array_equal(second.static, first.static)
    assert second.ids.tolist() == first.ids.tolist() and second.ids.dtype == object
    assert (second.periods, second.notes, second.content_hash) == (first.periods, first.notes, first.content_hash)
    assert validate_bundle(folder).format() == first_report.format()  # `explain check` says the same
    np.testing.assert_allclose(second.predict(), first.predict(), rtol=0, atol=0)


def test_a_copied_bundle_keeps_its_cache(bundle, tmp_path, monkeypatch):
    folder, reference = bundle
    load_bundle(folder)
    copy = shutil.copytree(folder, tmp_path / "copy")  # other inodes and times, the same bytes
    tables_not_read(monkeypatch)
    np.testing.assert_array_equal(load_bundle(copy).temporal, reference)


def test_a_changed_table_rebuilds_the_cache(bundle):
    folder, reference = bundle
    before = load_bundle(folder).content_hash
    frame = pd.read_parquet(folder / "temporal.parquet")
    frame.loc[0, "f2"] = 123.0
    frame.to_parquet(folder / "temporal.parquet", index=False)
    after = load_bundle(folder)
    i = after.index_of(str(frame.loc[0, "customer_id"]))
    assert (after.temporal[i] == 123.0).sum() == 1 and not np.array_equal(after.temporal, reference)
    assert after.content_hash != before
    assert manifest(folder / cache.CACHE_DIR)["content_hash"] == after.content_hash


def test_an_edit_that_keeps_size_and_modification_time_is_seen(bundle, tmp_path):
    _, _ = bundle
    static, long, reference = tables(seed=8)
    folder = write(tmp_path / "csv", static, long, "csv")
    load_bundle(folder)
    path = folder / "temporal.csv"
    before = path.stat()
    text = path.read_text()
    value = text.splitlines()[1].split(",")[2]
    edited = value[:-1] + ("1" if value[-1] != "1" else "2")    # the same length
    path.write_text(text.replace(value, edited, 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert float(edited) in load_bundle(folder).temporal


def test_a_new_file_that_would_change_the_check_is_not_hidden_by_the_cache(bundle):
    folder, _ = bundle
    load_bundle(folder)
    shutil.copy(folder / "temporal.parquet", folder / "temporal.csv")  # both formats: a problem now
    assert [p.file for p in validate_bundle(folder).problems] == ["temporal.csv"]


def _flip_a_value(place):
    entry = manifest(place)["arrays"]["input:temporal"]
    path = place / entry["file"]
    data = bytearray(path.read_bytes())
    data[-4 * 7] ^= 0x40                       # a float32 of the last customer, inside the file
    path.write_bytes(bytes(data))


def _cut(place):
    path = place / manifest(place)["arrays"]["input:temporal"]["file"]
    path.write_bytes(path.read_bytes()[:-100])


def _garbage_manifest(place):
    (place / cache.MANIFEST).write_text('{"format": 1, "arrays": ')


def _forged_manifest(place):
    data = manifest(place)
    data["content_hash"] = "0" * 64            # edited without its checksum
    (place / cache.MANIFEST).write_text(json.dumps(data))


def _missing_file(place):
    (place / manifest(place)["arrays"]["ids"]["file"]).unlink()


@pytest.mark.parametrize("damage", [_flip_a_value, _cut, _garbage_manifest, _forged_manifest, _missing_file])
def test_a_damaged_cache_is_rebuilt_never_trusted(bundle, monkeypatch, damage):
    folder, reference = bundle
    load_bundle(folder)
    damage(folder / cache.CACHE_DIR)
    read = tables_counted(monkeypatch)
    rebuilt = load_bundle(folder)
    np.testing.assert_array_equal(rebuilt.temporal, reference)
    assert read == ["static", "temporal"]                       # checked from the tables again
    tables_not_read(monkeypatch)
    np.testing.assert_array_equal(load_bundle(folder).temporal, reference)   # and cached again


def test_a_read_only_bundle_folder_caches_in_the_user_cache_directory(bundle, tmp_path, monkeypatch):
    folder, reference = bundle
    if os.geteuid() == 0:  # root writes anywhere: let os.access answer from the mode bits, as for a user
        monkeypatch.setattr(cache.os, "access", lambda path, mode: not mode & os.W_OK or bool(
            os.stat(path).st_mode & stat.S_IWUSR))
    folder.chmod(0o555)
    try:
        load_bundle(folder)
        assert not (folder / cache.CACHE_DIR).exists()
        place = cache.places(folder)[1]
        assert place.parent == tmp_path / "xdg" / "explain" and (place / cache.MANIFEST).is_file()
        tables_not_read(monkeypatch)
        mapped = load_bundle(folder)
        assert isinstance(mapped.temporal, np.memmap)
        np.testing.assert_array_equal(mapped.temporal, reference)
    finally:
        folder.chmod(0o755)


def test_no_cache_when_turned_off_or_for_small_tables(bundle, monkeypatch):
    folder, _ = bundle
    monkeypatch.setenv(cache.ENVIRONMENT, "off")
    load_bundle(folder)
    assert not (folder / cache.CACHE_DIR).exists()
    monkeypatch.delenv(cache.ENVIRONMENT)
    monkeypatch.setattr(cache, "MIN_BYTES", 16 << 20)
    load_bundle(folder)
    assert not (folder / cache.CACHE_DIR).exists()


def test_a_cache_built_under_looser_table_limits_does_not_bypass_stricter_ones(bundle, monkeypatch):
    from explain.modelfile.limits import DEFAULT_LIMITS

    folder, reference = bundle
    loose = DEFAULT_LIMITS.but(max_table_cells=10**9)
    load_bundle(folder, limits=loose)
    strict = DEFAULT_LIMITS.but(max_table_cells=20)
    problems = validate_bundle(folder, limits=strict).problems
    assert problems and all("max_table_cells=20" in p.message for p in problems), problems
    tables_not_read(monkeypatch)
    np.testing.assert_array_equal(load_bundle(folder, limits=loose.but(max_table_cells=None)).temporal, reference)


def test_a_cache_of_another_format_is_rebuilt(bundle, monkeypatch):
    folder, reference = bundle
    load_bundle(folder)
    place = folder / cache.CACHE_DIR
    data = manifest(place)
    data.pop("checksum")
    del data["limits"]                          # as an older loader wrote it, checksum and all
    (place / cache.MANIFEST).write_text(json.dumps({**data, "checksum": cache._checksum(data)}))
    read = tables_counted(monkeypatch)
    again = load_bundle(folder)
    assert read == ["static", "temporal"]
    np.testing.assert_array_equal(again.temporal, reference)
    assert "limits" in manifest(place)
