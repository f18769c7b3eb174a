"""The XLA path (explain.core.xla) against the graph path on the demo model, as ratios from one run.

    python bench/xla.py              # 1, 100 and 1,000 customers at 64 steps, 5 repeats
    python bench/xla.py --repeats 2  # quicker

For each size: the median time of ``explain.integrated_gradients`` on the graph path and on
the XLA path (its buckets compiled first, the compile time reported apart), their ratio, and
the largest difference between the two attributions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

SIZES = (1, 100, 1000)


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=64)
    args = parser.parse_args(argv)

    import explain
    from explain.bundle import load as bundle_io
    from explain.core import xla
    from explain.core.engine import engine_for
    from explain.demo.churn import DEFAULT_DEMO_DIR

    bundle = bundle_io.load_bundle(DEFAULT_DEMO_DIR)
    model, engine = bundle.model, engine_for(bundle.model)
    ids = [str(i) for i in bundle.ids]
    mean = {role: bundle.inputs_for(ids[:500])[role].mean(axis=0, keepdims=True) for role in ("static", "temporal")}
    print(f"demo model, {args.steps} steps (gausslegendre), median of {args.repeats}; cores: {os.cpu_count()}")
    print(f"{'customers':>9s} {'graph s':>9s} {'xla s':>9s} {'xla/graph':>9s} {'compile s':>9s} {'max |diff|':>10s}")
    for n in SIZES:
        inputs = bundle.inputs_for(ids[:n])

        def run():
            return explain.integrated_gradients(model, inputs, mean, steps=args.steps)

        xla.disable(engine)
        run()  # the graph path's trace
        graph_s, graph = timed(run, args.repeats)
        state = xla.enable(engine, background=False)
        start = time.perf_counter()
        run()  # compiles this size's buckets
        compile_s = time.perf_counter() - start
        xla_s, fast = timed(run, args.repeats)
        used = state.calls > 0
        diff = max(np.abs(fast.static - graph.static).max(), np.abs(fast.temporal - graph.temporal).max())
        xla.disable(engine)
        print(f"{n:9d} {graph_s:9.4f} {xla_s:9.4f} {xla_s / graph_s:9.2f} {compile_s:9.1f} {diff:10.1e}"
              + ("" if used else "  (graph path: no bucket)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
