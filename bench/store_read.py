"""What the Cohort page gains from a precomputed batch store: reading vs computing.

    python bench/store_read.py               # the demo bundle, the page's default settings
    python bench/store_read.py --steps 128

Not a test. Copies the demo bundle to a temporary folder, runs the batch job for every
customer there (``<copy>/attributions/bench``), then, for the page's sample sizes (200, 1000,
all), times in one process, alternating and best of ``--repeat``:

- read: ``find_store`` + ``open_store(path).arrays(bundle, ids)``, what the page does when
  a store matches (layout checks included);
- compute: ``explain_customers(bundle, ids, request)``, what it does otherwise (the engine,
  already traced and warm);

and prints both and their ratio, with the largest difference between the two results.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explain.analysis.explainer import explain_customers  # noqa: E402
from explain.batch.local import run_batch_job  # noqa: E402
from explain.batch.store import open_store  # noqa: E402
from explain.batch.stores import find_store  # noqa: E402
from explain.bundle.load import load_bundle  # noqa: E402
from explain.core.settings import Settings  # noqa: E402


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    request = Settings(steps=args.steps)
    with tempfile.TemporaryDirectory(prefix="explain-store-bench-") as tmp:
        folder = Path(tmp) / "demo"
        shutil.copytree(ROOT / "bundles" / "demo", folder, ignore=shutil.ignore_patterns("attributions"))
        bundle = load_bundle(folder)
        result = run_batch_job(bundle, folder / "attributions" / "bench", request, progress=False)
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"store: {bundle.n_customers} customers, {result.n_chunks} chunks, built in {result.seconds:.1f} s "
              f"({request.baseline} baseline, {args.steps} steps, {request.method})")
        explain_customers(bundle, [str(bundle.ids[0])], request)  # trace and warm up
        rng = np.random.default_rng(0)
        print(f"{'customers':>9} {'read s':>8} {'compute s':>10} {'compute/read':>13} {'max |diff|':>11}")
        for size in (200, 1000, bundle.n_customers):
            rows = np.sort(rng.choice(bundle.n_customers, size=size, replace=False))
            ids = [str(i) for i in bundle.ids[rows]]
            read_s, stored = best(lambda: open_store(find_store(bundle, request, ids=ids)).arrays(bundle, ids),
                                  args.repeat)
            compute_s, computed = best(lambda: explain_customers(bundle, ids, request), args.repeat)
            diff = max(np.abs(stored.static - computed.static).max(), np.abs(stored.temporal - computed.temporal).max())
            print(f"{size:>9} {read_s:>8.3f} {compute_s:>10.3f} {compute_s / read_s:>13.1f} {diff:>11.1e}")


if __name__ == "__main__":
    main()
