"""The checks of the tables' columns and values against ``bundle.json`` and the model: ids,
numbers, missing and infinite values, categories, periods and padded histories. Each problem
names its file, column and rows, and goes to the report with every other one.

Every check is vectorised over a table's rows: cells come from :class:`~explain.bundle.tables.Table`
one column at a time (Arrow), ids and periods as integer codes of their distinct texts; a long table
is put in order with one sort of (customer, period rank), and its feature columns go straight into the
``(customers, T, F)`` array, a few columns at a time. Python sees distinct ids and periods, and the
cells of columns that have a problem, never every row.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from explain.bundle.config import JSON_UNKNOWN_COLUMN, Config
from explain.bundle.problems import (
    CONFIG_FILE,
    EXAMPLES_SHOWN,
    MISSING_TOKENS,
    ValidationReport,
    rows_text,
)
from explain.bundle.tables import Table
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

COLUMNS_AT_ONCE = 8  # feature columns of a long table converted before they are written into the history array


def history_array(checked: dict, spec, static_ids: np.ndarray, side: str, table: Table,
                  report: ValidationReport) -> np.ndarray | None:
    """The checked history ``(n, T, F)`` (or ``(n, T)`` for ids) with its customers in the static table's
    order; says which histories are padded (a note), or that they cannot be (a problem: None)."""
    t_len, counts = spec.shape[0], checked["counts"]
    short = counts < t_len
    if spec.embedding is not None and spec.lookup is not None and short.any() \
            and getattr(spec.lookup, "mask_token", None) is None:
        report.add(table.file, NO_PAD_TOKEN.format(input=spec.key, expected=t_len))
        return None
    out = checked["values"]
    index = pd.Index(checked["ids"]).get_indexer(static_ids)  # the temporal row of each static customer
    if not np.array_equal(index, np.arange(len(index))):
        out = out[index]
    if short.any():
        report.notes.append(PERIODS_PADDED_NOTE.format(
            file=table.file, count=int(short.sum()), expected=t_len, side=side, padded_by=spec.padded_by))
    return out if len(spec.shape) > 1 else out[..., 0]


def check_static(table: Table | None, config: Config, plan: dict,
                 report: ValidationReport) -> dict | None:
    """The static table checked: {"ids", "values" (by input key; None after a problem), "features", "labels"},
    or None (no table, or no id column). Every problem goes to ``report``; the static inputs' columns go to
    ``plan["features"]``."""
    if table is None:
        return None
    id_col, label_col = config.id_column, config.label_column
    ok = id_col in table.columns
    if not ok:
        _missing_column(table, id_col, "the customer id column", config, report)
    if label_col is not None and label_col not in table.columns:
        _missing_column(table, label_col, "the label column ('label_column' in bundle.json)",
                        config, report)
        label_col = None
    values, features, values_ok = _static_values(table, config, plan, report)
    if id_col not in table.columns:
        return None
    ids, ids_ok = _static_ids(table, id_col, report)
    labels = _labels(table, label_col) if label_col is not None else None
    return {"ids": ids, "values": values if ok and values_ok and ids_ok else None, "features": features,
            "labels": labels}


def _static_values(table: Table, config: Config, plan: dict, report: ValidationReport
                   ) -> tuple[dict, list[str] | None, bool]:
    """(each static input's block by key, the table's feature columns, whether every value was good): the
    columns split between the model's static inputs in their order, each one's width checked."""
    specs = [spec for spec in plan["specs"].values() if spec.role == "static"]
    listed = [plan["listed"].get(spec.key) for spec in specs] if specs else [plan["listed"].get("static")]
    listed_all = None if all(x is None for x in listed) else [c for x in listed for c in (x or [])]
    features = _features(table, "static", listed_all,
                         {config.id_column, config.period_column, config.label_column}, config, report)
    values: dict = {}
    if features is None:  # a listed column is missing (said): the others and the ids are still checked
        _check_present(table, listed_all, specs, report, None)
        return values, features, False
    if not specs:  # the model could not be checked: every column as a number
        values["static"] = _numeric_block(table, features, report, None)
        plan["features"]["static"] = features
        return values, features, values["static"] is not None
    widths = [int(np.prod(spec.shape)) for spec in specs]
    if len(features) != sum(widths):
        _count_mismatch(table, "static", features, report, expected=sum(widths), listed=listed_all is not None)
        return values, features, False
    ok, start = True, 0
    for spec, width, own in zip(specs, widths, listed):
        part = features[start:start + width]
        start += width
        if own is not None and len(own) != width:
            report.add(CONFIG_FILE, INPUT_WIDTH.format(
                input=spec.key, expected=width, shape=(None, *spec.shape), given=len(own),
                columns=_examples(own)), column="inputs")
            ok = False
        plan["features"][spec.key] = part
        values[spec.key] = _input_block(table, part, spec, report, None)
        ok = ok and values[spec.key] is not None
    return values, features, ok


def _static_ids(table: Table, id_col: str, report: ValidationReport) -> tuple[np.ndarray, bool]:
    """(the customer ids, row by row; whether none is empty or repeated)."""
    codes, texts = table.keys(id_col)
    ids = texts[codes]
    ok = True
    empty = np.flatnonzero(ids == "")
    if empty.size:
        report.add(table.file, EMPTY_KEYS.format(
            column=id_col, count=empty.size, where=rows_text(table.file, table.is_csv, table.rows[empty]),
            what="a customer id"), column=id_col, rows=table.rows[empty])
        ok = False
    duplicated = (np.bincount(codes, minlength=len(texts)) > 1)[codes] & (ids != "")
    if duplicated.any():
        dup_ids = list(dict.fromkeys(ids[duplicated]))
        examples = [f"{i!r} (rows {', '.join(str(r) for r in table.rows[ids == i][:3])})"
                    for i in dup_ids[:EXAMPLES_SHOWN]]
        report.add(table.file, DUPLICATE_IDS.format(
            count=len(dup_ids), column=id_col, file=table.file,
            examples=_examples(examples, total=len(dup_ids), quote=False)),
            column=id_col, rows=table.rows[duplicated])
        ok = False
    return ids, ok


def _input_block(table: Table, features: list[str], spec, report: ValidationReport, keys) -> np.ndarray | None:
    """(rows, features) as the model input takes them: floats of its dtype, ids or texts."""
    columns = [_input_column(table, column, spec, report, _row_labels(table, keys)) for column in features]
    if any(column is None for column in columns):
        return None
    return np.stack(columns, axis=1)


def _input_column(table: Table, column: str, spec, report: ValidationReport, labels) -> np.ndarray | None:
    """One column as the model input takes it (floats of its dtype, category ids or texts), or None after
    reporting every bad cell."""
    if spec is None or spec.embedding is None:  # numbers (an integer input without an Embedding too:
        # the engine refuses it with its own words, and check says so up front)
        values, ok = numeric_column(table, column, report, labels)
        if not ok:
            return None
        return values if spec is not None and spec.dtype == "float64" else values.astype(np.float32)
    high = int(spec.embedding.input_dim) - 1
    if spec.dtype == "string":
        text = table.texts(column).astype(str)
        missing = (pd.Series(text, dtype=object).str.lower().isin(MISSING_TOKENS).to_numpy()
                   if spec.mask_zero is False else np.zeros(len(text), bool))
        if missing.any():
            idx = np.flatnonzero(missing)
            report.add(table.file, MISSING_VALUES.format(
                column=column, count=idx.size, where=rows_text(table.file, table.is_csv, table.rows[idx])),
                column=column, rows=table.rows[idx])
            return None
        return text
    values, ok = numeric_column(table, column, report, labels)
    if not ok:
        return None
    bad = values != np.round(values)
    if spec.lookup is None:
        bad |= (values < 0) | (values > high)
    if bad.any():
        idx = np.flatnonzero(bad)
        shown = [repr(v) for v in values[idx[:EXAMPLES_SHOWN]]]
        report.add(table.file, NOT_CATEGORY_IDS.format(
            column=column, input=spec.key, high=high, count=idx.size, fix=CATEGORY_IDS_FIX,
            where=rows_text(table.file, table.is_csv, table.rows[idx], shown)), column=column, rows=table.rows[idx])
        return None
    return values.astype(np.int64 if spec.dtype == "int64" else np.int32)


def _row_labels(table: Table, keys):
    """(row position -> 'customer, period') for messages, or None without key columns."""
    if keys is None:
        return None
    return lambda k: f"{table.text(keys[0], k)}, {table.text(keys[1], k)}"


def _check_present(table: Table, listed, specs, report: ValidationReport, keys) -> None:
    """Every problem of the listed feature columns that are there (when one is missing), so that
    one pass reports them all; numbers only (which column feeds which embedding is unknown then)."""
    if all(spec.kind == "numeric" for spec in specs):
        _numeric_block(table, [c for c in listed or [] if c in table.columns], report, keys)


class _LongKeys:
    """The id and period columns of a long table as codes, put in (customer, period) order by one sort:
    what is wrong with them (empty, duplicated, too many or too few periods, unsorted), and where each
    row goes in the ``(customers, T, F)`` array. Customers are numbered in order of first appearance."""

    def __init__(self, table: Table, id_col: str, period_col: str, spec) -> None:
        self.table, self.spec = table, spec
        self.id_codes, self.ids = table.keys(id_col)              # (rows,), (customers,)
        period_codes, self.period_texts = table.keys(period_col)  # (rows,), (P,)
        rank = period_ranks(self.period_texts)                    # (P,) sort key of each period label
        key = self.id_codes.astype(np.int64) * len(self.period_texts) + rank[period_codes]  # (rows,)
        self.order = None if np.all(key[1:] >= key[:-1]) else np.argsort(key, kind="stable")  # None: in order
        if self.order is not None:
            key = key[self.order]
        repeat = key[1:] == key[:-1]                              # a (customer, period) seen on the row before
        del key  # (rows,) int64: memory for the feature columns
        self.period_sorted = period_codes if self.order is None else period_codes[self.order]
        self.customer_sorted = self.id_codes if self.order is None else self.id_codes[self.order]
        duplicated = np.zeros(len(self.id_codes), bool)
        duplicated[1:] |= repeat
        duplicated[:-1] |= repeat
        self.duplicated = duplicated if self.order is None else _unsort(duplicated, self.order)
        self.group_starts = np.flatnonzero(duplicated & ~np.concatenate(([False], repeat)))  # sorted positions
        distinct = np.concatenate(([True], ~repeat))
        self.counts = np.bincount(self.customer_sorted[distinct], minlength=len(self.ids))  # periods per customer
        self.starts = np.cumsum(self.counts) - self.counts        # first sorted row of each customer
        self.unsorted: list[str] = []
        if self.order is not None:
            fell = (self.customer_sorted[1:] == self.customer_sorted[:-1]) & (self.order[1:] < self.order[:-1])
            self.unsorted = self.ids[np.unique(self.customer_sorted[1:][fell])].tolist()

    def report(self, id_col: str, period_col: str, report: ValidationReport) -> bool:
        """Empty keys, duplicated (customer, period) pairs, customers with a wrong number of periods
        (problems) and unsorted rows (a note); True when there is no problem."""
        table, ok = self.table, True
        for key_col, codes, texts, what in ((id_col, self.id_codes, self.ids, "a customer id"),
                                            (period_col, *self.table.keys(period_col), "a period")):
            empty = np.flatnonzero(codes == _code_of(texts, ""))
            if empty.size:
                report.add(table.file, EMPTY_KEYS.format(
                    column=key_col, count=empty.size, what=what,
                    where=rows_text(table.file, table.is_csv, table.rows[empty])),
                    column=key_col, rows=table.rows[empty])
                ok = False
        if self.group_starts.size:
            order = np.arange(len(self.id_codes)) if self.order is None else self.order
            first_rows = order[self.group_starts]                 # each pair's first row (the sort is stable)
            shown = self.group_starts[np.argsort(first_rows, kind="stable")[:EXAMPLES_SHOWN]]
            examples = [f"{self.ids[self.customer_sorted[s]]!r} {self.period_texts[self.period_sorted[s]]!r} "
                        f"(rows {', '.join(str(table.rows[k]) for k in order[s:s + 3][self._same_pair(s)])})"
                        for s in shown]
            count = self.group_starts.size
            report.add(table.file, DUPLICATE_PERIODS.format(
                count=count, examples=_examples(examples, total=count, quote=False)),
                column=period_col, rows=table.rows[self.duplicated])
            ok = False
        spec = self.spec
        if spec is not None:
            self.expected, why = spec.shape[0], f"the model's temporal input {spec.key!r} has T={spec.shape[0]}"
        else:
            values, times = np.unique(self.counts, return_counts=True)
            self.expected = int(values[np.argmax(times)]) if len(values) else 0
            why = "the most common count; the model could not be checked"
        if spec is not None and spec.padded_by:  # a masked history may be shorter: padded to T
            wrong = (self.counts > self.expected) | (self.counts < 1)
            why += f"; shorter histories are padded ({spec.padded_by}), longer ones are not allowed"
        else:
            wrong = self.counts != self.expected
        if wrong.any():
            which = np.flatnonzero(wrong)
            examples = [f"{self.ids[c]!r} has {self.counts[c]}" for c in which[:EXAMPLES_SHOWN]]
            report.add(table.file, WRONG_PERIOD_COUNT.format(
                count=which.size, expected=self.expected, why=why,
                examples=_examples(examples, total=which.size, quote=False)),
                column=period_col, rows=table.rows[wrong[self.id_codes]])
            ok = False
        if self.unsorted:
            report.notes.append(PERIODS_SORTED_NOTE.format(
                file=table.file, count=len(self.unsorted), examples=_examples(self.unsorted), column=period_col))
        return ok

    def _same_pair(self, s: int) -> np.ndarray:
        """Which of the (up to 3) sorted rows from ``s`` on hold the same (customer, period) as row ``s``."""
        end = min(s + 3, len(self.customer_sorted))
        return ((self.customer_sorted[s:end] == self.customer_sorted[s])
                & (self.period_sorted[s:end] == self.period_sorted[s]))

    def slots(self, t_len: int, side: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(customer, period slot) of each sorted row in a (customers, t_len) grid, histories shorter
        than t_len padded at ``side``; None when every customer fills the grid in file order."""
        if self.order is None and np.all(self.counts == t_len):
            return None
        within = np.arange(len(self.customer_sorted)) - self.starts[self.customer_sorted]
        if side == "start":
            within += t_len - self.counts[self.customer_sorted]
        return self.customer_sorted, within

    def period_labels(self, padding: str, report: ValidationReport) -> list[str]:
        """The period labels of the array: the most common sequence of the histories that have every period
        (ties: the one of the first customer by id); a note names the customers whose labels differ."""
        t_len = self.expected
        full = self.counts == t_len if self.spec is not None else np.ones(len(self.counts), bool)
        rows = full[self.customer_sorted]
        sequences = self.period_sorted[rows].reshape(-1, t_len) if t_len else np.zeros((0, 0), np.int64)
        if len(sequences) == 0:  # every history is short: name the periods by position
            labels = [f"t{i + 1}" for i in range(t_len)]
            known = {text: code for code, text in enumerate(self.period_texts)}
            common = np.asarray([known.get(label, -1) for label in labels], dtype=np.int64)
        else:
            common = sequences[0]
            if not np.all(sequences == common):
                distinct, which, times = np.unique(sequences, axis=0, return_inverse=True, return_counts=True)
                best = np.flatnonzero(times == times.max())
                if len(best) > 1:  # the sequence of the first customer in id order, as Counter.most_common
                    id_rank = np.empty(len(self.ids), np.int64)
                    id_rank[np.argsort(self.ids.astype(str), kind="stable")] = np.arange(len(self.ids))
                    first = np.full(len(distinct), np.iinfo(np.int64).max)
                    np.minimum.at(first, which.ravel(), id_rank[np.flatnonzero(full)])
                    best = best[np.argsort(first[best], kind="stable")]
                common = distinct[best[0]]
            labels = self.period_texts[common].tolist()
        within = np.arange(len(self.customer_sorted)) - self.starts[self.customer_sorted]
        if padding == "start":
            within += len(common) - self.counts[self.customer_sorted]
        differ = np.unique(self.customer_sorted[self.period_sorted != common[within]])
        if differ.size:
            differ = differ[np.argsort(self.ids[differ].astype(str), kind="stable")]
            first, last = self.period_texts[self.period_sorted[self.starts[differ]]], \
                self.period_texts[self.period_sorted[self.starts[differ] + self.counts[differ] - 1]]
            shown = [f"{self.ids[c]}: {a}..{b}" for c, a, b in
                     zip(differ[:EXAMPLES_SHOWN], first[:EXAMPLES_SHOWN], last[:EXAMPLES_SHOWN])]
            report.notes.append(MIXED_PERIODS_NOTE.format(
                file=self.table.file, count=differ.size, first=labels[0], last=labels[-1],
                examples=_examples(shown, total=differ.size, quote=False)))
        return labels

    def history(self, table: Table, features: list[str], spec, side: str, report: ValidationReport,
                labels) -> np.ndarray | None:
        """Every feature column checked and written into (customers, T, F) in period order, a few columns
        at a time; None when a column has a problem (every column is still checked)."""
        t_len, width = spec.shape[0], len(features)
        slots = self.slots(t_len, side)
        short = bool(np.any(self.counts < t_len))
        numeric = spec.embedding is None
        dtype = np.float64 if spec.dtype == "float64" else np.float32
        group = COLUMNS_AT_ONCE if numeric else width  # ids or texts: one block, one width for every column
        out, ok = None, True
        for start in range(0, width, group):
            names = features[start:start + group]
            if numeric:  # each column converted straight into its row of the block: (g, rows)
                block = np.empty((len(names), len(self.id_codes)), dtype)
                for j, column in enumerate(names):
                    values, good = numeric_column(table, column, report, labels)
                    ok = ok and good
                    if ok:
                        block[j] = values
            else:
                columns = [_input_column(table, column, spec, report, labels) for column in names]
                ok = ok and all(column is not None for column in columns)
                block = np.stack(columns) if ok else None
            pa.default_memory_pool().release_unused()  # the Arrow columns just read: not kept for later reads
            if not ok:
                continue
            if out is None:
                pad = spec.mask_value or 0.0
                if not numeric:
                    pad = 0 if spec.lookup is None else getattr(spec.lookup, "mask_token", None)
                    pad = 0 if pad is None else pad               # no mask token: history_array refuses short ones
                shape = (len(self.ids), t_len, width)
                out = np.full(shape, pad, dtype=block.dtype) if short else np.empty(shape, dtype=block.dtype)
            end = start + len(block)
            if slots is None:   # the rows are the grid already: (g, customers * T) -> (customers, T, g)
                out[:, :, start:end] = block.T.reshape(len(self.ids), t_len, -1)
            else:
                out[slots[0], slots[1], start:end] = (block if self.order is None else block[:, self.order]).T
        return out if ok else None


def _unsort(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``values`` given in sorted order back in file order."""
    out = np.empty_like(values)
    out[order] = values
    return out


def _code_of(texts: np.ndarray, text: str) -> int:
    found = np.flatnonzero(texts == text)
    return int(found[0]) if found.size else -1


def check_temporal(table: Table | None, config: Config, plan: dict, key: str,
                   report: ValidationReport) -> dict | None:
    if table is None:
        return None
    spec = plan["specs"].get(key)
    listed = plan["listed"].get(key)
    width = None if spec is None else (spec.shape[1] if len(spec.shape) > 1 else 1)
    ok = True
    columns = table.columns
    id_col, period_col = config.id_column, config.period_column
    for key_col, role in ((id_col, "the customer id column"), (period_col, "the period column")):
        if key_col not in columns:
            _missing_column(table, key_col, role, config, report)
            ok = False
    keys = _LongKeys(table, id_col, period_col, spec) if ok else None
    # the values go straight into the history array when its layout is known (keys without problems)
    layout = (keys is not None and spec is not None and not keys.group_starts.size
              and not np.any(keys.counts > spec.shape[0]) and not np.any(keys.counts < 1)
              and (spec.padded_by or np.all(keys.counts == spec.shape[0])))
    features = _features(table, "temporal", listed,
                         {id_col, period_col, config.label_column}, config, report)
    values = None
    if features is None:  # a listed column is missing (said): the others and the keys are still checked
        _check_present(table, listed, [spec] if spec is not None else [], report,
                       (id_col, period_col) if ok else None)
        ok = False
    else:
        plan["features"][key] = features
        labels = _row_labels(table, (id_col, period_col) if ok else None)
        if layout and len(features) == width:
            values = keys.history(table, features, spec, config.temporal_padding, report, labels)
            ok = ok and values is not None
        else:  # every column checked, none kept
            checked = [_input_column(table, column, spec, report, labels) is not None for column in features]
            ok = ok and all(checked)
        if width is not None and len(features) != width:
            _count_mismatch(table, "temporal", features, report, expected=width, listed=listed is not None)
            ok = False
    if keys is None:
        return None
    ok = keys.report(id_col, period_col, report) and ok
    if not ok:
        return {"ids": keys.ids, "values": None, "features": features}
    periods = keys.period_labels(config.temporal_padding, report)
    return {"ids": keys.ids, "values": values, "features": features, "periods": periods, "counts": keys.counts}


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
    known = set(static_table.columns) | set(temporal_table.columns)
    for table in more_tables:
        known |= set(table.columns)
    for key in ("display_names", "units"):
        unknown = [c for c in getattr(config, key) if c not in known]
        if unknown:
            report.add(CONFIG_FILE, JSON_UNKNOWN_COLUMN.format(
                file=CONFIG_FILE, key=key, columns=_examples(unknown),
                found=_examples(sorted(known), limit=20)), column=key)


def _features(table: Table, kind: str, listed: list[str] | None, reserved: set,
              config: Config, report: ValidationReport) -> list[str] | None:
    columns = table.columns
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
    columns = table.columns
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


def _count_mismatch(table: Table, kind: str, features: list[str], report: ValidationReport, *, expected: int,
                    listed: bool) -> None:
    """The table's feature columns are not as many as the model's input reads (``kind``: static or temporal);
    ``listed``: whether bundle.json listed them."""
    symbol = "S" if kind == "static" else "F"
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
    labels = _row_labels(table, keys)
    block, ok = np.empty((len(table), len(features))), True
    for j, column in enumerate(features):
        values, ok_column = numeric_column(table, column, report, labels)
        block[:, j] = values
        ok = ok and ok_column
    return block if ok else None


def _numbers(column: pa.ChunkedArray) -> np.ndarray | None:
    """float64 of a column of numbers (NaN where missing), or of text cells that all read as finite-or-infinite
    numbers as they are (pyarrow reads a subset of what pandas reads, and no spaces around them); None when
    the cells must be read one by one as text."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or (
            pa.types.is_boolean(kind) and column.null_count == 0):
        return column.cast(pa.float64(), safe=False).to_numpy()   # a null becomes NaN: missing
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        try:
            numbers = column.cast(pa.float64())
        except pa.ArrowException:
            return None
        if numbers.null_count == 0:
            values = numbers.to_numpy()
            if not np.isnan(values).any():
                return values
    return None


def numeric_column(table: Table, column: str, report: ValidationReport,
                   labels) -> tuple[np.ndarray, bool]:
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

    cells = table.column(column)
    values = _numbers(cells)
    if values is not None:
        missing = np.isnan(values)
    else:
        text = pd.Series(table.texts(column, keep=False), dtype=object)
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
    cells = table.column(column)
    kind = cells.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or (
            pa.types.is_boolean(kind) and cells.null_count == 0):
        values = cells.to_numpy() if cells.null_count == 0 else cells.cast(pa.float64(), safe=False).to_numpy()
    else:
        text = pd.Series(table.texts(column), dtype=object)
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
