"""Trusted code: the owner's own custom Keras layers, for bundles given on the command line.

``python -m explain ... --trust-code layers.py`` and ``streamlit run app.py -- --bundle DIR
--trust-code layers.py`` import ``layers.py`` (it runs, with every right of the user who
started the program: that is the point, and the reason it is never done for an upload) and
collect the Keras objects it defines:

* everything it registers with ``@keras.saving.register_keras_serializable`` (by registered
  name, ``"package>Name"``), and
* every class (a Keras layer, model, initializer, regularizer or constraint) and every
  function defined at the top level of the file, by its Python name.

:func:`load_trusted_code` returns them as a :class:`TrustedCode`; the model loaders of
``explain.modelfile.safe_load`` accept it (``trusted=``): the refusal walk lets exactly these names
through (everything else is still refused, with the same words) and Keras gets them as
``custom_objects``. Uploads never get a ``TrustedCode``.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Mapping

from explain.core.errors import ExplainError

TRUST_NOT_FOUND = (
    "--trust-code {path}: no such file. To fix: give the path of the Python file that defines "
    "your custom layers (for example --trust-code layers.py)."
)
TRUST_NOT_PYTHON = (
    "--trust-code {path} is not a Python source file (expected a name ending in .py). To fix: "
    "give the .py file that defines your custom layers."
)
TRUST_IMPORT_FAILED = (
    "--trust-code {path} could not be imported: {error}. To fix: check that the file runs with "
    "python {name} in this environment (its imports are installed)."
)
TRUST_NOTHING = (
    "--trust-code {path} defines no Keras object: no class or function at its top level and "
    "nothing registered with @keras.saving.register_keras_serializable. To fix: give the file "
    "that defines the model's custom layers."
)
# The dashboard shows this as a badge, the CLI prints it (to stderr) before working.
TRUSTED_BADGE = "trusted code loaded: {name}"


class TrustError(ExplainError):
    """The ``--trust-code`` file cannot be used."""


@dataclass(frozen=True)
class TrustedCode:
    """The Keras objects of one trusted file, by the names a model file uses for them."""

    path: Path
    objects: Mapping[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def badge(self) -> str:
        return TRUSTED_BADGE.format(name=self.name)

    def names(self) -> frozenset[str]:
        return frozenset(self.objects)


_LOADED: dict[Path, TrustedCode] = {}
_LOCK = threading.Lock()


def load_trusted_code(path) -> TrustedCode:
    """Import the trusted file ``path`` (once per process) and collect its Keras objects.

    Raises :class:`TrustError` (an ``ExplainError``) naming the file when it is missing, is
    not a ``.py`` file, fails to import (the error's type and message on one line) or
    defines no Keras object.
    """
    given = str(path)
    path = Path(path)
    if not path.is_file():
        raise TrustError(TRUST_NOT_FOUND.format(path=given))
    if path.suffix != ".py":
        raise TrustError(TRUST_NOT_PYTHON.format(path=given))
    resolved = path.resolve()
    with _LOCK:
        if resolved in _LOADED:
            return _LOADED[resolved]
        import keras

        before = dict(keras.saving.get_custom_objects())
        module = _import(resolved, given)
        objects = {name: obj for name, obj in keras.saving.get_custom_objects().items()
                   if before.get(name) is not obj}
        objects.update(_defined(module, keras))
        if not objects:
            raise TrustError(TRUST_NOTHING.format(path=given))
        trusted = TrustedCode(path=resolved, objects=MappingProxyType(objects))
        _LOADED[resolved] = trusted
        return trusted


def _import(path: Path, given: str) -> ModuleType:
    name = "explain_trusted_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.parent)
    sys.path.insert(0, folder)  # its own helper modules next to it import too
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and all: reported, never a traceback
        sys.modules.pop(name, None)
        text = " ".join(str(exc).split())
        error = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        raise TrustError(TRUST_IMPORT_FAILED.format(path=given, error=error[:300],
                                                    name=path.name)) from exc
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return module


def _defined(module: ModuleType, keras) -> dict[str, object]:
    """Top-level classes (Keras kinds) and functions defined in ``module`` itself."""
    kinds = (keras.layers.Layer, keras.initializers.Initializer, keras.regularizers.Regularizer,
             keras.constraints.Constraint)
    found = {}
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if (inspect.isclass(obj) and issubclass(obj, kinds)) or inspect.isfunction(obj):
            found[obj.__name__] = obj
    return found
