"""Which model input is which: roles, kinds, embeddings and padding, and how the model is fed.

Every 2-D float input ``(None, S)`` is static-like, every 3-D float input ``(None, T, F)``
temporal-like, in any order and with any names; a model may take a list or a dict. An integer
(or string) input that feeds an ``Embedding`` (directly, or through an ``IntegerLookup`` /
``StringLookup``) is *categorical*: it is attributed at the embedding's output and reported
per original feature. A 2-D categorical input is static (C categorical features) unless its
embedding has ``mask_zero=True`` (then it is a history of T category ids, 0 = padding) or the
roles say otherwise. A ``Masking`` layer reading a float temporal input marks its padded
periods (every feature equal to the mask value). An input that the model's graph does not
connect to its output is ``unused``: its attributions are exactly 0 (IG's dummy axiom).

Keys: a model with exactly one static-like and one temporal-like input is keyed ``"static"``
and ``"temporal"`` (the common case); any other model by its input names (its dict keys when
it takes a dict). This is the one place that decides it: the bundle checks, the engine,
the baselines and ``Bundle.predict`` read it. Nothing here imports TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

ROLES = ("static", "temporal")
RANKS = {2: "static", 3: "temporal"}
KINDS = ("numeric", "categorical")
LOOKUP_CLASSES = ("StringLookup", "IntegerLookup")

# Problems of single inputs (the engine raises them; ``check`` lists them).
NON_FLOAT_INPUT = (
    "The model's {role} input {name!r} has dtype {dtype}; Integrated Gradients needs a float "
    "input, because it differentiates the output with respect to it (gradients of integer or "
    "boolean inputs are None). Feed floats, or attribute at the embedding layer's output "
    "instead of the ids."
)
NO_EMBEDDING = NON_FLOAT_INPUT + (
    " {found} Category ids that feed an Embedding layer (directly or through an IntegerLookup/StringLookup) "
    "are attributed at the embedding's output: pass the ids to an Embedding."
)
SHARED_EMBEDDING = (
    "the Embedding layer {layer!r} is used by more than one input or call; "
    "give each categorical input its own Embedding."
)
BAD_RANK = "input {name!r} has shape {shape}; expected a 2-D (None, S) or a 3-D (None, T, F) input."
UNKNOWN_ROLE = "roles: {name!r} is not an input of the model; its inputs are {names}."
BAD_ROLE = "roles: input {name!r} cannot be {role!r}: {why}."


@dataclass(frozen=True)
class MeanEmbedding:
    """A categorical baseline: the mean embedding of ``values`` (the raw ids or text of many rows).

    The engine embeds every row and averages the vectors per feature (padded positions left
    out): with the data set's rows this is the frequency-weighted mean embedding.
    """

    values: np.ndarray


@dataclass(frozen=True)
class InputSpec:
    """One model input as the engine sees it."""

    key: str                 # how inputs, baselines and attributions are keyed
    name: str                # the model's input name
    position: int            # index in model.inputs
    role: str                # "static" or "temporal"
    kind: str                # "numeric" or "categorical"
    shape: tuple             # feature shape: (S,), (T, F), categorical (C,) or (T,) / (T, C)
    dtype: str               # the model input's dtype
    embedding: Any = None    # the Embedding layer (categorical)
    lookup: Any = None       # the IntegerLookup/StringLookup before it, if any
    mask_value: float | None = None   # Masking value of a numeric temporal input
    mask_zero: bool = False  # categorical history: id 0 (after the lookup) is padding
    problem: str | None = None  # why this input cannot be attributed
    unused: bool = False     # the graph does not connect it to the output (its attributions are 0)

    @property
    def padded_by(self) -> str | None:
        if self.mask_value is not None:
            return f"Masking({self.mask_value:g})"
        if self.mask_zero:
            return "Embedding(mask_zero=True)"
        return None

    def padding(self, values: np.ndarray) -> np.ndarray | None:
        """(n, T) True where a numeric history is padding (every feature at the mask value)."""
        if self.mask_value is None:
            return None
        return np.all(np.asarray(values) == self.mask_value, axis=-1)

    def describe(self) -> dict:
        return {"key": self.key, "name": self.name, "position": self.position, "role": self.role,
                "kind": self.kind, "shape": (None, *self.shape), "dtype": self.dtype,
                "embedding": getattr(self.embedding, "name", None), "lookup": getattr(self.lookup, "name", None),
                "padding": self.padded_by, "problem": self.problem, "unused": self.unused}


@dataclass(frozen=True)
class InputLayout:
    """The model's inputs in ``model.inputs`` order.

    ``roles`` is None when the inputs are not one static-like and one temporal-like input at
    least (``problem`` then says what was found).
    """

    shapes: tuple[tuple, ...]  # full shapes, batch dimension included
    names: tuple[str, ...]
    keys: tuple | None  # the dict key of each input when the model takes a dict
    roles: tuple[str, ...] | None
    specs: tuple[InputSpec, ...] = field(default=())
    problem: str | None = None

    @property
    def count(self) -> int:
        return len(self.shapes)

    @property
    def engine_keys(self) -> tuple[str, ...]:
        return tuple(spec.key for spec in self.specs)

    def spec(self, key: str) -> InputSpec:
        for spec in self.specs:
            if spec.key == key:
                return spec
        raise KeyError(key)

    def keys_of(self, role: str) -> tuple[str, ...]:
        return tuple(spec.key for spec in self.specs if spec.role == role)

    def position(self, role: str) -> int:
        return self.roles.index(role)

    def shape(self, role: str) -> tuple:
        """The full shape of the first input of ``role``, batch dimension included."""
        return self.shapes[self.position(role)]

    def name(self, role: str) -> str:
        return self.names[self.position(role)]

    def feed(self, arrays: Mapping[str, Any]) -> Any:
        """Arrays keyed by ``engine_keys`` arranged as the model is called: a list in
        ``model.inputs`` order, or a dict by the model's keys."""
        ordered = [arrays[spec.key] for spec in self.specs]
        return dict(zip(self.keys, ordered)) if self.keys is not None else ordered


def input_layout(model, roles: Mapping[str, str] | None = None) -> InputLayout:
    """The layout of ``model``'s inputs (none for a model without symbolic inputs).

    ``roles`` ({input name or dict key: "static"/"temporal"}) overrides the default role of a
    2-D categorical input.
    """
    try:
        inputs = list(getattr(model, "inputs", None) or [])
    except Exception:  # a subclassed model that was never called raises here
        inputs = []
    shapes = tuple(tuple(t.shape) for t in inputs)
    names = tuple(str(t.name) for t in inputs)
    keys = None
    structure = getattr(model, "_inputs_struct", None)  # Keras 3: how the model was built (dict or list)
    if isinstance(structure, dict):
        by_id = {id(t): key for key, t in structure.items()}
        keys = tuple(by_id.get(id(t)) for t in inputs)
        if None in keys:
            keys = None
    labels = tuple(str(k) for k in keys) if keys is not None else names
    roles = dict(roles or {})
    problems = [UNKNOWN_ROLE.format(name=r, names=", ".join(labels))
                for r in roles if r not in labels and r not in names]
    drafts = []
    for position, (tensor, shape, label) in enumerate(zip(inputs, shapes, labels)):
        draft = _describe_input(model, tensor, shape, position, label, roles.get(label, roles.get(names[position])))
        drafts.append(draft)
        if draft["problem"] and draft["kind"] is None:
            problems.append(draft["problem"])
    found_roles = [d["role"] for d in drafts]
    two = len(drafts) == 2 and sorted(r or "" for r in found_roles) == ["static", "temporal"]
    reached = _reached_inputs(model, inputs)
    specs = tuple(InputSpec(key=d["role"] if two else d["label"], name=d["name"], position=d["position"],
                            role=d["role"] or "static", kind=d["kind"] or "numeric", shape=d["shape"],
                            dtype=d["dtype"], embedding=d["embedding"], lookup=d["lookup"],
                            mask_value=d["mask_value"], mask_zero=d["mask_zero"], problem=d["problem"],
                            unused=reached is not None and d["position"] not in reached)
                  for d in drafts)
    ok_roles = None not in found_roles and {"static", "temporal"} <= set(found_roles)
    problem = "; ".join(problems) if problems else (None if ok_roles else "roles")
    return InputLayout(shapes=shapes, names=names, keys=keys,
                       roles=tuple(found_roles) if ok_roles and not problems else None,
                       specs=specs, problem=problem)


def _describe_input(model, tensor, shape, position, label, role_override):
    dtype = str(getattr(tensor, "dtype", "float32"))
    dtype = dtype.split(".")[-1].replace("'>", "")
    draft = {"label": label, "name": str(tensor.name), "position": position, "shape": tuple(shape[1:]),
             "dtype": dtype, "embedding": None, "lookup": None, "mask_value": None, "mask_zero": False,
             "problem": None, "role": RANKS.get(len(shape)), "kind": None}
    if len(shape) not in RANKS or any(d is None for d in shape[1:]):
        draft["problem"] = BAD_RANK.format(name=label, shape=shape)
        draft["role"] = None
        return draft
    if _is_float(dtype):
        draft["kind"] = "numeric"
        masking = [layer for layer, _ in _consumers(model, tensor) if type(layer).__name__ == "Masking"]
        if masking and draft["role"] == "temporal":
            draft["mask_value"] = float(masking[0].mask_value)
        if role_override is not None and role_override != draft["role"]:
            draft["problem"] = BAD_ROLE.format(name=label, role=role_override,
                                               why=f"a float input of rank {len(shape)} is {draft['role']}")
            draft["kind"] = None
        return draft
    embedding, lookup, found = _embedding_of(model, tensor)
    draft["kind"] = "categorical"
    if embedding is None:
        draft["problem"] = NO_EMBEDDING.format(role=draft["role"], name=str(tensor.name), dtype=dtype, found=found)
        return draft
    draft.update(embedding=embedding, lookup=lookup)
    draft["shape"] = tuple(shape[1:])
    mask_zero = bool(getattr(embedding, "mask_zero", False))
    if len(shape) == 2:
        draft["role"] = role_override or ("temporal" if mask_zero else "static")
    draft["mask_zero"] = mask_zero and draft["role"] == "temporal"
    return draft


def _reached_inputs(model, inputs) -> set[int] | None:
    """Positions of the ``inputs`` that the model's graph connects to its outputs, walking back
    from every output through each call's inputs; None when the model has no graph to walk (a
    subclassed model): then no input is taken for unused."""
    try:
        positions = {id(t): i for i, t in enumerate(inputs)}
        stack, seen, found = list(model.outputs), set(), set()
        while stack:
            tensor = stack.pop()
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            if id(tensor) in positions:
                found.add(positions[id(tensor)])
                continue
            history = tensor._keras_history
            stack.extend(history.operation._inbound_nodes[history.node_index].input_tensors)
        return found
    except Exception:  # no symbolic graph (or an unfamiliar one): nothing is taken for unused
        return None


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "half", "double"))


def _nodes(model):
    by_depth = getattr(model, "_nodes_by_depth", None)
    if by_depth:
        for nodes in by_depth.values():
            yield from nodes
        return
    for layer in getattr(model, "layers", []):
        yield from getattr(layer, "_inbound_nodes", [])


def _consumers(model, tensor) -> list[tuple[Any, Any]]:
    """(layer, node) of every call in ``model``'s graph that reads ``tensor``."""
    found = []
    for node in _nodes(model):
        try:
            inputs = list(node.input_tensors)
        except Exception:
            continue
        if any(t is tensor for t in inputs):
            found.append((node.operation, node))
    return found


def _embedding_of(model, tensor, depth: int = 0):
    """(Embedding layer, lookup layer or None, text saying what was found) for an integer input."""
    lookup = None
    current, owner = tensor, model
    for _ in range(8):
        # an Embedding(mask_zero=True) adds a NotEqual op on its ids: its mask, not a consumer
        consumers = [c for c in _consumers(owner, current) if type(c[0]).__name__ != "NotEqual"]
        if len(consumers) != 1:
            what = "several layers" if consumers else "no layer"
            return None, None, f"It feeds {what}{'' if not consumers else ': ' + _names(consumers)}, not one Embedding."
        layer, node = consumers[0]
        kind = type(layer).__name__
        if kind in LOOKUP_CLASSES and lookup is None:
            lookup = layer
            current = node.output_tensors[0]
            continue
        if kind == "Embedding":
            if len(getattr(layer, "_inbound_nodes", [])) != 1:
                return None, None, "It " + SHARED_EMBEDDING.format(layer=layer.name).replace("the Embedding",
                                                                                              "feeds the Embedding", 1)
            return layer, lookup, ""
        if hasattr(layer, "_nodes_by_depth") and depth < 3:  # a nested functional model: follow the input inside
            index = [i for i, t in enumerate(node.input_tensors) if t is current]
            inner = list(layer.inputs)
            if index and index[0] < len(inner) and lookup is None:
                return _embedding_of(layer, inner[index[0]], depth + 1)
        return None, None, f"It feeds {kind} {layer.name!r}, not an Embedding."
    return None, None, "It feeds a chain of layers, not an Embedding."


def _names(consumers) -> str:
    return ", ".join(f"{type(layer).__name__} {layer.name!r}" for layer, _ in consumers)
