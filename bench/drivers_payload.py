"""Figures KB the What drives churn page sends, without a browser (issue 42): ``ui.speed.spec`` of each figure of
``explain.plots.drivers`` as the page draws it (ranking, beeswarm, segments, dependence of the top feature, time
profiles, drift), for a bundle with a finished store (``bench/drivers.py --keep DIR`` makes one), and the time to
build and encode them.

    python bench/drivers_payload.py ROOT BUNDLE
    python bench/drivers_payload.py . /tmp/h/drv100k
    python bench/drivers_payload.py /tmp/before /tmp/h/drv100k    # an earlier checkout (git worktree add DIR REV)

``ROOT``: the checkout whose code draws, to compare versions in one run (the result is read by that checkout too).
"""

import sys
import time

root, bundle_dir = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)

import plotly.io as pio  # noqa: E402

import explain  # noqa: E402
from explain.bundle.load import load_bundle  # noqa: E402
from explain.modelfile.limits import DEFAULT_LIMITS  # noqa: E402
from explain.plots import drivers as plots  # noqa: E402
from ui import speed  # noqa: E402

bundle = load_bundle(bundle_dir, limits=DEFAULT_LIMITS)
d = explain.drivers(bundle)
builders = {"ranking": lambda: plots.ranking(d, grouped=True), "beeswarm": lambda: plots.beeswarm(d),
            "segments": lambda: plots.segments(d, grouped=True),
            "dependence": lambda: plots.dependence(d, d.ranking[0].feature.name)}
builders.update({f"time_{k}": (lambda k=k: plots.time_profile(d.time_profiles[k]))
                 for k in range(len(d.time_profiles))})
sizes, seconds = {}, {}
for name, build in builders.items():
    start = time.perf_counter()
    wire = pio.to_json(speed.spec(build()), validate=False)  # what Streamlit sends (st.plotly_chart)
    seconds[name] = time.perf_counter() - start
    sizes[name] = len(wire) / 1024
print(f"{root} {bundle_dir} ({d.n_customers:,} customers): KB per figure "
      + ", ".join(f"{k} {v:.1f}" for k, v in sizes.items()) + f"; total {sum(sizes.values()):.1f} KB; build + encode "
      + ", ".join(f"{k} {v:.3f}" for k, v in seconds.items()) + " s")
