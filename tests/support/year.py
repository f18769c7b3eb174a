"""A plain bundle of long daily histories: 365 days x 24 features and 20 static features (more
than the 15 bars a ranking shows), for the bin/zoom control and the "show all" toggle.

The model is linear in the inputs (Flatten + Dense + sigmoid, weights set by hand): its score
rises with ``calls`` over the last 30 days and with ``static_0`` (``PLANTED``), every other input
weighs a little, so IG gives every feature a non-zero effect and two clear drivers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

T, F, S = 365, 24, 20
DAYS = [d.strftime("%Y-%m-%d") for d in pd.date_range("2025-01-01", periods=T)]
TEMPORAL = ["calls"] + [f"signal_{j:02d}" for j in range(1, F)]
STATIC = [f"static_{j}" for j in range(S)]
PLANTED = ("calls", "static_0")


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
    w[-30:, 0] = 0.08  # calls of the last 30 days
    on_daily.set_weights([w.reshape(T * F, 1)])
    v = rng.normal(0, 0.05, (S, 1))
    v[0] = 1.0
    on_account.set_weights([v, np.array([-2.0])])
    return out


def write(folder: Path, n: int = 24, seed: int = 1) -> Path:
    """The bundle folder (``save_bundle``), ``n`` customers."""
    from explain.bundle.save import save_bundle

    rng = np.random.default_rng(seed)
    static = pd.DataFrame(rng.normal(0, 1, (n, S)).round(3), columns=STATIC)
    static.insert(0, "customer_id", [f"Y{k:03d}" for k in range(n)])
    temporal = rng.poisson(2.0, (n, T, F)).astype(np.float64)
    temporal[: n // 2, -30:, 0] += rng.integers(1, 4, (n // 2, 30))  # half of them call more lately
    static["churned"] = (rng.uniform(size=n) < 0.3).astype(int)
    return save_bundle(Path(folder), model(), static, temporal, periods=DAYS, temporal_features=TEMPORAL,
                       labels="churned", tables="parquet")
