"""What ``python -m explain check`` finds in a model before any attribution runs.

:func:`model_problems` lists, with the words ``attribute`` would use, the problems that
make every attribution fail or meaningless, so that ``check`` reports them up front:

* an input the output does not depend on (``engine.DISCONNECTED_INPUT``: its gradient is None),
* a non-float input, an integer id fed without an embedding (``engine.NON_FLOAT_INPUT``),
* a temporal input read through a ``Masking`` layer whose baseline months all equal the mask
  value (:data:`BASELINE_IS_MASK`): the whole baseline history is padding, so the path jumps
  at its start and the attributions explain that jump.

It has the signature of ``ig.model_problems`` (issue 11, helper N's branch); ``check`` uses
that one when it exists and this one until then.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from explain.engine import DISCONNECTED_INPUT, NON_FLOAT_INPUT
from explain.inputs import input_layout

BASELINE_IS_MASK = (
    "The model's {role} input {name!r} goes through a Masking layer ({layer!r}, mask_value={value:g}) and "
    "every period of the baseline equals that value, so the whole baseline history is padding: "
    "the path jumps at its start, and the attributions explain the jump, not the customer's history. "
    "Choose a baseline with real periods (for example mean, or cohort:LABEL), or a mask value that no "
    "real period takes."
)


def model_problems(model, inputs: Mapping | None = None, baselines: Mapping | None = None,
                   roles=None) -> list[str]:
    """Every problem of ``model`` that ``attribute`` would meet, as messages (``[]``: none).

    ``inputs``: ``{role: array}`` of a few customers (default: zeros); the output's dependence
    on each input is tested there, column by column. ``baselines``: one baseline ``{role: array}``,
    checked against the model's mask values (with ``inputs`` only, as ``ig.model_problems``).
    ``roles`` is accepted for ``ig.model_problems``' signature; here the roles are by rank.
    """
    layout = input_layout(model)
    roles = layout.roles
    if not roles:
        return []  # the bundle's own checks already say the inputs are not as expected
    problems = []
    dtypes = {role: _dtype(tensor) for role, tensor in zip(roles, model.inputs)}
    names = dict(zip(roles, layout.names))
    for role, dtype in dtypes.items():
        if not np.issubdtype(dtype, np.floating):
            problems.append(NON_FLOAT_INPUT.format(role=role, name=names[role], dtype=dtype.name))
    if inputs is None:
        inputs = {role: np.zeros((1, *shape[1:]), dtypes[role]) for role, shape in zip(roles, layout.shapes)}
    floats = [role for role in roles if np.issubdtype(dtypes[role], np.floating)]
    if floats and len(floats) == len(roles):
        problems += _disconnected(model, layout, roles, inputs, names)
    if baselines is not None and not problems:
        problems += _masked_baselines(model, roles, names, baselines)
    return problems


def _dtype(tensor) -> np.dtype:
    try:
        return np.dtype(str(getattr(tensor, "dtype", "float32")))
    except TypeError:
        return np.dtype("float32")


def _disconnected(model, layout, roles, inputs, names) -> list[str]:
    """DISCONNECTED_INPUT for each (output column, input) whose gradient is None."""
    import tensorflow as tf

    tensors = {role: tf.constant(np.asarray(inputs[role])) for role in roles}
    problems = []
    with tf.GradientTape(persistent=True) as tape:
        for tensor in tensors.values():
            tape.watch(tensor)
        out = model(layout.feed(tensors) if layout.roles == tuple(roles) else [tensors[r] for r in roles],
                    training=False)
        if isinstance(out, (list, tuple)):
            out = out[0]
        if len(out.shape) == 1:
            out = out[:, None]
        columns = [tf.reduce_sum(out[:, k]) for k in range(int(out.shape[-1]))]
    for k, column in enumerate(columns):
        for role in roles:
            if tape.gradient(column, tensors[role]) is None:
                problems.append(DISCONNECTED_INPUT.format(target=f"column {k}", role=role, name=names[role]))
    del tape
    return problems


def _masking_layers(model, roles) -> dict[str, list]:
    """{role: the Masking layers reading that input directly}."""
    import keras

    by_input = {id(tensor): role for role, tensor in zip(roles, model.inputs)}
    found: dict[str, list] = {}
    for layer in model.layers:
        if not isinstance(layer, keras.layers.Masking):
            continue
        try:
            source = layer.input
        except (AttributeError, ValueError):  # a layer used several times has no single input
            continue
        role = by_input.get(id(source))
        if role is not None:
            found.setdefault(role, []).append(layer)
    return found


def _masked_baselines(model, roles, names, baseline) -> list[str]:
    problems = []
    for role, layers in _masking_layers(model, roles).items():
        periods = np.asarray(baseline[role], np.float64)
        for layer in layers:
            value = float(layer.mask_value)
            if periods.size and np.all(periods == value):
                problems.append(BASELINE_IS_MASK.format(role=role, name=names[role], layer=layer.name, value=value))
    return problems
