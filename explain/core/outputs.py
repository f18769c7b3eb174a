"""One output view: a model with a prediction per period or several heads, seen as a model with one (None, K) output.

A churn model may score every period (an LSTM with ``return_sequences=True`` and a sigmoid per step: output
``(None, T, K)``, or ``(None, T)``) or have several outputs (a churn head and a spend head). The engine explains a
model with one ``(None, K)`` output; ``view(model, head, period)`` is that model: the same inputs (the same layers and
weights) and the chosen head's output at the chosen period::

    view = output_view(model, "churn", period=4)   # the fifth period's churn risk, (None, K)
    engine_for(view)                               # compiled once per view: views are kept per (model, head, period)

Everything downstream (IG, batch, drivers, faithfulness, what-if) works unchanged on the view. Where the chosen head
ends in a ``Dense`` (or a ``TimeDistributed(Dense)``) or an ``Activation`` with a sigmoid, softmax or linear activation,
the view ends in a fresh ``Activation`` layer fed by the pre-activation at that period (a Dense with a copy of the
head's weights), so ``space="logit"`` explains
the logits (``space_used`` "logit"); any other head ends in an ``Identity`` layer and the engine falls back to the
log-odds of the output (``space_used`` "log-odds"). A period is picked by its position from the end (the fifth of
twelve periods is ``[:, -8]``), so the engine's padding cut, which drops leading periods, keeps the same period.

``causal(model)``: True when every layer is known to let a period depend only on earlier periods (recurrent layers
without ``Bidirectional`` or ``go_backwards``, ``Conv1D(padding="causal")``, per-period layers), False when a layer
is known to look ahead (``Bidirectional``, a non-causal ``Conv1D``, attention over all periods, a backwards RNN),
None when a layer's behaviour over time is unknown (a Lambda, a pooling, an op): then later periods may matter.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from explain.core.errors import AttributionError

UNKNOWN_HEAD = "output={name!r} is not an output of the model; its outputs are {names}."
HEAD_OUT_OF_RANGE = "output={name!r} is out of range: the model has {count} output(s): {names}."
NOT_PER_PERIOD = (
    "output_period={period!r} was given, but the output {head!r} has shape {shape}: one prediction per customer, "
    "not one per period. Leave out --output-period (output_period)."
)
PERIOD_OUT_OF_RANGE = (
    "output_period={period!r} is out of range: the output {head!r} has {count} periods, so the period must be "
    "a number from 1 to {count} (1 is the first period, {count} the last){labels}."
)
PERIOD_NOT_A_LABEL = (
    "output_period={period!r} is neither a period number (1 to {count}) nor one of the period labels {labels}."
)
UNSUPPORTED_OUTPUT = (
    "the output {head!r} has shape {shape}; expected (None, K) or a prediction per period (None, T, K) or (None, T)."
)

_ACTIVATIONS = ("sigmoid", "softmax", "linear")
_KEEP_ORDER = {"InputLayer", "Dense", "EinsumDense", "Masking", "Dropout", "SpatialDropout1D", "GaussianNoise",
               "GaussianDropout", "AlphaDropout", "Activation", "ReLU", "LeakyReLU", "PReLU", "ELU", "Softmax",
               "Normalization", "Rescaling", "Embedding", "RepeatVector", "Concatenate", "Add", "Subtract",
               "Multiply", "Average", "Maximum", "Minimum", "Identity", "StringLookup", "IntegerLookup",
               "CategoryEncoding", "Discretization", "Hashing", "LSTM", "GRU", "SimpleRNN", "RNN", "ConvLSTM1D",
               "TimeDistributed", "Conv1D", "BatchNormalization", "LayerNormalization", "UnitNormalization",
               "Functional", "Sequential", "Model"}
_LOOK_AHEAD = {"Bidirectional", "MultiHeadAttention", "Attention", "AdditiveAttention", "GroupQueryAttention",
               "Conv1DTranspose", "GlobalAveragePooling1D", "GlobalMaxPooling1D", "AveragePooling1D",
               "MaxPooling1D", "Flatten", "Reshape", "Permute", "Cropping1D", "UpSampling1D", "ZeroPadding1D"}


class Head(NamedTuple):
    """One output of a model: its ``name``, ``index`` in ``model.outputs``, ``shape``; ``periods`` T of a
    (None, T, K) output (None otherwise: a (None, T) output is read per period only when a period is asked for);
    ``width`` K."""

    name: str
    index: int
    shape: tuple
    periods: int | None
    width: int

    @property
    def per_period(self) -> bool:
        return len(self.shape) == 3


def heads(model) -> list[Head]:
    """Every output of ``model`` (a subclassed model without symbolic outputs: one (None, 1) head)."""
    try:
        outputs = list(model.outputs)
    except Exception:  # noqa: BLE001 - a subclassed model without a graph
        outputs = []
    if not outputs:
        return [Head("output", 0, (None, 1), None, 1)]
    names = list(getattr(model, "output_names", None) or [])
    found = []
    for i, tensor in enumerate(outputs):
        shape = tuple(tensor.shape)
        name = str(names[i]) if i < len(names) else f"output_{i}"
        periods = int(shape[1]) if len(shape) == 3 and shape[1] is not None else None
        width = int(shape[-1]) if len(shape) >= 2 and shape[-1] is not None else 1
        found.append(Head(name, i, shape, periods, width))
    return found


def needs_view(model) -> bool:
    """Whether ``model`` has something other than one (None, K) output."""
    found = heads(model)
    return len(found) != 1 or found[0].per_period


def shape_problem(model) -> str | None:
    """A sentence when an output is neither (None, K), (None, T) nor (None, T, K)."""
    for head in heads(model):
        if len(head.shape) not in (2, 3) or head.shape[-1] is None:
            return UNSUPPORTED_OUTPUT.format(head=head.name, shape=head.shape)
    return None


def head_of(model, output=None) -> Head:
    """The head named (or numbered) by ``output``; None: the first (the only one, for most models)."""
    found = heads(model)
    if output is None or output == "":
        return found[0]
    names = ", ".join(repr(h.name) for h in found)
    for head in found:
        if head.name == str(output):
            return head
    text = str(output).strip()
    if text.lstrip("-").isdigit():
        index = int(text)
        if 0 <= index < len(found):
            return found[index]
        raise AttributionError(HEAD_OUT_OF_RANGE.format(name=output, count=len(found), names=names))
    raise AttributionError(UNKNOWN_HEAD.format(name=output, names=names))


def period_number(head: Head, period, labels=None) -> int | None:
    """The 1-based period number of ``period`` (a number 1..T as int or text, or one of ``labels``) for ``head``;
    None for a head with one prediction per customer and no period asked. Bad values raise, listing valid ones."""
    count = head.periods or (len(labels) if labels is not None else None)
    if period is None or period == "":
        return count if head.per_period else None
    if len(head.shape) == 2 and count is None:
        raise AttributionError(NOT_PER_PERIOD.format(period=period, head=head.name, shape=head.shape))
    if len(head.shape) == 2 and head.width != count:
        raise AttributionError(NOT_PER_PERIOD.format(period=period, head=head.name, shape=head.shape))
    if count is None:  # a per-period output of any length, and no periods to count
        raise AttributionError(PERIOD_OUT_OF_RANGE.format(period=period, head=head.name, count="an unknown number of",
                                                          labels=""))
    labels = [str(label) for label in labels] if labels is not None else None
    text = str(period).strip()
    digits = not isinstance(period, bool) and text.isdigit()
    if digits and 1 <= int(text) <= count:
        return int(text)
    if labels and text in labels:
        return labels.index(text) + 1
    if digits or isinstance(period, int):
        shown = f", or a period label such as {labels[0]!r} or {labels[-1]!r}" if labels else ""
        raise AttributionError(PERIOD_OUT_OF_RANGE.format(period=period, head=head.name, count=count, labels=shown))
    raise AttributionError(PERIOD_NOT_A_LABEL.format(period=period, count=count,
                                                     labels=", ".join(repr(x) for x in (labels or [])[:12])))


# --------------------------------------------------------------------------- the view

_LOCK = threading.Lock()
_SOURCE = "_explain_view_of"  # a view's attribute: the model it was made from
_CHOICE = "_explain_choice"  # a view's attribute: (head index, period number or None)
_VIEWS = "_explain_views"  # a model's attribute: its views by (head index, period); a cycle the collector frees


def source_of(model):
    """The model a view was made from; ``model`` itself when it is not a view."""
    return getattr(model, _SOURCE, None) or model


def _views(model) -> dict:
    views = getattr(model, _VIEWS, None)
    if views is None:
        views = {}
        object.__setattr__(model, _VIEWS, views)  # past Keras' attribute tracking
    return views


def choice_of(model) -> tuple[int, int | None]:
    """(head index, period number or None) that ``model`` explains: a view's, or (0, None)."""
    return getattr(model, _CHOICE, None) or (0, None)


def head_output_names(head: Head) -> list[str]:
    """The column names of a head that the bundle does not name: the head's name, or name_0, name_1, ..."""
    return [head.name] if head.width == 1 else [f"{head.name}_{i}" for i in range(head.width)]


class Choice(NamedTuple):
    """What ``choose`` resolved: ``output`` the head's name (None for a model with one output), ``period`` its
    number (1 = first; None: no period), and that head's ``output_names`` and default ``target``."""

    output: str | None
    period: int | None
    output_names: list
    target: int


def choose(bundle, output=None, period=None) -> Choice | None:
    """The head and period a request explains in ``bundle`` (``output``/``period`` as given; None: the bundle's own
    head, and its period for that head, else the last); None for a model with one (None, K) output and nothing
    asked. Bad values raise ``AttributionError`` listing the valid ones."""
    model = getattr(bundle, "model", None)
    if model is None:  # a bundle stand-in without a model (names only): nothing to choose
        return None
    model = source_of(model)
    found = heads(model)
    asked_head, asked_period = output not in (None, ""), period not in (None, "")
    if len(found) == 1 and not found[0].per_period and not asked_head and not asked_period:
        return None
    own_index, own_period = choice_of(bundle.model)
    head = head_of(model, output) if asked_head else found[own_index]
    if not asked_period and head.index == own_index and own_period is not None:
        period = own_period
    number = period_number(head, period, getattr(bundle, "periods", None))
    if head.index == own_index:
        names, target = list(bundle.output_names), int(getattr(bundle, "target", 0))
    else:
        names, target = head_output_names(head), 0
    return Choice(head.name if len(found) > 1 else None, number, names, target)


def output_view(model, output=None, period: int | None = None):
    """``model`` seen through one output: the head ``output`` (name or index; None: the first) at ``period`` (the
    1-based period number of a per-period head; None: the last; ignored by a (None, K) head unless it is (None, T)
    read per period). The model itself when it has one (None, K) output and no period is asked. Kept per
    (model, head, period): the engine's compiled functions are reused."""
    model = source_of(model)
    head = head_of(model, output)
    per_period = head.per_period or period is not None
    if len(heads(model)) == 1 and not per_period:
        return model
    count = head.periods or (head.width if len(head.shape) == 2 else None)
    if per_period:
        number = count if period is None else int(period)
        if number is None:
            raise AttributionError(PERIOD_OUT_OF_RANGE.format(period=period, head=head.name, count="?", labels=""))
        index = number - 1 - count if count is not None else number - 1  # from the end: the cut keeps it
    else:
        index = None
    key = (head.index, index)
    with _LOCK:
        views = _views(model)
        if key not in views:
            views[key] = _build(model, head, index)
            object.__setattr__(views[key], _CHOICE, (head.index, number if per_period else None))
        return views[key]


def head_model(model, output=None):
    """``model`` with one output: the head ``output`` whole ((None, T, K) for a per-period head): the risk curve's
    model. The model itself when it has one output."""
    model = source_of(model)
    head = head_of(model, output)
    if len(heads(model)) == 1:
        return model
    key = (head.index, "whole")
    with _LOCK:
        views = _views(model)
        if key not in views:
            import keras

            views[key] = _keep(keras.Model(model.inputs, model.outputs[head.index], name=f"{_name(model)}_{head.name}"),
                               model)
        return views[key]


def _name(model) -> str:
    return str(getattr(model, "name", "model") or "model")


def _build(model, head: Head, index: int | None):
    """The view of ``head`` at position ``index`` (negative, from the end; None: no period)."""
    import keras

    tensor = model.outputs[head.index]
    rank = len(head.shape)
    end = _pre_activation(tensor)
    if end is not None and not (rank == 2 and index is not None and end[2] == "softmax"):
        hidden, dense, activation = end  # softmax over the periods of a (None, T) head: no logit of one period
        z = _pre_activation_layer(dense)(hidden) if dense is not None else hidden
        out = keras.layers.Activation(activation, name="explained_output")(_pick(z, index, rank))
        return _keep(keras.Model(model.inputs, out, name=f"{_name(model)}_view"), model)
    out = keras.layers.Identity(name="explained_output")(_pick(tensor, index, rank))  # the engine reads log-odds
    return _keep(keras.Model(model.inputs, out, name=f"{_name(model)}_view"), model)


def _pick(tensor, index: int | None, rank: int):
    """``tensor`` at period ``index`` ((None, K)), or whole when no period is asked."""
    if index is None:
        return tensor
    return tensor[:, index, :] if rank == 3 else tensor[:, index:index + 1 or None]  # -1: [:, -1:]


def _keep(view, model):
    object.__setattr__(view, _SOURCE, model)
    return view


def _pre_activation(tensor):
    """(the input of the layer that made ``tensor``, the Dense whose kernel makes the pre-activation or None for an
    Activation layer, the activation's name), or None when the output does not end in a sigmoid, softmax or linear
    Dense, TimeDistributed(Dense) or Activation."""
    history = getattr(tensor, "_keras_history", None)
    if history is None:
        return None
    layer, node_index = history[0], history[1]
    try:
        node = layer._inbound_nodes[node_index]
        inputs = list(node.input_tensors)
    except Exception:  # noqa: BLE001 - an op without nodes
        return None
    if len(inputs) != 1:
        return None
    inner = layer.layer if type(layer).__name__ == "TimeDistributed" else layer
    name = getattr(getattr(inner, "activation", None), "__name__", None)
    if name not in _ACTIVATIONS:
        return None
    kind = type(inner).__name__
    if kind == "Dense" and getattr(inner, "kernel", None) is not None:
        return inputs[0], inner, name
    if kind == "Activation":
        return inputs[0], None, name
    return None


def _pre_activation_layer(dense):
    """A Dense layer computing ``dense``'s pre-activation (x @ kernel + bias) with a copy of its weights: a plain
    Keras layer, so the view can be cloned (``keras.models.clone_model``: the padding cut, the randomisation check)."""
    import keras

    copy = keras.layers.Dense(int(dense.units), use_bias=bool(dense.use_bias), dtype=dense.dtype_policy,
                              name="explained_logits")
    copy.build((None, int(dense.kernel.shape[0])))
    copy.kernel.assign(dense.kernel)
    if dense.use_bias:
        copy.bias.assign(dense.bias)
    return copy


# --------------------------------------------------------------------------- causality


def causal(model) -> bool | None:
    """True: every layer lets a period depend on earlier periods only (attributions to periods after the explained
    one are exactly 0); False: a layer looks ahead (later periods can matter); None: not known."""
    if look_ahead_layers(model):
        return False
    return None if any(type(layer).__name__ not in _KEEP_ORDER for layer in _layers(source_of(model))) else True


def look_ahead_layers(model) -> list:
    """The layers of ``model`` known to let a period depend on later periods."""
    found = []
    for layer in _layers(source_of(model)):
        kind = type(layer).__name__
        conv = kind in ("Conv1D", "SeparableConv1D", "DepthwiseConv1D") and getattr(layer, "padding", "valid") != \
            "causal" and max(tuple(getattr(layer, "kernel_size", (1,)))) > 1
        if kind in _LOOK_AHEAD or getattr(layer, "go_backwards", False) or conv:
            found.append(layer)
    return found


def _layers(model):
    """Every layer of ``model``, nested models' and wrappers' included."""
    for layer in getattr(model, "layers", None) or []:
        yield layer
        inner = getattr(layer, "layer", None) or getattr(layer, "forward_layer", None)
        if inner is not None:
            yield inner
        if getattr(layer, "layers", None):
            yield from _layers(layer)


def opened(model, output=None, period=None, periods=None):
    """(the model a bundle explains by default, its head's name, its period number) for a model opened with
    bundle.json's ``output`` and ``output_period`` (None: the first head, the last period): the view, or the model
    itself (and None, None) when it has one (None, K) output and no period is named."""
    if not needs_view(model) and period in (None, ""):
        return model, None, None
    head = head_of(model, output)
    number = period_number(head, period, periods)
    return output_view(model, head.name, number), head.name, number
