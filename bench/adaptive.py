"""Adaptive integration (steps="auto") against uniform Gauss-Legendre, as figures and ratios from one run.

    python bench/adaptive.py                        # 365 days x 24 features, 60 customers, 500 demo customers
    python bench/adaptive.py --periods 120 --customers 20 --demo-customers 100    # quicker

1. Builds a Masking + LSTM(64) model of daily histories (``--periods`` x 24 features in raw units,
   as a new user feeds them: counts, amounts in the hundreds; histories of a quarter to all of the
   periods, zero-padded at the start) and trains it briefly on a planted rule (a drop of usage in
   the last 30 days and support calls in the last 60 raise churn), in this run.
2. Explains ``--customers`` customers (not trained on) from the mean baseline with steps="auto"
   (tolerance 0.5 %, the default budget of 2,048 gradient points), and each of them with uniform
   Gauss-Legendre 16, 32, ..., 4096 points until it meets the same criterion (a ladder: a customer
   leaves it at the first rule that adds up). The criterion of issue 27: |delta| <= 0.5 % of
   |f(x) - f(b)| or 1e-3 absolute.
3. Prints, for both: the share of customers within the criterion, gradient points per customer
   (mean, median, 95th percentile, max), forward points, seconds per customer, and the uniform
   rule (one N for every customer, as steps=N is) that reaches the adaptive share; the ladder is
   also today's auto before this change (16, 32, ... up to 1,024 per customer).
4. Attribution error against Gauss-Legendre 4,096 on ``--reference`` customers, for auto, for
   today's auto, for the uniform rule with as many points as auto's mean, with the points that
   reach auto's share, and with 2,048 (how far the reference itself is from converged). A
   completeness criterion is a scalar: attributions that add up within 0.5 % can still be a few
   per cent off feature by feature; this part shows by how much.
5. The demo bundle: this auto against the auto before it (the same ladder up to 1,024, rebuilt from
   the fixed rules, which did not change) at the default tolerance: gradient points (all evaluated,
   and the final rule's) and time.

Seconds are wall time on this machine (shared: other processes change them; the ratios come from
the same run). Nothing here is tuned to the model: the settings are the library's defaults.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from explain.core.adaptive import DEFAULT_MAX_POINTS  # noqa: E402  (numpy only)

FEATURES = 24
STATIC = 8
LADDER = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
TODAY_CAP = 1024  # the doubling auto before adaptive integration stopped there


def planted_data(n: int, periods: int, seed: int):
    """(static (n, 8), temporal (n, periods, 24), churned (n,)): raw units, zero-padded short histories."""
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.uniform(0, 5, FEATURES)).astype("float32")  # counts to amounts in the hundreds
    temporal = (rng.gamma(1.5, 1.0, size=(n, periods, FEATURES)) * scale).astype("float32")
    declining = rng.random((n, 1, 1)) < 0.5
    decline = np.clip(np.linspace(1.3, -0.3, periods), 0, 1)[None, :, None]
    temporal = np.where(declining, temporal * decline, temporal).astype("float32")
    temporal[:, :, 1] = rng.poisson(0.1 + 0.4 * rng.random((n, 1)), size=(n, periods))  # support calls
    lengths = rng.integers(periods // 4, periods + 1, n)
    for i, length in enumerate(lengths):
        temporal[i, :periods - length] = 0.0  # padding: the Masking layer's value
    static = (rng.normal(size=(n, STATIC)) * np.exp(rng.uniform(0, 4, STATIC))).astype("float32")
    recent = temporal[:, -30:, 0].mean(axis=1) / scale[0]
    calls = temporal[:, -60:, 1].sum(axis=1)
    logit = -2.0 * (recent - 1.0) + 0.8 * calls / 6 - 1.5 + static[:, 0] / np.exp(2)
    churned = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("float32")
    return static, temporal, churned


def build_model(periods: int, static, temporal, churned, epochs: int):
    import keras

    keras.utils.set_random_seed(0)
    s_in = keras.Input((STATIC,), name="profile")
    t_in = keras.Input((periods, FEATURES), name="daily")
    history = keras.layers.LSTM(64)(keras.layers.Masking(0.0)(t_in))
    joined = keras.layers.Concatenate()([history, keras.layers.Dense(16, activation="relu")(s_in)])
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dense(32, activation="relu")(joined))
    model = keras.Model([s_in, t_in], out)
    model.compile("adam", "binary_crossentropy", metrics=["AUC"])
    fit = model.fit([static, temporal], churned, epochs=epochs, batch_size=64, verbose=0, validation_split=0.2)
    return model, float(fit.history["val_AUC"][-1])


def within(attribution, absolute: float, tolerance: float = 0.005) -> np.ndarray:
    gap = np.abs(attribution.prediction - attribution.baseline_prediction)
    return np.abs(attribution.delta) <= np.maximum(tolerance * gap, absolute)


def ladder(explain_at, n: int, absolute: float, cap: int = LADDER[-1]):
    """Uniform Gauss-Legendre doubling per customer: (points needed (n,), 0 where none met it;
    points evaluated (n,); seconds; {N: (customers, seconds)} per rung)."""
    needed, evaluated = np.zeros(n, np.int64), np.zeros(n, np.int64)
    todo, rungs, started = np.arange(n), {}, time.perf_counter()
    for steps in LADDER:
        if steps > cap or todo.size == 0:
            break
        begun = time.perf_counter()
        result = explain_at(todo, steps)
        rungs[steps] = (todo.size, time.perf_counter() - begun)
        evaluated[todo] += steps
        met = within(result, absolute)
        needed[todo[met]] = steps
        todo = todo[~met]
    return needed, evaluated, time.perf_counter() - started, rungs


def error_of_one(a, reference, i: int) -> float:
    """sum |a - ref| / sum |ref| of customer ``i`` of ``reference``, ``a`` holding that customer alone."""
    diff = np.abs(a.static[0] - reference.static[i]).sum() + np.abs(a.temporal[0] - reference.temporal[i]).sum()
    return float(diff / (np.abs(reference.static[i]).sum() + np.abs(reference.temporal[i]).sum()))


def describe(points: np.ndarray) -> str:
    return (f"mean {points.mean():7.1f}  median {np.median(points):6.0f}  p95 {np.percentile(points, 95):6.0f}  "
            f"max {points.max():5d}")


def long_history_part(args) -> None:
    import explain
    from explain.analysis.explainer import baseline_for, explain_customers
    from explain.bundle.load import Bundle
    from explain.core.settings import Settings

    print(f"== {args.periods} periods x {FEATURES} features, Masking + LSTM(64), raw units; cores: {os.cpu_count()}")
    started = time.perf_counter()
    static, temporal, churned = planted_data(args.train + args.customers, args.periods, seed=0)
    model, auc = build_model(args.periods, static[:args.train], temporal[:args.train], churned[:args.train],
                             args.epochs)
    print(f"trained on {args.train} customers, {args.epochs} epochs in {time.perf_counter() - started:.0f} s; "
          f"validation AUC {auc:.3f}")
    n = args.customers
    bundle = Bundle.from_arrays(model, static, temporal, ids=[f"C{i:05d}" for i in range(len(static))])
    ids = [str(i) for i in bundle.ids[args.train:]]
    baseline = baseline_for(bundle, bundle.inputs_for(list(bundle.ids)), "mean")  # the mean of every customer
    auto_settings = Settings(baseline="mean", steps="auto")

    explain_customers(bundle, ids[:2], _warm_up(), baseline=baseline)  # every compiled function traced: not timed
    begun = time.perf_counter()
    auto = explain_customers(bundle, ids, auto_settings, baseline=baseline)
    auto_seconds = time.perf_counter() - begun
    auto_ok = within(auto, 1e-3)

    def uniform(rows, steps):
        return explain_customers(bundle, [ids[i] for i in rows], Settings(baseline="mean", steps=int(steps)),
                                 baseline=baseline)

    needed, evaluated, ladder_seconds, rungs = ladder(uniform, n, 1e-3)
    met = needed > 0
    # one N for every customer (what steps=N is): the smallest rung whose customers-met share reaches auto's
    share_by_rung = {steps: float(np.mean(met & (needed <= steps))) for steps in LADDER}
    equal = next((steps for steps in LADDER if share_by_rung[steps] >= auto_ok.mean()), None)
    today = met & (needed <= TODAY_CAP)
    today_points = np.minimum(evaluated, sum(s for s in LADDER if s <= TODAY_CAP))

    print(f"\n{n} customers from the mean baseline; within = |delta| <= 0.5 % of |f(x) - f(b)| or 1e-3")
    print(f"auto (adaptive):  within {auto_ok.mean():6.1%}   gradient points {describe(auto.gradient_points)}")
    print(f"                  forward points {describe(auto.forward_points)}   final rule {auto.steps.mean():.1f} "
          f"points   {auto_seconds / n:.3f} s per customer")
    print(f"uniform GL, each customer its smallest rung of 16..4096 that is within: within {met.mean():6.1%}   "
          f"points needed {describe(np.where(met, needed, LADDER[-1]))}")
    print("uniform GL share within by rung: " + ", ".join(f"{s}: {share_by_rung[s]:.0%}" for s in LADDER))
    print(f"today's auto (doubling 16..{TODAY_CAP} per customer, the same ladder): within {today.mean():6.1%}   "
          f"gradient points evaluated {describe(today_points)}")
    per_point = {steps: seconds / (customers * steps) for steps, (customers, seconds) in rungs.items()}
    if equal is not None:
        seconds = per_point.get(equal, per_point[max(per_point)]) * equal
        print(f"uniform GL for auto's share ({auto_ok.mean():.0%}): {equal} points per customer (steps={equal}), "
              f"about {seconds:.3f} s per customer (its rung's seconds per point x {equal})")
        print(f"RATIOS  points uniform/auto: {equal / auto.gradient_points.mean():.1f}x   "
              f"time uniform/auto: {seconds / (auto_seconds / n):.1f}x   "
              f"(auto's forward points included in its time)")
    else:
        print(f"uniform GL up to 4096 points reaches {max(share_by_rung.values()):.0%} within, below auto's "
              f"{auto_ok.mean():.0%}")
    oracle = np.where(met, needed, LADDER[-1])
    print(f"RATIOS  per-customer uniform (each its own rung, as an oracle) / auto: "
          f"{oracle.mean() / auto.gradient_points.mean():.1f}x points; today's auto / auto: "
          f"{today_points.mean() / auto.gradient_points.mean():.1f}x points evaluated, within "
          f"{today.mean():.0%} vs {auto_ok.mean():.0%}")
    engine_ok = within(auto, 1e-4)
    print(f"auto within the engine's own limit (0.5 % or 1e-4): {engine_ok.mean():.1%}; "
          f"at the default budget: {np.mean(auto.gradient_points > DEFAULT_MAX_POINTS - 8):.1%}")

    if args.reference:
        k = min(args.reference, n)
        reference = uniform(np.arange(k), 4096)
        same = int(round(auto.gradient_points[:k].mean()))
        equal_points = uniform(np.arange(k), same)

        def error(a):
            diff = (np.abs(a.static[:k] - reference.static).sum(1)
                    + np.abs(a.temporal[:k] - reference.temporal).sum((1, 2)))
            size = np.abs(reference.static).sum(1) + np.abs(reference.temporal).sum((1, 2))
            return diff / size

        print(f"\nattributions against GL 4096 on {k} customers (sum |a - ref| / sum |ref|): auto median "
              f"{np.median(error(auto)):.2e} max {error(auto).max():.2e}; uniform GL {same} (auto's mean points) "
              f"median {np.median(error(equal_points)):.2e} max {error(equal_points).max():.2e}")
        before = [uniform(np.array([i]), needed[i] if met[i] else TODAY_CAP) for i in range(k)]  # today's auto
        before_error = np.array([error_of_one(b, reference, i) for i, b in enumerate(before)])
        print(f"  today's auto (each customer's first rule of 16..{TODAY_CAP} within the criterion): median "
              f"{np.median(before_error):.2e} max {before_error.max():.2e}")
        for steps in sorted({equal or LADDER[-1], 2048} - {4096}):
            other = error(uniform(np.arange(k), steps))
            print(f"  uniform GL {steps}: median {np.median(other):.2e} max {other.max():.2e}"
                  + ("  (how far the reference itself is from converged)" if steps == 2048 else ""))
    print(f"(long-history part: {time.perf_counter() - started:.0f} s; explain {explain.__name__})")


def demo_part(args) -> None:
    from explain.analysis.explainer import baseline_for, explain_customers
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings
    from explain.demo.churn import DEFAULT_DEMO_DIR

    bundle = load_bundle(DEFAULT_DEMO_DIR)
    ids = [str(i) for i in bundle.ids][:args.demo_customers]
    n = len(ids)
    baseline = baseline_for(bundle, bundle.inputs_for(list(bundle.ids)), "mean")
    explain_customers(bundle, ids[:2], _warm_up(), baseline=baseline)  # every compiled function traced: not timed
    begun = time.perf_counter()
    auto = explain_customers(bundle, ids, Settings(steps="auto"), baseline=baseline)
    auto_seconds = time.perf_counter() - begun

    def uniform(rows, steps):
        return explain_customers(bundle, [ids[i] for i in rows], Settings(steps=int(steps)), baseline=baseline)

    needed, evaluated, seconds, _ = ladder(uniform, n, 1e-4, cap=TODAY_CAP)
    print(f"\n== the demo ({n} customers, {bundle.n_periods} periods), mean baseline, tolerance 0.5 % (at least 1e-4)")
    print(f"auto now:    within {within(auto, 1e-4).mean():6.1%}   gradient points {describe(auto.gradient_points)}"
          f"   final rule mean {auto.steps.mean():.1f}   forward points mean {auto.forward_points.mean():.1f}"
          f"   {auto_seconds:.2f} s")
    final = np.where(needed > 0, needed, TODAY_CAP)
    print(f"auto before: within {np.mean(needed > 0):6.1%}   gradient points {describe(evaluated)}"
          f"   final rule mean {final.mean():.1f}   {seconds:.2f} s")
    print(f"RATIOS  before/now gradient points evaluated: {evaluated.mean() / auto.gradient_points.mean():.2f}x; "
          f"final rules: {final.mean() / auto.steps.mean():.2f}x; time: {seconds / auto_seconds:.2f}x; "
          f"customers where now uses more gradient points than before: {np.mean(auto.gradient_points > evaluated):.1%}")


def _warm_up():
    from explain.core.settings import Settings

    return Settings(baseline="mean", steps="auto", tolerance=1e-9, max_points=64)  # past the first try: the sweep too


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--periods", type=int, default=365)
    parser.add_argument("--customers", type=int, default=60, help="customers explained (not trained on)")
    parser.add_argument("--train", type=int, default=2000, help="customers trained on")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--reference", type=int, default=12, help="customers compared with GL 4096 (0: none)")
    parser.add_argument("--demo-customers", type=int, default=500, help="0: skip the demo part")
    args = parser.parse_args(argv)
    if args.periods > 0:
        long_history_part(args)
    if args.demo_customers > 0:
        demo_part(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
