"""``bundle.json``: column roles, display names, units, feature groups, output names, label, and the
``inputs`` of models with more than two inputs; every problem of the file goes to the report."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from explain.bundle.problems import CONFIG_FILE, TABLE_FILES, ValidationReport
from explain.core import verdict
from explain.core.bounded_json import TOO_LARGE, JsonBoundError, load_bounded
from explain.core.text import examples as _examples
from explain.modelfile.limits import DEFAULT_LIMITS, Limits

DEFAULT_ID_COLUMN = "customer_id"
DEFAULT_PERIOD_COLUMN = "period"
CONFIG_KEYS = ("id_column", "period_column", "static_features", "temporal_features",
               "display_names", "units", "groups", "output_names", "label_column", "positive_label",
               "inputs", "temporal_padding", "categories", "risk_bands", "target", "period_unit", "layout", "arrays",
               "output", "output_period", "planted")
PERIOD_UNITS = ("day", "week", "month", "quarter", "year")
PADDING_SIDES = ("start", "end")
INPUT_KEYS = ("features", "display_name", "role", "table")
INPUTS_INCOMPLETE = ("'inputs' must list 'features' for every model input; missing for {names}. "
                     "List each input's table columns in the model's order.")
INVALID_JSON = ("{file} is not valid JSON: {reason} (line {line}, column {col}). Fix the syntax "
                "or delete {file} to use the defaults.")
JSON_TOO_LARGE = ("{file} is too large to read: {reason}. It holds column roles and display names (a few KB). "
                  "To fix: shorten it; if you trust the file, raise the limit with --limit {field}=N on the "
                  "command line.")
JSON_NOT_OBJECT = "{file} must hold a JSON object ({{\"key\": value, ...}}); it holds {found}."
JSON_BAD_TYPE = "'{key}' must be {expected}; it is {found}."
JSON_UNKNOWN_KEY_NOTE = "{file}: unknown key(s) {keys} were ignored (known keys: {known})."
JSON_UNKNOWN_COLUMN = ("'{key}' names column(s) that are in neither table: {columns}. "
                       "Columns found: {found}. Fix the names (they are case-sensitive).")
JSON_DUPLICATE_FEATURE = "'{key}' lists column(s) more than once: {columns}."
GROUPS_EXPECTED = 'an object {"group name": ["feature column", ...]} (each group a non-empty list of column names)'
GROUP_UNKNOWN_COLUMN = ("'groups': group {group!r} lists {columns}, which {verb} not a feature column of the model's "
                        "inputs. Feature columns: {found}. Fix the names (they are case-sensitive) or remove them "
                        "from the group.")
GROUP_FEATURE_TWICE = ("'groups': the feature {column!r} is in {count} groups ({groups}); a feature belongs to one "
                       "group at most. Keep it in one of them.")
GROUP_REPEATS = "'groups': group {group!r} lists {columns} more than once; list each feature once."
GROUP_NOT_LIST = "'groups': group {group!r} must be a non-empty list of feature column names; it is {found}."
GROUP_EMPTY_NAME = "'groups': a group has an empty name; give every group a name (it is shown to readers)."
PLANTED_EXPECTED = ('a non-empty list of objects {"feature": "column name", "periods": ["period label", ...]} '
                    '(the drivers planted in synthetic data; "periods" optional: every period)')
UNKNOWN_TARGET = ("'target' is {value!r}, which is not an output of the model: its outputs are {names} "
                  "(give an index from 0 to {last}, or one of these names).")


@dataclass
class Config:
    present: bool = False
    id_column: str = DEFAULT_ID_COLUMN
    period_column: str = DEFAULT_PERIOD_COLUMN
    static_features: list[str] | None = None
    temporal_features: list[str] | None = None
    display_names: dict[str, str] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)  # group name -> feature columns, declared order
    output_names: list[str] | None = None
    label_column: str | None = None
    positive_label: Any = None
    inputs: dict[str, dict] | None = None
    temporal_padding: str = "start"
    categories: dict[str, dict] = field(default_factory=dict)
    risk_bands: tuple | None = None  # explain.core.verdict bands
    target: int | str | None = None  # the output explained by default: an index or an output name
    period_unit: str | None = None   # day | week | month | quarter | year (default: read from the periods)
    layout: str = "long"             # "long": temporal tables; "arrays": .npy histories (explain.bundle.arrays)
    arrays: dict | None = None       # bundle.json 'arrays' of the array layout: {"version", "histories": {stem: ...}}
    output: str | None = None        # the head explained by default, of a model with several outputs
    output_period: int | str | None = None  # the period explained by default (number, 1 = first, or label): last
    planted: list[dict] | None = None  # [{"feature": column, "periods": [labels] or absent}]: known true drivers
    raw: bytes = b""
    oversized: bool = False          # over a JSON limit: not parsed


def _input_config(config: Config, layout, spec) -> dict:
    """bundle.json 'inputs' entry of ``spec`` (by engine key, input name or dict key)."""
    entries = config.inputs or {}
    keys = [spec.key, spec.name] + ([layout.keys[spec.position]] if layout.keys is not None else [])
    for key in keys:
        if key is not None and str(key) in entries:
            return entries[str(key)]
    return {}


def input_plan(config: Config, layout, report: ValidationReport) -> dict:
    """Which columns feed which input and which table each history comes from.

    {"listed": {key: columns or None}, "tables": {key: (csv name, parquet name)},
     "labels": {key: display name}, "specs": {key: InputSpec}, "features": filled in by the checks}.
    """
    plan = {"listed": {}, "tables": {}, "labels": {}, "specs": {}, "features": {}}
    if layout is None:  # no usable model: check the tables as a plain two-input bundle
        plan["listed"] = {"static": config.static_features, "temporal": config.temporal_features}
        plan["tables"] = {"temporal": TABLE_FILES["temporal"]}
        return plan
    temporal_specs = [spec for spec in layout.specs if spec.role == "temporal"]
    missing = []
    for spec in layout.specs:
        entry = _input_config(config, layout, spec)
        plan["specs"][spec.key] = spec
        plan["labels"][spec.key] = entry.get("display_name", spec.key)
        listed = entry.get("features")
        if listed is None and spec.role == "static" and len(layout.keys_of("static")) == 1:
            listed = config.static_features
        if listed is None and spec.role == "temporal" and len(temporal_specs) == 1:
            listed = config.temporal_features
        if listed is None and config.inputs is not None:
            missing.append(spec.key)
        plan["listed"][spec.key] = listed
        if spec.role == "temporal":
            table = entry.get("table")
            if table:
                stem = table.rsplit(".", 1)[0] if table.lower().endswith((".csv", ".parquet")) else table
                plan["tables"][spec.key] = (f"{stem}.csv", f"{stem}.parquet")
            elif len(temporal_specs) == 1:
                plan["tables"][spec.key] = TABLE_FILES["temporal"]
            else:
                plan["tables"][spec.key] = (f"temporal_{spec.key}.csv", f"temporal_{spec.key}.parquet")
    if missing:
        report.add(CONFIG_FILE, INPUTS_INCOMPLETE.format(names=_examples(missing)), column="inputs")
    return plan


def read_config(folder: Path, report: ValidationReport, limits: Limits = DEFAULT_LIMITS) -> Config:
    """``bundle.json`` of ``folder`` (defaults when there is none), every problem in ``report``; its size,
    depth and number of values are bounded by ``limits`` before it is parsed."""
    config = Config()
    path = folder / CONFIG_FILE
    if not path.is_file():
        return config
    config.present = True
    data = _parse(path, config, report, limits)
    if data is None:
        return config
    unknown = [key for key in data if key not in CONFIG_KEYS]
    if unknown:
        report.notes.append(JSON_UNKNOWN_KEY_NOTE.format(
            file=CONFIG_FILE, keys=_examples(unknown, limit=20), known=", ".join(CONFIG_KEYS)))
    take = _Taker(data, report)
    _read_columns(config, take, report)
    _read_inputs(config, take)
    _read_outputs(config, take, data, report)
    config.planted = take("planted", PLANTED_EXPECTED, is_planted)
    return config


def _parse(path: Path, config: Config, report: ValidationReport, limits: Limits) -> dict | None:
    """The file's JSON object (bounded before it is parsed), or None with its problem in ``report``."""
    size = path.stat().st_size
    try:
        if size > limits.max_json_bytes:
            raise JsonBoundError(TOO_LARGE.format(size=size, limit=limits.max_json_bytes), "max_json_bytes")
        config.raw = path.read_bytes()
        data = load_bounded(config.raw, max_bytes=limits.max_json_bytes, max_depth=limits.max_json_depth,
                            max_values=limits.max_json_values)
    except JsonBoundError as error:
        report.add(CONFIG_FILE, JSON_TOO_LARGE.format(file=CONFIG_FILE, reason=error.reason, field=error.field))
        config.oversized = True
        return None
    except UnicodeDecodeError as error:
        report.add(CONFIG_FILE, INVALID_JSON.format(
            file=CONFIG_FILE, reason="it is not UTF-8 text", line="?", col=error.start))
        return None
    except json.JSONDecodeError as error:
        report.add(CONFIG_FILE, INVALID_JSON.format(
            file=CONFIG_FILE, reason=error.msg, line=error.lineno, col=error.colno))
        return None
    if not isinstance(data, dict):
        report.add(CONFIG_FILE, JSON_NOT_OBJECT.format(file=CONFIG_FILE, found=json_kind(data)))
        return None
    return data


def is_planted(v) -> bool:
    """``planted``: a non-empty list of {"feature": text, "periods": [texts or numbers]} ("periods" optional)."""
    return isinstance(v, list) and bool(v) and all(
        isinstance(e, dict) and _is_str(e.get("feature")) and set(e) <= {"feature", "periods"}
        and (e.get("periods") is None or (isinstance(e["periods"], list) and bool(e["periods"])
                                          and all(isinstance(p, (str, int)) and not isinstance(p, bool)
                                                  for p in e["periods"])))
        for e in v)


def _is_str(v) -> bool:
    return isinstance(v, str) and v != ""


def _is_str_list(v) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(_is_str(x) for x in v)


def _is_str_map(v) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


def _is_inputs(v) -> bool:
    return isinstance(v, dict) and v and all(
        isinstance(spec, dict) and set(spec) <= set(INPUT_KEYS)
        and _is_str_list(spec.get("features", ["x"]))
        and all(_is_str(spec[k]) for k in ("display_name", "role", "table") if k in spec)
        and spec.get("role", "static") in ("static", "temporal") for spec in v.values())


def _is_arrays(v) -> bool:
    return isinstance(v, dict) and set(v) <= {"version", "histories"} and isinstance(v.get("version", 1), int) \
        and isinstance(v.get("histories", {}), dict) and all(
            isinstance(h, dict) and set(h) == {"shape", "dtype", "periods"} and isinstance(h["shape"], list)
            and 1 <= len(h["shape"]) <= 3 and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**40
                                                  for d in h["shape"])
            and _is_str(h["dtype"]) and isinstance(h["periods"], list)
            and all(isinstance(p, (str, int)) for p in h["periods"]) for h in v.get("histories", {}).values())


class _Taker:
    """``take(key, expected, check)``: the value of ``key`` when it passes ``check``; None when absent or null,
    and None with a problem naming the key and what was expected when it does not pass."""

    def __init__(self, data: dict, report: ValidationReport) -> None:
        self.data, self.report = data, report

    def __call__(self, key: str, expected: str, check) -> Any:
        if key not in self.data or self.data[key] is None:
            return None
        value = self.data[key]
        if not check(value):
            self.report.add(CONFIG_FILE, JSON_BAD_TYPE.format(
                file=CONFIG_FILE, key=key, expected=expected, found=json_kind(value)), column=key)
            return None
        return value


def _read_columns(config: Config, take: _Taker, report: ValidationReport) -> None:
    """Column roles, feature lists, display names, units and the label column."""
    config.id_column = take("id_column", "a column name (text)", _is_str) or DEFAULT_ID_COLUMN
    config.period_column = (take("period_column", "a column name (text)", _is_str)
                            or DEFAULT_PERIOD_COLUMN)
    for key in ("static_features", "temporal_features"):
        value = take(key, "a non-empty list of column names", _is_str_list)
        if value is not None:
            repeated = sorted(c for c, k in Counter(value).items() if k > 1)
            if repeated:
                report.add(CONFIG_FILE, JSON_DUPLICATE_FEATURE.format(
                    file=CONFIG_FILE, key=key, columns=_examples(repeated)), column=key)
            setattr(config, key, list(value))
    config.display_names = dict(take("display_names", "an object {column: text}", _is_str_map) or {})
    config.units = dict(take("units", "an object {column: text}", _is_str_map) or {})
    groups = take("groups", GROUPS_EXPECTED, lambda v: isinstance(v, dict)) or {}
    for name, members in groups.items():
        if _is_str_list(members):
            config.groups[str(name)] = list(members)
        else:
            report.add(CONFIG_FILE, GROUP_NOT_LIST.format(group=name, found=json_kind(members)), column="groups")
    config.output_names = take("output_names", "a non-empty list of names", _is_str_list)
    config.label_column = take("label_column", "a column name (text) or null", _is_str)


def _read_inputs(config: Config, take: _Taker) -> None:
    """The ``inputs`` of models with more inputs, padding side, categories and the period unit."""
    inputs = take("inputs", "an object {input name: {\"features\": [columns], \"display_name\": text, "
                  "\"role\": \"static\" or \"temporal\", \"table\": file name}}", _is_inputs)
    config.inputs = {str(k): dict(v) for k, v in inputs.items()} if inputs else None
    config.temporal_padding = take("temporal_padding", "\"start\" or \"end\"",
                                   lambda v: v in PADDING_SIDES) or "start"
    categories = take("categories", "an object {column: {id or text: display text}}",
                      lambda v: isinstance(v, dict) and all(_is_str_map(m) for m in v.values()))
    config.categories = {str(c): dict(m) for c, m in (categories or {}).items()}
    config.layout = take("layout", '"long" or "arrays"', lambda v: v in ("long", "arrays")) or "long"
    config.arrays = take("arrays", 'an object {"version": 1, "histories": {name: {"shape": [numbers], "dtype": '
                         'text, "periods": [texts]}}}', _is_arrays)
    config.period_unit = take("period_unit", " or ".join(f'"{u}"' for u in PERIOD_UNITS), lambda v: v in PERIOD_UNITS)


def _read_outputs(config: Config, take: _Taker, data: dict, report: ValidationReport) -> None:
    """The positive label, the target explained and the risk bands."""
    positive = data.get("positive_label")
    if positive is not None and not isinstance(positive, (str, int, float, bool)):
        report.add(CONFIG_FILE, JSON_BAD_TYPE.format(
            file=CONFIG_FILE, key="positive_label", expected="a number or a text",
            found=json_kind(positive)), column="positive_label")
    else:
        config.positive_label = positive
    config.target = take("target", "an output index (a number) or an output name (text)",
                         lambda v: _is_str(v) or (isinstance(v, int) and not isinstance(v, bool) and v >= 0))
    config.output = take("output", "the name of one of the model's outputs (text)", _is_str)
    config.output_period = take("output_period", "a period number (1 is the first) or a period label (text)",
                                lambda v: _is_str(v) or (isinstance(v, int) and not isinstance(v, bool) and v >= 1))
    if data.get("risk_bands") is not None:
        config.risk_bands, problem = verdict.parse_bands(data["risk_bands"])
        if problem:
            report.add(CONFIG_FILE, problem, column="risk_bands")


def group_problems(groups: dict, features) -> list[str]:
    """Every problem of the feature ``groups`` ({name: [columns]}) against the model's feature columns
    ``features``: an empty name, a column listed twice in a group, a column that is not a feature, a feature in
    two groups. The same words for ``bundle.json`` and ``save_bundle(groups=...)``."""
    known = list(dict.fromkeys(str(c) for c in features))
    problems, owners = [], {}
    if any(not str(name).strip() for name in groups):
        problems.append(GROUP_EMPTY_NAME)
    for name, members in groups.items():
        members = [str(c) for c in members]
        repeated = sorted(c for c, k in Counter(members).items() if k > 1)
        if repeated:
            problems.append(GROUP_REPEATS.format(group=name, columns=_examples(repeated)))
        unknown = [c for c in dict.fromkeys(members) if c not in set(known)]
        if unknown:
            problems.append(GROUP_UNKNOWN_COLUMN.format(
                group=name, columns=_examples(unknown), verb="is" if len(unknown) == 1 else "are",
                found=_examples(known, limit=20)))
        for column in dict.fromkeys(members):
            owners.setdefault(column, []).append(str(name))
    for column, names in owners.items():
        if len(names) > 1:
            problems.append(GROUP_FEATURE_TWICE.format(column=column, count=len(names),
                                                       groups=_examples(names, limit=len(names))))
    return problems


def check_groups(config: Config, features, report: ValidationReport) -> None:
    """``bundle.json``'s ``groups`` against the bundle's feature columns ``features`` (every input's, in order):
    each problem into ``report``, naming the file, the group and the column."""
    for problem in group_problems(config.groups, features):
        report.add(CONFIG_FILE, problem, column="groups")


def default_target(output_names: list[str], target=None, positive_label=None) -> tuple[int, str | None]:
    """(the output explained by default, a problem or None): ``bundle.json``'s ``target`` (an index
    or an output name); else, for a model with several outputs, the class named or numbered by
    ``positive_label`` (softmax ["stay", "churn"] with positive_label "churn" or 1: output 1); else 0."""
    k = len(output_names)
    if target is not None:
        if isinstance(target, str) and target in output_names:
            return output_names.index(target), None
        index = int(target) if isinstance(target, int) or str(target).isdigit() else None
        if index is not None and 0 <= index < k:
            return index, None
        return 0, UNKNOWN_TARGET.format(value=target, names=", ".join(map(repr, output_names)), last=k - 1)
    if positive_label is not None and k > 1:
        if str(positive_label) in output_names:
            return output_names.index(str(positive_label)), None
        number = positive_label if not isinstance(positive_label, bool) else None
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number)
        if isinstance(number, (int, float)) and float(number).is_integer() and 0 <= number < k:
            return int(number), None
    return 0, None


def json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "a text", bool: "true/false",
             int: "a number", float: "a number", type(None): "null"}
    return f"{kinds.get(type(value), type(value).__name__)} ({json.dumps(value)[:60]})"
