"""The Customer page's "What would keep this customer?" card at 365 days (issue 42), before and after, in one run.

    python bench/whatif_size.py --bundle /tmp/big20k                 # 5 customers scored >= 0.5, old code at 432f605
    python bench/whatif_size.py --bundle /tmp/big20k --before 432f605 --customers 3 --no-old

Times the card's parts in one process on one bundle: ``Observed.of`` (the data's ranges, with its peak traced
allocation), the bundle's medians, and the whole search the card runs (``counterfactual.search``, threshold 0.5,
3 s limit, as ``ui/keep.py``) for customers whose score is at least 0.5, first with nothing computed (cold: the
first pays the bundle's medians, timed apart before it; the engine compiled first by one attribution call, as
the heatmap's has on the page) then again (warm: the bundle's statistics kept, as the dashboard keeps them);
then the code of ``--before`` (``git show``): its ``Observed.of``, its per-customer median and its candidate
listing, on the same customer and inputs, and the new listing beside it. Prints the date and ``uptime``'s load at
the start and the end. Only for this benchmark; no test times anything.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explain.analysis import counterfactual, whatif  # noqa: E402
from explain.bundle.load import load_bundle  # noqa: E402
from explain.core.settings import Settings  # noqa: E402


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def old_module(ref: str, path: str, name: str):
    """The module at ``path`` as it was at git ``ref``, imported under ``name``."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:{path}"], capture_output=True, text=True,
                          check=True).stdout
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(text)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def timed(call, trace: bool = True):
    """(value, seconds, peak traced GB: None untraced; tracing slows the making of many small objects)."""
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    try:
        value = call()
        return value, time.perf_counter() - start, tracemalloc.get_traced_memory()[1] / 1e9 if trace else None
    finally:
        if trace:
            tracemalloc.stop()


def high_risk(bundle, folder: str, count: int) -> list[str]:
    """The first ``count`` customers scored >= 0.5 (the scores kept beside the bundle's array cache)."""
    scores = np.load(Path(folder) / ".explain-cache" / "scores.npy")[:, 0]
    return [str(bundle.ids[i]) for i in np.flatnonzero(scores >= 0.5)[:count]]


def new_card(bundle, ids, settings, observed):
    rows = []
    for cid in ids:
        start = time.perf_counter()
        ctx = whatif.context(bundle, cid, settings, observed=observed)
        result = counterfactual.search(ctx, threshold=0.5, time_limit=3.0)
        rows.append((cid, time.perf_counter() - start, result))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default="/tmp/big20k")
    parser.add_argument("--customers", type=int, default=5)
    parser.add_argument("--before", default="432f605", help="git ref of the code before (default 432f605, the last "
                        "commit before this work)")
    parser.add_argument("--no-old", action="store_true", help="skip the code before (about a minute at 20k)")
    args = parser.parse_args()
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "|", load(), "| pid", os.getpid())
    bundle = load_bundle(args.bundle)
    settings = Settings().for_bundle(bundle)
    ids = high_risk(bundle, args.bundle, args.customers)
    print(f"bundle {args.bundle}: {bundle.n_customers} x {bundle.n_periods} x {bundle.n_temporal}; customers {ids}")
    observed, seconds, peak = timed(lambda: whatif.Observed.of(bundle))
    print(f"new Observed.of: {seconds:.2f} s, peak traced {peak:.3f} GB")
    low = str(bundle.ids[int(np.argmin(np.load(Path(args.bundle) / ".explain-cache" / "scores.npy")[:, 0]))])
    _, seconds, _ = timed(lambda: whatif.explain_inputs(bundle, bundle.inputs_for([low]), settings), trace=False)
    print(f"the page's attribution call before the card (compiles the engine, as the heatmap has): {seconds:.2f} s")
    _, seconds, peak = timed(lambda: whatif.bundle_medians(bundle, observed))
    print(f"new bundle medians (once per bundle; the first card's search computes them): {seconds:.2f} s, "
          f"peak traced {peak:.3f} GB")
    for label in ("cold", "warm"):
        for cid, took, result in new_card(bundle, ids, settings, observed):
            print(f"new card ({label}) {cid}: {took:.2f} s  reached={result.reached} rounds={result.rounds} "
                  f"evaluated={result.evaluated} edits={result.scenario.text()!r} stopped={result.stopped!r}")
    if args.no_old:
        print("end |", load())
        return
    ctx = whatif.context(bundle, ids[0], settings, observed=observed)
    old = old_module(args.before, "explain/analysis/whatif.py", "whatif_before")
    old_observed, seconds, peak = timed(lambda: old.Observed.of(bundle))
    print(f"old Observed.of: {seconds:.2f} s, peak traced {peak:.3f} GB; same ranges: "
          f"{np.array_equal(old_observed.temporal_min, observed.temporal_min)}")
    old_ctx = old.context(bundle, ids[0], settings, observed=old_observed, baseline=ctx.baseline)
    medians, seconds, peak = timed(lambda: old_ctx.median(None))
    print(f"old median (per customer): {seconds:.2f} s, peak traced {peak:.3f} GB; same medians: "
          f"{np.array_equal(medians['temporal'], ctx.median(None)['temporal'], equal_nan=True)}")
    rng = np.random.default_rng(0)
    attribution = type("A", (), {"static": rng.normal(size=(1, bundle.n_static)),
                                 "temporal": rng.normal(size=(1, bundle.n_periods, bundle.n_temporal))})
    current = {role: ctx.original[role].copy() for role in whatif.ROLES}
    old_cf = old_module(args.before, "explain/analysis/counterfactual.py", "counterfactual_before")
    for round_ in range(2):
        got, new_s, _ = timed(lambda: counterfactual.candidate_edits(ctx, current, attribution, 0, set(), set()),
                              trace=False)
        want, old_s, _ = timed(lambda: old_cf.candidate_edits(ctx, current, attribution, 0, set(), set()),
                               trace=False)
        same = len(got) == len(want) and all(a[0] == b[0] and a[1] == b[1] for a, b in zip(got, want))
        print(f"candidate_edits (medians kept) #{round_ + 1}: old {old_s:.2f} s, new {new_s:.3f} s "
              f"({len(got)} candidates, same: {same})")
    print("end |", load())


if __name__ == "__main__":
    main()
