"""Bundles from Python objects: a Keras model, a DataFrame or array of static features and a
``(n, T, F)`` array (or a long DataFrame) of history.

``from_objects(...)`` gives an in-memory :class:`~explain.bundle.load.Bundle`;
``save_bundle(path, ...)`` writes the same bundle as a folder (Parquet tables by default)
that ``explain check`` passes and ``load_bundle`` reads back with the same arrays and names.

Every argument is checked first and every problem is reported at once, in a ``BundleError``
like ``load_bundle``'s, each problem naming the argument (``static``, ``ids``, ...), what was
expected and how to fix it.

Conventions (the bundle format's defaults):

* ``static`` as a DataFrame: its columns are the static features, in the model's order
  (or pick and order them with ``static_features``); a ``customer_id`` column, if any, holds
  the ids, else the index does (``ids=`` overrides the index). ``labels`` may name one of
  its columns (the true outcome, never fed to the model) or be an array of n values.
* ``temporal`` as a long DataFrame: columns ``customer_id``, ``period`` and the temporal
  features; one row per customer and period, every customer with the same periods. Periods
  are ordered as ``load_bundle`` orders them (numbers, else dates, else text).
* Without names: ``static_0, ...``, ``temporal_0, ...``; periods ``t1 ... tT``; ids ``0 ... n-1``.
* ``display_names`` and ``units`` ({feature: text}) and ``groups`` ({group name: [features]}, a feature in one group
  at most) are checked against the features and written to bundle.json as they are.
* The model's padding (a ``Masking`` layer) is read from the model as ``load_bundle`` reads it
  (:func:`layout_fields`): an in-memory bundle gets the same baselines as the folder ``save_bundle`` writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from explain.bundle import checks as bundle_checks
from explain.bundle.config import DEFAULT_ID_COLUMN, DEFAULT_PERIOD_COLUMN, group_problems
from explain.bundle.problems import MISSING_TOKENS, ValidationReport
from explain.bundle.roles import OUTPUT_NAMES_COUNT, default_output_names, input_roles, output_check
from explain.core.errors import BundleError
from explain.core.inputs import input_layout

ID_COLUMN = DEFAULT_ID_COLUMN
PERIOD_COLUMN = DEFAULT_PERIOD_COLUMN
LABEL_COLUMN = "label"  # the column that holds ``labels`` given as an array
TABLE_FORMATS = ("parquet", "csv")
SHOWN = 5

# ---- message templates (tests import these) ---------------------------------------------
WRONG_TYPE = "{argument} must be {expected}; it is {found}."
WRONG_RANK = "{argument} must be {expected}; it has shape {shape}."
NOT_NUMERIC_ARRAY = ("{argument} must hold numbers; its dtype is {dtype}. Convert it with "
                     "numpy.asarray(..., dtype='float32') (encode categories as 0/1 columns).")
NOT_NUMERIC_COLUMNS = ("{argument} has column(s) that are not numbers: {columns}. Convert them to "
                       "numbers (encode categories as 0/1 columns) or leave them out with {names}=[...].")
NOT_FINITE_VALUES = ("{argument} has {count} missing or infinite value(s) (NaN or inf): {where}. Fill "
                     "them in (for example with 0 or the feature's median) or drop those customers.")
MODEL_MISMATCH = ("{argument} has {symbol}={given} {what}, but the model's {role} input {shape} expects "
                  "{symbol}={expected}. {fix}")
COUNT_MISMATCH = "{argument} has {given} {what}, but {other} has {expected}. {fix}"
DUPLICATE_VALUES = "{argument} has {count} value(s) more than once: {examples}. {fix}"
EMPTY_VALUES = "{argument} has empty value(s) at position(s) {positions}. {fix}"
UNKNOWN_FEATURES = ("{argument} names feature(s) that are not features of this bundle: {unknown}. "
                    "Features: {known}.")
MISSING_COLUMNS = ("{argument} lists column(s) that {table} does not have: {missing}. Columns of "
                   "{table}: {found}.")
RESERVED_NAMES = ("{argument} uses the name(s) {names}, which the bundle's tables use for {what}. Rename "
                  "those features.")
UNORDERED_PERIODS = ("periods {given} are not in increasing order as load_bundle sorts period labels "
                     "(numbers, else dates, else text): it would read them as {order}. Give them in "
                     "that order, or use labels that sort, such as '01', '02', ... or '2025-01', '2025-02'.")
IDS_TWICE = ("ids is given and static also has a '{column}' column: give the customer ids once, "
             "either as ids=[...] or as that column.")
PERIODS_WITH_LONG = ("periods {given} differ from the periods of temporal's '{column}' column {found}; "
                     "leave periods out when temporal is a long DataFrame.")
LONG_MISSING_CUSTOMERS = ("temporal has no rows for {count} customer(s) of static: {examples}. Every "
                          "customer needs one row per period in temporal.")
LONG_EXTRA_CUSTOMERS = ("temporal has rows for {count} customer(s) that are not in static: {examples}. "
                        "Remove those rows or add the customers to static.")
LONG_DUPLICATE_ROWS = ("temporal has {count} (customer, period) pair(s) more than once: {examples}. Each "
                       "customer needs one row per period; remove the duplicate rows.")
LONG_OTHER_PERIODS = ("{count} customer(s) of temporal do not have the periods {periods}: {examples}. "
                      "Give every customer one row for each of these periods.")
LABEL_COLUMN_MISSING = ("labels={label!r} names no column of static; columns: {found}. Pass the column's "
                        "name or an array of one label per customer.")
PATH_IN_USE = ("{path} already exists and is not empty. save_bundle writes a new folder: choose another "
               "path, or pass overwrite=True to replace a bundle folder.")
NOT_A_BUNDLE_FOLDER = ("{path} holds files that are not part of a bundle ({examples}); overwrite=True "
                       "replaces bundle folders only. Choose another path.")
UNKNOWN_TABLE_FORMAT = "tables={value!r} is not valid; expected one of: parquet, csv."
SAVED_BUT_INVALID = "save_bundle wrote a bundle that does not pass check, so nothing was saved:\n{report}"


class _Problems:
    """Collects every problem (one per argument and issue) into a ValidationReport."""

    def __init__(self) -> None:
        self.report = ValidationReport()

    def add(self, argument: str, message: str) -> None:
        self.report.add(argument, message)

    def raise_if_any(self) -> None:
        if not self.report.ok:
            raise BundleError(self.report.format(), self.report.problems)


def _examples(values, limit: int = SHOWN) -> str:
    values = list(values)
    text = ", ".join(repr(str(v)) for v in values[:limit])
    return text + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _kind(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return type(value).__name__


def _names(argument: str, given, count: int, problems: _Problems, *, default_prefix: str, what: str,
           other: str) -> list[str]:
    """``count`` names from ``given`` (or ``default_prefix``_0, _1, ...), checked: right count, unique, non-empty;
    ``what`` they are and the ``other`` argument whose axis gives their count, for the messages."""
    if given is None:
        return [f"{default_prefix}_{j}" for j in range(count)]
    if isinstance(given, str) or not isinstance(given, (Sequence, np.ndarray, pd.Index)):
        problems.add(argument, WRONG_TYPE.format(argument=argument, expected=f"a list of {count} {what}",
                                                 found=_kind(given)))
        return [f"{default_prefix}_{j}" for j in range(count)]
    names = [str(x) for x in given]
    _check_keys(argument, names, problems, what)
    if len(names) != count:
        problems.add(argument, COUNT_MISMATCH.format(
            argument=argument, given=len(names), what=what, other=other, expected=count,
            fix=f"Give exactly {count} {what}, in the model's order."))
        return [f"{default_prefix}_{j}" for j in range(count)]
    return names


def _check_keys(argument: str, names: list[str], problems: _Problems, what: str) -> None:
    empty = [k for k, name in enumerate(names) if not name.strip()]
    if empty:
        problems.add(argument, EMPTY_VALUES.format(argument=argument, positions=", ".join(map(str, empty[:SHOWN])),
                                                   fix=f"Every one of the {what} needs a text."))
    counts = pd.Series(names).value_counts()
    repeated = [name for name, k in counts.items() if k > 1]
    if repeated:
        problems.add(argument, DUPLICATE_VALUES.format(argument=argument, count=len(repeated),
                                                       examples=_examples(repeated),
                                                       fix=f"The {what} must be unique."))


def _numeric_frame(argument: str, frame: pd.DataFrame, names_argument: str,
                   problems: _Problems) -> np.ndarray | None:
    bad = [c for c in frame.columns
           if not (pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c]))]
    if bad:
        problems.add(argument, NOT_NUMERIC_COLUMNS.format(argument=argument, columns=_examples(bad),
                                                          names=names_argument))
        return None
    return frame.to_numpy(dtype=np.float64, na_value=np.nan)


def _numeric_array(argument: str, value, rank: int, expected: str, problems: _Problems) -> np.ndarray | None:
    try:
        array = np.asarray(value)
    except Exception:  # ragged nested lists
        problems.add(argument, WRONG_TYPE.format(argument=argument, expected=expected, found=_kind(value)))
        return None
    if array.ndim != rank:
        problems.add(argument, WRONG_RANK.format(argument=argument, expected=expected, shape=array.shape))
        return None
    if array.dtype.kind not in "biuf":
        problems.add(argument, NOT_NUMERIC_ARRAY.format(argument=argument, dtype=array.dtype))
        return None
    return array.astype(np.float64)


def _listed_columns(argument: str, listed, table: str, frame: pd.DataFrame, problems: _Problems):
    """The columns ``listed`` picks from a DataFrame argument (None: not given; False: reported missing)."""
    if listed is None:
        return None
    if isinstance(listed, str) or not isinstance(listed, (Sequence, np.ndarray, pd.Index)):
        problems.add(argument, WRONG_TYPE.format(argument=argument, expected="a list of column names",
                                                 found=_kind(listed)))
        return False
    missing = [str(c) for c in listed if str(c) not in frame.columns]
    if missing:
        problems.add(argument, MISSING_COLUMNS.format(argument=argument, table=table, missing=_examples(missing),
                                                      found=_examples(frame.columns, 20)))
        return False
    return [str(c) for c in listed]


def _static(static, ids, static_features, labels, problems: _Problems) -> dict:
    """{"values": (n, S) float64 or None, "features", "ids" (list or None), "labels", "label_name"}."""
    out: dict[str, Any] = {"values": None, "features": None, "ids": None, "labels": None, "label_name": None}
    if isinstance(static, pd.DataFrame):
        frame = static.copy()
        frame.columns = [str(c) for c in frame.columns]
        if ID_COLUMN in frame.columns:
            if ids is not None:
                problems.add("ids", IDS_TWICE.format(column=ID_COLUMN))
            out["ids"] = [str(i) for i in frame.pop(ID_COLUMN)]
        elif ids is None:
            out["ids"] = [str(i) for i in frame.index]
        if isinstance(labels, str):
            if labels in frame.columns:
                out["labels"], out["label_name"] = frame.pop(labels).to_numpy(), labels
            else:
                problems.add("labels", LABEL_COLUMN_MISSING.format(label=labels, found=_examples(frame.columns, 20)))
        picked = _listed_columns("static_features", static_features, "static", frame, problems)
        if picked is False:
            return out
        frame = frame if picked is None else frame[picked]
        out["features"] = list(frame.columns)
        out["values"] = _numeric_frame("static", frame, "static_features", problems)
        return out
    out["values"] = _numeric_array("static", static, 2, "a DataFrame or an (n, S) array", problems)
    return out


def _temporal(temporal, periods, problems: _Problems) -> dict:
    """Array: {"values": (n, T, F)}. Long DataFrame: {"frame": ..., "features": [...]}."""
    if isinstance(temporal, pd.DataFrame):
        frame = temporal.copy()
        frame.columns = [str(c) for c in frame.columns]
        missing = [c for c in (ID_COLUMN, PERIOD_COLUMN) if c not in frame.columns]
        if missing:
            problems.add("temporal", MISSING_COLUMNS.format(
                argument="temporal (a long DataFrame)", table="temporal", missing=_examples(missing),
                found=_examples(frame.columns, 20)))
            return {}
        return {"frame": frame}
    values = _numeric_array("temporal", temporal, 3, "an (n, T, F) array or a long DataFrame", problems)
    return {"values": values}


def _from_long(frame: pd.DataFrame, ids: list[str], temporal_features, periods,
               problems: _Problems) -> tuple[np.ndarray | None, list[str] | None, list[str] | None]:
    """A long table -> ((n, T, F) in ``ids`` order, features, periods), or Nones after reporting."""
    keys = pd.DataFrame({"id": frame[ID_COLUMN].astype(str).to_numpy(),
                         "period": frame[PERIOD_COLUMN].astype(str).to_numpy()})
    features = [c for c in frame.columns if c not in (ID_COLUMN, PERIOD_COLUMN)]
    picked = _listed_columns("temporal_features", temporal_features, "temporal", frame, problems)
    if picked is False:
        return None, None, None
    features = features if picked is None else picked
    values = _numeric_frame("temporal", frame[features], "temporal_features", problems)
    ok = values is not None
    known, present = set(ids), set(keys["id"])
    lacking = [i for i in ids if i not in present]
    extra = list(dict.fromkeys(i for i in keys["id"] if i not in known))
    if lacking:
        problems.add("temporal", LONG_MISSING_CUSTOMERS.format(count=len(lacking), examples=_examples(lacking)))
    if extra:
        problems.add("temporal", LONG_EXTRA_CUSTOMERS.format(count=len(extra), examples=_examples(extra)))
    duplicated = keys.duplicated(keep=False)
    if duplicated.any():
        pairs = list(dict.fromkeys(map(tuple, keys[duplicated].to_numpy().tolist())))
        problems.add("temporal", LONG_DUPLICATE_ROWS.format(
            count=len(pairs), examples=", ".join(f"({i!r}, {p!r})" for i, p in pairs[:SHOWN])))
    labels = list(pd.unique(keys["period"]))
    order = np.argsort(bundle_checks.period_ranks(np.asarray(labels, dtype=object)), kind="stable")
    labels = [labels[k] for k in order]
    per_customer = keys.groupby("id", sort=False)["period"].agg(frozenset)
    others = [i for i, found in per_customer.items() if found != frozenset(labels) and i in known]
    if others:
        problems.add("temporal", LONG_OTHER_PERIODS.format(count=len(others), periods=_examples(labels),
                                                           examples=_examples(others)))
    if periods is not None and [str(p) for p in periods] != labels:
        problems.add("periods", PERIODS_WITH_LONG.format(given=_examples(periods), column=PERIOD_COLUMN,
                                                          found=_examples(labels)))
    if not ok or lacking or extra or duplicated.any() or others:
        return None, features, labels
    position = {p: k for k, p in enumerate(labels)}
    row = {i: k for k, i in enumerate(ids)}
    cube = np.empty((len(ids), len(labels), len(features)))
    cube[keys["id"].map(row).to_numpy(), keys["period"].map(position).to_numpy()] = values
    return cube, features, labels


def _where_not_finite(values: np.ndarray, ids: list[str], axes: list[list[str]], names: list[str]) -> tuple[int, str]:
    bad = np.argwhere(~np.isfinite(values))
    places = []
    for index in bad[:SHOWN]:
        parts = [f"customer {ids[index[0]]!r}" if index[0] < len(ids) else f"row {index[0]}"]
        parts += [f"{name} {axis[k]!r}" for name, axis, k in zip(names, axes, index[1:])]
        places.append(" ".join(parts))
    more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    return len(bad), ", ".join(places) + more


def _labels(labels, n: int, problems: _Problems) -> np.ndarray | None:
    """One label per customer, typed as load_bundle reads them back (integers stay integers)."""
    array = np.asarray(labels)
    if array.ndim != 1:
        problems.add("labels", WRONG_RANK.format(argument="labels", expected=f"one label per customer, ({n},)",
                                                 shape=array.shape))
        return None
    if len(array) != n:
        problems.add("labels", COUNT_MISMATCH.format(argument="labels", given=len(array), what="labels",
                                                     other="static", expected=n,
                                                     fix="Give one label per customer, in static's order."))
        return None
    if array.dtype.kind == "b":
        return array
    if array.dtype.kind in "iu":
        return array.astype(np.int64)
    if array.dtype.kind == "f":
        if np.all(np.isfinite(array)) and np.all(array == np.round(array)):
            return array.astype(np.int64)
        return array
    text = pd.Series(["" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip() for v in array],
                     dtype=object)
    numbers = pd.to_numeric(text.mask(text.str.lower().isin(MISSING_TOKENS)), errors="coerce")
    if numbers.notna().sum() == (~text.str.lower().isin(MISSING_TOKENS)).sum():  # as load_bundle reads them
        return _labels(numbers.to_numpy(np.float64), n, problems)
    return text.to_numpy(dtype=object)


def _text_map(argument: str, value, features: list[str], problems: _Problems) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.add(argument, WRONG_TYPE.format(argument=argument, expected="a dict {feature: text}",
                                                 found=_kind(value)))
        return {}
    mapping = {str(k): str(v) for k, v in value.items()}
    unknown = [k for k in mapping if k not in features]
    if unknown:
        problems.add(argument, UNKNOWN_FEATURES.format(argument=argument, unknown=_examples(unknown),
                                                       known=_examples(features, 20)))
    return {k: v for k, v in mapping.items() if k in features}


def _groups(value, features: list[str], problems: _Problems) -> dict[str, list[str]]:
    """``groups`` ({group name: [feature names]}) checked against the bundle's features, as bundle.json's are."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(m, (Sequence, np.ndarray, pd.Index)) and not isinstance(m, str) and len(m) > 0
            for m in value.values()):
        problems.add("groups", WRONG_TYPE.format(argument="groups", expected="a dict {group name: [feature names]} "
                                                 "(each group a non-empty list)", found=_kind(value)))
        return {}
    groups = {str(name): [str(c) for c in members] for name, members in value.items()}
    for problem in group_problems(groups, features):
        problems.add("groups", problem)
    return groups


def padding_side(layout, temporal: np.ndarray) -> str:
    """The side a two-input model's histories are padded at, "start" or "end": the side more customers' histories
    are padded at alone (the model's Masking value or mask_zero; "start" when nothing is padded). What the notebook's
    bundle and the bundle.json that ``save_bundle`` writes both say."""
    padding = layout.spec("temporal").padding(temporal)
    if padding is None or padding.shape[1] < 2:
        return "start"
    at_end = int((padding[:, -1] & ~padding[:, 0]).sum())
    at_start = int((padding[:, 0] & ~padding[:, -1]).sum())
    return "end" if at_end > at_start else "start"


def layout_fields(model, static: np.ndarray, temporal: np.ndarray, *, static_features: list[str],
                  temporal_features: list[str], periods: list[str], feature_labels: dict[str, str]) -> dict:
    """The fields of an in-memory two-input bundle that ``load_bundle`` fills from the model's input layout
    (``explain.core.inputs``): the layout itself (its padding: Masking, mask_zero), every input's columns, display
    names and periods, the arrays by key for a padded model, and the side its histories are padded at. So the
    notebook's bundle gets the same baselines (padding rules included) as the folder ``save_bundle`` writes.
    Empty when the model's layout has a problem (the engine then says what it is)."""
    layout = input_layout(model)
    if layout.problem is not None or layout.roles is None or set(layout.engine_keys) != {"static", "temporal"}:
        return {}
    plain = all(s.embedding is None and s.padded_by is None for s in layout.specs)
    side = padding_side(layout, temporal)
    return dict(
        layout=layout, input_roles=tuple(s.role for s in layout.specs),
        input_arrays={} if plain else {"static": static, "temporal": temporal},
        input_features={"static": list(static_features), "temporal": list(temporal_features)},
        input_labels={"static": "static", "temporal": "temporal"},
        feature_labels={c: feature_labels.get(c, c) for c in [*static_features, *temporal_features]},
        input_periods={"temporal": list(periods)}, temporal_padding=side,
    )


def _model_shapes(model, problems: _Problems) -> tuple[tuple | None, dict | None, int | None]:
    roles, shapes, problem = input_roles(model)
    if problem:
        problems.add("model", problem)
    width, problem = output_check(model)  # (None, K), per period (None, T, K), several heads
    if problem:
        problems.add("model", problem)
    return roles, shapes, width


def gather(model, static, temporal, *, ids=None, periods=None, static_features=None, temporal_features=None,
           labels=None, display_names=None, units=None, groups=None, output_names=None) -> dict:
    """Check every argument; the bundle's fields, or ``BundleError`` listing every problem."""
    problems = _Problems()
    roles, shapes, k = _model_shapes(model, problems)
    s = _static(static, ids, static_features, labels, problems)
    t = _temporal(temporal, periods, problems)
    xs = s["values"]
    n = xs.shape[0] if xs is not None else None
    ids = _ids(ids, s["ids"], n, problems)
    xt, t_features, t_periods = _history(t, ids, temporal_features, periods, n, problems)
    _against_model(shapes, xs, xt, problems)
    s_features = s["features"] or (None if xs is None else _names(
        "static_features", static_features, xs.shape[1], problems, default_prefix="static",
        what="static feature names", other="static (its second axis)"))
    t_features, t_periods = _history_names(xt, t_features, t_periods, temporal_features, periods, problems)
    features = [*(s_features or []), *(t_features or [])]
    _check_feature_names(s_features, t_features, s["label_name"], problems)
    _check_finite(_Named(xs, xt, ids, s_features, t_features, t_periods), problems)
    label_values, label_name = _label_values(s, static, labels, n, features, problems)
    names_map = _text_map("display_names", display_names, features, problems)
    units_map = _text_map("units", units, features, problems)
    groups_map = _groups(groups, features, problems)
    outputs = _output_names(output_names, k, problems)
    problems.raise_if_any()
    return dict(
        model=model, ids=np.asarray(ids, dtype=object), static=xs.astype(np.float32),
        temporal=xt.astype(np.float32), static_features=list(s_features), temporal_features=list(t_features),
        static_labels=[names_map.get(c, c) for c in s_features],
        temporal_labels=[names_map.get(c, c) for c in t_features],
        units=units_map, groups=groups_map, periods=list(t_periods), output_names=outputs or default_output_names(k),
        labels=label_values, label_name=label_name if label_values is not None else None,
        display_names=names_map, input_roles=roles,
    )


def _ids(ids, table_ids, n, problems: _Problems) -> list[str] | None:
    """The ids: the argument, else static's id column or index, else 0 ... n-1."""
    if ids is not None:
        if isinstance(ids, str) or not isinstance(ids, (Sequence, np.ndarray, pd.Index, pd.Series)):
            problems.add("ids", WRONG_TYPE.format(argument="ids", expected="a list of customer ids",
                                                  found=_kind(ids)))
            ids = None
        else:
            ids = [str(i).strip() for i in ids]
    ids = ids if ids is not None else table_ids
    if ids is None and n is not None:
        ids = [str(i) for i in range(n)]
    if ids is not None:
        _check_keys("ids", ids, problems, "customer ids")
        if n is not None and len(ids) != n:
            problems.add("ids", COUNT_MISMATCH.format(argument="ids", given=len(ids), what="ids", other="static",
                                                      expected=n, fix="Give one id per row of static, in order."))
    return ids


def _history(t: dict, ids, temporal_features, periods, n, problems: _Problems):
    """(values (n, T, F), feature names or None, period labels or None): an array, or a long table reshaped into
    one in the ids' order."""
    xt, t_features, t_periods = t.get("values"), None, None
    ids_ok = ids is not None and not any(p.file == "ids" for p in problems.report.problems)
    if "frame" in t and ids_ok:
        xt, t_features, t_periods = _from_long(t["frame"], ids, temporal_features, periods, problems)
    elif "frame" in t:
        t_features = [c for c in t["frame"].columns if c not in (ID_COLUMN, PERIOD_COLUMN)]
    if xt is not None and n is not None and xt.shape[0] != n:
        problems.add("temporal", COUNT_MISMATCH.format(
            argument="temporal", given=xt.shape[0], what="customers (first axis)", other="static", expected=n,
            fix="Give both inputs one row per customer, in the same order."))
    return xt, t_features, t_periods


def _against_model(shapes, xs, xt, problems: _Problems) -> None:
    """The arrays' sizes against the model's inputs."""
    if shapes is None:
        return
    model_s, model_t = shapes["static"], shapes["temporal"]
    if xs is not None and xs.shape[1] != model_s[1]:
        problems.add("static", MODEL_MISMATCH.format(
            argument="static", symbol="S", given=xs.shape[1], what="features", role="static",
            shape=model_s, expected=model_s[1], fix="Pass the features the model was trained on, in its order."))
    if xt is not None:
        for axis, symbol, what in ((1, "T", "periods"), (2, "F", "features")):
            if xt.shape[axis] != model_t[axis]:
                problems.add("temporal", MODEL_MISMATCH.format(
                    argument="temporal", symbol=symbol, given=xt.shape[axis], what=what, role="temporal",
                    shape=model_t, expected=model_t[axis],
                    fix=f"Give every customer the {model_t[axis]} {what} the model reads."))


def _history_names(xt, t_features, t_periods, temporal_features, periods, problems: _Problems):
    """(temporal feature names, period labels): given, read from the long table, or defaults; periods in order."""
    if t_features is None and xt is not None:
        t_features = _names("temporal_features", temporal_features, xt.shape[2], problems, default_prefix="temporal",
                            what="temporal feature names", other="temporal (its last axis)")
    if t_periods is None and xt is not None:
        if periods is None:
            t_periods = [f"t{i + 1}" for i in range(xt.shape[1])]
        else:
            t_periods = _names("periods", periods, xt.shape[1], problems, default_prefix="t", what="period labels",
                               other="temporal (its second axis)")
            ranks = bundle_checks.period_ranks(np.asarray(t_periods, dtype=object))
            if np.any(np.diff(ranks) < 0) and len(set(t_periods)) == len(t_periods):
                problems.add("periods", UNORDERED_PERIODS.format(
                    given=_examples(t_periods, 12),
                    order=_examples([t_periods[j] for j in np.argsort(ranks, kind="stable")], 12)))
    return t_features, t_periods


def _check_feature_names(s_features, t_features, label_name, problems: _Problems) -> None:
    """A name is static or temporal, never both, and never a name the tables use for ids, periods or labels."""
    if s_features and t_features:
        both = sorted(set(s_features) & set(t_features))
        if both:
            problems.add("temporal_features", DUPLICATE_VALUES.format(
                argument="static_features and temporal_features", count=len(both), examples=_examples(both),
                fix="A name is either a static or a temporal feature; rename one of them."))
    reserved = {ID_COLUMN: "the customer ids", PERIOD_COLUMN: "the periods"}
    if label_name is not None:
        reserved[label_name] = "the labels"
    for argument, names in (("static_features", s_features), ("temporal_features", t_features)):
        clash = [name for name in names or () if name in reserved]
        if clash:
            problems.add(argument, RESERVED_NAMES.format(argument=argument, names=_examples(clash),
                                                         what=" and ".join(reserved[c] for c in clash)))


class _Named(NamedTuple):
    """The customers' arrays with the names that say where a value is (each None while an argument has a
    problem): static (n, S) and its features, temporal (n, T, F), its features and periods, the ids."""

    static: np.ndarray | None
    temporal: np.ndarray | None
    ids: list | None
    static_features: list | None
    temporal_features: list | None
    periods: list | None


def _check_finite(named: _Named, problems: _Problems) -> None:
    """No missing or infinite value, each one named by customer, feature (and period)."""
    xs, xt, ids, s_features, t_features, t_periods = named
    if xs is not None and ids is not None and s_features is not None and not np.all(np.isfinite(xs)):
        count, where = _where_not_finite(xs, ids, [s_features], ["feature"])
        problems.add("static", NOT_FINITE_VALUES.format(argument="static", count=count, where=where))
    if xt is not None and ids is not None and t_features is not None and t_periods is not None \
            and not np.all(np.isfinite(xt)):
        count, where = _where_not_finite(xt, ids, [t_periods, t_features], ["period", "feature"])
        problems.add("temporal", NOT_FINITE_VALUES.format(argument="temporal", count=count, where=where))


def _label_values(s: dict, static, labels, n, features, problems: _Problems):
    """(label values or None, the label column's name): a column of static, or an array given."""
    label_values, label_name = None, s["label_name"]
    if s["labels"] is not None:
        label_values = _labels(s["labels"], n or 0, problems)
    elif labels is not None and not isinstance(labels, str) and n is not None:
        label_values = _labels(labels, n, problems)
        label_name = LABEL_COLUMN
        while label_name in features:
            label_name += "_"
    elif isinstance(labels, str) and not isinstance(static, pd.DataFrame):
        problems.add("labels", WRONG_TYPE.format(argument="labels", expected="an array of one label per customer "
                                                 "(a column name only when static is a DataFrame)", found="a text"))
    return label_values, label_name


def _output_names(output_names, k, problems: _Problems) -> list[str] | None:
    if output_names is None:
        return None
    if isinstance(output_names, str) or not isinstance(output_names, (Sequence, np.ndarray)):
        problems.add("output_names", WRONG_TYPE.format(argument="output_names", expected="a list of names",
                                                       found=_kind(output_names)))
        return None
    outputs = [str(x) for x in output_names]
    _check_keys("output_names", outputs, problems, "output names")
    if k is not None and len(outputs) != k:
        problems.add("output_names", OUTPUT_NAMES_COUNT.format(given=len(outputs), expected=k))
    return outputs


def fields(model, static, temporal, **names) -> dict:
    """Every field of an in-memory :class:`~explain.bundle.load.Bundle` (no files) from a Keras model and the
    customers' data: what ``Bundle.from_objects`` builds its bundle from.

    ``static``: a DataFrame or an ``(n, S)`` array; ``temporal``: an ``(n, T, F)`` array or a
    long DataFrame (``customer_id``, ``period``, features). Keyword arguments: ``ids``,
    ``periods``, ``static_features``, ``temporal_features``, ``labels``, ``display_names``,
    ``units``, ``groups``, ``output_names`` (see the module docstring). Every problem is reported at once
    (``BundleError``), each naming its argument. The model's input layout (padded histories behind a Masking
    layer) is read as ``load_bundle`` reads it (:func:`layout_fields`).
    """
    gathered = gather(model, static, temporal, **names)
    names_map = gathered.pop("display_names")
    return {**gathered, **layout_fields(model, gathered["static"], gathered["temporal"],
                                        static_features=gathered["static_features"],
                                        temporal_features=gathered["temporal_features"],
                                        periods=gathered["periods"], feature_labels=names_map)}
