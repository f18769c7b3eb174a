"""The checks of the tables' columns and values against ``bundle.json`` and the model: ids,
numbers, missing and infinite values, categories, periods and padded histories. Each problem
names its file, column and rows, and goes to the report with every other one."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np
import pandas as pd

from explain.bundle.config import JSON_UNKNOWN_COLUMN, Config
from explain.bundle.problems import (
    CONFIG_FILE,
    EXAMPLES_SHOWN,
    MISSING_TOKENS,
    Table,
    ValidationReport,
    cell_text,
    column_texts,
    rows_text,
)
from explain.core.text import examples as _examples

NO_FEATURE_COLUMNS = ("{file} has no feature columns (only {columns}). Expected the {role} "
                      "features next to the id column.")
MISSING_COLUMN = ("column '{column}' is missing from {file} (needed as {role}). Columns found: "
                  "{found}. {fix}")
EXTRA_COLUMNS_NOTE = "{file}: column(s) {columns} are not listed in bundle.json '{key}' and were ignored."
NON_NUMERIC = "column '{column}' must hold numbers, but {count} value(s) are not numbers: {where}. {fix}"
DECIMAL_COMMA_FIX = "Write decimals with a point ('12.5', not '12,5') and no thousands separators."
NON_NUMERIC_FIX = "Replace them with numbers (encode categories as 0/1 columns)."
MISSING_VALUES = ("column '{column}' has {count} missing value(s) (empty, NA or NaN): {where}. "
                  "Fill them in (for example with 0 or the column's median) or remove those rows.")
INFINITE_VALUES = "column '{column}' has {count} infinite value(s): {where}. Replace them with finite numbers."
EMPTY_KEYS = "column '{column}' has {count} empty value(s): {where}. Every row needs {what}."
DUPLICATE_IDS = ("{count} customer id(s) appear more than once in column '{column}': {examples}. "
                 "Each customer needs exactly one row in {file}; remove or merge the duplicates.")
IDS_MISSING_FROM = ("{count} customer(s) of {present_file} have no rows in {absent_file}: "
                    "{examples}. Every customer needs one row in the static table and one row per "
                    "period in the temporal table; add the rows or remove these customers.")
WRONG_PERIOD_COUNT = ("{count} customer(s) do not have exactly {expected} periods ({why}): "
                      "{examples}. Give each customer exactly {expected} rows, one per period.")
DUPLICATE_PERIODS = ("{count} (customer, period) pair(s) appear more than once: {examples}. "
                     "Each customer needs one row per period; remove the duplicate rows.")
PERIODS_SORTED_NOTE = ("{file}: the rows of {count} customer(s) were not in period order "
                       "(e.g. {examples}); they were sorted by '{column}'.")
MIXED_PERIODS_NOTE = ("{file}: {count} customer(s) have other period labels than {first}..{last} "
                      "(e.g. {examples}); each customer's periods are aligned by position "
                      "(first to last) and shown as {first}..{last}.")
FEATURE_COUNT_MISMATCH = ("the model's {role} input expects {symbol}={expected} features, but "
                          "{source} gives {given}: {columns}. {fix}")
INPUT_WIDTH = ("input {input!r} expects {expected} feature(s) (shape {shape}), but bundle.json "
               "'inputs' lists {given}: {columns}.")
NOT_CATEGORY_IDS = ("column '{column}' feeds the Embedding of input {input!r} and must hold whole-number "
                    "category ids from 0 to {high}, but {count} value(s) are not: {where}. {fix}")
CATEGORY_IDS_FIX = ("Write the category ids the model was trained with, or put a StringLookup/IntegerLookup "
                    "in the model to read the categories as text.")
PERIODS_PADDED_NOTE = ("{file}: {count} customer(s) have fewer than {expected} periods; their histories "
                       "are padded at the {side} with the mask value of {padded_by}, as the model expects "
                       "('temporal_padding' in bundle.json), and shown as no data.")
NO_PAD_TOKEN = ("input {input!r} has customers with fewer than {expected} periods, but its lookup "
                "layer has no mask token to pad them with. Give each customer {expected} rows.")


def history_array(checked: dict, spec, order: pd.Series, side: str, table: Table,
                   report: ValidationReport) -> np.ndarray | None:
    """Long rows -> (n, T, F) (or (n, T) for ids), customers in static-table order, short
    histories padded at ``side`` with the mask value."""
    n, t_len = len(order), spec.shape[0]
    values = checked["values"]
    position = order.loc[checked["ids"]].to_numpy()
    sort = np.lexsort((checked["period_rank"], position))
    position, values = position[sort], values[sort]
    counts = np.bincount(position, minlength=n)
    index = np.arange(len(position)) - np.repeat(np.cumsum(counts) - counts, counts)  # row within customer
    slot = index + (t_len - counts[position]) if side == "start" else index
    if spec.embedding is not None:  # category ids (an integer input without one is read as numbers)
        pad = 0
        if spec.lookup is not None:
            pad = getattr(spec.lookup, "mask_token", None)
            if pad is None and (counts < t_len).any():
                report.add(table.file, NO_PAD_TOKEN.format(input=spec.key, expected=t_len))
                return None
        out = np.full((n, t_len, values.shape[1]), pad, dtype=values.dtype)
    else:
        dtype = np.float64 if spec.dtype == "float64" else np.float32
        out = np.full((n, t_len, values.shape[1]), spec.mask_value or 0.0, dtype=dtype)
    out[position, slot] = values
    if (counts < t_len).any():
        report.notes.append(PERIODS_PADDED_NOTE.format(
            file=table.file, count=int((counts < t_len).sum()), expected=t_len, side=side,
            padded_by=spec.padded_by))
    return out if len(spec.shape) > 1 else out[..., 0]


def check_static(table: Table | None, config: Config, plan: dict,
                  report: ValidationReport) -> dict | None:
    if table is None:
        return None
    ok = True
    columns = list(table.frame.columns)
    id_col = config.id_column
    if id_col not in columns:
        _missing_column(table, id_col, "the customer id column", config, report)
        ok = False
    label_col = config.label_column
    if label_col is not None and label_col not in columns:
        _missing_column(table, label_col, "the label column ('label_column' in bundle.json)",
                        config, report)
        label_col = None
    specs = [spec for spec in plan["specs"].values() if spec.role == "static"]
    listed = [plan["listed"].get(spec.key) for spec in specs] if specs else [plan["listed"].get("static")]
    listed_all = None if all(x is None for x in listed) else [c for x in listed for c in (x or [])]
    features = _features(table, "static", listed_all,
                         {id_col, config.period_column, config.label_column}, config, report)
    values: dict = {}
    if features is None:  # a listed column is missing (said): the others and the ids are still checked
        _check_present(table, listed_all, specs, report, None)
        ok = False
    elif not specs:  # the model could not be checked: every column as a number
        block = _numeric_block(table, features, report, None)
        ok = ok and block is not None
        values["static"] = block
        plan["features"]["static"] = features
    else:
        widths = [int(np.prod(spec.shape)) for spec in specs]
        if len(features) != sum(widths):
            _count_mismatch(table, "static", "S", sum(widths), features, listed_all is not None, report)
            ok = False
        else:
            start = 0
            for spec, width, own in zip(specs, widths, listed):
                part = features[start:start + width]
                start += width
                if own is not None and len(own) != width:
                    report.add(CONFIG_FILE, INPUT_WIDTH.format(
                        input=spec.key, expected=width, shape=(None, *spec.shape), given=len(own),
                        columns=_examples(own)), column="inputs")
                    ok = False
                plan["features"][spec.key] = part
                block = _input_block(table, part, spec, report, None)
                ok = ok and block is not None
                values[spec.key] = block
    if id_col not in columns:
        return None
    ids = column_texts(table, id_col).to_numpy(dtype=object)
    empty = np.flatnonzero(ids == "")
    if empty.size:
        report.add(table.file, EMPTY_KEYS.format(
            column=id_col, count=empty.size, where=rows_text(table.file, table.is_csv, table.rows[empty]),
            what="a customer id"), column=id_col, rows=table.rows[empty])
        ok = False
    duplicated = pd.Series(ids).duplicated(keep=False).to_numpy() & (ids != "")
    if duplicated.any():
        dup_ids = list(dict.fromkeys(ids[duplicated]))
        examples = [f"{i!r} (rows {', '.join(str(r) for r in table.rows[ids == i][:3])})"
                    for i in dup_ids[:EXAMPLES_SHOWN]]
        report.add(table.file, DUPLICATE_IDS.format(
            count=len(dup_ids), column=id_col, file=table.file,
            examples=_examples(examples, total=len(dup_ids), quote=False)),
            column=id_col, rows=table.rows[duplicated])
        ok = False
    labels = _labels(table, label_col) if label_col is not None else None
    return {"ids": ids, "values": values if ok else None, "features": features, "labels": labels}


def _input_block(table: Table, features: list[str], spec, report: ValidationReport, keys) -> np.ndarray | None:
    """(rows, features) as the model input takes them: floats of its dtype, ids or texts."""
    if spec is None or spec.embedding is None:  # numbers (an integer input without an Embedding too:
        # the engine refuses it with its own words, and check says so up front)
        block = _numeric_block(table, features, report, keys)
        if block is None:
            return None
        return block if spec is not None and spec.dtype == "float64" else block.astype(np.float32)
    labels = None
    if keys is not None:
        def labels(k: int) -> str:
            return f"{cell_text(table.frame[keys[0]].iat[k])}, {cell_text(table.frame[keys[1]].iat[k])}"
    high = int(spec.embedding.input_dim) - 1
    columns, ok = [], True
    for column in features:
        if spec.dtype == "string":
            text = column_texts(table, column).astype(str)
            missing = (text.str.lower().isin(MISSING_TOKENS).to_numpy() if spec.mask_zero is False
                       else np.zeros(len(text), bool))
            if missing.any():
                idx = np.flatnonzero(missing)
                report.add(table.file, MISSING_VALUES.format(
                    column=column, count=idx.size, where=rows_text(table.file, table.is_csv, table.rows[idx])),
                    column=column, rows=table.rows[idx])
                ok = False
            columns.append(text.to_numpy(dtype=object).astype(str))
            continue
        values, ok_column = numeric_column(table, column, report, labels)
        ok = ok and ok_column
        if not ok_column:
            continue
        bad = values != np.round(values)
        if spec.lookup is None:
            bad |= (values < 0) | (values > high)
        if bad.any():
            idx = np.flatnonzero(bad)
            shown = [repr(v) for v in values[idx[:EXAMPLES_SHOWN]]]
            report.add(table.file, NOT_CATEGORY_IDS.format(
                column=column, input=spec.key, high=high, count=idx.size, fix=CATEGORY_IDS_FIX,
                where=rows_text(table.file, table.is_csv, table.rows[idx], shown)), column=column, rows=table.rows[idx])
            ok = False
            continue
        columns.append(values.astype(np.int64 if spec.dtype == "int64" else np.int32))
    if not ok:
        return None
    return np.stack(columns, axis=1)


def _check_present(table: Table, listed, specs, report: ValidationReport, keys) -> None:
    """Every problem of the listed feature columns that are there (when one is missing), so that
    one pass reports them all; numbers only (which column feeds which embedding is unknown then)."""
    if all(spec.kind == "numeric" for spec in specs):
        _numeric_block(table, [c for c in listed or [] if c in table.frame.columns], report, keys)


def check_temporal(table: Table | None, config: Config, plan: dict, key: str,
                    report: ValidationReport) -> dict | None:
    if table is None:
        return None
    spec = plan["specs"].get(key)
    listed = plan["listed"].get(key)
    width = None if spec is None else (spec.shape[1] if len(spec.shape) > 1 else 1)
    ok = True
    columns = list(table.frame.columns)
    id_col, period_col = config.id_column, config.period_column
    for key_col, role in ((id_col, "the customer id column"), (period_col, "the period column")):
        if key_col not in columns:
            _missing_column(table, key_col, role, config, report)
            ok = False
    features = _features(table, "temporal", listed,
                         {id_col, period_col, config.label_column}, config, report)
    if features is None:  # a listed column is missing (said): the others and the keys are still checked
        _check_present(table, listed, [spec] if spec is not None else [], report,
                       (id_col, period_col) if ok else None)
        values, ok = None, False
    else:
        plan["features"][key] = features
        values = _input_block(table, features, spec, report, (id_col, period_col) if ok else None)
        ok = ok and values is not None
        if width is not None and len(features) != width:
            _count_mismatch(table, "temporal", "F", width, features, listed is not None, report)
            ok = False
    if id_col not in columns or period_col not in columns:
        return None

    ids = column_texts(table, id_col).to_numpy(dtype=object)
    periods = column_texts(table, period_col).to_numpy(dtype=object)
    for key_col, keys, what in ((id_col, ids, "a customer id"), (period_col, periods, "a period")):
        empty = np.flatnonzero(keys == "")
        if empty.size:
            report.add(table.file, EMPTY_KEYS.format(
                column=key_col, count=empty.size, what=what,
                where=rows_text(table.file, table.is_csv, table.rows[empty])),
                column=key_col, rows=table.rows[empty])
            ok = False

    pairs = pd.DataFrame({"id": ids, "period": periods})
    duplicated = pairs.duplicated(keep=False).to_numpy()
    if duplicated.any():
        groups = pairs[duplicated].groupby(["id", "period"], sort=False).groups
        examples = [f"{i!r} {p!r} (rows {', '.join(str(table.rows[k]) for k in list(rows)[:3])})"
                    for (i, p), rows in list(groups.items())[:EXAMPLES_SHOWN]]
        report.add(table.file, DUPLICATE_PERIODS.format(
            count=len(groups), examples=_examples(examples, total=len(groups), quote=False)),
            column=period_col, rows=table.rows[duplicated])
        ok = False

    rank = period_ranks(periods)
    pairs["rank"] = rank
    # periods per customer (nunique on object columns runs in Python per group: 0.1 s for 3,000 customers);
    # the same count as nunique because a period is never NaN here (column_texts: a missing cell is "")
    per_customer = pairs.drop_duplicates(["id", "period"]).groupby("id", sort=False).size()
    if spec is not None:
        expected, why = spec.shape[0], f"the model's temporal input {spec.key!r} has T={spec.shape[0]}"
    else:
        expected = int(per_customer.mode().iloc[0]) if len(per_customer) else 0
        why = "the most common count; the model could not be checked"
    if spec is not None and spec.padded_by:  # a masked history may be shorter: padded to T
        wrong = per_customer[(per_customer > expected) | (per_customer < 1)]
        why += f"; shorter histories are padded ({spec.padded_by}), longer ones are not allowed"
    else:
        wrong = per_customer[per_customer != expected]
    if len(wrong):
        examples = [f"{i!r} has {k}" for i, k in list(wrong.items())[:EXAMPLES_SHOWN]]
        bad_rows = table.rows[pairs["id"].isin(wrong.index).to_numpy()]
        report.add(table.file, WRONG_PERIOD_COUNT.format(
            count=len(wrong), expected=expected, why=why,
            examples=_examples(examples, total=len(wrong), quote=False)),
            column=period_col, rows=bad_rows)
        ok = False

    codes = pd.factorize(pairs["id"])[0]
    by_customer = np.argsort(codes, kind="stable")          # file order within a customer
    falls = (np.diff(codes[by_customer]) == 0) & (np.diff(rank[by_customer]) < 0)
    if falls.any():
        names = list(dict.fromkeys(ids[by_customer[1:][falls]]))
        report.notes.append(PERIODS_SORTED_NOTE.format(
            file=table.file, count=len(names), examples=_examples(names), column=period_col))

    if not ok:
        return {"ids": ids, "values": None, "features": features}
    # one label sequence per customer, in period order; the most common one names the periods
    ordered = pairs.sort_values(["id", "rank"], kind="stable")
    sequences = ordered.groupby("id", sort=False)["period"].agg(tuple)
    full = sequences[sequences.map(len) == expected] if spec is not None else sequences
    if len(full) == 0 and len(sequences):  # every history is short: name the periods by position
        full = pd.Series([tuple(f"t{i + 1}" for i in range(expected))])
    common = Counter(full.tolist()).most_common(1)[0][0] if len(full) else ()

    def aligned(seq):  # the part of the common labels a (padded) history occupies
        if len(seq) == len(common):
            return common
        return common[len(common) - len(seq):] if config.temporal_padding == "start" else common[:len(seq)]

    others = sequences[sequences.map(lambda s: s != aligned(s))]
    if len(others):
        report.notes.append(MIXED_PERIODS_NOTE.format(
            file=table.file, count=len(others), first=common[0], last=common[-1],
            examples=_examples([f"{i}: {s[0]}..{s[-1]}" for i, s in others.items()], quote=False)))
    return {"ids": ids, "values": values, "features": features, "period_rank": rank,
            "periods": list(common)}


def check_same_customers(static: dict, temporal: dict, static_table: Table,
                          temporal_table: Table, id_column: str,
                          report: ValidationReport) -> None:
    static_ids, temporal_ids = set(static["ids"]), set(temporal["ids"])
    only_static = [i for i in dict.fromkeys(static["ids"]) if i and i not in temporal_ids]
    only_temporal = [i for i in dict.fromkeys(temporal["ids"]) if i and i not in static_ids]
    for lacking, present, absent in ((only_static, static_table, temporal_table),
                                     (only_temporal, temporal_table, static_table)):
        if lacking:
            report.add(absent.file, IDS_MISSING_FROM.format(
                count=len(lacking), present_file=present.file, absent_file=absent.file,
                examples=_examples(lacking)), column=id_column)


def check_config_columns(config: Config, static_table: Table | None,
                          temporal_table: Table | None, report: ValidationReport,
                          more_tables: Sequence[Table] = ()) -> None:
    if not config.present or static_table is None or temporal_table is None:
        return
    known = set(static_table.frame.columns) | set(temporal_table.frame.columns)
    for table in more_tables:
        known |= set(table.frame.columns)
    for key in ("display_names", "units"):
        unknown = [c for c in getattr(config, key) if c not in known]
        if unknown:
            report.add(CONFIG_FILE, JSON_UNKNOWN_COLUMN.format(
                file=CONFIG_FILE, key=key, columns=_examples(unknown),
                found=_examples(sorted(known), limit=20)), column=key)


def _features(table: Table, kind: str, listed: list[str] | None, reserved: set,
              config: Config, report: ValidationReport) -> list[str] | None:
    columns = list(table.frame.columns)
    if listed is None:
        features = [c for c in columns if c not in reserved]
        if not features:
            report.add(table.file, NO_FEATURE_COLUMNS.format(
                file=table.file, columns=_examples(columns), role=kind))
            return None
        return features
    missing = [c for c in listed if c not in columns]
    for column in missing:
        _missing_column(table, column, f"a {kind} feature listed in bundle.json "
                        f"'{kind}_features'", config, report)
    extra = [c for c in columns if c not in listed and c not in reserved]
    if extra:
        report.notes.append(EXTRA_COLUMNS_NOTE.format(
            file=table.file, columns=_examples(extra), key=f"{kind}_features"))
    return None if missing else list(listed)


def _missing_column(table: Table, column: str, role: str, config: Config,
                    report: ValidationReport) -> None:
    columns = list(table.frame.columns)
    close = [c for c in columns if c.strip().lower() == column.strip().lower()]
    if "bundle.json" in role:
        fix = f"Add the column to {table.file} or fix its name in bundle.json."
    elif config.label_column == column:
        fix = "Add the column or fix 'label_column' in bundle.json."
    else:
        key = "id_column" if column == config.id_column else "period_column"
        fix = (f"Rename your {role.removeprefix('the ')} to {column!r}, or name it in "
               f"bundle.json as \"{key}\".")
    if close:
        fix = f"Column {close[0]!r} differs only in case or spaces: rename it to {column!r}. " + fix
    report.add(table.file, MISSING_COLUMN.format(
        column=column, file=table.file, role=role, found=_examples(columns, limit=20), fix=fix),
        column=column)


def _count_mismatch(table: Table, kind: str, symbol: str, expected: int, features: list[str],
                    listed: bool, report: ValidationReport) -> None:
    if listed:
        source = f"bundle.json '{kind}_features'"
        fix = f"List exactly {expected} columns in '{kind}_features', in the model's input order."
    else:
        source = f"{table.file} (every column but the id{', period' if kind == 'temporal' else ''}" \
                 f" and label columns)"
        fix = (f"If some columns are not model features (a label, a name), list the {expected} "
               f"features in bundle.json '{kind}_features' (and the label in 'label_column').")
    report.add(table.file, FEATURE_COUNT_MISMATCH.format(
        role=kind, symbol=symbol, expected=expected, source=source, given=len(features),
        columns=_examples(features, limit=20), fix=fix))


def _numeric_block(table: Table, features: list[str], report: ValidationReport,
                   keys: tuple[str, str] | None) -> np.ndarray | None:
    """(rows, features) float64, or None after reporting every bad cell, column by column."""
    labels = None
    if keys is not None:  # (customer, period) of a row, computed only for rows shown
        def labels(k: int) -> str:
            return f"{cell_text(table.frame[keys[0]].iat[k])}, {cell_text(table.frame[keys[1]].iat[k])}"
    block, ok = np.empty((len(table.frame), len(features))), True
    for j, column in enumerate(features):
        values, ok_column = numeric_column(table, column, report, labels)
        block[:, j] = values
        ok = ok and ok_column
    return block if ok else None


def numeric_column(table: Table, column: str, report: ValidationReport,
                    labels) -> tuple[np.ndarray, bool]:
    series = table.frame[column]
    ok = True

    def where(mask, values=None):
        """(row positions, 'rows 3 (C01, 2025-02: 'abc'), ... of file (convention)')."""
        idx = np.flatnonzero(mask)
        first = idx[:EXAMPLES_SHOWN]
        shown = [""] * len(first)
        if values is not None:
            shown = [repr(v) for v in np.asarray(values, dtype=object)[first]]
        if labels is not None:
            shown = [f"{labels(k)}: {v}" if v else labels(k) for k, v in zip(first, shown)]
        return idx, rows_text(table.file, table.is_csv, table.rows[idx], shown)

    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
    else:
        text = column_texts(table, column)
        missing = text.str.lower().isin(MISSING_TOKENS).to_numpy()
        values = pd.to_numeric(text.mask(missing, "nan"), errors="coerce").to_numpy(np.float64)
        bad = np.isnan(values) & ~missing
        if bad.any():
            idx, text_where = where(bad, text.to_numpy(dtype=object))
            comma = text.iloc[idx].str.fullmatch(r"[-+]?\d+(\.\d{3})*,\d+").any()
            report.add(table.file, NON_NUMERIC.format(
                column=column, count=idx.size, where=text_where,
                fix=DECIMAL_COMMA_FIX if comma else NON_NUMERIC_FIX),
                column=column, rows=table.rows[idx])
            ok = False
    if missing.any():
        idx, text_where = where(missing)
        report.add(table.file, MISSING_VALUES.format(column=column, count=idx.size, where=text_where),
                   column=column, rows=table.rows[idx])
        ok = False
    infinite = np.isinf(values)
    if infinite.any():
        idx, text_where = where(infinite, values)
        report.add(table.file, INFINITE_VALUES.format(column=column, count=idx.size, where=text_where),
                   column=column, rows=table.rows[idx])
        ok = False
    return values, ok


def _labels(table: Table, column: str) -> np.ndarray:
    """The label column: numbers when every non-missing cell is one, else text."""
    series = table.frame[column]
    if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        values = series.to_numpy()
    else:
        text = column_texts(table, column)
        missing = text.str.lower().isin(MISSING_TOKENS)
        numbers = pd.to_numeric(text.mask(missing, "nan"), errors="coerce")
        if numbers[~missing].notna().all():
            values = numbers.to_numpy(np.float64)
        else:
            return text.to_numpy(dtype=object)
    values = np.asarray(values)
    if values.dtype.kind == "f" and np.all(np.isfinite(values)) and np.all(values == np.round(values)):
        return values.astype(np.int64)
    return values


def period_ranks(periods: np.ndarray) -> np.ndarray:
    """Sort key of each period label: numeric if all are numbers, else dates, else text."""
    unique = pd.unique(pd.Series(periods, dtype=object))
    key: Any = None
    numbers = pd.to_numeric(pd.Series(unique), errors="coerce")
    if len(unique) and numbers.notna().all():
        key = numbers.to_numpy()
    else:
        try:
            key = pd.to_datetime(pd.Series(unique), format="mixed").to_numpy()
        except (ValueError, TypeError):
            key = np.asarray(unique, dtype=str)
    order = np.argsort(key, kind="stable")
    rank_of = {unique[k]: r for r, k in enumerate(order)}
    return pd.Series(periods, dtype=object).map(rank_of).to_numpy(dtype=np.int64)
