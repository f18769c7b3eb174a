"""A plain bundle of long daily histories: 365 days x 24 features and 20 static features (more
than the 15 bars a ranking shows), for the bin/zoom control and the "show all" toggle.

The model is linear in the inputs (Flatten + Dense + sigmoid, weights set by hand): its score
rises with ``calls`` over the last 30 days and with ``static_0`` (``PLANTED``), every other input
weighs a little, so IG gives every feature a non-zero effect and clear drivers: support calls of
the last 30 days, data usage of the last 60 days (less usage, more risk), late payments in the
summer, and the first static feature, the price increase.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

T, F, S = 365, 24, 20
DAYS = [d.strftime("%Y-%m-%d") for d in pd.date_range("2025-01-01", periods=T)]
NAMED = ["support_calls", "data_usage_gb", "late_payments", "dropped_calls", "app_logins", "roaming_minutes"]
TEMPORAL = NAMED + [f"usage_metric_{j:02d}" for j in range(len(NAMED), F)]
STATIC = ["price_increase"] + [f"profile_{j:02d}" for j in range(1, S)]
PLANTED = ("support_calls", "price_increase")
NAMES = {"support_calls": "Support calls", "data_usage_gb": "Data usage (GB)", "late_payments": "Late payments",
         "dropped_calls": "Dropped calls", "app_logins": "App logins", "roaming_minutes": "Roaming minutes",
         "price_increase": "Price increase (%)",
         **{c: c.replace("_", " ").capitalize() for c in TEMPORAL[len(NAMED):] + STATIC[1:]}}


def model(seed: int = 0):
    """(None, 365, 24) 'daily' and (None, 20) 'account' -> Flatten / Dense -> sigmoid 'churn'."""
    import keras

    daily = keras.Input((T, F), name="daily")
    account = keras.Input((S,), name="account")
    on_daily = keras.layers.Dense(1, use_bias=False, name="daily_weights")
    on_account = keras.layers.Dense(1, name="account_weights")
    logit = keras.layers.Add()([on_daily(keras.layers.Flatten()(daily)), on_account(account)])
    out = keras.Model([daily, account], keras.layers.Activation("sigmoid", name="churn")(logit))
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.002, (T, F))
    w[-30:, 0] = 0.03   # support calls of the last 30 days
    w[-60:, 1] = -0.02  # data usage of the last 60 days: less usage, more risk
    w[180:240, 2] = 0.03  # late payments in the summer
    on_daily.set_weights([w.reshape(T * F, 1)])
    v = rng.normal(0, 0.05, (S, 1))
    v[0] = 1.0
    on_account.set_weights([v, np.array([-4.5])])  # about -1.5 in logit for an average customer
    return out


def write(folder: Path, n: int = 24, seed: int = 1) -> Path:
    """The bundle folder (``save_bundle``), ``n`` customers."""
    from explain.bundle.save import save_bundle

    rng = np.random.default_rng(seed)
    static = pd.DataFrame(rng.normal(0, 1, (n, S)).round(3), columns=STATIC)
    static.insert(0, "customer_id", [f"Y{k:03d}" for k in range(n)])
    temporal = rng.poisson(2.0, (n, T, F)).astype(np.float64)
    temporal[: n // 2, -30:, 0] += rng.integers(1, 4, (n // 2, 30))  # half of them call more lately
    temporal[: n // 2, -60:, 1] = np.maximum(0.0, temporal[: n // 2, -60:, 1] - 1.5)  # and use less data
    temporal[::3, 180:240, 2] += 1.0  # a third pay late in the summer
    static["churned"] = (rng.uniform(size=n) < 0.3).astype(int)
    return save_bundle(Path(folder), model(), static, temporal, periods=DAYS, temporal_features=TEMPORAL,
                       labels="churned", tables="parquet", display_names=NAMES)
