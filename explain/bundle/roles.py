"""The model's side of a bundle: which input is which, and its output's width and names."""

from __future__ import annotations

from explain.core.inputs import input_layout

MODEL_INPUTS = ("the model must take exactly two inputs, one (None, S) and one (None, T, F), in either "
                "order, or more of them (every 2-D input static-like, every 3-D input temporal-like, "
                "category ids into an Embedding), with known S, T and F; it takes {found}.")
MODEL_OUTPUT = ("the model's outputs must be of shape (None, K), or a prediction per period (None, T, K); it has "
                "{found}.")
OUTPUT_PERIODS = ("the model's output {head!r} has shape {shape}: a prediction for each of {count} periods, but its "
                  "history input {input!r} has {periods} periods. A per-period output needs one prediction per period "
                  "of the history: return the sequence of the same length (return_sequences=True, padding='causal').")
OUTPUT_NAMES_COUNT = ("'output_names' has {given} name(s), but the model has {expected} "
                      "output(s) (its output shape is (None, {expected})).")


def model_roles(model, roles=None):
    """(roles in model.inputs order, {role: first input shape}, problem text or None).

    An input the engine cannot attribute (an integer input without an Embedding) does not stop
    the bundle from opening: ``check`` and ``attribute`` report it in the engine's words."""
    layout = input_layout(model, roles)
    if not layout.count:
        return None, None, MODEL_INPUTS.format(found="no symbolic inputs (a subclassed model?)")
    found = " and ".join(str(s) for s in layout.shapes)
    if layout.count < 2 or layout.roles is None:
        problems = [spec.problem for spec in layout.specs if spec.problem]
        if problems and layout.count >= 2:
            return None, None, " ".join(problems)
        return None, None, MODEL_INPUTS.format(found=f"{layout.count} input(s): {found}")
    shapes: dict = {}
    for spec, shape in zip(layout.specs, layout.shapes):
        shapes.setdefault(spec.role, shape)
    return layout.roles, shapes, None


def input_roles(model) -> tuple[tuple[str, ...] | None, dict | None, str | None]:
    """(roles in model.inputs order, {role: shape of its first input}, problem text or None)."""
    return model_roles(model)


def default_output_names(k: int | None) -> list[str]:
    k = k or 1
    return ["output"] if k == 1 else [f"output_{i}" for i in range(k)]


def output_width(model) -> int:
    try:
        return int(model.outputs[0].shape[-1])
    except Exception:
        return 1


def output_check(model) -> tuple[int | None, str | None]:
    """(K of the model's first output, a problem or None): each output is (None, K), (None, T) or a prediction per
    period (None, T, K) whose T is the number of periods of a history input; several outputs (heads) are fine."""
    from explain.core.outputs import heads, shape_problem

    try:
        found = [tuple(t.shape) for t in model.outputs]
    except Exception:  # a subclassed model without symbolic outputs
        found = []
    problem = shape_problem(model) if found else None
    if not found or problem:
        return None, MODEL_OUTPUT.format(found=", ".join(str(s) for s in found) or "no symbolic output")
    layout = input_layout(model)
    lengths = {spec.name: shape[1] for spec, shape in zip(layout.specs, layout.shapes) if len(shape) >= 3}
    for head in heads(model):
        if head.per_period and lengths and head.periods not in lengths.values() and None not in lengths.values():
            name, periods = next(iter(lengths.items()))
            return None, OUTPUT_PERIODS.format(head=head.name, shape=head.shape, count=head.periods, input=name,
                                               periods=periods)
    return heads(model)[0].width, None


def head_width(model, output) -> tuple[int | None, str | None]:
    """(K of the head ``output`` names, a problem or None): bundle.json's 'output' checked against the model."""
    from explain.core.errors import ExplainError
    from explain.core.outputs import head_of

    try:
        return head_of(model, output).width, None
    except ExplainError as error:
        return None, f"'output': {error}"
