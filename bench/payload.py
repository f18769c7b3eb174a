"""Figures KB a Customer switch sends, without a browser (issue 42): ``ui.speed.spec`` of
``explain.figures.customer_figures(spec=True)`` (the heatmap, the static bars, the history) for a few customers
with the mean baseline, and the time to build and encode them.

    python bench/payload.py ROOT BUNDLE ID,ID,ID
    python bench/payload.py . bundles/demo C00002,C00017,C00031
    python bench/payload.py /tmp/before /tmp/big20k C0001333,C0006666,C0011999   # an earlier checkout

``ROOT``: the checkout whose code draws (``git worktree add DIR REV`` or ``git archive REV | tar -x``), to
compare versions in one run. A long history is drawn as the page first shows it (``View()``: auto bins).
"""

import json
import sys
import time

root, bundle_dir, ids = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
sys.path.insert(0, root)

import numpy as np  # noqa: E402

import explain  # noqa: E402
from explain import figures  # noqa: E402
from explain.core.settings import Settings  # noqa: E402
from explain.plots import periods as P  # noqa: E402
from ui import speed  # noqa: E402

bundle = explain.load_bundle(bundle_dir)
a = explain.explain_customers(bundle, ids, Settings(baseline="mean"))
keys = ["temporal"] if bundle.plain else list(bundle.layout.keys_of("temporal"))
views = {k: P.View() if len(bundle.input_periods.get(k, bundle.periods)) > P.MAX_PERIODS else None for k in keys}
sizes, times = [], []
for row in range(len(ids)):
    t0 = time.perf_counter()
    shown = figures.customer_figures(a, bundle, row, ids=ids, views=views, spec=True)
    wire = [json.dumps(speed.spec(s.figure), default=str, separators=(",", ":")) for s in shown]
    times.append(time.perf_counter() - t0)
    sizes.append([round(len(w) / 1024, 1) for w in wire])
print(f"{root} {bundle_dir}: KB per figure (heatmaps, static, history) {sizes[0]}, total {sum(sizes[0]):.1f}; "
      f"build + encode s, median {float(np.median(times)):.3f}")
