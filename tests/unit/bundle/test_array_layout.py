"""The array layout of a bundle (issue 26): histories as memory-mapped ``.npy`` files. A long bundle converted to
arrays and back gives identical arrays, ids, periods and attributions; a bundle built here with padded starts,
other column names, a float64 history, two histories and a categorical one (ids into an Embedding) opens the same
in both layouts; damaged or lying files are refused with messages naming the file, column and customers; the
histories are memory-mapped and opening does not read them into memory; the array cache records a checked
array bundle without copying it and a changed file is checked again."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pandas as pd
import psutil
import pytest

from explain.bundle import arrays as array_io
from explain.bundle import cache
from explain.bundle.convert import convert_bundle
from explain.bundle.load import load_bundle, validate_bundle
from explain.bundle.save import save_bundle
from explain.cli import main
from explain.core.errors import BundleError, ExplainError
from explain.core.settings import Settings
from tests.support import padded

keras = pytest.importorskip("keras")

T, F, W, S = 6, 3, 4, 2   # days (padded, float64), features per day, weeks of the second history, static
N = 9
MASK = -1.0


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(cache.ENVIRONMENT, raising=False)


def four_input_model():
    """profile (S,) float32; days (T, F) float64 behind Masking(-1); weeks (W, 2) float32; plans (T,) ids into an
    Embedding(5, mask_zero) -> LSTM."""
    keras.utils.set_random_seed(11)
    profile = keras.Input((S,), name="profile")
    days = keras.Input((T, F), name="days", dtype="float64")
    weeks = keras.Input((W, 2), name="weeks")
    plans = keras.Input((T,), name="plans", dtype="int32")
    d = keras.layers.LSTM(3)(keras.layers.Masking(MASK)(days))
    w = keras.layers.Dense(2)(keras.layers.Flatten()(weeks))
    p = keras.layers.LSTM(2)(keras.layers.Embedding(5, 2, mask_zero=True)(plans))
    out = keras.layers.Dense(1, activation="sigmoid")(
        keras.layers.Concatenate()([keras.layers.Dense(2)(profile), d, w, p]))
    return keras.Model([profile, days, weeks, plans], out)


def four_inputs(seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, T + 1, size=N)
    days = rng.uniform(0.5, 2.0, size=(N, T, F))
    plans = rng.integers(1, 5, size=(N, T)).astype(np.int32)
    for i, length in enumerate(lengths):
        days[i, :T - length] = MASK
        plans[i, :T - length] = 0
    return {"profile": rng.normal(size=(N, S)).astype(np.float32), "days": days,
            "weeks": rng.normal(size=(N, W, 2)).astype(np.float32), "plans": plans}


@pytest.fixture(scope="module")
def demo_arrays(tmp_path_factory):
    """(long demo bundle, its array layout, back to long)."""
    base = tmp_path_factory.mktemp("demo")
    arrays = convert_bundle("bundles/demo", base / "arrays", "arrays")
    return load_bundle("bundles/demo"), arrays, convert_bundle(arrays, base / "long", "long")


def same_bundle(a, b):
    assert a.ids.tolist() == b.ids.tolist()
    assert set(a.arrays) == set(b.arrays)
    for key in a.arrays:
        assert np.asarray(a.arrays[key]).dtype == np.asarray(b.arrays[key]).dtype, key
        np.testing.assert_array_equal(np.asarray(a.arrays[key]), np.asarray(b.arrays[key]))
    assert (a.periods, a.input_periods, a.static_features, a.temporal_features, a.feature_labels) == \
        (b.periods, b.input_periods, b.static_features, b.temporal_features, b.feature_labels)
    np.testing.assert_array_equal(a.labels, b.labels)


def test_long_to_arrays_and_back_gives_identical_arrays_and_attributions(demo_arrays):
    from explain.analysis.explainer import explain_customers

    long, arrays_dir, back_dir = demo_arrays
    arrays, back = load_bundle(arrays_dir), load_bundle(back_dir)
    assert sorted(p.name for p in arrays_dir.iterdir()) == ["bundle.json", "model.keras", "static.csv", "temporal.npy"]
    assert json.loads((arrays_dir / "bundle.json").read_text())["layout"] == "arrays"
    assert isinstance(arrays.temporal, np.memmap) and not arrays.temporal.flags.writeable
    same_bundle(long, arrays)
    same_bundle(long, back)
    ids = long.ids[[0, 17, 2999]].tolist()
    for baseline in ("zero", "mean"):
        settings = Settings(steps=16, baseline=baseline)
        a, b = explain_customers(long, ids, settings), explain_customers(arrays, ids, settings)
        for key in a.inputs:
            np.testing.assert_array_equal(a.inputs[key], b.inputs[key])
        np.testing.assert_array_equal(a.prediction, b.prediction)
        np.testing.assert_array_equal(a.delta, b.delta)


def test_four_inputs_padded_float64_two_histories_and_ids_open_the_same_in_both_layouts(tmp_path):
    from explain.analysis.explainer import explain_customers

    model, inputs = four_input_model(), four_inputs()
    names = dict(ids=[f"K-{k}" for k in range(N)], periods={"days": [f"2024-03-{d:02d}" for d in range(1, T + 1)],
                                                            "plans": [f"2024-03-{d:02d}" for d in range(1, T + 1)],
                                                            "weeks": ["2024-W01", "2024-W02", "2024-W03", "2024-W04"]})
    names["features"] = {"days": ["calls", "minutes", "texts"], "weeks": ["spend", "visits"], "plans": ["plan"],
                         "profile": ["age", "tenure"]}
    long = load_bundle(save_bundle(tmp_path / "long", model, inputs, layout="long", **names))
    folder = save_bundle(tmp_path / "arrays", model, inputs, layout="arrays", **names)
    assert sorted(p.name for p in folder.glob("*.npy")) == ["temporal_days.npy", "temporal_plans.npy",
                                                             "temporal_weeks.npy"]
    arrays = load_bundle(folder)
    same_bundle(long, arrays)
    assert arrays.arrays["days"].dtype == np.float64 and arrays.arrays["plans"].dtype == np.int32
    np.testing.assert_array_equal(arrays.arrays["days"], inputs["days"])   # padded at the start with -1
    assert any("have fewer than 6 periods" in note for note in arrays.notes)
    ids = ["K-0", "K-4", "K-8"]
    a, b = explain_customers(long, ids, Settings(steps=8)), explain_customers(arrays, ids, Settings(steps=8))
    assert set(a.inputs) == {"profile", "days", "weeks", "plans"}
    for key in a.inputs:
        np.testing.assert_array_equal(a.inputs[key], b.inputs[key])
    np.testing.assert_array_equal(a.padding["days"], arrays.padding("days", [0, 4, 8]))


def test_other_column_names_and_a_csv_bundle_convert_with_their_names(tmp_path):
    source = padded.write(tmp_path / "weeks", extra={"id_column": "customer_id"})
    folder = convert_bundle(source, tmp_path / "arrays")
    config = json.loads((folder / "bundle.json").read_text())
    assert config["period_column"] == "week" and config["temporal_features"] == padded.TEMPORAL
    assert config["arrays"]["histories"]["temporal"]["periods"] == padded.WEEKS
    same_bundle(load_bundle(source), load_bundle(folder))


@pytest.fixture
def small(tmp_path):
    """An array bundle of the demo's first 40 customers, and its history."""
    demo = load_bundle("bundles/demo")
    folder = save_bundle(tmp_path / "small", demo.model, demo.static[:40], np.asarray(demo.temporal[:40]),
                         ids=demo.ids[:40].tolist(), periods=demo.periods, static_features=demo.static_features,
                         temporal_features=demo.temporal_features, layout="arrays")
    return folder, np.asarray(demo.temporal[:40])


def problems(folder):
    report = validate_bundle(folder)
    assert not report.ok
    return [str(p) for p in report.problems]


def test_a_truncated_or_padded_npy_is_refused_naming_its_sizes(small):
    folder, _ = small
    data = (folder / "temporal.npy").read_bytes()
    (folder / "temporal.npy").write_bytes(data[:-100])
    [text] = problems(folder)
    assert "temporal.npy holds" in text and "cut short" in text and "(40, 12, 6)" in text
    (folder / "temporal.npy").write_bytes(data + b"\0" * 8)
    [text] = problems(folder)
    assert "longer than that" in text


def test_a_lying_header_is_refused_before_anything_is_mapped(small):
    folder, history = small
    big = np.lib.format.open_memmap(folder / "temporal.npy", mode="r+")
    header = (folder / "temporal.npy").read_bytes()[:128].replace(b"(40, 12, 6)", b"(4000000, 12, 6)")
    del big
    data = (folder / "temporal.npy").read_bytes()
    (folder / "temporal.npy").write_bytes(header + data[128:])
    [text] = problems(folder)
    assert "cut short" in text and "(4000000, 12, 6)" in text


def test_wrong_shape_and_dtype_against_the_model_and_bundle_json(small):
    folder, history = small
    config = json.loads((folder / "bundle.json").read_text())
    np.save(folder / "temporal.npy", history[:, :10])                   # 10 periods; bundle.json says 12
    [text] = problems(folder)
    assert "(40, 10, 6)" in text and "bundle.json 'arrays' says shape (40, 12, 6)" in text
    config["arrays"]["histories"]["temporal"]["shape"] = [40, 10, 6]
    config["arrays"]["histories"]["temporal"]["periods"] = config["arrays"]["histories"]["temporal"]["periods"][:10]
    (folder / "bundle.json").write_text(json.dumps(config))
    [text] = problems(folder)
    assert "needs (40, 12, 6)" in text and "static.parquet" in text
    np.save(folder / "temporal.npy", history.astype(np.int64))
    config["arrays"]["histories"]["temporal"].update(shape=[40, 12, 6], dtype="int64",
                                                     periods=load_bundle("bundles/demo").periods)
    (folder / "bundle.json").write_text(json.dumps(config))
    [text] = problems(folder)
    assert "temporal.npy holds int64 values" in text and "float32 (or float64)" in text


def test_missing_and_infinite_values_are_all_reported_with_customer_period_and_column(small):
    folder, history = small
    damaged = history.copy()
    damaged[3, 5, 1] = np.nan
    damaged[7, 0, 1] = np.nan
    damaged[9, 11, 4] = np.inf
    np.save(folder / "temporal.npy", damaged)
    texts = problems(folder)
    assert len(texts) == 2, texts
    ids = load_bundle("bundles/demo").ids
    periods = load_bundle("bundles/demo").periods
    assert "column 'support_calls' has 2 missing value(s)" in texts[0]
    assert f"'{ids[3]}' at {periods[5]}" in texts[0] and f"'{ids[7]}' at {periods[0]}" in texts[0]
    assert "temporal.npy" in texts[0]
    assert "column 'app_logins' has 1 infinite value(s)" in texts[1] and f"'{ids[9]}' at {periods[11]}" in texts[1]


class _Trap:
    def __reduce__(self):
        return (open, ("/tmp/i26a-pickle-trap-ran", "w"))


def test_a_pickled_object_array_is_refused_unread(small, tmp_path):
    folder, _ = small
    trap = np.empty((40, 12, 6), dtype=object)
    trap[:] = 0.0
    trap[0, 0, 0] = _Trap()
    np.save(folder / "temporal.npy", trap, allow_pickle=True)
    assert pickle.dumps  # the file holds a pickle
    [text] = problems(folder)
    assert "holds Python objects" in text and "refused unread" in text
    import os
    assert not os.path.exists("/tmp/i26a-pickle-trap-ran")


def test_a_missing_npy_a_table_beside_it_and_a_newer_version_are_said(small):
    folder, _ = small
    data = (folder / "temporal.npy").read_bytes()
    (folder / "temporal.npy").unlink()
    [text] = problems(folder)
    assert "temporal.npy is missing" in text and "explain convert" in text
    (folder / "temporal.npy").write_bytes(data)
    (folder / "temporal.csv").write_text("customer_id,period\n")
    [text] = problems(folder)
    assert "both temporal.npy and temporal.csv" in text
    (folder / "temporal.csv").unlink()
    config = json.loads((folder / "bundle.json").read_text())
    config["arrays"]["version"] = 2
    (folder / "bundle.json").write_text(json.dumps(config))
    [text] = problems(folder)
    assert "version 2" in text


def test_the_cache_records_a_checked_array_bundle_without_copying_it(small, monkeypatch):
    folder, history = small
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    first = load_bundle(folder)
    manifest = json.loads((folder / cache.CACHE_DIR / cache.MANIFEST).read_text())
    assert manifest["arrays"]["input:temporal"]["bundle_file"] == "temporal.npy"
    assert not any(p.stat().st_size >= history.nbytes for p in (folder / cache.CACHE_DIR).iterdir())

    def no_scan(*args, **kwargs):
        raise AssertionError("the history was read again although the cache is fresh")
    monkeypatch.setattr(array_io, "scan", no_scan)
    second = load_bundle(folder)
    assert isinstance(second.temporal, np.memmap) and second.content_hash == first.content_hash
    np.testing.assert_array_equal(second.temporal, history)
    monkeypatch.undo()
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    changed = history.copy()
    changed[0, 0, 0] = np.nan                       # a changed file: checked again, the NaN found
    np.save(folder / "temporal.npy", changed)
    with pytest.raises(BundleError, match="missing value"):
        load_bundle(folder)
    changed[0, 0, 0] = 1.5
    np.save(folder / "temporal.npy", changed)
    third = load_bundle(folder)
    assert third.content_hash != first.content_hash and third.temporal[0, 0, 0] == 1.5


def test_opening_a_large_array_bundle_does_not_read_it_into_memory(tmp_path, monkeypatch):
    """384 MB of history: the first open reads every value (a 4 MiB chunk at a time), the bundle maps it; the
    process grows by far less than the array (a generous bound: a tenth)."""
    n, t, f = 40_000, 100, 24
    keras.utils.set_random_seed(0)
    s_in, t_in = keras.Input((2,), name="s"), keras.Input((t, f), name="t")
    out = keras.layers.Dense(1)(keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)]))
    model = keras.Model([s_in, t_in], out)
    folder = save_bundle(tmp_path / "big", model, np.zeros((3, 2)), np.zeros((3, t, f)), layout="arrays")
    ids = [f"X{k:06d}" for k in range(n)]
    pd.DataFrame({"customer_id": ids, "static_0": np.ones(n), "static_1": np.ones(n)}).to_parquet(
        folder / "static.parquet", index=False)
    big = np.lib.format.open_memmap(folder / "temporal.npy", mode="w+", dtype=np.float32, shape=(n, t, f))
    for start in range(0, n, 5_000):
        big[start:start + 5_000] = np.arange(start, min(n, start + 5_000), dtype=np.float32)[:, None, None]
    big.flush()
    del big
    config = json.loads((folder / "bundle.json").read_text())
    config["arrays"]["histories"]["temporal"]["shape"] = [n, t, f]
    (folder / "bundle.json").write_text(json.dumps(config))
    monkeypatch.setattr(array_io, "CHUNK_BYTES", 4 << 20)
    load_bundle("bundles/demo")                        # imports warm
    process = psutil.Process()
    before = process.memory_info().rss
    bundle = load_bundle(folder)
    grown = process.memory_info().rss - before
    assert isinstance(bundle.temporal, np.memmap) and bundle.n_customers == n
    assert grown < n * t * f * 4 / 10, (grown, n * t * f * 4)
    np.testing.assert_array_equal(bundle.inputs_for(["X012345"])["temporal"], np.full((1, t, f), 12345, np.float32))
    from explain.core import baselines

    before = process.memory_info().rss
    mean = baselines.mean(bundle.data())["temporal"]       # a data-wide mean reads every page, one chunk at a time
    assert process.memory_info().rss - before < n * t * f * 4 / 4   # chunks in float64: tens of MB
    np.testing.assert_array_equal(mean, np.full((1, t, f), (n - 1) / 2))


def test_save_bundle_writes_arrays_above_the_threshold_and_refuses_unknown_layouts(tmp_path, monkeypatch):
    demo = load_bundle("bundles/demo")
    args = dict(ids=demo.ids[:20].tolist(), periods=demo.periods, static_features=demo.static_features,
                temporal_features=demo.temporal_features)
    from explain.bundle import save

    monkeypatch.setattr(save, "ARRAYS_ABOVE", 20 * 12 * 6 - 1)
    folder = save_bundle(tmp_path / "auto", demo.model, demo.static[:20], np.asarray(demo.temporal[:20]), **args)
    assert (folder / "temporal.npy").is_file() and not (folder / "temporal.parquet").exists()
    monkeypatch.setattr(save, "ARRAYS_ABOVE", 20 * 12 * 6)
    folder = save_bundle(tmp_path / "long", demo.model, demo.static[:20], np.asarray(demo.temporal[:20]), **args)
    assert (folder / "temporal.parquet").is_file()
    with pytest.raises(ExplainError, match="layout must be"):
        save_bundle(tmp_path / "x", demo.model, demo.static[:20], np.asarray(demo.temporal[:20]), layout="wide",
                    **args)


def test_cli_convert_then_check_and_attribute(tmp_path, capsys):
    out = tmp_path / "arrays"
    assert main(["convert", "--bundle", "bundles/demo", "--out", str(out), "--layout", "arrays"]) == 0
    assert main(["check", "--bundle", str(out)]) == 0
    assert "is valid" in capsys.readouterr().out
    assert main(["attribute", "--bundle", str(out), "--customer", "C00042", "--steps", "8",
                 "--out", str(tmp_path / "one.json")]) == 0
    assert main(["convert", "--bundle", "bundles/demo", "--out", str(out)]) == 2    # not empty: refused


def test_the_ray_chunks_of_an_array_bundle_are_the_loaders_rows(demo_arrays):
    import pyarrow as pa

    from explain.batch import ray_tables

    _, folder, _ = demo_arrays
    bundle = load_bundle(folder)
    layout = ray_tables.table_layout(folder, bundle)
    ids = bundle.ids[[40, 3, 2999, 7]].tolist()
    keys = pa.table({"customer_id": ids, "chunk": [5] * 4, "slot": [2, 0, 3, 1]})
    row = ray_tables.chunk_from_arrays(keys, layout=layout).to_pylist()[0]
    got_ids, static, temporal = ray_tables.chunk_arrays(row, layout)
    order = [ids[k] for k in np.argsort([2, 0, 3, 1])]
    assert got_ids == order
    expected = bundle.inputs_for(order)
    np.testing.assert_array_equal(static, expected["static"])
    np.testing.assert_array_equal(temporal, expected["temporal"])


def test_cli_batch_on_an_array_bundle_gives_the_long_bundles_store(demo_arrays, tmp_path):
    from explain.batch.store import read_store

    long_dir, arrays_dir = "bundles/demo", demo_arrays[1]
    (tmp_path / "ids.txt").write_text("C00001\nC00777\nC02999\n")
    stores = {}
    for name, folder in (("long", long_dir), ("arrays", arrays_dir)):
        out = tmp_path / f"{name}.parquet"
        assert main(["batch", "--bundle", str(folder), "--out", str(out), "--customers-file",
                     str(tmp_path / "ids.txt"), "--steps", "8", "--baseline", "mean"]) == 0
        stores[name] = read_store(out)
        assert len(stores[name][0]) == 3 * (9 + 12 * 6)   # every cell of the three customers
    for left, right in zip(stores["long"], stores["arrays"]):
        pd.testing.assert_frame_equal(left.reset_index(drop=True), right.reset_index(drop=True))


def test_problems_of_the_static_table_and_of_the_array_are_listed_together(small):
    folder, history = small
    static = pd.read_parquet(folder / "static.parquet")
    static.loc[5, "customer_id"] = static.loc[4, "customer_id"]           # a duplicated id
    static.to_parquet(folder / "static.parquet", index=False)
    damaged = history.copy()
    damaged[2, 3, 0] = np.inf
    np.save(folder / "temporal.npy", damaged)
    texts = problems(folder)
    assert any("appear more than once" in t and "static.parquet" in t for t in texts), texts
    assert any("1 infinite value(s)" in t and "temporal.npy" in t for t in texts), texts
    import explain

    with pytest.raises(BundleError, match="infinite"):
        explain.load_bundle(folder)


def test_a_batch_chunk_gives_back_the_pages_of_its_rows(demo_arrays, monkeypatch):
    """A batch chunk of a memory-mapped bundle gives back (madvise DONTNEED) the pages of the rows it read,
    first to last, and the values read again afterwards are unchanged; a bundle in memory gives nothing."""
    import dataclasses

    from explain.batch import local
    from explain.bundle import load as bundle_load
    from explain.core.settings import Settings

    bundle = load_bundle(demo_arrays[1])
    assert isinstance(bundle.temporal, np.memmap)
    given = []
    real = bundle_load.release_pages
    monkeypatch.setattr(bundle_load, "release_pages", lambda values, part: (given.append((values, part)),
                                                                            real(values, part)))
    ids = ["C00010", "C00003", "C00007"]
    before = bundle.inputs_for(ids)["temporal"].copy()
    local.compute_chunk(bundle, ids, Settings(steps=8))
    assert len(given) == 1  # the memory-mapped history (the static table is in memory)
    values, part = given[0]
    rows = sorted(bundle.index_of(i) for i in ids)
    assert values is bundle.temporal and part.shape[0] == rows[-1] - rows[0] + 1  # the chunk's first to last row
    np.testing.assert_array_equal(part, bundle.temporal[rows[0]:rows[-1] + 1])
    np.testing.assert_array_equal(bundle.inputs_for(ids)["temporal"], before)  # read again from the page cache

    given.clear()
    bundle = dataclasses.replace(bundle, static=np.array(bundle.static), temporal=np.array(bundle.temporal))
    local.compute_chunk(bundle, ids, Settings(steps=8))
    assert given == []
