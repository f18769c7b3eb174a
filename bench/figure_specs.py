"""The Customer page's three figures: Plotly's graph objects against plain figure dicts, one run.

    python bench/figure_specs.py               # the demo bundle's first customer, 20 repeats
    python bench/figure_specs.py --repeats 5

Prints the median time to build the three figures with ``explain.plots.figures.temporal_panel``,
``static_bars`` and ``history_figure`` (``go.Figure``), with their ``*_spec`` twins (dicts),
and with the dicts made ready to send (``ui.speed.spec``), and the ratio. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed(fn, repeats):
    fn()  # warm: imports, the subplot grids' cache
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)

    from explain import load_bundle
    from explain.analysis.diagnostics import shown_baseline
    from explain.analysis.explainer import explain_customers
    from explain.core.settings import Settings
    from explain.plots import figures

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bundle = load_bundle(os.path.join(root, "bundles", "demo"))
    cid = str(bundle.ids[0])
    settings = Settings().resolved(bundle.output_names)
    a = explain_customers(bundle, [cid], settings)
    inputs = bundle.inputs_for([cid])
    base = shown_baseline(bundle, cid, settings)
    units_s = [bundle.units.get(c) for c in bundle.static_features]
    units_t = [bundle.units.get(c) for c in bundle.temporal_features]

    def three(panel, bars, history):
        return (
            panel(bundle.periods, bundle.temporal_labels, a.temporal[0], values=inputs["temporal"][0],
                  baseline=base["temporal"], units=units_t,
                  title="Monthly features: effect of each feature in each period"),
            bars(bundle.static_labels, a.static[0], inputs["static"][0], units=units_s, baseline=base["static"],
                 title="Static features (label: the customer's value)"),
            history(bundle.periods, bundle.temporal_labels, inputs["temporal"][0], baseline=base["temporal"],
                    units=units_t, columns=2, title="The customer's monthly history (dashed: the baseline)"))

    rows = [("graph objects (go.Figure)", lambda: three(figures.temporal_panel, figures.static_bars,
                                                        figures.history_figure))]
    if hasattr(figures, "temporal_panel_spec"):
        from ui import speed

        def specs():
            return three(figures.temporal_panel_spec, figures.static_bars_spec, figures.history_spec)

        rows += [("dicts (*_spec)", specs),
                 ("dicts, ready to send (speed.spec)", lambda: [speed.spec(d) for d in specs()]),
                 ("go.Figure, ready to send (speed.spec)", lambda: [speed.spec(f) for f in rows[0][1]()])]
    print(f"{bundle.n_periods} periods, {bundle.n_temporal} monthly and {bundle.n_static} static features; "
          f"median of {args.repeats}")
    first = None
    for name, fn in rows:
        t = timed(fn, args.repeats)
        first = first or t
        print(f"  {name:40s} {t * 1e3:8.2f} ms   x{first / t:6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
