"""A TensorFlow SavedModel folder as a bundle's model (``savedmodel/`` in place of ``model.keras``).

A SavedModel is a TensorFlow program: its graph can read and write files and run operations of its own, and
nothing can be checked about what it does before it runs. So it is opened only when the owner says they trust
it (``--trust-model``, ``load_bundle(..., trust_model=True)``: a :class:`TrustModel` loader), never from an
upload, and only under Keras' TensorFlow backend.

What is checked before TensorFlow reads anything (:func:`check_folder`, the same ``Limits`` as a model file):

* ``max_file_bytes``: every file of the folder (``saved_model.pb``, each ``variables/`` shard, assets);
* ``max_uncompressed_bytes``: all its files together (the counterpart of a ``.keras`` archive unpacked);
* ``max_members``: how many files it holds;
* ``max_params``: the values of the weights listed in ``variables/variables.index`` (read by TensorFlow's
  checkpoint reader, which runs no graph), before the graph is loaded;
* every entry is a plain file or folder (no links, no devices).

``max_layers`` and ``max_config_entries`` measure a Keras architecture, which a SavedModel does not hold; the
trial load's ``memory_limit_bytes``, ``timeout_s``, ``cpu_limit_s`` and ``max_load_cpu_s`` are for uploads, which
never hold a SavedModel.

:func:`open_savedmodel` then calls the ``serving_default`` signature (what Keras 3's ``model.export(dir)``,
TensorFlow 2.x's ``model.save(dir)`` and ``tf.saved_model.save(module, dir, signatures=...)`` write) through a
``keras.layers.TFSMLayer`` inside a Keras functional model whose inputs come from the signature: one
``keras.Input`` per argument, named as in the signature, with its shape and dtype, **in the order of their names**
(a signature's arguments are keyword arguments: TensorFlow keeps them by name, not by position). The model takes a
dict {name: array}; the bundle's tables are matched to those names as for any model of several inputs (a model of
one 2-D and one 3-D float input is the usual ``static``/``temporal`` pair). Each output of the signature is an
output of the model (a head, chosen by its name with ``--output NAME``), named as in the signature, in the order
of their names; an output of shape ``(None,)`` becomes ``(None, 1)``. Gradients flow
through the loaded function (TensorFlow differentiates the loaded graph).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from explain.core.errors import UnsafeModelError
from explain.core.text import one_line
from explain.modelfile.limits import DEFAULT_LIMITS, Limits

FOLDER = "savedmodel"
SIGNATURE = "serving_default"
GRAPH_FILES = ("saved_model.pb", "saved_model.pbtxt")
VARIABLES = "variables/variables"  # the checkpoint prefix of a SavedModel's weights
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"

WHY = ("a SavedModel is a TensorFlow program: its graph can read and write files and run operations of its own, "
       "and nothing about what it does can be checked before it runs")
NOT_TRUSTED = ("This bundle holds a TensorFlow SavedModel (savedmodel/): " + WHY + ". It is opened only if you "
               "say you trust it: pass --trust-model if you trust it (explain.load_bundle(path, trust_model=True) "
               "in Python), or save the model with Keras 3 as model.keras.")
FROM_UPLOAD = ("'{name}' belongs to a TensorFlow SavedModel (savedmodel/): " + WHY + ", so the dashboard never "
               "opens one from an upload. To fix: upload the model saved with Keras 3 as model.keras, or serve this "
               "bundle from its folder with explain serve --bundle DIR --trust-model if you trust it.")
NOT_TENSORFLOW = ("savedmodel/ is a TensorFlow SavedModel, which runs only under Keras' TensorFlow backend; this "
                  "process uses {backend!r} (KERAS_BACKEND). To fix: run with KERAS_BACKEND=tensorflow, or save the "
                  "model with Keras 3 as model.keras.")
BOTH_MODELS = ("the bundle holds both {file} and savedmodel/: keep one model (remove the other) so that it is clear "
               "which one is explained.")
NO_GRAPH = ("savedmodel/ holds no saved_model.pb: it is not a SavedModel. To fix: write it with model.export(dir) "
            "(Keras 3) or tf.saved_model.save(obj, dir) into the bundle's savedmodel/ folder.")
NOT_PLAIN = ("savedmodel/{name} is {what}, not a plain file or folder: a SavedModel is read from its own files only. "
             "To fix: copy the files themselves into savedmodel/.")
FILE_TOO_LARGE = ("savedmodel/{name} is {size:,} bytes, over the limit of {limit:,} bytes for a model file "
                  "(max_file_bytes). To fix: use a smaller model, or raise it with --limit max_file_bytes=N if you "
                  "trust this model.")
TOTAL_TOO_LARGE = ("savedmodel/ holds {size:,} bytes in all, over the limit of {limit:,} bytes "
                   "(max_uncompressed_bytes). To fix: use a smaller model, or raise it with "
                   "--limit max_uncompressed_bytes=N if you trust this model.")
TOO_MANY_FILES = ("savedmodel/ holds more than {limit:,} files (max_members). To fix: remove what is not the model, "
                  "or raise it with --limit max_members=N if you trust this model.")
TOO_MANY_PARAMS = ("savedmodel/variables holds {params:,} weights, over the limit of {limit:,} (max_params). "
                   "To fix: use a smaller model, or raise it with --limit max_params=N (none: no limit) if you "
                   "trust this model.")
UNREADABLE = ("savedmodel/ could not be opened by TensorFlow: {error}. To fix: check that it was written by "
              "model.export(dir) or tf.saved_model.save, whole (saved_model.pb and variables/).")
NO_SIGNATURE = ("savedmodel/ has no '" + SIGNATURE + "' signature (it has {found}). To fix: export it with "
                "model.export(dir) (Keras 3), or tf.saved_model.save(obj, dir, signatures={{'" + SIGNATURE
                + "': f}}) with f a tf.function of input_signature=[tf.TensorSpec(...), ...].")
FIXED_BATCH = ("savedmodel/: the '" + SIGNATURE + "' signature's input {name!r} has shape {shape}; its first "
               "dimension must be None (any number of customers). To fix: export it with tf.TensorSpec([None, ...]).")


class SavedModelError(UnsafeModelError):
    """A SavedModel refused or unreadable; the message names savedmodel/, what is wrong and how to fix it."""


@dataclass(frozen=True)
class TrustModel:
    """A bundle's model loader that also opens a SavedModel folder: the owner trusts the model
    (``--trust-model``). ``loader(path)`` opens ``model.keras`` / ``model.h5`` as before (None: the default,
    ``safe_load.open_model`` under ``limits``). Never for uploads (``load_bundle_from_uploads`` drops it)."""

    loader: Callable | None = None
    limits: Limits = DEFAULT_LIMITS

    def __call__(self, path):
        if self.loader is not None:
            return self.loader(path)
        from explain.modelfile import safe_load

        return safe_load.open_model(path, limits=self.limits)


def trusts_model(loader) -> bool:
    """Whether ``loader`` is the owner's word that a SavedModel may be opened."""
    return isinstance(loader, TrustModel)


def untrusted(loader):
    """``loader`` without the trust in a SavedModel (what an upload gets)."""
    return loader.loader if isinstance(loader, TrustModel) else loader


def is_savedmodel_part(name: str) -> bool:
    """Whether an uploaded file's name is (part of) a SavedModel: a path through ``savedmodel/`` or
    ``variables/``, ``saved_model.pb``, ``fingerprint.pb``, a ``variables.index`` or ``variables.data-*`` shard."""
    parts = [p for p in str(name).replace("\\", "/").split("/") if p]
    base = parts[-1].lower() if parts else ""
    return (any(p.lower() in (FOLDER, "variables") for p in parts[:-1]) or base in GRAPH_FILES
            or base == "fingerprint.pb" or base == "variables.index" or base.startswith("variables.data-"))


@dataclass(frozen=True)
class FolderReport:
    """What :func:`check_folder` measured: the files (relative to the bundle folder, sorted), their bytes in
    all and the weights listed in the variables' index (None when there is no ``variables/``)."""

    files: tuple[str, ...]
    total_bytes: int
    params: int | None


def check_folder(path, limits: Limits = DEFAULT_LIMITS) -> FolderReport:
    """The sizes of the SavedModel folder ``path`` against ``limits``, each measured before it is read (see the
    module's words); ``SavedModelError`` naming the file and the limit otherwise."""
    root = Path(path)
    files, total = [], 0
    for folder, dirs, names in os.walk(root, followlinks=False):
        for name in sorted(dirs + names):
            full = Path(folder, name)
            relative = full.relative_to(root).as_posix()
            if full.is_symlink() or not (full.is_dir() or full.is_file()):
                raise SavedModelError(NOT_PLAIN.format(name=relative, what="a link" if full.is_symlink()
                                                       else "not a regular file"))
            if full.is_file():
                size = full.stat().st_size
                if size > limits.max_file_bytes:
                    raise SavedModelError(FILE_TOO_LARGE.format(name=relative, size=size,
                                                                limit=limits.max_file_bytes))
                files.append(relative)
                total += size
                if len(files) > limits.max_members:
                    raise SavedModelError(TOO_MANY_FILES.format(limit=limits.max_members))
    if total > limits.max_uncompressed_bytes:
        raise SavedModelError(TOTAL_TOO_LARGE.format(size=total, limit=limits.max_uncompressed_bytes))
    if not any((root / name).is_file() for name in GRAPH_FILES):
        raise SavedModelError(NO_GRAPH)
    params = _params(root) if (root / (VARIABLES + ".index")).is_file() else None
    if params is not None and limits.max_params is not None and params > limits.max_params:
        raise SavedModelError(TOO_MANY_PARAMS.format(params=params, limit=limits.max_params))
    return FolderReport(files=tuple(f"{FOLDER}/{name}" for name in sorted(files)), total_bytes=total, params=params)


def _params(root: Path) -> int:
    """The values of every variable listed in the checkpoint index (TensorFlow's reader: no graph runs)."""
    import tensorflow as tf

    try:
        listed = tf.train.list_variables(str(root / VARIABLES))
    except Exception as error:  # noqa: BLE001 - a damaged index is one message
        raise SavedModelError(UNREADABLE.format(error=one_line(error))) from error
    total = 0
    for name, shape in listed:
        if name == OBJECT_GRAPH:  # the checkpoint's own record of the objects, not a weight
            continue
        count = 1
        for dim in shape:
            count *= int(dim)
        total += count
    return total


def backend_problem() -> str | None:
    """NOT_TENSORFLOW when Keras' backend in this process is not TensorFlow (JAX cannot run a TF graph)."""
    from explain.core import backend

    name = backend.name()
    return None if name == "tensorflow" else NOT_TENSORFLOW.format(backend=name)


def open_savedmodel(path, *, limits: Limits = DEFAULT_LIMITS):
    """The SavedModel folder ``path`` as a Keras functional model (see the module's words), after
    :func:`check_folder`; ``SavedModelError`` for a refusal or a folder TensorFlow cannot read."""
    problem = backend_problem()
    if problem:
        raise SavedModelError(problem)
    check_folder(path, limits)
    import keras

    try:
        layer = _layer_class()(str(path), call_endpoint=SIGNATURE, trainable=False, name=FOLDER)
    except ValueError as error:
        if "endpoint" in str(error):
            raise SavedModelError(NO_SIGNATURE.format(found=_signatures(error))) from error
        raise SavedModelError(UNREADABLE.format(error=one_line(error))) from error
    except Exception as error:  # noqa: BLE001 - every TensorFlow failure is one message naming the folder
        raise SavedModelError(UNREADABLE.format(error=one_line(error))) from error
    inputs = _inputs(layer)
    outputs = layer(inputs)
    named, taken = {}, {*inputs, FOLDER}  # layer names in use: an output named like one keeps Keras' own name
    for name in sorted(outputs):
        tensor = outputs[name]
        if len(tensor.shape) == 1:  # one value per customer: (None,) -> (None, 1)
            tensor = keras.layers.Reshape((1,))(tensor)
        named[name] = keras.layers.Identity(name=name)(tensor) if name not in taken else tensor
    return keras.Model(inputs, next(iter(named.values())) if len(named) == 1 else named, name=FOLDER)


def _signatures(error: Exception) -> str:
    text = str(error)
    return text[text.find("[") :] if "[" in text else "none"


def _inputs(layer) -> dict:
    """{name: keras.Input} of the signature's arguments, in the order of their names."""
    import keras

    args, kwargs = layer.call_endpoint_fn.structured_input_signature
    specs = dict(kwargs)
    specs.update({spec.name or f"input_{k}": spec for k, spec in enumerate(args)})
    out = {}
    for name in sorted(specs):
        spec = specs[name]
        shape = tuple(spec.shape.as_list()) if spec.shape.rank is not None else ()
        if not shape or shape[0] is not None:
            raise SavedModelError(FIXED_BATCH.format(name=name, shape=shape or "unknown"))
        out[name] = keras.Input(shape=shape[1:], dtype=spec.dtype.name, name=name)
    return out


_CLASS: list = []


def _layer_class():
    """``keras.layers.TFSMLayer`` called with the signature's arguments by name (TFSMLayer passes one
    positional argument, which a signature function does not take)."""
    if not _CLASS:
        import keras

        class SignatureLayer(keras.layers.TFSMLayer):
            def call(self, inputs: Any, training=False, **kwargs):
                return self.call_endpoint_fn(**inputs)

        _CLASS.append(SignatureLayer)
    return _CLASS[0]

