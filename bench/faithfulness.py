"""How long the faithfulness checks take on the demo, and what batching gains over a loop.

    python bench/faithfulness.py                  # 200 demo customers, the default settings
    python bench/faithfulness.py --customers 1000

Not a test. In one process: a first run of ``explain.analysis.faithfulness.run`` (it traces the compiled
functions), then ``--repeat`` warm runs, printing each part's time (best of the warm runs) and
the figures of the last run. Then a loop of single-row model calls, one per perturbed input
(what a per-cell Python loop does), timed over a few customers' deletion curve, is scaled to
the number of perturbed inputs the batched curves evaluate, and the ratio printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explain.analysis import faithfulness as fa  # noqa: E402
from explain.analysis.explainer import baseline_for  # noqa: E402
from explain.bundle.load import load_bundle  # noqa: E402
from explain.core.settings import Settings  # noqa: E402


def loop_seconds_per_call(bundle, result, customers: int = 2) -> float:
    """Seconds per perturbed input when each one is its own model call (the IG deletion curve)."""
    inputs = bundle.inputs_for(result.ids[:customers])
    x = fa.flatten(inputs["static"], inputs["temporal"])
    b = fa.flatten(**fa.single_baseline(baseline_for(bundle, inputs, result.settings.baseline), customers))
    order = np.argsort(-np.abs(x - b), axis=1)  # any order costs the same
    s = bundle.n_static
    calls, start = 0, time.perf_counter()
    for i in range(customers):
        z = x[i].copy()
        for k in range(x.shape[1] + 1):
            if k:
                z[order[i, k - 1]] = b[i, order[i, k - 1]]
            fa.predict(bundle.model, z[None, :s], z[None, s:].reshape(1, bundle.n_periods, bundle.n_temporal))
            calls += 1
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--customers", type=int, default=fa.DEFAULT_CUSTOMERS)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bundle = load_bundle(ROOT / "bundles" / "demo")
    settings = Settings(steps=args.steps)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average before: {os.getloadavg()[0]:.2f}")
    start = time.perf_counter()
    result = fa.run(bundle, settings, customers=args.customers)
    print(f"first run (traces the compiled functions): {time.perf_counter() - start:.2f} s")
    warm = []
    for _ in range(args.repeat):
        result = fa.run(bundle, settings, customers=args.customers)
        warm.append(result.seconds)
    best = {key: min(seconds[key] for seconds in warm) for key in warm[0]}
    curves = result.curves
    inputs = (2 + result.random_orders) * 2 * len(result.ids) * curves.k.size
    print(f"{len(result.ids)} customers, {curves.cells} cells, {curves.k.size} points per curve, "
          f"{result.random_orders} random orders, {result.randomisation.spearman_runs.shape[0]} re-initialisations; "
          f"best of {args.repeat} warm runs, s:")
    print("  " + ", ".join(f"{key} {value:.2f}" for key, value in best.items()))
    per_call = loop_seconds_per_call(bundle, result)
    print(f"curves: {inputs:,} perturbed inputs in {best['curves']:.2f} s "
          f"({best['curves'] / inputs * 1e6:.1f} us each); one model call each: {per_call * 1e3:.2f} ms per call, "
          f"{per_call * inputs:.0f} s in all; loop / batched = {per_call * inputs / best['curves']:.0f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("\n".join(fa.summary_lines(result)))


if __name__ == "__main__":
    main()
