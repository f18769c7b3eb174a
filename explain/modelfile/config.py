"""The refusal walk over a model's architecture (a .keras file's ``config.json``, an .h5
file's ``model_config``), like Keras' deserializer reads it: every class it names must be a
built-in Keras class or function (no ``Lambda``, no custom or registered object, no module
outside Keras, no lookup vocabulary read from a file), and the weights each layer will
allocate are estimated before anything is built.

Public API: :func:`check_config` (raise ``UnsafeModelError`` listing every offending entry at
once, or with the estimated size; return the estimated number of weights) and
:class:`ConfigWalker` (the walk itself). ``trusted`` names the custom objects of
``--trust-code`` (``explain.modelfile.trust``): exactly those names pass, everything inside them is
still walked.  The templates below are re-exported by ``explain.modelfile.safe_load``.
"""

from __future__ import annotations

import re

from explain.core.bounded_json import JsonBoundError, load_bounded
from explain.core.errors import refusal
from explain.core.text import LINES_SHOWN, listing, one_line
from explain.modelfile.limits import Limits

UNSAFE_CONFIG = (
    "{path} was refused before loading: {count:,} part(s) of its config.json could run "
    "code or read files on this machine:\n{problems}"
)
TOO_MANY_LAYERS = (
    "{path}: the model has {layers:,} layers (nested models counted), over the limit of {limit:,}; "
    "loading it would hold this server for minutes (Keras' load time grows with the square of the "
    "layers). To fix: use a smaller model, or, if you trust this file, raise the limit with "
    "--limit max_layers=N on the command line."
)
# One line of UNSAFE_CONFIG's {problems}.  {where} is the path in the config, for
# example "functional > inner_model > layers[2]".
UNSAFE_ITEM = "- at {where}: layer {layer!r} ({class_name}): {why} To fix: {fix}"
CONFIG_TOO_LARGE = (
    "{path}: its {part} is too large to check: {reason}. To fix: use a smaller model, or, if you "
    "trust this file, raise the limit with --limit {field}=N on the command line."
)
CONFIG_ENTRIES = "it declares {count:,} objects (layers, initializers ...), over the limit max_config_entries={limit:,}"
TOO_MANY_PARAMS = (
    "{path}: the model is too large: it declares about {params:,} weights (about {gib:.1f} "
    "GiB in float32), over the limit of {limit:,}; largest layers: {largest}. To fix: use a "
    "smaller model, or, if you trust this file, raise the limit with --limit max_params=N on the "
    "command line."
)


# Why a part of config.json is refused, and how to fix it: (why, fix) pairs.
REASON_LAMBDA = (
    "a Lambda layer stores Python bytecode that would run when the model is loaded or "
    "called.",
    "replace the Lambda by built-in layers (for example keras.layers.Normalization, "
    "Rescaling, Reshape or Concatenate), or do that preprocessing outside the model, "
    "then save it again.",
)
REASON_PY_LAMBDA = (
    "its {field} is a Python lambda (stored bytecode that would run).",
    "use a built-in Keras function by name (for example activation=\"relu\") instead of "
    "a lambda, then save the model again.",
)
REASON_DENIED_CLASS = {
    "TFSMLayer": (
        "a TFSMLayer loads a TensorFlow SavedModel from a path on this machine and runs "
        "its graph.",
        "rebuild this part with built-in Keras layers and save the model again.",
    ),
    "TorchModuleWrapper": (
        "a TorchModuleWrapper holds a pickled PyTorch module (arbitrary code).",
        "rebuild this part with built-in Keras layers and save the model again.",
    ),
    "JaxLayer": (
        "a JaxLayer wraps Python functions that are not part of Keras.",
        "rebuild this part with built-in Keras layers and save the model again.",
    ),
    "FlaxLayer": (
        "a FlaxLayer wraps a Flax module (Python code that is not part of Keras).",
        "rebuild this part with built-in Keras layers and save the model again.",
    ),
}
REASON_MODULE = (
    "its module {module!r} is not part of Keras; loading it would import and run code "
    "from that module.",
    "use built-in Keras layers only, then save the model again.",
)
REASON_NO_MODULE = (
    "it names no module, so Keras would look {class_name!r} up among the custom objects "
    "registered in this process.",
    "use built-in Keras layers only, then save the model again.",
)
REASON_NOT_MODELING = (
    "{module}.{class_name} is a Keras utility, not a part of a model.",
    "use built-in Keras layers only, then save the model again.",
)
REASON_REGISTERED = (
    "it is a custom object registered as {registered!r} (with "
    "@keras.saving.register_keras_serializable); its code is not part of Keras.",
    "rebuild it with built-in Keras layers (custom layers cannot be uploaded), then save "
    "the model again.",
)
# The command line's hint when a model is refused for code of its own (never shown for an upload).
TRUST_CODE_HINT = (
    "hint: if these are your own custom layers, your own model on your own machine, add --trust-code LAYERS.py "
    "(the Python file that defines them: it is imported and runs) to this command; the dashboard's uploads never "
    "run such code."
)
# the refusals that code of the model's own causes (a custom class registered, or from another module)
_CUSTOM_CODE = re.compile(r"registered as .* \(with @keras\.saving\.register_keras_serializable\)|"
                          r"its module .* is not part of Keras|it names no module, so Keras would look")


def custom_code_refused(text: str) -> bool:
    """True when ``text`` (a check report or an error) refuses a model for custom code of its own."""
    return bool(_CUSTOM_CODE.search(str(text)))


REASON_FUNCTION = (
    "its {field} refers to the Python function {module}.{name}, which is not a built-in "
    "Keras function.",
    "use a built-in Keras function by name (for example activation=\"relu\"), then save "
    "the model again.",
)
REASON_VOCAB_FILE = (
    "its vocabulary is the file path {vocabulary!r}, which would be read from this "
    "machine when the model is loaded.",
    "pass the vocabulary as a list (vocabulary=[...]) or call layer.adapt(...) before "
    "saving, so that it is stored inside the .keras file.",
)
REASON_MALFORMED = (
    "this entry is malformed ({detail}).",
    'save the model again with model.save("model.keras") instead of editing config.json.',
)


# Serialized values (tensors, arrays, bytes...) that Keras decodes as data, never as code.
_DATA_CLASSES = frozenset(
    {"__keras_tensor__", "__tensor__", "__numpy__", "__bytes__", "__ellipsis__"}
)
# Keras namespaces whose objects are not parts of a model.
_NON_MODELING_PREFIXES = (
    "keras.utils",
    "keras.config",
    "keras.saving",
    "keras.models.load",
    "keras.src.utils",
    "keras.src.saving",
    "keras.src.export",
    "keras.src.legacy.saving",
    "keras.preprocessing",
)
# Where built-in Keras functions live (activations, initializers...).
_FUNCTION_MODULES = frozenset(
    {"activations", "constraints", "initializers", "losses", "metrics", "optimizers",
     "regularizers", "ops"}
)
_FUNCTION_NAME_DENYLIST = frozenset({"get", "deserialize", "serialize"})
_LOOKUP_CLASSES = frozenset({"StringLookup", "IntegerLookup", "TextVectorization"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")



def as_int(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _prod(values) -> int:
    out = 1
    for v in values:
        v = as_int(v)
        out *= v if v else 1
    return out


def _shape_from_build_config(node: dict):
    build = node.get("build_config")
    if isinstance(build, dict):
        for key in ("input_shape", "query_shape", "shape"):
            shape = build.get(key)
            if isinstance(shape, list) and shape:
                return shape
    return None


def last_dim(shape) -> int | None:
    if isinstance(shape, list) and shape and not isinstance(shape[0], (list, dict)):
        return as_int(shape[-1])
    return None


def _inbound_last_dim(node: dict) -> int | None:
    best = None
    for inbound in node.get("inbound_nodes") or []:
        args = inbound.get("args") if isinstance(inbound, dict) else None
        for arg in args or []:
            if isinstance(arg, dict) and arg.get("class_name") == "__keras_tensor__":
                conf = arg.get("config")
                dim = last_dim(conf.get("shape")) if isinstance(conf, dict) else None
                if dim is not None:
                    best = dim if best is None else max(best, dim)
    return best


def _kernel_volume(cfg: dict) -> int:
    kernel = cfg.get("kernel_size", 1)
    return _prod(kernel if isinstance(kernel, list) else [kernel])


def _estimate_params(class_name: str, cfg: dict, shape) -> int:
    """Weights a layer will allocate when built (best effort; 0 when unknown)."""
    last = last_dim(shape) or 1
    units = as_int(cfg.get("units")) or 0
    filters = as_int(cfg.get("filters")) or 0
    channels_first = cfg.get("data_format") == "channels_first"
    channels = last
    if channels_first and isinstance(shape, list) and len(shape) > 1:
        channels = as_int(shape[1]) or 1
    if class_name == "Dense":
        return last * units + units
    if class_name == "EinsumDense":
        out = cfg.get("output_shape")
        return last * _prod(out if isinstance(out, list) else [out])
    if class_name in ("LSTM", "LSTMCell"):
        return 4 * units * (last + units + 1)
    if class_name in ("GRU", "GRUCell"):
        return 3 * units * (last + units + 2)
    if class_name in ("SimpleRNN", "SimpleRNNCell"):
        return units * (last + units + 1)
    if class_name.startswith("ConvLSTM"):
        return 4 * filters * (_kernel_volume(cfg) * (channels + filters) + 1)
    if class_name == "Embedding":
        return (as_int(cfg.get("input_dim")) or 0) * (as_int(cfg.get("output_dim")) or 0)
    if class_name.startswith("Conv") and class_name[4:6] in ("1D", "2D", "3D"):
        return _kernel_volume(cfg) * channels * filters + filters
    if class_name.startswith("DepthwiseConv"):
        multiplier = as_int(cfg.get("depth_multiplier")) or 1
        return _kernel_volume(cfg) * channels * multiplier + channels * multiplier
    if class_name.startswith("SeparableConv"):
        multiplier = as_int(cfg.get("depth_multiplier")) or 1
        depthwise = _kernel_volume(cfg) * channels * multiplier
        return depthwise + channels * multiplier * filters + filters
    if class_name == "MultiHeadAttention":
        heads = as_int(cfg.get("num_heads")) or 0
        key_dim = as_int(cfg.get("key_dim")) or 0
        value_dim = as_int(cfg.get("value_dim")) or key_dim
        return heads * (key_dim * 2 * last + value_dim * 2 * last) + 4 * heads * key_dim
    if class_name in ("BatchNormalization", "LayerNormalization", "Normalization",
                      "GroupNormalization", "RMSNormalization"):
        return 4 * channels
    if class_name == "PReLU" and isinstance(shape, list):
        return _prod(shape[1:])
    return 0


def _refusal(class_name: str, module, registered, conf) -> tuple[str, dict] | None:
    """(reason, its fields) when a class that is not trusted may not be built: registered under another name,
    from no module or one outside Keras, a Lambda or a denied class, not a modelling class, or a lookup layer
    whose vocabulary is a file; else None."""
    if registered is not None and registered != class_name:
        return REASON_REGISTERED, {"registered": registered}
    if module is None:
        return REASON_NO_MODULE, {"class_name": class_name}
    if not isinstance(module, str):
        return REASON_MALFORMED, {"detail": "module is not a string"}
    if module != "keras" and not module.startswith("keras."):
        return REASON_MODULE, {"module": module}
    if class_name == "Lambda":
        return REASON_LAMBDA, {}
    if class_name in REASON_DENIED_CLASS:
        return REASON_DENIED_CLASS[class_name], {}
    if any(module == p or module.startswith(p + ".") for p in _NON_MODELING_PREFIXES):
        return REASON_NOT_MODELING, {"module": module, "class_name": class_name}
    vocabulary = conf.get("vocabulary") if isinstance(conf, dict) else None
    if class_name in _LOOKUP_CLASSES and isinstance(vocabulary, str):
        return REASON_VOCAB_FILE, {"vocabulary": vocabulary}
    return None


class ConfigWalker:
    """Walks a model config like Keras' deserializer does, collecting refusals and sizes.

    ``trusted``: class or registered names (``"package>Name"``) of the owner's own objects
    (``--trust-code``) that pass the class checks; their configs are still walked.
    """

    def __init__(self, trusted=()):
        self.problems: list[str] = []   # the first LINES_SHOWN problems; problem_count counts them all
        self.problem_count = 0
        self.layers = 0                 # entries of every "layers" list but inputs (nested models counted)
        self.params: list[tuple[str, int]] = []
        self.trusted = frozenset(trusted or ())

    def walk_root(self, root: dict) -> None:
        conf = root.get("config")
        name = conf.get("name") if isinstance(conf, dict) else None
        # With compile=False Keras drops the top-level compile_config unread.
        self._node(root, (), name if isinstance(name, str) else "model", None, ("model", "?"),
                   skip_keys=("compile_config",))

    # -- helpers
    def _problem(self, where: tuple[str, ...], owner, reason, **fields) -> None:
        self.problem_count += 1
        if len(self.problems) >= LINES_SHOWN:
            return
        why, fix = reason
        self.problems.append(
            UNSAFE_ITEM.format(
                where=" > ".join(where), layer=owner[0], class_name=owner[1],
                why=why.format(**fields), fix=fix.format(**fields),
            )
        )

    def _value(self, value, trail, pos, owner, shape):
        if isinstance(value, dict):
            if "class_name" in value:
                self._node(value, trail, pos, shape, owner)
            else:
                for key, item in value.items():
                    self._value(item, trail, _join(pos, key), owner, shape)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self._value(item, trail, f"{pos}[{i}]", owner, shape)

    def _node(self, node: dict, trail, pos, shape, owner, skip_keys=()) -> None:
        """One object of the config: refused with its reason, or passed (its parameters counted) and its
        children walked."""
        where = trail + (pos,)
        class_name = self._class_name(node, trail, pos, shape, owner)
        if class_name is None:  # refused, plain data, or walked already
            return
        conf = node.get("config")
        name = conf.get("name") if isinstance(conf, dict) else None
        me = (name if isinstance(name, str) else pos, class_name)
        if not _IDENTIFIER.match(class_name):
            self._problem(where, me, REASON_MALFORMED, detail=f"class_name {class_name!r}")
            return
        registered = node.get("registered_name")
        if self._is_trusted(class_name, registered):
            self._children(node, trail, me, shape, skip_keys)
            return
        refused = _refusal(class_name, node.get("module"), registered, conf)
        if refused is not None:
            reason, fields = refused
            self._problem(where, me, reason, **fields)
            return
        shape = self._count_params(node, me, shape)
        self._children(node, trail, me, shape, skip_keys)

    def _class_name(self, node: dict, trail, pos, shape, owner) -> str | None:
        """The class (or typespec) name to check, or None when there is nothing more to check: a malformed name
        or a Python lambda (refused), plain data, a slice (its values walked), a function (checked)."""
        class_name = node.get("class_name")
        where = trail + (pos,)
        if not isinstance(class_name, str) or not class_name:
            self._problem(where, owner, REASON_MALFORMED, detail="class_name is not a name")
            return None
        if class_name in _DATA_CLASSES:
            return None
        if class_name == "__lambda__":
            self._problem(where, owner, REASON_PY_LAMBDA, field=pos or "value")
            return None
        if class_name == "__slice__":
            self._value(node.get("config"), trail, pos, owner, shape)
            return None
        if class_name == "function":
            self._function(node, where, owner, pos or "value")
            return None
        if class_name == "__typespec__":
            class_name = node.get("spec_name")
            if not isinstance(class_name, str):
                self._problem(where, owner, REASON_MALFORMED, detail="spec_name is not a name")
                return None
        return class_name

    def _count_params(self, node: dict, me, shape):
        """The input shape the node's children see (its own build or inbound shape, else ``shape``); its
        estimated parameters go to ``self.params``."""
        class_name, conf = me[1], node.get("config")
        own_shape = _shape_from_build_config(node)
        if own_shape is None and node.get("inbound_nodes"):
            dim = _inbound_last_dim(node)
            own_shape = [None, dim] if dim is not None else None
        if own_shape is not None:
            shape = own_shape
        if isinstance(conf, dict):
            params = _estimate_params(class_name, conf, shape)
            if params:
                self.params.append((f"{me[0]} ({class_name})", params))
        return shape

    def _is_trusted(self, class_name: str, registered) -> bool:
        if registered is not None and registered != class_name:
            return registered in self.trusted
        return class_name in self.trusted

    def _children(self, node: dict, trail, me, shape, skip_keys) -> None:
        child_trail = trail + (me[0],)
        conf = node.get("config")
        if isinstance(conf, dict) and isinstance(conf.get("layers"), list):
            self.layers += sum(not (isinstance(layer, dict) and layer.get("class_name") == "InputLayer")
                               for layer in conf["layers"])
        for key, value in node.items():
            if key in ("class_name", "module", "registered_name") or key in skip_keys:
                continue
            if key == "config" and isinstance(value, dict):
                for ckey, cvalue in value.items():
                    self._value(cvalue, child_trail, ckey, me, shape)
            else:
                self._value(value, child_trail, key, me, shape)

    def _function(self, node: dict, where, owner, field) -> None:
        module = node.get("module")
        name = node.get("config")
        registered = node.get("registered_name")
        if self.trusted & {name, registered}:
            return
        ok = isinstance(name, str) and bool(_IDENTIFIER.match(name))
        ok = ok and name not in _FUNCTION_NAME_DENYLIST
        ok = ok and registered in (None, "function", name)
        if ok and module == "builtins":
            ok = _is_keras_builtin_function(name)
        elif ok and isinstance(module, str) and module.startswith("keras."):
            parts = module.split(".")
            section = parts[2] if parts[1] == "src" and len(parts) > 2 else parts[1]
            ok = section in _FUNCTION_MODULES
        else:
            ok = False
        if not ok:
            self._problem(where, owner, REASON_FUNCTION, field=field, module=module, name=name)


def _join(pos: str, key: str) -> str:
    return f"{pos}.{key}" if pos else key


def _is_keras_builtin_function(name: str) -> bool:
    import keras

    for section in ("activations", "constraints", "initializers", "losses", "metrics",
                    "optimizers", "regularizers"):
        if callable(getattr(getattr(keras, section, None), name, None)):
            return True
    return False




def parse_config(raw: bytes, shown: str, part: str, limits: Limits, unreadable: str) -> dict:
    """A model's architecture (``part``: "config.json", "model_config") parsed once its size, its number
    of objects (``"class_name"`` keys, counted on the bytes), its depth and its number of values are
    within ``limits``: CONFIG_TOO_LARGE otherwise; ``unreadable`` (a template with {path} and {reason})
    for bad UTF-8 or JSON or a config that describes no Keras object."""
    entries = raw.count(b'"class_name"')
    try:
        if entries > limits.max_config_entries:
            raise JsonBoundError(CONFIG_ENTRIES.format(count=entries, limit=limits.max_config_entries),
                                 "max_config_entries")
        config = load_bounded(raw, max_bytes=limits.max_json_bytes, max_depth=limits.max_json_depth,
                              max_values=limits.max_json_values)
    except JsonBoundError as error:
        raise refusal(CONFIG_TOO_LARGE, path=shown, part=part, reason=error.reason, field=error.field) from None
    except Exception as exc:  # noqa: BLE001 - bad UTF-8, bad JSON
        raise refusal(unreadable, path=shown, reason=one_line(exc)) from None
    if not (isinstance(config, dict) and isinstance(config.get("class_name"), str)):
        raise refusal(unreadable, path=shown, reason="it does not describe a Keras object")
    return config


def check_config(config: dict, shown: str, limits: Limits, trusted=()) -> int:
    """Walk ``config`` (the file ``shown``); return the estimated number of weights.

    Raises ``UnsafeModelError``: UNSAFE_CONFIG listing the offending entries (the first
    LINES_SHOWN, then how many more; ``problems`` holds one line each), TOO_MANY_LAYERS over
    ``limits.max_layers``, or TOO_MANY_PARAMS over ``limits.max_params`` (``None``: no limit).
    The config's depth was bounded when it was parsed (``explain.core.bounded_json``).
    """
    walker = ConfigWalker(trusted)
    walker.walk_root(config)
    if walker.problems:
        raise refusal(UNSAFE_CONFIG, items=walker.problems, path=shown, count=walker.problem_count,
                      problems="\n".join(listing(walker.problems, total=walker.problem_count, budget=2000)))
    if walker.layers > limits.max_layers:
        raise refusal(TOO_MANY_LAYERS, path=shown, layers=walker.layers, limit=limits.max_layers)
    params = sum(n for _, n in walker.params)
    if limits.max_params is not None and params > limits.max_params:
        largest = sorted(walker.params, key=lambda item: -item[1])[:3]
        raise refusal(TOO_MANY_PARAMS, path=shown, params=params, gib=params * 4 / 1024**3,
                      limit=limits.max_params, largest=", ".join(f"{label}: {n:,}" for label, n in largest))
    return params
