"""Speed and memory of the IG engine, as ratios measured in one run (not a timed test).

    python bench/benchmark.py            # full run (about 10 minutes on 2 cores)
    python bench/benchmark.py --quick    # fewer repeats and sizes, for a smoke test

Three ways to get the same attributions on a model of the demo's size (10 static
features, 12 periods x 8 features, Dense(16) + LSTM(32) + Dense(16) + sigmoid):

- seed: the seed question's loop (shared/000_*.txt), corrected: per input, one
  GradientTape and one batch-1 model call per step, steps + 1 points. Its cost per customer
  does not depend on how many customers there are, so it is measured on a few customers.
- engine: ``explain.integrated_gradients`` (validation, f(x), f(b), path gradients).
- limit: the model's forward + backward pass alone over exactly the same interpolation
  points, prebuilt as tensors, in the engine's chunk size: what no IG code can beat.

Then the peak RSS of a fresh process that explains 10,000 customers at 64 steps, and the
trace counts of the engine's compiled function after all of the above.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

S, T, F = 10, 12, 8


def build_model(seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    s_in = keras.Input((S,), name="static")
    t_in = keras.Input((T, F), name="temporal")
    h = keras.layers.Concatenate()([keras.layers.Dense(16, activation="relu")(s_in), keras.layers.LSTM(32)(t_in)])
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dense(16, activation="relu")(h))
    return keras.Model([s_in, t_in], out)


def make_data(n, seed=1):
    rng = np.random.default_rng(seed)
    return {"static": rng.normal(size=(n, S)).astype("float32"),
            "temporal": rng.normal(size=(n, T, F)).astype("float32")}


def zero_baseline():
    return {"static": np.zeros((1, S), "float32"), "temporal": np.zeros((1, T, F), "float32")}


def seed_loop(model, x, steps):
    """The seed question's corrected loop for one customer (shared/000_*.txt)."""
    import tensorflow as tf

    inputs_1 = tf.convert_to_tensor(x["static"], dtype=tf.float32)
    inputs_2 = tf.convert_to_tensor(x["temporal"], dtype=tf.float32)
    baseline_1 = tf.zeros_like(inputs_1)
    baseline_2 = tf.zeros_like(inputs_2)
    path_gradients_1 = []
    for i in range(steps + 1):
        alpha = tf.cast(i / steps, tf.float32)
        current_input = baseline_1 + alpha * (inputs_1 - baseline_1)
        with tf.GradientTape() as tape:
            tape.watch(current_input)
            pred = model([current_input, inputs_2])[0, 0]
            g = tape.gradient(pred, current_input)
        path_gradients_1.append(g)
    avg_1 = tf.reduce_mean(tf.stack(path_gradients_1), axis=0)
    ig_1 = (inputs_1 - baseline_1) * avg_1
    path_gradients_2 = []
    for i in range(steps + 1):
        alpha = tf.cast(i / steps, tf.float32)
        current_input = baseline_2 + alpha * (inputs_2 - baseline_2)
        with tf.GradientTape() as tape:
            tape.watch(current_input)
            pred = model([inputs_1, current_input])[0, 0]
            g = tape.gradient(pred, current_input)
        path_gradients_2.append(g)
    avg_2 = tf.reduce_mean(tf.stack(path_gradients_2), axis=0)
    ig_2 = (inputs_2 - baseline_2) * avg_2
    return ig_1.numpy(), ig_2.numpy()


def limit_function(model):
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec((None, S), tf.float32), tf.TensorSpec((None, T, F), tf.float32)])
    def grads(ps, pt):
        with tf.GradientTape() as tape:
            tape.watch([ps, pt])
            total = tf.reduce_sum(model([ps, pt], training=False)[:, 0])
        return tape.gradient(total, [ps, pt])

    return grads


def limit_points(x, steps, chunk):
    """The engine's interpolation points (Gauss-Legendre alphas), prebuilt per chunk."""
    import tensorflow as tf

    from explain.core.quadrature import alphas_and_weights

    alphas, _ = alphas_and_weights("gausslegendre", steps)
    per_call = max(1, chunk // steps)
    chunks = []
    for start in range(0, x["static"].shape[0], per_call):
        xs = x["static"][start:start + per_call]
        xt = x["temporal"][start:start + per_call]
        ps = (alphas[None, :, None] * xs[:, None]).reshape(-1, S).astype("float32")
        pt = (alphas[None, :, None, None] * xt[:, None]).reshape(-1, T, F).astype("float32")
        chunks.append((tf.constant(ps), tf.constant(pt)))
    return chunks


def timed(fn, repeats):
    return timed_pair(fn, None, repeats)[0]


def timed_pair(first, second, repeats):
    """Median seconds of ``first`` and ``second``, run alternately so that load from other
    processes on a shared machine hits both alike."""
    fns = [f for f in (first, second) if f is not None]
    for fn in fns:
        fn()  # warm-up (tracing, allocation)
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, bucket in zip(fns, times):
            start = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) for bucket in times]


def peak_rss_child(n, steps):
    """Peak RSS (MiB) of a fresh process explaining n customers at ``steps``."""
    code = f"""
import os, resource, sys
os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'
sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import benchmark as b, explain
model = b.build_model()
x = b.make_data({n})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
a = explain.integrated_gradients(model, x, b.zero_baseline(), steps={steps})
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(before, after, float(abs(a.delta).max()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, delta = map(float, out.stdout.split()[-3:])
    return before, after, delta


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()

    import tensorflow as tf

    import explain
    from explain.core import ig

    model = build_model()
    steps_list = (16, 64, 256)
    customers_list = (1, 100) if args.quick else (1, 100, 1000)
    repeats = 3 if args.quick else 7
    chunk = ig.DEFAULT_BATCH_SIZE
    grads = limit_function(model)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"TensorFlow {tf.__version__}; engine chunk {chunk} points")
    print(f"{'steps':>5} {'customers':>9} {'seed ms/cust':>13} {'engine ms/cust':>15} {'limit ms/cust':>14} "
          f"{'engine/limit':>12} {'seed/engine':>12}")
    rows = []
    seed_ms = {}
    for steps in steps_list:
        sample = make_data(3 if steps < 256 or not args.quick else 1, seed=5)
        per_customer = []
        for i in range(sample["static"].shape[0]):
            one = {k: v[i:i + 1] for k, v in sample.items()}
            per_customer.append(timed(lambda: seed_loop(model, one, steps), 1 if steps == 256 else 2))
        seed_ms[steps] = 1000 * statistics.median(per_customer)
        for n in customers_list:
            x = make_data(n)
            r = 5 * repeats if n == 1 else repeats if n * steps <= 64_000 else max(2, repeats // 3)
            points = limit_points(x, steps, chunk)
            engine_s, limit_s = timed_pair(
                lambda: explain.integrated_gradients(model, x, zero_baseline(), steps=steps),
                lambda: [g.numpy() for ps, pt in points for g in grads(ps, pt)],
                r,
            )
            row = {"steps": steps, "customers": n, "seed_ms": seed_ms[steps], "engine_ms": 1000 * engine_s / n,
                   "limit_ms": 1000 * limit_s / n}
            row["engine_over_limit"] = row["engine_ms"] / row["limit_ms"]
            row["seed_over_engine"] = row["seed_ms"] / row["engine_ms"]
            rows.append(row)
            print(f"{steps:>5} {n:>9} {row['seed_ms']:>13.1f} {row['engine_ms']:>15.3f} {row['limit_ms']:>14.3f} "
                  f"{row['engine_over_limit']:>12.2f} {row['seed_over_engine']:>12.0f}", flush=True)
    traces = dict(ig.engine_for(model).traces)
    print(f"traces of the engine's functions after every size above: {traces}")
    n_rss = 2000 if args.quick else 10_000
    before, after, delta = peak_rss_child(n_rss, 64)
    print(f"peak RSS, {n_rss} customers x 64 steps in a fresh process: {after:.0f} MiB "
          f"(after importing TF and building the model: {before:.0f} MiB); max |delta| {delta:.2g}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "traces": traces, "peak_rss_mib": after, "rss_customers": n_rss}, fh, indent=1)


if __name__ == "__main__":
    main()
