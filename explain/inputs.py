"""Which model input is which: input roles by rank, and how the model is fed.

The 2-D input ``(None, S)`` is the static one, the 3-D input ``(None, T, F)`` the temporal
one, in either order and with any names; a model may take a list or a dict. This is the one
place that decides it (the bundle checks, the engine and ``Bundle.predict`` read it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

ROLES = ("static", "temporal")
RANKS = {2: "static", 3: "temporal"}


@dataclass(frozen=True)
class InputLayout:
    """The model's inputs in ``model.inputs`` order: their shapes, names, dict keys and roles.

    ``roles`` is None when the inputs are not exactly one 2-D and one 3-D input (``count``
    and ``shapes`` then say what was found).
    """

    shapes: tuple[tuple, ...]  # full shapes, (None, S) and (None, T, F)
    names: tuple[str, ...]
    keys: tuple | None  # the dict key of each input when the model takes a dict
    roles: tuple[str, ...] | None

    @property
    def count(self) -> int:
        return len(self.shapes)

    def position(self, role: str) -> int:
        return self.roles.index(role)

    def shape(self, role: str) -> tuple:
        """The full shape of ``role``'s input, batch dimension included."""
        return self.shapes[self.position(role)]

    def name(self, role: str) -> str:
        return self.names[self.position(role)]

    def feed(self, arrays: Mapping[str, Any]) -> Any:
        """``{"static": ..., "temporal": ...}`` arranged as the model is called: a list in
        ``model.inputs`` order, or a dict by the model's keys."""
        ordered = [arrays[role] for role in self.roles]
        return dict(zip(self.keys, ordered)) if self.keys is not None else ordered


def input_layout(model) -> InputLayout:
    """The layout of ``model``'s inputs (none for a model without symbolic inputs)."""
    try:
        inputs = list(getattr(model, "inputs", None) or [])
    except Exception:  # a subclassed model that was never called raises here
        inputs = []
    shapes = tuple(tuple(t.shape) for t in inputs)
    ranks = sorted(len(s) for s in shapes)
    roles = tuple(RANKS[len(s)] for s in shapes) if ranks == [2, 3] else None
    keys = None
    structure = getattr(model, "_inputs_struct", None)  # Keras 3: how the model was built (dict or list)
    if isinstance(structure, dict):
        by_id = {id(t): key for key, t in structure.items()}
        keys = tuple(by_id.get(id(t)) for t in inputs)
        if None in keys:
            keys = None
    return InputLayout(shapes=shapes, names=tuple(str(t.name) for t in inputs), keys=keys, roles=roles)
