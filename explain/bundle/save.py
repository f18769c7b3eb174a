"""``save_bundle``: a bundle folder written from Python objects, checked as ``explain check`` checks it, then renamed
into place (nothing is left half-written)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from explain.bundle import arrays as array_io
from explain.bundle import load as bundle_io
from explain.bundle import many
from explain.bundle.cache import CACHE_DIR
from explain.bundle.convert import UNKNOWN_LAYOUT, write_layout, write_npy
from explain.bundle.objects import (
    ID_COLUMN,
    NOT_A_BUNDLE_FOLDER,
    PATH_IN_USE,
    PERIOD_COLUMN,
    SAVED_BUT_INVALID,
    TABLE_FORMATS,
    UNKNOWN_TABLE_FORMAT,
    _examples,
    gather,
    padding_side,
)
from explain.core.errors import BundleError, ExplainError
from explain.core.files import make_readable
from explain.core.inputs import input_layout
from explain.modelfile import savedmodel as saved

SAVEDMODEL_NOT_TRUSTED = ("model: {path} is a TensorFlow SavedModel folder: " + saved.WHY + ". To fix: pass "
                          "trust_model=True if you trust it (the bundle then holds it as savedmodel/ and opens with "
                          "--trust-model), or give the Keras model itself.")
MODEL_PATH = ("model: {path} is not a TensorFlow SavedModel folder (no saved_model.pb in it). To fix: give the Keras "
              "model object, or the folder written by model.export(dir) or tf.saved_model.save.")

ARRAYS_ABOVE = 10_000_000  # temporal cells above which save_bundle writes the array layout by default


def save_bundle(path: str | os.PathLike, model, static, temporal=None, *, tables: str = "parquet",
                overwrite: bool = False, trust_code=None, layout: str | None = None, trust_model: bool = False,
                **names) -> Path:
    """Write a bundle folder from Python objects (arguments as ``Bundle.from_objects``); return its path.

    Two forms: ``(model, static, temporal)`` for a model with one static and one temporal input,
    or ``(model, inputs)`` for any model: ``inputs`` a dict {input name: array or DataFrame} or a
    list in the model's input order (several inputs, categories as ids or texts, padded
    histories; see :mod:`explain.bundle.many`). ``target`` and ``period_unit`` go to bundle.json, as do
    ``display_names`` ({column: text}), ``units`` ({column: text}) and ``groups`` ({group name: [columns]}: features
    that measure one thing, such as orders, items and spend; a feature in one group at most).

    ``layout``: ``"long"`` (temporal tables), ``"arrays"`` (each history a memory-mapped ``.npy`` file, one row per
    customer: :mod:`explain.bundle.arrays`) or None (default): arrays when the histories hold more than
    ``ARRAYS_ABOVE`` (10 million) cells, the size above which a long table is over the default table limit and
    slow to open, else long. ``tables``: ``"parquet"`` (default) or ``"csv"`` (the static table, and the long
    temporal tables). ``trust_code``: the Python file defining the
    model's own custom layers (as ``--trust-code``; it is imported and runs). The folder is
    written next to ``path`` under a temporary name, checked with ``validate_bundle`` (what
    ``explain check`` runs: the model is opened through ``safe_load``) and only then renamed to
    ``path``, so a failed save leaves nothing behind. An existing non-empty ``path`` is refused
    unless ``overwrite=True`` and it is a bundle folder.

    ``model`` may also be the path of a TensorFlow SavedModel folder (``model.export(dir)``,
    ``tf.saved_model.save``) with ``trust_model=True`` (it is a program: refused without it): it is opened as
    ``--trust-model`` opens it (``explain.modelfile.savedmodel``), the tables are checked against it, and the folder
    is copied into the bundle as ``savedmodel/``.
    """
    if tables not in TABLE_FORMATS:
        raise ExplainError(UNKNOWN_TABLE_FORMAT.format(value=tables))
    if layout not in (None, *array_io.LAYOUTS):
        raise ExplainError(UNKNOWN_LAYOUT.format(value=layout))
    loader = bundle_io.trusted_loader(trust_code)  # first: a bad file is said before anything is written
    source = None
    if isinstance(model, (str, os.PathLike)):
        source, model = Path(model).expanduser(), _open_savedmodel(Path(model).expanduser(), trust_model)
        loader = saved.TrustModel(loader)
    if temporal is None and many.is_inputs(static):
        write = _inputs_writer(model, static, tables=tables, layout=layout, loader=loader, names=names,
                               source=source)
    else:
        write = _arrays_writer(model, static, temporal, tables=tables, layout=layout, names=names, source=source)
    path = _free(Path(path).expanduser(), overwrite)
    _write_checked(path, write, loader)
    return path


def _open_savedmodel(source: Path, trust_model: bool):
    """The SavedModel folder ``source`` as the Keras model the tables are checked against (``trust_model``)."""
    if not (source.is_dir() and any((source / name).is_file() for name in saved.GRAPH_FILES)):
        raise ExplainError(MODEL_PATH.format(path=source))
    if not trust_model:
        raise ExplainError(SAVEDMODEL_NOT_TRUSTED.format(path=source))
    return saved.open_savedmodel(source)


def _use_savedmodel(folder: Path, source: Path | None) -> None:
    """The SavedModel folder ``source`` copied into ``folder`` as ``savedmodel/``, in place of the model.keras
    saved from its Keras wrapper (nothing when ``source`` is None)."""
    if source is not None:
        (folder / bundle_io.MODEL_FILE).unlink(missing_ok=True)
        shutil.copytree(source, folder / bundle_io.SAVEDMODEL_DIR, symlinks=True)


def _inputs_writer(model, inputs, *, tables: str, layout: str | None, loader, names: dict, source: Path | None = None
                   ) -> Callable[[Path], None]:
    """What writes the bundle of a model of any inputs (:mod:`explain.bundle.many`) into a folder; in the array
    layout (chosen, or above ``ARRAYS_ABOVE`` history cells) its histories are then rewritten as ``.npy``."""
    values = inputs.values() if isinstance(inputs, dict) else inputs
    cells = sum(int(np.size(v)) for v in values if isinstance(v, np.ndarray) and v.ndim == 3)
    chosen = layout or ("arrays" if cells > ARRAYS_ABOVE else "long")

    def write(folder: Path) -> None:
        many.write_folder(folder, model, inputs, tables, **names)
        if chosen == "arrays":  # the histories through the loader (padded as the model takes them)
            _to_arrays(folder, loader if source is None else (lambda _: model))  # a SavedModel: the one opened
        _use_savedmodel(folder, source)
    return write


def _arrays_writer(model, static, temporal, *, tables: str, layout: str | None, names: dict,
                   source: Path | None = None) -> Callable[[Path], None]:
    """What writes the bundle of a static and a temporal input into a folder, every argument checked first
    (``BundleError``); bundle.json says 'temporal_padding' "end" when the histories are padded at the end."""
    extra = {key: names.pop(key) for key in ("target", "period_unit") if names.get(key) is not None}
    fields = gather(model, static, temporal, **names)
    model_layout = input_layout(model)
    if (model_layout.problem is None and model_layout.roles is not None
            and set(model_layout.engine_keys) == {"static", "temporal"}
            and padding_side(model_layout, fields["temporal"]) == "end"):  # as the notebook's bundle says
        extra["temporal_padding"] = "end"
    chosen = layout or ("arrays" if fields["temporal"].size > ARRAYS_ABOVE else "long")

    def write(folder: Path) -> None:
        _write(folder, fields, tables, extra, chosen)
        _use_savedmodel(folder, source)
    return write


def _free(path: Path, overwrite: bool) -> Path:
    """``path``, when a bundle may be written there: absent, empty, or (``overwrite``) a bundle folder."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        if not overwrite or not path.is_dir():
            raise ExplainError(PATH_IN_USE.format(path=path))
        kept = (*bundle_io.BUNDLE_FILES, "demo_metrics.json", "attributions", CACHE_DIR, "temporal.npy",
                bundle_io.SAVEDMODEL_DIR, bundle_io.LEGACY_MODEL_FILE)
        foreign = [p.name for p in path.iterdir() if p.name not in kept
                   and not re.fullmatch(r"temporal_\w+\.(csv|parquet|npy)", p.name)]  # several histories' tables
        if foreign:
            raise ExplainError(NOT_A_BUNDLE_FOLDER.format(path=path, examples=_examples(foreign)))
    return path


def _write_checked(path: Path, write: Callable[[Path], None], loader) -> None:
    """``write`` into a folder next to ``path``, checked with ``validate_bundle``, then renamed to ``path``
    (an old folder there replaced); nothing is left behind when a step fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = make_readable(tempfile.mkdtemp(prefix=f".{path.name}.saving-", dir=path.parent))  # not 0700
    try:
        write(staging)
        report = bundle_io.validate_bundle(staging, loader=loader)
        if not report.ok:
            raise BundleError(SAVED_BUT_INVALID.format(report=report.format()), report.problems)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(staging, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _to_arrays(folder: Path, loader) -> None:
    """The long bundle just written into ``folder`` rewritten in place in the array layout."""
    bundle = bundle_io.load_bundle(folder, loader=loader)
    converted = Path(tempfile.mkdtemp(prefix=".arrays-", dir=folder))
    try:
        write_layout(converted, folder, bundle, "arrays")
        for table in [p for p in folder.iterdir() if p.is_file()]:
            table.unlink()
        for made in converted.iterdir():
            os.replace(made, folder / made.name)
    finally:
        shutil.rmtree(converted, ignore_errors=True)
        shutil.rmtree(folder / CACHE_DIR, ignore_errors=True)


def _write(folder: Path, fields: dict, tables: str, extra: dict, layout: str = "long") -> None:
    """model.keras, static and temporal tables (float32 values as float64: exact) and bundle.json; in the array
    layout the history goes as it is into temporal.npy."""
    ids = fields["ids"].astype(str)
    n, t, f = fields["temporal"].shape
    static = pd.DataFrame(fields["static"].astype(np.float64), columns=fields["static_features"])
    static.insert(0, ID_COLUMN, ids)
    if fields["labels"] is not None:
        static[fields["label_name"]] = fields["labels"]
    frames = {"static": static}
    if layout == "long":
        temporal = pd.DataFrame(fields["temporal"].astype(np.float64).reshape(n * t, f),
                                columns=fields["temporal_features"])
        temporal.insert(0, PERIOD_COLUMN, np.tile(np.asarray(fields["periods"], dtype=object), n))
        temporal.insert(0, ID_COLUMN, np.repeat(ids, t))
        frames["temporal"] = temporal
    else:
        shape, dtype = write_npy(folder / f"temporal{array_io.SUFFIX}", fields["temporal"])
        extra = {**extra, "layout": "arrays", "arrays": {"version": array_io.VERSION, "histories": {
            "temporal": {"shape": shape, "dtype": dtype, "periods": [str(p) for p in fields["periods"]]}}}}
    for name, frame in frames.items():
        if tables == "parquet":
            frame.to_parquet(folder / f"{name}.parquet", index=False)
        else:
            frame.to_csv(folder / f"{name}.csv", index=False)
    config = {"id_column": ID_COLUMN, "period_column": PERIOD_COLUMN,
              "static_features": fields["static_features"], "temporal_features": fields["temporal_features"],
              "display_names": fields["display_names"], "units": fields["units"],
              "output_names": fields["output_names"], **extra}
    if fields["groups"]:
        config["groups"] = fields["groups"]
    if fields["labels"] is not None:
        config["label_column"] = fields["label_name"]
    (folder / bundle_io.CONFIG_FILE).write_text(json.dumps(config, indent=1, ensure_ascii=False) + "\n",
                                                encoding="utf-8")
    fields["model"].save(folder / bundle_io.MODEL_FILE)
