"""How long the What-if page's search takes on the demo bundle, and what batching gains.

    python bench/whatif_search.py                 # 40 flagged customers, threshold 0.5
    python bench/whatif_search.py --customers 100 --steps 32

Not a test. In one process (the engine traced and warm first):

- the search (``explain.analysis.counterfactual.search``, the page's defaults: at most 3 edits, 10 s) for the
  ``--customers`` customers the model flags (prediction > 0.5), half the highest-risk ones and
  half drawn with a seed: time per customer (median, 95th percentile, slowest), how many reach
  the threshold, edits and candidate inputs scored per customer;
- one round's candidates scored in one batched call (what the search does) against one model
  call per candidate (what a per-cell Python loop would do), best of ``--repeat``, and the ratio.
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

from explain.analysis import counterfactual, whatif  # noqa: E402
from explain.bundle.load import load_bundle  # noqa: E402
from explain.core.settings import Settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default=str(ROOT / "bundles" / "demo"))
    parser.add_argument("--customers", type=int, default=40)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    bundle = load_bundle(args.bundle)
    settings = Settings(baseline="mean", steps=args.steps)
    scores = bundle.predict()[:, 0]
    flagged = np.flatnonzero(scores > args.threshold)
    top = flagged[np.argsort(-scores[flagged], kind="stable")][: args.customers // 2]
    rest = np.setdiff1d(flagged, top)
    drawn = np.random.default_rng(0).choice(rest, size=min(args.customers - top.size, rest.size), replace=False)
    ids = [str(bundle.ids[i]) for i in np.concatenate([top, np.sort(drawn)])]

    counterfactual.search(whatif.context(bundle, ids[0], settings), threshold=args.threshold)  # trace and warm up
    seconds, reached, edits, evaluated = [], 0, [], []
    for cid in ids:
        ctx = whatif.context(bundle, cid, settings)
        start = time.perf_counter()
        result = counterfactual.search(ctx, threshold=args.threshold)
        seconds.append(time.perf_counter() - start)
        reached += result.reached
        edits.append(len(result.scenario.edits))
        evaluated.append(result.evaluated)

    # one round of candidates: batched vs one call each
    ctx = whatif.context(bundle, ids[0], settings)
    attribution = whatif.explain_inputs(bundle, {r: ctx.original[r][None].astype(np.float32) for r in whatif.ROLES},
                                        settings)
    pool = sorted(counterfactual.candidate_edits(ctx, ctx.original, attribution, 0, set(), set()), key=lambda c: -c[1])
    trials = [counterfactual.with_change(ctx.original, change)
              for _, _, change in pool[:counterfactual.SEARCH_CANDIDATES]]
    static = np.stack([t["static"] for t in trials])
    temporal = np.stack([t["temporal"] for t in trials])

    def batched():
        return whatif.predict(bundle, static, temporal, 0)

    def one_by_one():
        return np.concatenate([whatif.predict(bundle, static[k:k + 1], temporal[k:k + 1], 0)
                               for k in range(len(trials))])

    times = {}
    for name, fn in (("batched", batched), ("one by one", one_by_one)):
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - start)
        times[name] = (best, out)
    gap = float(np.abs(times["batched"][1] - times["one by one"][1]).max())

    s = np.asarray(seconds)
    print(f"{len(ids)} flagged customers of {Path(args.bundle).name}, threshold {args.threshold:g}, "
          f"{args.steps} steps, mean baseline, at most 3 edits; {os.cpu_count()} cores, {platform.machine()}")
    print(f"search time per customer: median {np.median(s):.3f} s, p95 {np.quantile(s, 0.95):.3f} s, "
          f"slowest {s.max():.3f} s")
    print(f"reached the threshold: {reached} of {len(ids)}; edits per customer: mean {np.mean(edits):.2f}, "
          f"most {max(edits)}; candidate inputs scored: mean {np.mean(evaluated):.0f}")
    print(f"one round's {len(trials)} candidates: batched {times['batched'][0] * 1e3:.1f} ms, one call each "
          f"{times['one by one'][0] * 1e3:.1f} ms, ratio {times['one by one'][0] / times['batched'][0]:.1f}; "
          f"max |difference| {gap:.1e}")


if __name__ == "__main__":
    main()
