"""Legacy HDF5 (``.h5``) Keras models: the same checks as a ``.keras`` file, then the legacy loader.

TensorFlow 2 (tf.keras) and Keras 3's ``model.save("model.h5")`` write one HDF5 file: the
architecture is the JSON attribute ``model_config`` of the root group, the weights are
datasets under ``model_weights/`` (and ``optimizer_weights/``). Nothing here runs before the
checks pass: the file is opened with h5py (metadata only), ``model_config`` is read under a
size cap, rewritten into the shape of a Keras 3 ``config.json`` (:func:`legacy_config`) and
walked by the same refusal walk as a ``.keras`` file (Lambda layers, custom or registered
classes, modules outside Keras, lookup vocabularies read from files, the estimated number of
weights), and the declared sizes, links and external storage of every dataset are checked.

Public API: :func:`check_hdf5_file` and :func:`load_hdf5_model` (used through
``safe_load.open_model``, which picks this module for ``.h5`` / ``.hdf5`` names, see
:func:`is_hdf5_name`).  Both take ``limits=Limits(...)`` and ``trusted=`` (the owner's
``--trust-code`` objects, ``explain.modelfile.trust``) like the ``.keras`` loaders.
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path
from typing import TYPE_CHECKING

from explain.core.errors import refusal
from explain.core.text import one_line
from explain.modelfile.common import (
    ZIP_MAGIC,
    ModelFileReport,
    check_path,
    hdf5_datasets,
    is_hdf5,
    keras_load,
    sniff_kind,
    trusted_names,
)
from explain.modelfile.config import CONFIG_TOO_LARGE, as_int, check_config, last_dim, parse_config
from explain.modelfile.limits import DEFAULT_LIMITS, Limits

if TYPE_CHECKING:
    from explain.modelfile.trust import TrustedCode

HDF5_SUFFIXES = (".h5", ".hdf5")


def is_hdf5_name(path) -> bool:
    """Whether ``path``'s name says legacy HDF5 model (``.h5`` / ``.hdf5``, any case)."""
    return Path(path).suffix.lower() in HDF5_SUFFIXES

# --------------------------------------------------------------------------- messages

_CONVERT = ('in a trusted environment, run model = keras.saving.load_model("model.h5") and '
            'model.save("model.keras"), and use the .keras file')
NOT_HDF5 = (
    "{path} is named like a legacy HDF5 Keras model but is not an HDF5 file ({kind}). To fix: "
    "if it is a Keras 3 model, name it model.keras; otherwise save the model again with "
    'model.save("model.h5") or model.save("model.keras").'
)
UNREADABLE_HDF5 = (
    "{path} is a damaged HDF5 file ({reason}). To fix: save the model again with "
    'model.save("model.keras") and use that file.'
)
WEIGHTS_ONLY = (
    "{path} holds weights only, not a model: it has no model_config attribute (it was written "
    "by model.save_weights). To fix: build the model in code, call "
    'model.load_weights("{name}"), then model.save("model.keras") and use that file.'
)
BAD_MODEL_CONFIG = (
    "{path}: its model_config attribute cannot be read ({reason}). To fix: " + _CONVERT + "."
)
BAD_DATASETS = "{path}: the HDF5 file {reason}. To fix: " + _CONVERT + "."
DATASETS_TOO_LARGE = (
    "{path} declares {size:,} bytes of weights, over the limit of {limit:,} bytes. To fix: use "
    "a smaller model, or raise it with --limit max_uncompressed_bytes=N on the command line if you "
    "trust this file."
)

# --------------------------------------------------------------------------- legacy configs

# Keras classes a module-less legacy entry may name: what Keras' legacy deserializer finds by
# name among its built-in layers, models, initializers, regularizers, constraints and dtype
# policies (anything else is looked up among custom objects, and refused).
_LEGACY_NAMESPACES = ("layers", "models", "initializers", "regularizers", "constraints",
                      "dtype_policies")
_LEGACY_EXTRA = {"Functional": "keras.models", "Policy": "keras.dtype_policies"}


def _legacy_module(class_name: str) -> str | None:
    """The public Keras module of a built-in class named ``class_name``, else None."""
    import keras

    if class_name in _LEGACY_EXTRA:
        return _LEGACY_EXTRA[class_name]
    bases = (keras.layers.Layer, keras.initializers.Initializer, keras.regularizers.Regularizer,
             keras.constraints.Constraint, keras.dtype_policies.DTypePolicy)
    for section in _LEGACY_NAMESPACES:
        obj = getattr(getattr(keras, section, None), class_name, None)
        if inspect.isclass(obj) and issubclass(obj, bases):
            return f"keras.{section}"
    return None


def _layer_dim(node: dict, inputs: list) -> int | None:
    """The last dimension a legacy layer outputs, from its config and its inputs' dimensions."""
    conf = node.get("config") if isinstance(node.get("config"), dict) else {}
    for key in ("batch_input_shape", "batch_shape"):
        dim = last_dim(conf.get(key))
        if dim is not None:
            return dim
    known = [d for d in inputs if d is not None]
    if node.get("class_name") == "Concatenate" and known:
        return sum(known)
    for key in ("units", "filters", "output_dim"):
        value = as_int(conf.get(key))
        if value:
            return value
    return max(known) if known else None


def _legacy_inbound(node: dict) -> list[str]:
    """Names of the layers feeding a legacy node: inbound_nodes = [[[name, i, j, {}], ...]]."""
    names = []
    for call in node.get("inbound_nodes") or []:
        for ref in call if isinstance(call, list) else []:
            if isinstance(ref, list) and ref and isinstance(ref[0], str):
                names.append(ref[0])
    return names


def _add_shapes(model_node: dict) -> None:
    """Give each layer of a legacy Functional/Sequential a ``build_config`` input shape.

    Legacy configs carry no tensor shapes between layers, which the size estimate reads;
    the last dimension is propagated from the inputs (best effort, like the estimate).
    """
    conf = model_node.get("config")
    layers = conf.get("layers") if isinstance(conf, dict) else None
    if not isinstance(layers, list):
        return
    sequential = model_node.get("class_name") == "Sequential"
    dims: dict[str, int | None] = {}
    previous: int | None = None
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        if layer.get("class_name") in ("Functional", "Sequential", "Model"):
            _add_shapes(layer)
        sources = [previous] if sequential else [dims.get(n) for n in _legacy_inbound(layer)]
        known = [d for d in sources if d is not None]
        if known and "build_config" not in layer and layer.get("class_name") != "InputLayer":
            layer["build_config"] = {"input_shape": [None, max(known)]}
        dim = _layer_dim(layer, sources)
        name = layer.get("name") or (layer.get("config") or {}).get("name")
        if isinstance(name, str):
            dims[name] = dim
        previous = dim if dim is not None else previous


def _add_modules(node):
    """Name the Keras module of every module-less built-in entry; registered names apart."""
    if isinstance(node, list):
        for item in node:
            _add_modules(item)
        return
    if not isinstance(node, dict):
        return
    class_name = node.get("class_name")
    if isinstance(class_name, str) and "module" not in node:
        if ">" in class_name:  # a registered custom object: "package>Name"
            node["registered_name"] = class_name
            node["class_name"] = class_name.rsplit(">", 1)[1] or class_name
        else:
            module = _legacy_module(class_name)
            if module is not None:
                node["module"] = module
    for value in node.values():
        _add_modules(value)


def legacy_config(config: dict) -> dict:
    """A copy of a legacy ``model_config`` in the shape the refusal walk reads.

    Every module-less entry whose class is a built-in Keras class gets that class's Keras
    module; a registered custom object (``"package>Name"``) gets its registered name; any
    other module-less entry stays module-less and is refused as a custom object, with the
    same words as in a ``.keras`` file. Layers get input shapes for the size estimate.
    """
    config = copy.deepcopy(config)
    _add_shapes(config)
    _add_modules(config)
    return config


# --------------------------------------------------------------------------- the file


def _check_datasets(h5, shown: str, max_bytes: int) -> int:
    """Declared size of every dataset; no links, external storage or virtual datasets."""
    try:
        total, bad = hdf5_datasets(h5)
    except Exception as exc:  # noqa: BLE001 - a damaged file
        raise refusal(UNREADABLE_HDF5, path=shown, reason=one_line(exc)) from None
    if bad:
        raise refusal(BAD_DATASETS, path=shown, reason="; ".join(bad[:5]))
    if total > max_bytes:
        raise refusal(DATASETS_TOO_LARGE, path=shown, size=total, limit=max_bytes)
    return total


def _read_model_config(h5, shown: str, name: str, limits: Limits) -> dict:
    if "model_config" not in h5.attrs:
        raise refusal(WEIGHTS_ONLY, path=shown, name=name)
    try:
        size = h5.attrs.get_id("model_config").get_storage_size()
    except Exception as exc:  # noqa: BLE001
        raise refusal(BAD_MODEL_CONFIG, path=shown, reason=one_line(exc)) from None
    if size > limits.max_json_bytes:
        reason = f"it is {size:,} bytes, over the limit max_json_bytes={limits.max_json_bytes:,}"
        raise refusal(CONFIG_TOO_LARGE, path=shown, part="model_config", reason=reason, field="max_json_bytes")
    try:
        raw = h5.attrs["model_config"]
        if hasattr(raw, "tobytes") and not isinstance(raw, (bytes, str)):
            raw = raw.tobytes()
        raw = raw if isinstance(raw, bytes) else str(raw).encode("utf-8")
    except Exception as exc:  # noqa: BLE001 - bad bytes
        raise refusal(BAD_MODEL_CONFIG, path=shown, reason=one_line(exc)) from None
    return parse_config(raw, shown, "model_config", limits, BAD_MODEL_CONFIG)


def check_hdf5_file(
    path,
    *,
    limits: Limits = DEFAULT_LIMITS,
    display_name: str | None = None,
    trusted: "TrustedCode | None" = None,
) -> ModelFileReport:
    """Check a legacy ``.h5`` model without building it; raise ``UnsafeModelError``.

    The same refusals as :func:`explain.modelfile.safe_load.check_model_file`, read from the HDF5
    file: its size, its signature, ``model_config`` (the refusal walk; ``trusted`` names the
    custom objects of ``--trust-code``), the estimated number of weights
    (``limits.max_params``) and every dataset's declared size and storage
    (``limits.max_uncompressed_bytes``).
    """
    import h5py

    path = Path(path)
    shown = display_name or str(path)
    size = check_path(path, shown, limits.max_file_bytes)
    with open(path, "rb") as handle:
        head = handle.read(16)
        if not is_hdf5(handle, size):
            kind = "a Keras 3 .keras zip archive" if head.startswith(ZIP_MAGIC) else sniff_kind(head)
            raise refusal(NOT_HDF5, path=shown, kind=kind)
    try:
        h5 = h5py.File(path, "r")
    except Exception as exc:  # noqa: BLE001 - any parse error
        raise refusal(UNREADABLE_HDF5, path=shown, reason=one_line(exc)) from None
    with h5:
        config = _read_model_config(h5, shown, path.name, limits)
        params = check_config(legacy_config(config), shown, limits, trusted_names(trusted))
        weights_bytes = _check_datasets(h5, shown, limits.max_uncompressed_bytes)
    return ModelFileReport(
        path=path, size_bytes=size, uncompressed_bytes=weights_bytes, members=(),
        estimated_params=params, weights_bytes=weights_bytes,
    )


def load_hdf5_model(path, *, limits: Limits = DEFAULT_LIMITS, display_name: str | None = None,
                    trusted: "TrustedCode | None" = None):
    """:func:`check_hdf5_file`, then Keras' legacy loader (``safe_mode=True``, ``compile=False``,
    ``trusted``'s objects as ``custom_objects``)."""
    path = Path(path)
    check_hdf5_file(path, limits=limits, display_name=display_name, trusted=trusted)
    return keras_load(path, display_name or str(path), ".h5", trusted)
