"""Bundle folders from Python objects for a model with any inputs: several static-like inputs, several
histories, category ids or texts into an Embedding, histories padded behind a Masking layer.

``inputs`` is a mapping {the model's input name: array or DataFrame} or a list in the model's input
order. A static-like input (None, C) takes an (n, C) array (or (n,) when C = 1) or a DataFrame whose
columns are its features (a ``customer_id`` column, else the index, gives the ids); a history
(None, T, F) takes an (n, T, F) array or a long DataFrame (``customer_id``, ``period``, features).
Category inputs hold their ids or texts as they are (integers, or text for a StringLookup). A
padded customer's padding (every feature at the Masking value, or the mask id) is left out of the
tables, as ``bundle.json``'s ``temporal_padding`` says, and must sit at that side of the history.

``write_folder`` checks what it can name an argument for (input names and count, customers, shapes,
dtypes, padding, feature names) and writes ``model.keras``, ``static.*``, one long table per history
and ``bundle.json`` with ``inputs``; ``explain.bundle.save`` then checks the folder as ``explain check``
does. The two-input form (``static``, ``temporal``) stays in ``explain.bundle.objects``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from explain.bundle import checks as bundle_checks
from explain.bundle.config import DEFAULT_ID_COLUMN, DEFAULT_PERIOD_COLUMN, PADDING_SIDES
from explain.bundle.objects import LABEL_COLUMN, UNORDERED_PERIODS, _examples, _groups, _kind, _labels, _Problems
from explain.core.errors import BundleError
from explain.core.inputs import input_layout

ID_COLUMN, PERIOD_COLUMN = DEFAULT_ID_COLUMN, DEFAULT_PERIOD_COLUMN
NAMES = ("ids", "periods", "features", "labels", "display_names", "units", "groups", "output_names", "categories",
         "target", "period_unit", "temporal_padding")

# ---- message templates (tests import these) ---------------------------------------------
INPUTS_TYPE = ("inputs must be a dict {{input name: array or DataFrame}} or a list in the model's input order; "
               "it is {found}.")
INPUTS_COUNT = "inputs has {given} entries, but the model has {expected} inputs: {names}. Give one per input."
INPUTS_UNKNOWN = "inputs names {unknown}, which the model does not have; its inputs are {names}."
INPUTS_MISSING = "inputs lacks the model's input(s) {missing}; give an array or DataFrame for each of {names}."
INPUT_SHAPE = ("inputs[{name!r}] has shape {shape}, but the model's input {name!r} {model_shape} expects {expected}. "
               "{fix}")
INPUT_ROWS = "inputs[{name!r}] has {given} customers (rows), but inputs[{first!r}] has {expected}. {fix}"
INPUT_DTYPE = ("inputs[{name!r}] holds {dtype} values, but the model's input {name!r} reads {reads}. "
               "{fix}")
INPUT_NOT_FINITE = ("inputs[{name!r}] has {count} missing or infinite value(s) (NaN or inf), first at customer "
                    "{customer!r}. Fill them in or drop those customers.")
PADDING_INSIDE = ("inputs[{name!r}]: {count} customer(s) have padding ({padded_by}) that is not at the {side} of "
                  "their history, for example {examples}. Pad short histories at the {side} only (bundle.json "
                  "'temporal_padding': {side!r}), or give temporal_padding={other!r}.")
FEATURE_NAMES = ("features[{name!r}] has {given} name(s), but inputs[{name!r}] has {expected} feature(s). Give one "
                 "name per feature, in order.")
NAMES_TWICE = ("the feature name(s) {names} are used by more than one input (or by the ids, periods or labels); "
               "rename them.")
FEATURES_TYPE = "features must be a dict {{input name: [feature names]}}; it is {found}."
BAD_PADDING_SIDE = "temporal_padding must be 'start' or 'end'; it is {value!r}."
LONG_COLUMNS = ("inputs[{name!r}] is a long DataFrame, so it needs the columns {needed}; it has {found}.")
IDS_COUNT = "ids has {given} value(s), but the inputs have {n} customers. Give one id per customer."
PERIODS_COUNT = ("periods has {given} label(s), but the history inputs[{name!r}] has T={expected} periods. Give one "
                 "label per period, oldest first (a dict {{input name: labels}} for several histories).")


def is_inputs(value) -> bool:
    """True when ``value`` is the several-inputs form: a mapping, or a list or tuple of arrays or frames."""
    return isinstance(value, Mapping) or (isinstance(value, (list, tuple)) and len(value) > 0 and all(
        isinstance(v, (np.ndarray, pd.DataFrame, list, tuple)) for v in value))


def _by_spec(layout, inputs, problems: _Problems) -> dict:
    """{spec.key: the value given for that input}."""
    names = ", ".join(repr(s.name) for s in layout.specs)
    if isinstance(inputs, Mapping):
        found, unknown = {}, []
        for given, value in inputs.items():
            spec = next((s for s in layout.specs if str(given) in (s.name, s.key) or (
                layout.keys is not None and str(given) == str(layout.keys[s.position]))), None)
            if spec is None:
                unknown.append(str(given))
            else:
                found[spec.key] = value
        if unknown:
            problems.add("inputs", INPUTS_UNKNOWN.format(unknown=_examples(unknown), names=names))
        missing = [s.name for s in layout.specs if s.key not in found]
        if missing and not unknown:
            problems.add("inputs", INPUTS_MISSING.format(missing=_examples(missing), names=names))
        return found
    if not isinstance(inputs, (list, tuple)):
        problems.add("inputs", INPUTS_TYPE.format(found=_kind(inputs)))
        return {}
    if len(inputs) != len(layout.specs):
        problems.add("inputs", INPUTS_COUNT.format(given=len(inputs), expected=len(layout.specs), names=names))
        return {}
    return {spec.key: value for spec, value in zip(layout.specs, inputs)}


def _padding(spec, values: np.ndarray) -> np.ndarray | None:
    """(n, T) True where a history is padding (the Masking value in every feature, or the mask id)."""
    if spec.mask_value is not None:
        return np.all(values == spec.mask_value, axis=-1)
    if spec.mask_zero:
        token = getattr(spec.lookup, "mask_token", None) if spec.lookup is not None else 0
        pad = values == token
        return pad if pad.ndim == 2 else pad.all(axis=-1)
    return None


def _reads(spec) -> str:
    if spec.kind == "categorical":
        return "category texts" if "string" in str(spec.dtype) else "category ids (integers)"
    return "numbers"


def _array(spec, value, problems: _Problems) -> tuple[np.ndarray | None, list | None, list | None, pd.DataFrame | None]:
    """(values shaped like the input, features from a DataFrame, ids from a DataFrame, a long frame as given)."""
    name = spec.name
    if isinstance(value, pd.DataFrame):
        frame = value.copy()
        frame.columns = [str(c) for c in frame.columns]
        if spec.role == "temporal":
            if not {ID_COLUMN, PERIOD_COLUMN} <= set(frame.columns):
                problems.add(f"inputs[{name!r}]", LONG_COLUMNS.format(
                    name=name, needed=f"{ID_COLUMN!r}, {PERIOD_COLUMN!r} and its features",
                    found=_examples(frame.columns, 20)))
            return None, [c for c in frame.columns if c not in (ID_COLUMN, PERIOD_COLUMN)], None, frame
        ids = [str(i) for i in (frame.pop(ID_COLUMN) if ID_COLUMN in frame.columns else frame.index)]
        return frame.to_numpy(), list(frame.columns), ids, None
    try:
        array = np.asarray(value)
    except Exception:  # ragged lists
        problems.add(f"inputs[{name!r}]", INPUTS_TYPE.format(found=_kind(value)))
        return None, None, None, None
    if spec.role == "static" and tuple(spec.shape) == (1,) and array.ndim == 1:
        array = array.reshape(-1, 1)  # (n,) for an input of one column
    return array, None, None, None


def _check_values(spec, array: np.ndarray, problems: _Problems) -> np.ndarray | None:
    name, argument = spec.name, f"inputs[{spec.name!r}]"
    expected = (None, *spec.shape)
    if array.ndim != len(expected) or any(e is not None and e != g for e, g in zip(expected[1:], array.shape[1:])):
        what = {"static": "one row of features per customer", "temporal": "periods x features per customer"}
        problems.add(argument, INPUT_SHAPE.format(
            name=name, shape=array.shape, model_shape=expected, expected=f"(n, {', '.join(map(str, spec.shape))})",
            fix=f"Give {what[spec.role]}, in the model's order."))
        return None
    text = array.dtype.kind in "OUS"
    if spec.kind == "categorical" and "string" in str(spec.dtype):
        if not text:
            problems.add(argument, INPUT_DTYPE.format(name=name, dtype=array.dtype, reads=_reads(spec),
                                                      fix="Give the categories as the texts the model's lookup knows."))
            return None
        return np.asarray(array, dtype=object)
    if text:
        problems.add(argument, INPUT_DTYPE.format(
            name=name, dtype="text", reads=_reads(spec),
            fix="Encode categories as numbers, or feed the texts to a model input that reads them (a StringLookup)."))
        return None
    if spec.kind == "categorical":
        numbers = array.astype(np.float64)
        if not np.all(np.isfinite(numbers)) or np.any(numbers != np.round(numbers)):
            problems.add(argument, INPUT_DTYPE.format(name=name, dtype="non-integer", reads=_reads(spec),
                                                      fix="Give each category as its integer id."))
            return None
        return array.astype(np.int64)
    numbers = array.astype(np.float64)
    return numbers


def _names_of(argument: str, given, count: int, default: list[str], problems: _Problems, name: str) -> list[str]:
    if given is None:
        return default
    names = [str(x) for x in given]
    if len(names) != count:
        problems.add(argument, FEATURE_NAMES.format(name=name, given=len(names), expected=count))
        return default
    return names


def _periods_for(spec, periods, t: int, problems: _Problems, several: bool) -> list[str]:
    given = periods.get(spec.name, periods.get(spec.key)) if isinstance(periods, Mapping) else (
        None if several else periods)
    if given is None:
        return [f"t{i + 1}" for i in range(t)]
    labels = [str(p) for p in given]
    if len(labels) != t:
        problems.add("periods", PERIODS_COUNT.format(given=len(labels), name=spec.name, expected=t))
        return [f"t{i + 1}" for i in range(t)]
    return labels


def write_folder(folder: Path, model, inputs, tables: str, **names) -> None:
    """Check ``inputs`` (and ``names``: ids, periods, features, labels, display_names, units, groups,
    output_names, categories, target, period_unit, temporal_padding) against ``model`` and write
    the bundle's files into ``folder``; ``BundleError`` listing every problem naming its argument."""
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}; the keywords are {', '.join(NAMES)}")
    problems = _Problems()
    layout = input_layout(model)
    if layout.problem is not None or layout.roles is None:
        raise BundleError(f"model: {layout.problem}", [])
    side = names.get("temporal_padding") or "start"
    if side not in PADDING_SIDES:
        problems.add("temporal_padding", BAD_PADDING_SIDE.format(value=side))
        side = "start"
    features_given = names.get("features") or {}
    if not isinstance(features_given, Mapping):
        problems.add("features", FEATURES_TYPE.format(found=_kind(features_given)))
        features_given = {}
    given = _by_spec(layout, inputs, problems)
    problems.raise_if_any()
    inputs, frame_ids = _inputs(layout, given, features_given, problems)
    problems.raise_if_any()
    ids = _customers(layout, inputs.arrays, inputs.long_frames, names.get("ids"), frame_ids, problems)
    problems.raise_if_any()
    _history_tables(inputs, ids, names.get("periods"), side, problems)
    problems.raise_if_any()
    static = _static_table(inputs, ids, names.get("labels"), problems)
    groups = _groups(names.get("groups"), [c for key in inputs.columns for c in inputs.columns[key]], problems)
    problems.raise_if_any()
    names = {**names, "groups": groups or None, "temporal_padding": side}
    _write(folder, model, inputs, static, tables=tables, names=names)


class _Inputs(NamedTuple):
    """The model's inputs as given: its input layout, each input's checked array (by input key), each input's
    column names, and the long tables of its histories (given as long DataFrames, or made from the arrays)."""

    layout: Any                                   # explain.core.inputs.InputLayout
    arrays: dict
    columns: dict
    long_frames: dict


class _Static(NamedTuple):
    """The static table to write, and the name of its label column (None without labels)."""

    frame: pd.DataFrame
    label_name: str | None


def _inputs(layout, given: dict, features_given: Mapping, problems: _Problems) -> tuple[_Inputs, list | None]:
    """(the inputs: arrays, feature names and long frames by key; the ids read from a DataFrame or None)."""
    arrays, columns, long_frames, frame_ids = {}, {}, {}, None
    for spec in layout.specs:
        array, from_frame, ids, long = _array(spec, given[spec.key], problems)
        listed = features_given.get(spec.name, features_given.get(spec.key))
        if long is not None:
            columns[spec.key] = [str(c) for c in listed] if listed is not None else from_frame
            long_frames[spec.key] = long
            continue
        if array is None:
            continue
        if ids is not None and frame_ids is None:
            frame_ids = ids
        values = _check_values(spec, array, problems)
        if values is None:
            continue
        arrays[spec.key] = values
        width = 1 if spec.role == "temporal" and values.ndim == 2 else values.shape[-1]
        default = from_frame or ([spec.name] if width == 1 and spec.role == "static" else
                                 [f"{spec.name}_{j}" for j in range(width)])
        columns[spec.key] = _names_of(f"features[{spec.name!r}]", listed, width, default, problems, spec.name)
    return _Inputs(layout, arrays, columns, long_frames), frame_ids


def _customers(layout, arrays: dict, long_frames: dict, ids, frame_ids, problems: _Problems) -> list[str]:
    """The customers' ids (the argument, a DataFrame's, the long frames', else 0 ... n-1): the same count in every
    input, and every value finite."""
    first = next(iter(arrays), None)
    n = len(arrays[first]) if first is not None else None
    for key, values in arrays.items():
        if len(values) != n:
            spec = layout.spec(key)
            problems.add(f"inputs[{spec.name!r}]", INPUT_ROWS.format(
                name=spec.name, given=len(values), first=layout.spec(first).name, expected=n,
                fix="Give every input one row per customer, in the same order."))
    ids = [str(i) for i in ids] if ids is not None else frame_ids
    if ids is None:
        if n is None:  # every input a long frame: the ids are theirs
            ids = list(dict.fromkeys(str(i) for frame in long_frames.values() for i in frame[ID_COLUMN]))
        else:
            ids = [str(i) for i in range(n)]
    if n is not None and len(ids) != n:
        problems.add("ids", IDS_COUNT.format(given=len(ids), n=n))
    for key, values in arrays.items():
        finite = np.isfinite(values.reshape(len(values), -1)) if values.dtype.kind == "f" else None
        if finite is not None and not finite.all():
            bad = int(np.flatnonzero(~finite.all(axis=1))[0])  # the first customer with a NaN or inf
            problems.add(f"inputs[{layout.spec(key).name!r}]", INPUT_NOT_FINITE.format(
                name=layout.spec(key).name, count=int((~finite).sum()), customer=ids[bad] if bad < len(ids) else bad))
    return ids


def _history_tables(inputs: _Inputs, ids: list, periods, side: str, problems: _Problems) -> None:
    """Long tables of the histories given as arrays (into ``inputs.long_frames``): padded periods left out,
    padding at one side only, periods in order."""
    layout, arrays, columns, long_frames = inputs
    histories = [s for s in layout.specs if s.role == "temporal"]
    for spec in histories:
        if spec.key in long_frames:
            continue
        values = arrays[spec.key]
        labels = _periods_for(spec, periods, values.shape[1], problems, several=len(histories) > 1)
        pad = _padding(spec, values)
        pad = np.zeros(values.shape[:2], bool) if pad is None else pad
        steps = np.diff(pad.astype(np.int8), axis=1)
        inside = np.flatnonzero((steps > 0).any(axis=1) if side == "start" else (steps < 0).any(axis=1))
        if inside.size:
            problems.add(f"inputs[{spec.name!r}]", PADDING_INSIDE.format(
                name=spec.name, count=inside.size, padded_by=spec.padded_by, side=side,
                examples=_examples([ids[i] for i in inside]), other="end" if side == "start" else "start"))
            continue
        ranks = bundle_checks.period_ranks(np.asarray(labels, dtype=object))
        if np.any(np.diff(ranks) < 0):
            problems.add("periods", UNORDERED_PERIODS.format(
                given=_examples(labels, 12),
                order=_examples([labels[j] for j in np.argsort(ranks, kind="stable")], 12)))
            continue
        rows, cols = np.nonzero(~pad)  # (customer, period) of every real period, customer by customer
        cells = values[rows, cols].reshape(len(rows), -1)
        frame = pd.DataFrame(cells, columns=columns[spec.key])
        frame.insert(0, PERIOD_COLUMN, np.asarray(labels, dtype=object)[cols])
        frame.insert(0, ID_COLUMN, np.asarray(ids, dtype=object)[rows])
        long_frames[spec.key] = frame


def _static_table(inputs: _Inputs, ids: list, labels, problems: _Problems) -> _Static:
    """The static table: every static-like input's columns side by side, then the label."""
    layout, arrays, columns, _ = inputs
    static = pd.DataFrame({ID_COLUMN: ids})
    for spec in layout.specs:
        if spec.role == "static":
            for j, column in enumerate(columns[spec.key]):
                static[column] = arrays[spec.key][:, j]
    label_name = None
    if labels is not None:  # one label per customer (the true outcome, never fed to the model)
        values = _labels(labels, len(ids), problems)
        if values is not None:
            label_name = LABEL_COLUMN
            while label_name in static.columns:
                label_name += "_"
            static[label_name] = values
    every = [c for key in columns for c in columns[key]]
    twice = sorted({c for c in every if every.count(c) > 1} | ({ID_COLUMN, PERIOD_COLUMN} & set(every)))
    if twice:
        problems.add("features", NAMES_TWICE.format(names=_examples(twice)))
    return _Static(static, label_name)


def _write(folder: Path, model, inputs: _Inputs, static: _Static, *, tables: str, names: dict) -> None:
    """The tables, bundle.json and model.keras into ``folder`` (``names``: bundle.json's names and
    'temporal_padding'; ``tables``: "csv" or "parquet")."""
    layout, columns, long_frames, side = inputs.layout, inputs.columns, inputs.long_frames, names["temporal_padding"]
    suffix = "parquet" if tables == "parquet" else "csv"

    def write(frame: pd.DataFrame, stem: str) -> None:
        if tables == "parquet":
            frame.to_parquet(folder / f"{stem}.{suffix}", index=False)
        else:
            frame.to_csv(folder / f"{stem}.{suffix}", index=False)

    histories = [s for s in layout.specs if s.role == "temporal"]
    write(static.frame, "static")
    config_inputs = {}
    for spec in layout.specs:
        entry = {"features": columns[spec.key]}
        if spec.role == "temporal":
            stem = "temporal" if len(histories) == 1 else f"temporal_{spec.key}"
            write(long_frames[spec.key], stem)
            if len(histories) > 1:
                entry["table"] = stem
        config_inputs[spec.name] = entry
    config = {"id_column": ID_COLUMN, "period_column": PERIOD_COLUMN, "inputs": config_inputs,
              "temporal_padding": side}
    for key in ("display_names", "units", "groups", "output_names", "categories", "target", "period_unit"):
        if names.get(key) is not None:
            config[key] = names[key]
    if static.label_name is not None:
        config["label_column"] = static.label_name
    (folder / "bundle.json").write_text(json.dumps(config, indent=1, ensure_ascii=False, default=_plain) + "\n",
                                        encoding="utf-8")
    model.save(folder / "model.keras")


def _plain(value):
    """numpy scalars and arrays in bundle.json as JSON values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")
