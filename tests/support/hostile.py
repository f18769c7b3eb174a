"""Builders of hostile input, shared by test_safe_load, test_bundle and test_hostile.

Model files: ``.keras`` archives with code in them (a Lambda, a module outside Keras, a
lookup reading a local file), other formats renamed ``.keras`` (HDF5, a zipped
SavedModel), bad archives (zip slip, a decompression bomb) and tiny files that declare
huge layers. Bundle mutations: functions ``mutate(folder)`` that break one thing of a
bundle folder's tables or bundle.json in place.

Nothing here is a test; every builder writes under the folder it is given.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import zipfile
from pathlib import Path

import pandas as pd

EVIL_HTML = "<img src=x onerror=alert(1)>"
EVIL_LATEX = "$\\href{javascript:alert(1)}{x}$"
PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4

# --------------------------------------------------------------------------- .keras archives


def rewrite_config(src: Path, dst: Path, edit) -> Path:
    """Copy a .keras archive, replacing config.json by ``edit(config)``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "config.json":
                config = json.loads(data)
                config = edit(config) or config
                data = json.dumps(config).encode()
            zout.writestr(info.filename, data)
    return dst


def write_zip(dst: Path, members: dict, compression=zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(dst, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=compression)
    return dst


def archive_with(src: Path, extra: dict) -> dict:
    """The members of the archive ``src``, updated with ``extra`` ({name: bytes})."""
    with zipfile.ZipFile(src) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    members.update(extra)
    return members


def layer_node(config: dict, index: int) -> dict:
    return config["config"]["layers"][index]


def tiny_model_file(path: Path) -> Path:
    """Input(5) -> Dense(3), named "tiny": the base that config-editing builders tamper with."""
    import keras

    inp = keras.Input((5,), name="x")
    keras.Model(inp, keras.layers.Dense(3, name="dense")(inp), name="tiny").save(path)
    return path


def dense_file(src: Path, dst: Path, features: int, units: int) -> Path:
    """``src`` (Input(5) -> Dense(3)) edited to declare Dense(units) after ``features``."""

    def edit(config):
        layer_node(config, 0)["config"]["batch_shape"] = [None, features]
        dense = layer_node(config, 1)
        dense["config"]["units"] = units
        dense["build_config"]["input_shape"] = [None, features]
        dense["inbound_nodes"][0]["args"][0]["config"]["shape"] = [None, features]

    path = rewrite_config(src, dst, edit)
    assert path.stat().st_size < 100_000  # a few KB, whatever the declared size
    return path


def huge_dense_file(src: Path, dst: Path) -> Path:
    """A tiny file declaring Dense(100_000) after 100_000 features: 10**10 weights, 40 GB."""
    return dense_file(src, dst, 100_000, 100_000)


DELETE = object()


def replace_dense(**node):
    """An edit of a tiny model's config: set (or DELETE) keys of the Dense layer's node."""
    def edit(config):
        dense = layer_node(config, 1)
        for key, value in node.items():
            if value is DELETE:
                dense.pop(key, None)
            else:
                dense[key] = value
    return edit


def set_dense_config(key, value):
    def edit(config):
        layer_node(config, 1)["config"][key] = value
    return edit


def lambda_file(path: Path, marker: str) -> Path:
    """A model whose Lambda layer 'evil' creates the file ``marker`` when it runs.

    Building the model runs the lambda once; the marker is removed before returning, so
    a marker that exists afterwards means the file's code ran.
    """
    import keras

    inp = keras.Input((3,))
    out = keras.layers.Lambda(lambda x: (open(marker, "w").close(), x)[1], name="evil")(inp)
    keras.Model(inp, out, name="outer").save(path)
    os.remove(marker)
    return path


def nested_lambda_file(path: Path) -> Path:
    """Functional 'functional' > Sequential 'inner_model' whose layers[2] is a Lambda."""
    import keras

    inner = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(3), keras.layers.Lambda(lambda x: x * 2)],
        name="inner_model",
    )
    inp = keras.Input((4,))
    keras.Model(inp, keras.layers.Dense(1)(inner(inp)), name="functional").save(path)
    return path


def module_outside_keras_file(src: Path, dst: Path) -> Path:
    """The tiny model with its Dense layer renamed to ``os.system``."""
    return rewrite_config(src, dst, replace_dense(module="os", class_name="system"))


def lookup_file(src: Path, dst: Path, vocabulary_path: Path, class_name: str = "StringLookup") -> Path:
    """The tiny model with a lookup layer whose vocabulary is read from ``vocabulary_path``."""
    lookup = {"module": "keras.layers", "class_name": class_name, "registered_name": None,
              "config": {"name": "lookup", "vocabulary": str(vocabulary_path)}, "build_config": {}}

    def edit(config):
        config["config"]["layers"].insert(1, lookup)

    return rewrite_config(src, dst, edit)


def hdf5_file(path: Path) -> Path:
    """A legacy HDF5 Keras model written to ``path`` (whatever its suffix)."""
    import keras

    inp = keras.Input((3,))
    h5 = path.with_name(path.stem + "-legacy.h5")
    keras.Model(inp, keras.layers.Dense(1)(inp)).save(h5)
    return h5.replace(path)


SAVEDMODEL_ZIPS = {
    "flat": {"saved_model.pb": b"\x08\x01", "variables/variables.index": b"x"},
    "in-a-folder": {"my_model/saved_model.pb": b"\x08\x01", "my_model/fingerprint.pb": b"x"},
}


def savedmodel_zip(path: Path, layout: str = "flat") -> Path:
    return write_zip(path, SAVEDMODEL_ZIPS[layout])


def zip_slip_file(src: Path, dst: Path, name: str = "../evil") -> Path:
    return write_zip(dst, archive_with(src, {name: b"evil"}))


def bomb_file(src: Path, dst: Path, size: int) -> Path:
    """``src`` plus a member assets/zeros.bin of ``size`` zero bytes, deflated (about 1/1000)."""
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for name, data in archive_with(src, {}).items():
            zout.writestr(name, data)
        with zout.open("assets/zeros.bin", "w", force_zip64=True) as member:
            chunk = bytes(16 * 1024**2)
            left = size
            while left > 0:
                member.write(chunk[:min(left, len(chunk))])
                left -= len(chunk)
    return dst


# --------------------------------------------------------------------------- oversized files (issue 25's table)
# Each file is small (KB to a few MB) and declares something huge; none needs Keras to be written.


def keras_with_config(dst: Path, config: bytes) -> Path:
    """A deflated .keras archive holding ``config`` as config.json (and metadata.json, no weights)."""
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("metadata.json", json.dumps({"keras_version": "3.0.0"}))
        zf.writestr("config.json", config)
    return dst


def functional_config(layers: list) -> bytes:
    return json.dumps({"module": "keras", "class_name": "Functional", "registered_name": "Functional",
                       "config": {"name": "hostile", "layers": layers}}).encode()


def refused_entries_file(dst: Path, count: int) -> Path:
    """A model whose config lists ``count`` Lambda layers (each would run stored bytecode)."""
    lam = {"module": "keras.layers", "class_name": "Lambda", "config": {"name": "evil"}}
    return keras_with_config(dst, functional_config([lam] * count))


def long_sequential_file(dst: Path, layers: int) -> Path:
    """A Sequential of ``layers`` Dense(2) layers after an Input(2), written as Keras 3 writes it."""
    dense = [{"module": "keras.layers", "class_name": "Dense", "registered_name": None,
              "config": {"name": f"dense_{i}", "units": 2, "activation": "relu", "use_bias": True},
              "build_config": {"input_shape": [None, 2]}} for i in range(layers)]
    first = {"module": "keras.layers", "class_name": "InputLayer", "registered_name": None,
             "config": {"batch_shape": [None, 2], "dtype": "float32", "name": "input"}}
    config = {"module": "keras", "class_name": "Sequential", "registered_name": None,
              "config": {"name": "long", "layers": [first, *dense]}}
    return keras_with_config(dst, json.dumps(config).encode())


def deep_config_file(dst: Path, depth: int) -> Path:
    """A model whose config nests lists ``depth`` levels deep."""
    nested = b"[" * depth + b"]" * depth
    return keras_with_config(dst, b'{"class_name": "Functional", "module": "keras", "config": {"layers": '
                             + nested + b"}}")


def deep_json(depth: int) -> bytes:
    """A bundle.json whose display_names nest ``depth`` levels deep."""
    return b'{"display_names": ' + b"[" * depth + b"]" * depth + b"}"


def long_json_list(count: int) -> bytes:
    """A bundle.json whose static_features list holds ``count`` names."""
    return b'{"static_features": [' + b",".join([b'"a"'] * count) + b"]}"


def zeros_parquet(path: Path, rows: int, chunk: int = 10_000_000) -> Path:
    """customer_id and one feature, both int8 zeros, ``rows`` rows written ``chunk`` at a time (about 1 MB
    per 20 million rows)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    block = pa.table({"customer_id": np.zeros(chunk, np.int8), "tenure": np.zeros(chunk, np.int8)})
    with pq.ParquetWriter(path, block.schema, compression="zstd") as writer:
        left = rows
        while left > 0:
            writer.write_table(block.slice(0, min(left, chunk)))
            left -= chunk
    return path


def long_csv(path: Path, lines: int) -> Path:
    """customer_id,tenure then ``lines`` rows of 0,0 (4 bytes a row)."""
    with open(path, "wb") as handle:
        handle.write(b"customer_id,tenure\n")
        block = b"0,0\n" * 1_000_000
        left = lines
        while left > 0:
            handle.write(block[: 4 * min(left, 1_000_000)])
            left -= 1_000_000
    return path


def nested_parquet(path: Path) -> Path:
    """A static table whose feature column holds lists."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"customer_id": ["a", "b"], "tenure": [[1, 2], [3]]}), path)
    return path


def wide_bad_csv(path: Path, columns: int) -> Path:
    """A static table of 2 customers and ``columns`` feature columns, every cell text: one problem per column."""
    header = ["customer_id"] + [f"f{j}" for j in range(columns)]
    write_csv(path, header, [[f"C{i}"] + ["abc"] * columns for i in range(2)])
    return path


# --------------------------------------------------------------------------- bundle tables


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def set_cell(name, row, column, value):
    """Set one cell: ``row`` is the 1-based data row."""
    def mutate(folder):
        header, rows = read_csv(folder / name)
        rows[row - 1][header.index(column)] = value
        write_csv(folder / name, header, rows)
    return mutate


def edit_rows(name, edit):
    """Replace (header, rows) of a CSV by ``edit(header, rows)``."""
    def mutate(folder):
        header, rows = read_csv(folder / name)
        header, rows = edit(header, rows)
        write_csv(folder / name, header, rows)
    return mutate


def edit_config(edit):
    def mutate(folder):
        config = json.loads((folder / "bundle.json").read_text())
        edit(config)
        (folder / "bundle.json").write_text(json.dumps(config))
    return mutate


def write_bytes(name, data):
    def mutate(folder):
        (folder / name).write_bytes(data)
    return mutate


def delete(name):
    def mutate(folder):
        (folder / name).unlink()
    return mutate


def drop_column(column):
    def edit(header, rows):
        k = header.index(column)
        return header[:k] + header[k + 1:], [r[:k] + r[k + 1:] for r in rows]
    return edit


def rename_column(old, new):
    def edit(header, rows):
        return [new if h == old else h for h in header], rows
    return edit


def add_column(column, value):
    def edit(header, rows):
        return header + [column], [r + [value] for r in rows]
    return edit


def reverse_columns(header, rows):
    order = list(reversed(range(len(header))))
    return [header[k] for k in order], [[r[k] for k in order] for r in rows]


def as_parquet_bytes(folder_name):
    def mutate(folder):
        frame = pd.read_csv(folder / "static.csv", dtype=str)
        buffer = io.BytesIO()
        frame.to_parquet(buffer)
        (folder / folder_name).write_bytes(buffer.getvalue())
    return mutate


def both(*mutations):
    def mutate(folder):
        for m in mutations:
            m(folder)
    return mutate


def rename_feature(old, new):
    """Rename a feature column in whichever table holds it, and everywhere in bundle.json."""
    def mutate(folder):
        for name in ("static.csv", "temporal.csv"):
            header, _ = read_csv(folder / name)
            if old in header:
                edit_rows(name, rename_column(old, new))(folder)
        path = folder / "bundle.json"
        if path.is_file():
            config = json.loads(path.read_text())
            for key in ("static_features", "temporal_features"):
                if old in (config.get(key) or []):
                    config[key] = [new if c == old else c for c in config[key]]
            (config.get("display_names") or {}).pop(old, None)  # shown under its own (new) name
            units = config.get("units") or {}
            if old in units:
                units[new] = units.pop(old)
            path.write_text(json.dumps(config))
    return mutate


def rename_features_to_markup(folder: Path) -> None:
    """Rename the demo's tenure_months to EVIL_HTML and data_usage_gb to EVIL_LATEX (both drivers)."""
    both(rename_feature("tenure_months", EVIL_HTML), rename_feature("data_usage_gb", EVIL_LATEX))(folder)


# --------------------------------------------------------------------------- small bundles


def small_bundle(demo: Path, folder: Path, customers: int = 30, periods: int = 12) -> Path:
    """The demo bundle cut to its first ``customers`` customers (same model and bundle.json)."""
    folder.mkdir(parents=True)
    for name in ("model.keras", "bundle.json"):
        shutil.copy(demo / name, folder / name)
    static = (demo / "static.csv").read_text().splitlines()
    (folder / "static.csv").write_text("\n".join(static[:customers + 1]) + "\n")
    temporal = (demo / "temporal.csv").read_text().splitlines()
    (folder / "temporal.csv").write_text("\n".join(temporal[:customers * periods + 1]) + "\n")
    return folder


# --------------------------------------------------------------------------- markdown from a bundle

EVIL_IMAGE = "![pixel](https://img.evil.example/p.png)"
EVIL_LINKS = "sign in at https://login.evil.example/sso or www.evil.example, or mail help@evil.example"
EVIL_ID = "https://id.evil.example"


def markdown_bundle(demo: Path, folder: Path, customers: int = 30, periods: int = 12) -> Path:
    """A small demo bundle whose texts would be images and links if a page rendered them as markdown: the
    display name of the first static and the first monthly feature, the output name, the label column's
    name, and the first customer's id."""
    small_bundle(demo, folder, customers, periods)
    config = json.loads((folder / "bundle.json").read_text())
    first_static, first_temporal = config["static_features"][0], config["temporal_features"][0]
    config["display_names"][first_static] = f"Tenure {EVIL_IMAGE}"
    config["display_names"][first_temporal] = f"Data usage {EVIL_LINKS}"
    config["output_names"] = [f"churn ({EVIL_LINKS})"]
    label = f"churned {EVIL_IMAGE}"
    old_label, config["label_column"] = config["label_column"], label
    (folder / "bundle.json").write_text(json.dumps(config))
    for name in ("static.csv", "temporal.csv"):
        header, rows = read_csv(folder / name)
        header = [label if c == old_label else c for c in header]
        first_id = rows[0][0]
        rows = [[EVIL_ID if r[0] == first_id else r[0], *r[1:]] for r in rows]
        write_csv(folder / name, header, rows)
    return folder
