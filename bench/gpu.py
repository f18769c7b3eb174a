"""Customers per second of the IG engine on each Keras backend present (TensorFlow, JAX), on whatever
device each finds (a GPU when there is one, else the CPU), with the chunk-size curve.

    python bench/gpu.py                 # every backend installed; sizes for a CPU, or a GPU when found
    python bench/gpu.py --backends jax  # JAX alone (a GPU machine may have no TensorFlow)
    python bench/gpu.py --quick         # smaller sizes

Each backend runs in its own process (Keras picks its backend when it is imported). Two models:
the demo bundle's (bundles/demo/model.keras: 9 static features, 12 months x 6, LSTM(32)) and a
365 days x 24 features LSTM(64) model with 40 static features built here (untrained: speed only).
Inputs are random draws of the models' shapes; the baseline is their mean; Gauss-Legendre 64
points, output space. Per backend and model: one customer's time (median of repeats after
warm-up), batch customers per second (after a first call that compiles the same shapes), and
customers per second at each points-per-call size (``explain.core.chunks.calibrate``), then the
JAX / TensorFlow ratios when both ran. Machine load (``os.getloadavg``) is printed at each step.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

STEPS = 64
SIZES = {  # (customers for one-customer repeats, demo batch, long batch, curve candidates demo, curve long)
    "cpu": (20, 1000, 100, (1024, 2048, 4096, 8192, 16384, 32768), (1024, 2048, 4096)),
    "gpu": (50, 30000, 1000, (1024, 4096, 6400, 16384, 65536, 192000), (4096, 16384, 65536, 262144)),
    "quick": (5, 200, 20, (1024, 4096, 16384), (1024, 4096)),
}


def load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def long_model():
    """(None, 40) static + (None, 365, 24) Masking(0) -> LSTM(64) history -> sigmoid; untrained, seeded."""
    import keras

    keras.utils.set_random_seed(0)
    static, history = keras.Input((40,), name="static"), keras.Input((365, 24), name="temporal")
    h = keras.layers.Concatenate()([keras.layers.Dense(16, activation="relu")(static),
                                    keras.layers.LSTM(64)(keras.layers.Masking(0.0)(history))])
    return keras.Model({"static": static, "temporal": history}, keras.layers.Dense(1, activation="sigmoid")(h))


def device() -> str:
    import keras

    if keras.config.backend() == "jax":
        import jax

        d = jax.devices()[0]
        return f"{d.platform}: {getattr(d, 'device_kind', '')}"
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return f"gpu: {gpus[0].name}" if gpus else f"cpu: {platform.processor() or platform.machine()}"


def inputs(model, n, seed=1):
    rng = np.random.default_rng(seed)
    shapes = {i.name: tuple(i.shape[1:]) for i in model.inputs}
    x = {k: rng.normal(size=(n, *s)).astype("float32") for k, s in shapes.items()}
    b = {k: v.mean(axis=0, keepdims=True) + 0.5 for k, v in x.items()}  # never the Masking value 0
    return x, b


def measure(name, model, sizes, report):
    import explain
    from explain.core import chunks
    from explain.core.engine import engine_for

    repeats, batch, curve_sizes = sizes
    x, b = inputs(model, batch)
    one = {k: v[:1] for k, v in x.items()}
    for _ in range(3):
        explain.integrated_gradients(model, one, b, steps=STEPS)  # compile and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        explain.integrated_gradients(model, one, b, steps=STEPS)
        times.append(time.perf_counter() - start)
    report[f"{name}_one_ms"] = 1000 * statistics.median(times)
    print(f"  {name}: one customer {report[f'{name}_one_ms']:.2f} ms (median of {repeats}; {load()})", flush=True)
    start = time.perf_counter()
    explain.integrated_gradients(model, x, b, steps=STEPS)  # compiles the batch's shapes
    first = time.perf_counter() - start
    start = time.perf_counter()
    a = explain.integrated_gradients(model, x, b, steps=STEPS)
    seconds = time.perf_counter() - start
    report[f"{name}_batch"] = {"customers": batch, "first_s": first, "seconds": seconds,
                               "customers_per_s": batch / seconds, "max_abs_delta": float(np.abs(a.delta).max())}
    print(f"  {name}: {batch} customers in {seconds:.2f} s = {batch / seconds:.1f} customers/s "
          f"(first call {first:.2f} s; {load()})", flush=True)
    calibration = chunks.calibrate(engine_for(model), alphas=STEPS, candidates=curve_sizes, repeats=2)
    report[f"{name}_curve"] = {str(p): rate / STEPS for p, rate in calibration.curve.items()}  # customers/s
    report[f"{name}_curve_pick"] = calibration.points
    report[f"{name}_curve_oom"] = calibration.stopped_by_memory
    curve = ", ".join(f"{p}: {rate / STEPS:.1f}" for p, rate in calibration.curve.items())
    print(f"  {name}: customers/s by points per call {{{curve}}}; picked {calibration.points} ({load()})", flush=True)


def worker(kind: str) -> dict:
    import keras

    report = {"backend": keras.config.backend(), "device": device(), "sizes": kind}
    print(f"{report['backend']} on {report['device']} ({load()})", flush=True)
    demo = keras.saving.load_model(os.path.join(ROOT, "bundles", "demo", "model.keras"))
    repeats, demo_batch, long_batch, demo_curve, long_curve = SIZES[kind]
    measure("demo", demo, (repeats, demo_batch, demo_curve), report)
    measure("long", long_model(), (max(3, repeats // 4), long_batch, long_curve), report)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="tensorflow,jax")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(args.sizes)), flush=True)
        return 0
    reports = {}
    for backend in args.backends.split(","):
        if importlib.util.find_spec(backend) is None:
            print(f"{backend}: not installed, skipped")
            continue
        kind = "quick" if args.quick else _device_kind(backend)
        env = dict(os.environ, KERAS_BACKEND=backend)
        out = subprocess.run([sys.executable, __file__, "--worker", backend, "--sizes", kind], env=env,
                             stdout=subprocess.PIPE, text=True)
        lines = out.stdout.splitlines()
        print("\n".join(line for line in lines if not line.startswith("RESULT ")))
        if out.returncode != 0:
            print(f"{backend}: failed (exit {out.returncode})")
            continue
        reports[backend] = json.loads(next(line for line in lines if line.startswith("RESULT "))[7:])
    if {"tensorflow", "jax"} <= set(reports):
        tf_report, jax_report = reports["tensorflow"], reports["jax"]
        print(f"one demo customer, JAX / TensorFlow time: {jax_report['demo_one_ms'] / tf_report['demo_one_ms']:.2f}x")
        for name in ("demo", "long"):
            ratio = jax_report[f"{name}_batch"]["customers_per_s"] / tf_report[f"{name}_batch"]["customers_per_s"]
            print(f"{name} batch throughput, JAX / TensorFlow: {ratio:.2f}x")
    return 0


def _device_kind(backend: str) -> str:
    """Sizes for a GPU when the backend sees one (asked in a child: Keras is never imported here)."""
    probe = ("import jax; print(jax.default_backend())" if backend == "jax" else
             "import tensorflow as tf; print('gpu' if tf.config.list_physical_devices('GPU') else 'cpu')")
    out = subprocess.run([sys.executable, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return "gpu" if out.stdout.strip() in ("gpu", "cuda", "rocm") else "cpu"


if __name__ == "__main__":
    sys.exit(main())
