"""Attributions as JSON, long-format tables and sentences; atomic file output. No streamlit.

The standalone HTML report is drawn by :mod:`explain.plots.html`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from explain.core import verdict
from explain.core.errors import ExplainError
from explain.core.files import csv_download, write_atomic
from explain.core.periods import Words, unit_of
from explain.core.periods import words as periods_words
from explain.core.text import unit_after

LONG_COLUMNS = ["customer_id", "input", "period", "feature", "value", "attribution"]
POINTS_COLUMNS = ["gradient_points", "forward_points"]  # attribute's CSV/Parquet: each customer's, on each row
SUMMARY_COLUMNS = ["customer_id", "prediction", "baseline_prediction", "delta", "steps", "gradient_points",
                   "forward_points"]
OUTPUT_SUFFIXES = (".json", ".csv", ".parquet")
BAD_SUFFIX = "Output file {path!r} must end in one of {suffixes}: the suffix picks the format."

CLOSE_BASELINE = 0.02  # |f(x) - f(b)| below this: the baseline scores (almost) like the customer
CLOSE_BASELINE_NOTE = (
    "The comparison's prediction ({fb:.3f}) is within {limit:g} of this customer's ({fx:.3f}): there is almost no "
    "difference for the effects to share out, so every effect is small whatever drives the score. Compare "
    "with someone who scores differently (for example the average customer with the other outcome, or zero)."
)

# Delta badge: |delta| relative to |f(x) - f(b)| (at least 0.01 of it, so tiny differences do not alarm).
DELTA_FINE = 0.01
DELTA_CHECK = 0.05


def settings_dict(attribution, request=None) -> dict:
    """The settings of the CLI's JSON (docs/cli.md): the attribution's (target as an index), with the
    baseline spec of ``request`` when one is given."""
    settings = {**(request.as_dict() if request is not None else {}), **attribution.settings.as_dict()}
    if request is not None:
        settings["baseline"] = str(request.baseline)
    return settings


def to_json_dict(attribution, bundle, ids, request=None) -> dict:
    """The JSON of docs/cli.md: settings, then one entry per customer.

    A bundle with more inputs (categorical, padded or several histories) also gets
    ``inputs``: every model input by key with its features, periods, attributions and values
    (null at padded periods); ``static`` holds every static-like feature side by side and
    ``temporal`` the one history (left out when there are several). ``notes`` and
    ``ignored_inputs`` (keys of inputs the model does not use) come when there are any."""
    settings = settings_dict(attribution, request)
    settings["space_used"] = attribution.space_used
    settings["target_name"] = bundle.output_names[attribution.settings.target]
    inputs = bundle.inputs_for(ids)
    plain = getattr(bundle, "plain", True)
    customers = []
    for i, cid in enumerate(ids):
        entry = {
            "id": str(cid),
            "prediction": float(attribution.prediction[i]),
            "baseline_prediction": float(attribution.baseline_prediction[i]),
            "delta": float(attribution.delta[i]),
            "steps": int(attribution.steps[i]),
            "gradient_points": int(attribution.gradient_points[i]),
            "forward_points": _points(attribution.forward_points, i),
        }
        if attribution.arrival is not None:  # a change since an earlier time: periods that arrived since then
            entry["arrival"] = float(attribution.arrival[i])
        if plain:
            entry["static"] = {"features": list(bundle.static_features), "values": attribution.static[i].tolist(),
                               "inputs": inputs["static"][i].astype(float).tolist()}
            entry["temporal"] = {"periods": list(bundle.periods), "features": list(bundle.temporal_features),
                                 "values": attribution.temporal[i].tolist(),
                                 "inputs": inputs["temporal"][i].astype(float).tolist()}
        else:
            entry["static"] = {"features": list(bundle.static_features), "values": attribution.static[i].tolist()}
            if attribution.temporal is not None:
                entry["temporal"] = {"periods": list(bundle.periods), "features": list(bundle.temporal_features),
                                     "values": _padded_none(attribution.temporal[i], attribution.padding.get(
                                         _first_temporal(bundle), None), i)}
            entry["inputs"] = {view.key: _input_entry(view, attribution, inputs, i) for view in input_views(bundle)}
        if attribution.per_input is not None:
            entry["per_input"] = {
                role: {"reference_prediction": float(v["reference_prediction"][i]), "delta": float(v["delta"][i]),
                       **{name: int(v[name][i]) for name in ("steps", "gradient_points") if name in v}}
                for role, v in attribution.per_input.items()
            }
        customers.append(entry)
    out = {"settings": settings, "customers": customers}
    if attribution.notes:  # an input the model does not use: its attributions are exactly 0
        out["notes"] = list(attribution.notes)
        out["ignored_inputs"] = list(attribution.ignored_inputs)
    return out


class InputView:
    """One model input of a bundle as the reports show it."""

    def __init__(self, key, role, label, features, periods):
        self.key, self.role, self.label, self.features, self.periods = key, role, label, features, periods


def input_views(bundle) -> list[InputView]:
    """The bundle's inputs in model order: static and temporal for a plain bundle, else every
    input with its display name, columns and (histories) periods."""
    if getattr(bundle, "plain", True):
        return [InputView("static", "static", "Static features", list(bundle.static_features), None),
                InputView("temporal", "temporal", f"{periods_words(bundle).adjective.capitalize()} features",
                          list(bundle.temporal_features),
                          list(bundle.periods))]
    return [InputView(spec.key, spec.role, bundle.input_labels.get(spec.key, spec.key),
                      list(bundle.input_features[spec.key]),
                      list(bundle.input_periods[spec.key]) if spec.role == "temporal" else None)
            for spec in bundle.layout.specs]


def _first_temporal(bundle):
    return next((spec.key for spec in bundle.layout.specs if spec.role == "temporal"), None)


def _cell(value):
    if isinstance(value, (str, np.str_)):
        return str(value)
    return float(value)


def _padded_none(values, padding, i):
    """values (T, ...) as lists, None at padded periods."""
    rows = np.asarray(values)
    pad = None if padding is None else np.asarray(padding[i], bool)
    out = []
    for t in range(rows.shape[0]):
        if pad is not None and pad[t]:
            out.append(None if rows.ndim == 1 else [None] * int(np.prod(rows.shape[1:])))
        else:
            out.append(_cell(rows[t]) if rows.ndim == 1 else [_cell(v) for v in np.ravel(rows[t])])
    return out


def _input_entry(view, attribution, inputs, i) -> dict:
    entry = {"role": view.role, "display_name": view.label, "features": view.features}
    attr, value = attribution.inputs[view.key][i], inputs[view.key][i]
    if view.role == "temporal":
        entry["periods"] = view.periods
        pad = attribution.padding.get(view.key)
        entry["values"] = _padded_none(attr, pad, i)
        entry["inputs"] = _padded_none(value, pad, i)
    else:
        entry["values"] = [float(v) for v in np.ravel(attr)]
        entry["inputs"] = [_cell(v) for v in np.ravel(value)]
    return entry


def long_layout(bundle) -> dict[str, np.ndarray]:
    """The rows of one customer in the long format: ``input``, ``period`` and ``feature`` of
    each: every input in model order (a plain bundle: the S static features first, then the
    T x F temporal cells period by period)."""
    inputs, periods, features = [], [], []
    for view in input_views(bundle):
        if view.role == "static":
            inputs += [view.key] * len(view.features)
            periods += [""] * len(view.features)
            features += [str(x) for x in view.features]
        else:
            cells = [(str(p), str(x)) for p in view.periods for x in view.features]
            inputs += [view.key] * len(cells)
            periods += [p for p, _ in cells]
            features += [x for _, x in cells]
    return {name: np.array(values, dtype=object) for name, values in
            (("input", inputs), ("period", periods), ("feature", features))}


def long_frame(attribution, bundle, ids) -> pd.DataFrame:
    """customer_id, input (static|temporal, or the input's key), period (empty for static),
    feature, value, attribution; padded periods of a history are empty (no data).

    ``value`` is float64, or text when an input holds text (a category read by a StringLookup):
    then every value is written as its input holds it (``34.2`` for a float32 34.2, ``2`` for an
    integer id, ``premium``) and padded cells are ``""``."""
    ids = np.asarray([str(i) for i in ids], dtype=object)
    inputs = bundle.inputs_for(list(ids))
    n = len(ids)
    layout = long_layout(bundle)
    per = len(layout["input"])
    values, no_data, attributions = [], [], []
    for view in input_views(bundle):
        value = np.asarray(inputs[view.key]).reshape(n, -1)
        attr = np.asarray(attribution.inputs[view.key], np.float64).reshape(n, -1)
        pad = attribution.padding.get(view.key) if view.role == "temporal" else None
        cells = np.zeros(attr.shape, bool)
        if pad is not None and np.any(pad):
            cells = np.repeat(np.asarray(pad, bool), attr.shape[1] // pad.shape[1], axis=1)
            attr = np.where(cells, np.nan, attr)
        values.append(value)
        no_data.append(cells)
        attributions.append(attr)
    no_data = np.concatenate(no_data, axis=1)  # (n, per)
    if all(v.dtype.kind in "fiub" for v in values):
        value = np.where(no_data, np.nan, np.concatenate([v.astype(np.float64) for v in values], axis=1))
    else:  # text categories: the column as text ("" where there is no data)
        value = np.concatenate([np.array([_text(v) for v in part.ravel()], dtype=object).reshape(part.shape)
                                for part in values], axis=1)
        value[no_data] = ""
    return pd.DataFrame({
        "customer_id": np.repeat(ids, per),
        **{name: np.tile(values, n) for name, values in layout.items()},
        "value": value.reshape(-1),
        "attribution": np.concatenate(attributions, axis=1).reshape(-1),
    })[LONG_COLUMNS]


def _text(value) -> str:
    """One input value as text, as its input holds it (numpy's shortest text for its own dtype)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _points(points, i):
    """A count of points spent as JSON (None where it is not known: an older store)."""
    return None if points is None else int(points[i])


def summary_frame(attribution, ids) -> pd.DataFrame:
    """One row per customer (``SUMMARY_COLUMNS``): the predictions, the delta, the final rule's
    points (``steps``) and every gradient and forward evaluation spent."""
    n = len(ids)
    forward = attribution.forward_points
    return pd.DataFrame({
        "customer_id": [str(i) for i in ids],
        "prediction": attribution.prediction,
        "baseline_prediction": attribution.baseline_prediction,
        "delta": attribution.delta,
        "steps": np.asarray(attribution.steps, np.int64),
        "gradient_points": np.asarray(attribution.gradient_points, np.int64),
        "forward_points": np.asarray(forward if forward is not None else np.full(n, -1), np.int64),
    })[SUMMARY_COLUMNS]


def attribute_frame(attribution, bundle, ids) -> pd.DataFrame:
    """The long format (``LONG_COLUMNS``) then ``POINTS_COLUMNS``: the gradient and forward evaluations
    spent on each customer (``summary_frame``'s), repeated on every row of that customer."""
    frame = long_frame(attribution, bundle, ids)
    spent = summary_frame(attribution, ids)
    per = len(frame) // max(1, len(ids))
    for name in POINTS_COLUMNS:
        frame[name] = np.repeat(spent[name].to_numpy(), per)
    return frame


def write_attributions(path, attribution, bundle, ids, request=None) -> Path:
    """Write JSON (docs/cli.md's shape), or CSV / Parquet (the long format, then each customer's
    ``gradient_points`` and ``forward_points``: ``attribute_frame``), chosen by suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise ExplainError(BAD_SUFFIX.format(path=str(path), suffixes=", ".join(OUTPUT_SUFFIXES)))
    if suffix == ".json":
        text = json.dumps(to_json_dict(attribution, bundle, ids, request), indent=1)
        return write_atomic(path, lambda tmp: tmp.write_text(text + "\n", encoding="utf-8"))
    frame = attribute_frame(attribution, bundle, ids)
    if suffix == ".csv":  # opened in spreadsheets: no cell may run as a formula
        return write_atomic(path, lambda tmp: tmp.write_bytes(csv_download(frame).encode("utf-8")))
    return write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


# ----------------------------------------------------------------------------- words


CLOSE_CHANGE_NOTE = (
    "The score barely moved since then ({fb:.3f} -> {fx:.3f}, less than {limit:g}): every effect below is small; "
    "the largest say what moved it at all."
)


def close_baseline_note(prediction: float, baseline_prediction: float, *, change: bool = False) -> str | None:
    """The warning when the baseline's prediction is within ``CLOSE_BASELINE`` of the customer's, else None
    (``change``: the baseline is the customer earlier: a small change is an answer, not a bad comparison)."""
    if abs(prediction - baseline_prediction) > CLOSE_BASELINE + 1e-12:  # within: 0.02 itself is warned about
        return None
    note = CLOSE_CHANGE_NOTE if change else CLOSE_BASELINE_NOTE
    return note.format(fx=prediction, fb=baseline_prediction, limit=CLOSE_BASELINE)


def delta_status(delta: float, prediction: float, baseline_prediction: float, *,
                 auto: bool = False) -> tuple[str, str]:
    """('fine' | 'check' | 'too few steps', advice) for one customer's completeness gap;
    ``auto``: the attribution was computed with steps="auto" (the advice is then its budget)."""
    scale = max(abs(prediction - baseline_prediction), 0.01)
    ratio = abs(delta) / scale
    total = verdict.quality(delta, prediction, baseline_prediction)
    left = _percent_text(ratio)
    if ratio <= DELTA_FINE:
        return "fine", (f"The attributions add up to {total} of the score difference ({left} unexplained, "
                        f"gap {delta:+.2g}).")
    if ratio <= DELTA_CHECK:
        return "check", (f"The attributions add up to {total} of the score difference: {left} is unexplained "
                         f"(gap {delta:+.2g}). Raise the steps to be sure.")
    more = ("Raise the budget of 'auto' (--max-points)" if auto else "Choose 'auto' (or raise the steps)")
    return "too few steps", (
        f"The attributions add up to {total} of the difference "
        f"(gap {delta:+.2g}): the integral has not converged, so their sizes and signs cannot be trusted. "
        f"{more} before reading them."
    )


def _percent_text(ratio: float) -> str:
    """A share in plain percent for the words: '0.1 %', 'under 0.1 %' for a tiny non-zero share, '0 %'."""
    if ratio == 0:
        return "0 %"
    return "under 0.1 %" if ratio < 0.0005 else f"{100 * ratio:.1f} %"


def contributions(attribution, bundle, i: int, recent: int | None = None,
                  static_values=None) -> list[tuple[str, float]]:
    """(phrase, attribution) items for customer ``i``: each static feature (with its value
    when ``static_values`` (S,) is given), and each temporal feature split into its last
    ``recent`` periods (default: the bundle's period's recent window, ``explain.core.periods``:
    30 days, 4 weeks, 3 months) and the periods before; largest first."""
    labels = list(bundle.static_labels)
    if static_values is not None:
        units = [bundle.units.get(c, "") for c in bundle.static_features]
        labels = [f"{label} = {v}" if isinstance(v, str) else
                  f"{label} = {float(v):g}" + (f" {unit_after(label, u)}" if unit_after(label, u) else "")
                  for label, v, u in zip(labels, static_values, units)]
    items = [(labels[j], float(attribution.static[i, j])) for j in range(attribution.static.shape[1])]
    for view in input_views(bundle):  # every history (one for a plain bundle)
        if view.role != "temporal":
            continue
        names = (bundle.temporal_labels if getattr(bundle, "plain", True)
                 else [bundle.feature_labels.get(c, c) for c in view.features])
        attr = np.asarray(attribution.inputs[view.key][i], np.float64).reshape(len(view.periods), -1)
        # the bundle's period words for its first history, else read from this history's labels
        said = periods_words(bundle) if list(view.periods) == list(bundle.periods) else Words(unit_of(view.periods))
        periods, last_n = view.periods, min(said.recent if recent is None else recent, len(view.periods))
        for j, label in enumerate(names):
            column = attr[:, j]
            last = (f"in the last {said.count(last_n)} ({periods[-last_n]} to {periods[-1]})" if last_n > 1
                    else f"in the last {said.unit} ({periods[-1]})")
            items.append((f"{label} {last}", float(column[-last_n:].sum())))
            if len(periods) > last_n:
                items.append((f"{label} before {periods[-last_n]}", float(column[:-last_n].sum())))
    return sorted(items, key=lambda item: -abs(item[1]))


def _category_text(bundle, column, value):
    """A categorical column's value by its display text (``categories`` in bundle.json), else as it is."""
    names = bundle.categories.get(column)
    if not names:
        return value
    key = str(value) if isinstance(value, str) else (str(int(value)) if float(value).is_integer() else str(value))
    return str(names.get(key, key))


def summary_text(attribution, bundle, i: int, top: int = 3, customer_id=None) -> str:
    """A few sentences for a non-expert about customer ``i`` (``customer_id`` adds the
    static features' values to the phrases)."""
    target = attribution.settings.target
    name = bundle.output_names[target]
    unit = {"output": "", "logit": " (log-odds)", "log-odds": " (log-odds)"}[attribution.space_used]
    fx, fb = float(attribution.prediction[i]), float(attribution.baseline_prediction[i])
    lines = [f"Predicted {name} {fx:.2f}{unit} against {fb:.2f} for the baseline ({fx - fb:+.2f})."]
    values = None
    if customer_id is not None:  # every static feature side by side (categories as they are written)
        values = (bundle.inputs_for([customer_id])["static"][0] if getattr(bundle, "plain", True)
                  else [_category_text(bundle, c, v) for c, v in
                        zip(bundle.static_features, bundle.static[bundle.index_of(customer_id)])])
    items = [item for item in contributions(attribution, bundle, i, static_values=values) if abs(item[1]) > 0][:top]
    status, advice = delta_status(float(attribution.delta[i]), fx, fb, auto=attribution.settings.steps == "auto")
    if items and status != "too few steps":  # effects that do not add up are not named (their sign may be wrong)
        effects = "; ".join(f"{value:+.2f} from {phrase}" for phrase, value in items)
        lines.append(f"Largest effects: {effects}.")
    lines.append(advice)
    return " ".join(lines)


# ----------------------------------------------------------------------------- downloads


def csv_bytes(attribution, bundle, ids) -> bytes:
    """The long format (``LONG_COLUMNS``) as UTF-8 CSV bytes, no text cell read as a formula
    (``explain.core.files.csv_download``)."""
    return csv_download(long_frame(attribution, bundle, ids)).encode("utf-8")


def json_bytes(attribution, bundle, ids, request=None) -> bytes:
    """``to_json_dict`` as indented UTF-8 JSON bytes."""
    return (json.dumps(to_json_dict(attribution, bundle, ids, request), indent=1) + "\n").encode("utf-8")


HOW_TO_READ = (
    "Integrated Gradients splits the difference between this customer's score and the "
    "baseline's score into one share per input value. It walks in small steps from the "
    "baseline to the customer and adds up how much the score moves with each feature on the way. "
    "A positive (red) share raised the score above the baseline; a negative (blue) share lowered it; "
    "white means no effect. All shares together add up to the prediction minus the baseline "
    "prediction; the gap left over (delta) says how far the numbers can be trusted."
)
