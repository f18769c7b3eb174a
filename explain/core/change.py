"""Why a customer's score changed since an earlier time: Integrated Gradients from the customer as it was then.

The baseline is the same customer earlier (``previous:K``: each history shifted K periods later; ``bundle:DIR``:
an earlier snapshot matched by id), so completeness makes the attributions add up to f(now) - f(then).

One case needs more than a straight path. A history the model reads padding in (a Masking layer, ``mask_zero``
ids) was shorter then: periods that are padding in the baseline hold data in the customer ("arrived" periods).
Along a straight path such a period would leave the mask value at once, so the model would jump from "no data"
to "data" at the start of the path and the integral would not add up. The change is therefore taken in two parts:

1. **Arrival**: the arrived periods appear at the mask's edge, ``f(b') - f(b)``, where ``b'`` is the baseline
   with those periods set just off the mask value (``explain.core.baselines.MASK_OFFSET``; categorical ids: the
   customer's own ids). Two model calls, exact; it has no gradient to split it, so it is spread evenly over the
   arrived cells of that customer (``Attribution.arrival`` holds it whole, and a note says so).
2. **Values**: Integrated Gradients from ``b'`` to the customer, a continuous path: its attributions add up to
   ``f(x) - f(b')`` within the quadrature error.

Together: sum = f(x) - f(b), the reported ``baseline_prediction`` is f(b) and ``delta`` is the integral's.

The other way round, a period with data then and padding now (an earlier snapshot whose oldest periods have left
the window since) is padding all along the path, as a customer's padding always is; the step from the snapshot's
values to padding there is counted with the arrival, in the same two model calls, and spread over those cells:
the only case where a cell that is padding now holds a share.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from explain.core.baselines import MASK_OFFSET
from explain.core.engine import StopCheck, engine_for
from explain.core.errors import AttributionError
from explain.core.ig import Attribution, _by_key, _check_inputs, integrated_gradients, request_settings
from explain.core.settings import Settings

ARRIVAL_NOTE = (
    "{count} customer(s) have data in periods their earlier history did not have (padding then), or lost periods "
    "it had: their arrival moved the score by {low:+.3g} to {high:+.3g}; the arrival has no gradient to split it, "
    "so it is spread evenly over those periods' cells (Attribution.arrival holds it whole)."
)
PER_INPUT_CHANGE = (
    "The change since an earlier period is explained on the joint path only: periods that arrived since then "
    "(padding in the earlier history) have no per-input path. Use path='joint'."
)


def integrated_change(model, inputs: dict, then: dict, settings: Settings | None = None, *,
                      batch_size: int | None = None, ids=None, output_names=None, should_stop: StopCheck = None,
                      roles: dict | None = None) -> Attribution:
    """Integrated Gradients of the customers ``inputs`` from ``then``, the same customers earlier (one row each,
    keyed as ``inputs``): the attributions add up to f(now) - f(then), periods that arrived since then included
    (module docstring). The same arguments as ``integrated_gradients``; without arrived periods it is that."""
    engine = engine_for(model, roles)
    inputs, then = _by_key(engine, inputs, "inputs"), _by_key(engine, then, "baselines")  # lists: model order
    _, _, now_padding, _ = _check_inputs(engine, inputs, ids)
    _, _, then_padding, _ = _check_inputs(engine, then, ids)
    # periods that arrived (padding then, data now) or left (data then, padding now: a snapshot whose oldest
    # periods left the window); the engine keeps a customer's padding in the baseline, so either moves f(b)
    arrived = {key: then_padding[key] != now_padding[key] for key in now_padding}
    arrived = {key: rows for key, rows in arrived.items() if rows.any()}
    call = {"batch_size": batch_size, "ids": ids, "output_names": output_names, "should_stop": should_stop,
            "roles": roles}
    if not arrived:
        return integrated_gradients(model, inputs, then, settings, **call)
    settings = request_settings(settings, {}, engine.n_outputs, output_names)
    if settings.path != "joint":
        raise AttributionError(PER_INPUT_CHANGE)
    moved = _arrived_at_edge(engine, inputs, then, arrived)
    result = integrated_gradients(model, inputs, moved, settings, **call)
    f_then = engine.outputs(_by_engine_key(engine, then), settings.space, batch_size or 1024,
                            should_stop)[:, settings.target]
    arrival = result.baseline_prediction - f_then
    return _with_arrival(result, arrived, arrival, f_then, then)


def _by_engine_key(engine, arrays: dict) -> dict:
    return {key: np.asarray(arrays[key]) for key in engine.keys}


def _arrived_at_edge(engine, inputs: dict, then: dict, arrived: dict) -> dict:
    """``then`` with its arrived periods just off the mask value (numeric) or at the customer's ids (categorical)."""
    moved = _by_engine_key(engine, then)
    for key, rows in arrived.items():
        spec = next(s for s in engine.specs if s.key == key)
        values = moved[key].copy()
        if spec.kind == "categorical":
            values[rows] = np.asarray(inputs[key])[rows]
        else:
            values = values.astype(np.float64)
            values[rows] = spec.mask_value + MASK_OFFSET * max(1.0, abs(spec.mask_value))
        moved[key] = values
    return moved


def _with_arrival(result: Attribution, arrived: dict, arrival: np.ndarray, f_then: np.ndarray,
                  then: dict) -> Attribution:
    """``result`` (from the baseline with arrived periods at the mask's edge) with the arrival added, spread
    evenly over each customer's arrived cells, and f(then) as the baseline prediction."""
    inputs = {key: value.copy() for key, value in result.inputs.items()}
    cells = sum(rows.sum(axis=1) * int(np.prod(inputs[key].shape[2:], dtype=np.int64)) for key, rows in
                arrived.items())  # (n,)
    share = np.divide(arrival, cells, out=np.zeros_like(arrival), where=cells > 0)
    for key, rows in arrived.items():
        extra = (1,) * (inputs[key].ndim - 2)
        inputs[key] += (rows * share[:, None]).reshape(*rows.shape, *extra)
    temporal = next((inputs[key] for key, value in result.inputs.items() if value is result.temporal), None)
    given = {}
    for key in result.inputs:
        value = np.array(then[key])
        value.flags.writeable = False
        given[key] = value
    who = np.flatnonzero(cells > 0)
    note = ARRIVAL_NOTE.format(count=len(who), low=float(arrival[who].min()), high=float(arrival[who].max()))
    return dataclasses.replace(result, inputs=inputs, temporal=temporal, baseline_prediction=f_then,
                               baselines=given, arrival=np.where(cells > 0, arrival, 0.0),
                               notes=(*result.notes, note))
