"""Which compiled functions the engine uses: Keras' own backend (``KERAS_BACKEND``, read through
``keras.config.backend()``).

The IG arithmetic (``explain.core.engine``, ``ig``, ``adaptive``) is written once on NumPy; per
backend only the compiled functions differ, behind one small interface that both
``explain.core.backend_tf`` (TensorFlow: ``tf.function`` + ``GradientTape``, the default) and
``explain.core.backend_jax`` (JAX: ``jax.jit`` over the model's stateless call, ``jax.vjp``)
provide:

* ``NAME``; ``dtype(name)``: a dtype with ``.name`` and ``.as_numpy_dtype``; ``constant(array,
  dtype)``: an argument of the compiled functions; ``numpy(tensor)``: a result as an array;
* ``Compiler(engine)``: ``build(kind, space)`` returns the compiled function ``kind`` for output
  ``space`` (or, for ``kind == "embed"``, for the categorical input ``space``):

  - ``path(xs, bs, raws, alphas (c, k), weights (c, k), target)``: per input the weighted gradient
    sums (c, *point shape) float64 of each row along its own alphas, and whether they were finite (c,);
  - ``sweep(xs, bs, raws, alphas (c, k), target)``: the model's output (c, k) float64 along the paths;
  - ``forward(xs, raws)``: outputs (n, K) float64; ``points(ps, raws, target)``: outputs (m,) and
    gradients at each point; ``embed(ids)``: vectors (n, *shape, d) and padding (n, *shape);

  ``for_chunks(space, fn, rows, alphas)``: the function the chunks of one request call (the
  TensorFlow backend's optional XLA buckets), and ``check(layout)``: a sentence for an input the
  backend cannot compile (None when all can); ``fixed(space, rows)``: ``path`` compiled for calls of
  ``rows`` rows and each shape it meets (a batch job's calls: ``explain.core.xla.compiled_calls``);
* ``matmul(a, b)``: the logit head's product.

PyTorch is not offered: the ``torch`` wheel that pip installs from PyPI on Linux brings its CUDA
libraries (several gigabytes; a CPU-only wheel needs PyTorch's own package index), too much to
install and test in CI for a third copy of these functions.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

SUPPORTED = {"tensorflow": "explain.core.backend_tf", "jax": "explain.core.backend_jax"}
UNSUPPORTED = ("Keras' backend is {name!r} (KERAS_BACKEND); explain computes gradients with 'tensorflow' (the default) "
               "or 'jax'. Set KERAS_BACKEND=tensorflow or KERAS_BACKEND=jax before starting Python.")


def name() -> str:
    """Keras' backend in this process ("tensorflow", "jax", ...): Keras' own answer once it is imported, else
    what Keras will choose (``KERAS_BACKEND``, then ``keras.json`` in ``KERAS_HOME`` or ``~/.keras``, then
    TensorFlow), so that importing the engine does not import Keras."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "config"):
        return keras.config.backend()
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as file:
            return str(json.load(file).get("backend") or "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


def module(backend: str | None = None):
    """The module of compiled functions for ``backend`` (Keras' own when None)."""
    backend = backend or name()
    if backend not in SUPPORTED:
        raise RuntimeError(UNSUPPORTED.format(name=backend))
    return importlib.import_module(SUPPORTED[backend])


# ------------------------------------------------------------------ optional imports of Keras and TensorFlow, left out
# {the module refused: the importers it is refused to}. Each is an optional import of Keras or TensorFlow, in a
# ``try: import X except ImportError`` of theirs, for a part that nothing here uses; together 2-3 s of a dashboard
# start where all three are installed (``python -X importtime``, 2-core AMD EPYC):
UNUSED_OPTIONAL_IMPORTS = {
    "sklearn": ("keras.src.wrappers",),  # Keras' scikit-learn wrappers (keras.wrappers.SKLearnClassifier ...); 0.8 s
    "IPython": ("keras.src.saving.file_editor",),  # KerasFileEditor's notebook display
    # TensorFlow Lite's converter from JAX (tf.lite.TFLiteConverter.experimental_from_jax); a patch of JAX for Keras'
    # Orbax checkpoints. On Keras' JAX backend, Keras imports JAX first, and it is found already imported.
    "jax": ("tensorflow.lite.", "keras.src.callbacks.orbax_checkpoint"),
}


class _UnusedOptionalImports:
    """A finder that refuses ``import X`` when, and only when, one of X's importers in
    :data:`UNUSED_OPTIONAL_IMPORTS` asks for it (read from the importing frames), so that the importer leaves that
    optional part undefined as it does where X is not installed. Every other ``import X`` (scikit-learn for the
    segments of What drives churn, JAX as Keras' backend) finds it as usual."""

    def find_spec(self, name, path=None, target=None):
        importers = UNUSED_OPTIONAL_IMPORTS.get(name)
        if importers is None:
            return None
        frame = sys._getframe(1)
        while frame is not None:
            if str(frame.f_globals.get("__name__", "")).startswith(importers):
                raise ImportError(f"{name} is not loaded for {frame.f_globals['__name__']} here (explain.core.backend)")
            frame = frame.f_back
        return None


def skip_unused_optional_imports() -> bool:
    """Let Keras' and TensorFlow's import leave out the optional parts of :data:`UNUSED_OPTIONAL_IMPORTS` in this
    process (see :class:`_UnusedOptionalImports`). For the dashboard's and the command line's processes only, never
    on ``import explain`` (a notebook may use Keras' wrappers). Does nothing once Keras or TensorFlow is imported
    (a module already imported is found in ``sys.modules``, never refused); True if the finder is (now) in place."""
    if any(isinstance(f, _UnusedOptionalImports) for f in sys.meta_path):
        return True
    if "keras" in sys.modules or "tensorflow" in sys.modules:
        return False
    sys.meta_path.insert(0, _UnusedOptionalImports())
    return True


def prepare_process() -> None:
    """The command line's and the dashboard's processes, before TensorFlow is imported: Keras and TensorFlow without
    their unused optional imports (:func:`skip_unused_optional_imports`), and XLA's compiled executables kept on
    disk between processes (``explain.core.xla.keep_compiled``). Never on ``import explain``."""
    from explain.core import xla

    skip_unused_optional_imports()
    xla.keep_compiled()
