"""The model's side of a bundle: which input is which, and its output's width and names."""

from __future__ import annotations

from explain.core.inputs import input_layout

MODEL_INPUTS = ("the model must take exactly two inputs, one (None, S) and one (None, T, F), in either "
                "order, or more of them (every 2-D input static-like, every 3-D input temporal-like, "
                "category ids into an Embedding), with known S, T and F; it takes {found}.")
MODEL_OUTPUT = "the model must have one output of shape (None, K); it has {found}."
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
