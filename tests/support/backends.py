"""Unlike models run on one Keras backend per process (Keras picks its backend when imported), for
tests/unit/core/test_backends.py:

    python -m tests.support.backends build DIR       # (any backend) the models as DIR/NAME.keras + inputs
    python -m tests.support.backends attribute DIR OUT.npz   # IG of every model and setting on this backend

and the Customer page's numbers on this process's backend (customer_page).

The models differ in their layers (GRU, Conv1D, Dense only, Embedding with mask_zero, Masking,
two temporal inputs, softmax, float64) and in their inputs' order and names.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np

N, S, T, F = 4, 5, 7, 3
SETTINGS = {  # name: integrated_gradients keywords
    "gl32": {"steps": 32},
    "logit": {"steps": 32, "space": "logit"},
    "per_input": {"steps": 16, "path": "per-input", "method": "trapezoid"},
    "auto": {"steps": "auto", "tolerance": 0.01, "max_points": 256},
}
# The settings each unlike model is compared on: every model on the default rule; the logit space, the per-input path
# and the adaptive rule each on the models whose layers make that setting's calls differ (output heads: sigmoid after
# a GRU, softmax, float64, linear; inputs: categorical, three inputs, the temporal input first; padding: Masking,
# mask_zero): 18 calls instead of all 32, each a compile on JAX (about 60 s of CPU there for the 32)
COMPARED = {
    "gru": ("gl32", "logit", "auto"),
    "conv1d_temporal_first": ("gl32", "per_input"),
    "dense_only": ("gl32", "logit"),
    "embedding": ("gl32", "per_input", "auto"),
    "masking": ("gl32", "auto"),
    "two_temporal": ("gl32", "per_input"),
    "softmax": ("gl32", "logit"),
    "float64": ("gl32", "logit", "auto"),
}


def jax_compilation_cache(folder: Path) -> dict:
    """Environment variables that give every JAX process started with them JAX's persistent compilation cache in
    ``folder``: a computation compiled once (the same model's same function at the same shapes, in any test's
    process, in a Ray worker) is read back instead of compiled again, every entry however quick to compile. Where
    ``filelock`` is installed, a size limit (never reached) turns on JAX's lock on the folder, for processes that
    write to it at once (Ray's workers); without it, an entry read while written fails to load and is compiled."""
    env = {"JAX_COMPILATION_CACHE_DIR": str(folder), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    if importlib.util.find_spec("filelock") is not None:
        env["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(16 << 30)
    return env


def session_jax_cache(tmp_path_factory) -> Path:
    """The JAX compilation cache folder of this test session: one for all its pytest-xdist workers (the parent of a
    worker's base temporary folder), so that a JAX process on one worker reads what another worker's JAX processes
    compiled (the demo model's functions, compiled by the JAX re-runs, the JAX pages and the Ray actors on JAX alike),
    whichever worker runs which file; JAX's lock (``filelock``) keeps processes that write at once apart."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "jax-compilation-cache"


def jax_process_flags() -> dict:
    """XLA_FLAGS for a test's process started on JAX (the re-runs, the JAX sides, the JAX pages): the flags already
    set, and XLA's CPU compiler with LLVM at optimisation level 0, without its most expensive passes. XLA's own graph
    optimisations are the same; the machine code is slower, which these small models do not feel, and costs a third
    less CPU to compile: 17 s instead of 27 s for the unlike models' attributions on JAX; 115 s instead of 156 s for
    the re-runs (2026-12-07, one run each, nothing else running). The numbers are those of the optimised build within
    rounding (the unlike models' attributions within 1e-6 of the largest; the completeness residuals, about 1e-7,
    in their last digits), far inside the comparisons' 1e-5. The tests' Ray cluster gives its workers the same flags
    (tests.support.ray_cluster), so that every JAX process of a test session reads what another compiled: JAX's
    persistent cache keys include the flags. A user's process compiles with XLA's default level."""
    return {"XLA_FLAGS": " ".join(filter(None, [os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0",
                                                "--xla_llvm_disable_expensive_passes=true"]))}


def jax_cache_environment(tmp_path_factory):
    """The body of the test files' module fixture ``jax_cache``: :func:`jax_compilation_cache` of this test
    session (:func:`session_jax_cache`: one folder, shared by the JAX test files of every worker) in this process's
    environment while the module's tests run (the processes they start inherit it), the environment as it was
    afterwards."""
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        for name, value in jax_compilation_cache(session_jax_cache(tmp_path_factory)).items():
            patch.setenv(name, value)
        yield


def customer_page() -> dict:
    """The Customer page the dashboard opens with (no EXPLAIN_BUNDLE: the demo) through AppTest, on this process's
    backend: its heatmap and its metrics' labels."""
    import keras

    from tests.support.apptest import app, charts, errors, heatmap

    at = app()
    assert not errors(at), errors(at)
    z = heatmap(charts(at)["temporal_heatmap"])["z"]
    return {"backend": keras.config.backend(), "z": z.tolist(), "metrics": [m.label for m in at.metric]}


def _models():
    import keras

    layers = keras.layers
    keras.utils.set_random_seed(7)
    models = {}

    s, t = keras.Input((S,), name="s"), keras.Input((T, F), name="t")
    h = layers.Concatenate()([layers.Dense(6, activation="tanh")(s), layers.GRU(5)(t)])
    models["gru"] = keras.Model([s, t], layers.Dense(1, activation="sigmoid")(h))

    s, t = keras.Input((S,), name="account"), keras.Input((T, F), name="weeks")
    c = layers.GlobalAveragePooling1D()(layers.Conv1D(4, 3, activation="relu")(t))
    h = layers.Concatenate()([c, layers.Dense(3)(s)])
    models["conv1d_temporal_first"] = keras.Model([t, s], layers.Dense(1, activation="sigmoid")(h))

    s, t = keras.Input((S,), name="x_static"), keras.Input((T, F), name="x_history")
    h = layers.Concatenate()([s, layers.Flatten()(t)])
    models["dense_only"] = keras.Model({"x_static": s, "x_history": t},
                                       layers.Dense(1)(layers.Dense(8, activation="relu")(h)))

    s, plan, t = keras.Input((S,), name="numbers"), keras.Input((1,), dtype="int32", name="plan"), \
        keras.Input((T,), dtype="int32", name="events")
    e = layers.Flatten()(layers.Embedding(4, 3)(plan))
    ev = layers.LSTM(4)(layers.Embedding(6, 2, mask_zero=True)(t))
    h = layers.Concatenate()([layers.Dense(4, activation="tanh")(s), e, ev])
    models["embedding"] = keras.Model([s, plan, t], layers.Dense(1, activation="sigmoid")(h))

    s, t = keras.Input((S,), name="s"), keras.Input((T, F), name="t")
    h = layers.Concatenate()([layers.Dense(4, activation="tanh")(s), layers.LSTM(4)(layers.Masking(0.0)(t))])
    models["masking"] = keras.Model([s, t], layers.Dense(1, activation="sigmoid")(h))

    s, t1, t2 = keras.Input((S,), name="profile"), keras.Input((T, F), name="calls"), keras.Input((T, 2), name="bills")
    h = layers.Concatenate()([layers.Dense(4)(s), layers.LSTM(3)(t1), layers.GRU(3)(t2)])
    models["two_temporal"] = keras.Model([t2, s, t1], layers.Dense(1, activation="sigmoid")(h))

    s, t = keras.Input((S,), name="s"), keras.Input((T, F), name="t")
    h = layers.Concatenate()([layers.Dense(4, activation="relu")(s), layers.LSTM(4)(t)])
    models["softmax"] = keras.Model([s, t], layers.Dense(3, activation="softmax")(h))

    s, t = keras.Input((S,), name="s", dtype="float64"), keras.Input((T, F), name="t", dtype="float64")
    h = layers.Concatenate(dtype="float64")([layers.Dense(4, activation="tanh", dtype="float64")(s),
                                             layers.LSTM(4, dtype="float64")(t)])
    models["float64"] = keras.Model([s, t], layers.Dense(1, activation="sigmoid", dtype="float64")(h))
    return models


def _inputs(name, model, rng):
    """(inputs, baselines) keyed as explain.core.inputs keys this model's inputs."""
    from explain.core.inputs import input_layout

    x, b = {}, {}
    for spec in input_layout(model).specs:
        shape = tuple(spec.shape)
        if spec.kind == "categorical":
            high = int(spec.embedding.input_dim)
            ids = rng.integers(1, high, size=(N, *shape)).astype("int32")
            if spec.mask_zero:
                ids[:2, :3] = 0  # two customers with a short history, padded at the start
            x[spec.key], b[spec.key] = ids, np.zeros((1, *shape), "int32") if not spec.mask_zero else ids[:1] * 0 + 1
        else:
            dtype = "float64" if name == "float64" else "float32"
            x[spec.key] = rng.normal(size=(N, *shape)).astype(dtype)
            if name == "masking" and spec.role == "temporal":
                x[spec.key][:2, :2] = 0.0  # padded periods (Masking(0))
            b[spec.key] = np.full((1, *shape), 0.5 if name == "masking" else 0.0, dtype)  # never the mask value
    return x, b


def build(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    for name, model in _models().items():
        model.save(folder / f"{name}.keras")
        x, b = _inputs(name, model, rng)
        np.savez(folder / f"{name}.npz", **{f"x:{k}": v for k, v in x.items()}, **{f"b:{k}": v for k, v in b.items()})


def attribute(folder: Path, out: Path) -> None:
    import keras

    import explain

    results, meta = {}, {"backend": keras.config.backend()}
    for path in sorted(folder.glob("*.keras")):
        model = keras.saving.load_model(path)
        arrays = np.load(path.with_suffix(".npz"))
        x = {k[2:]: arrays[k] for k in arrays.files if k.startswith("x:")}
        b = {k[2:]: arrays[k] for k in arrays.files if k.startswith("b:")}
        for setting in COMPARED[path.stem]:
            target = 2 if path.stem == "softmax" else 0
            a = explain.integrated_gradients(model, x, b, target=target, **SETTINGS[setting])
            for key, values in a.inputs.items():
                results[f"{path.stem}/{setting}/{key}"] = values
            results[f"{path.stem}/{setting}/prediction"] = a.prediction
            results[f"{path.stem}/{setting}/delta"] = a.delta
    np.savez(out, **results)
    print(json.dumps(meta))


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(Path(sys.argv[2]))
    else:
        attribute(Path(sys.argv[2]), Path(sys.argv[3]))
