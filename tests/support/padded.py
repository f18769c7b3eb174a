"""A padded bundle unlike the demo: 64 weekly periods behind ``Masking(0)`` + an LSTM whose weights
are set by hand (no training), some customers with a short history padded at the start.

The planted rule: the LSTM's cell adds up ``tanh(W_SUPPORT * support + W_USAGE * usage)`` over the
customer's real weeks (its input, forget and output gates held near 1), so ``support`` drives the
score, ``usage`` a little, and ``logins`` not at all (zero weight: exactly zero attribution).
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

T = 64
WEEKS = [(date(2024, 1, 1) + timedelta(weeks=k)).isoformat() for k in range(T)]
TEMPORAL = ["support", "usage", "logins"]
STATIC = ["plan_price", "age"]
W_SUPPORT, W_USAGE = 0.05, 0.01
PLANTED = "support"  # the temporal driver
IGNORED = "logins"


def model():
    """(None, 2) 'account' and (None, 64, 3) 'weeks' -> Masking(0) -> LSTM(1) -> sigmoid 'churn'."""
    import keras

    account = keras.Input((len(STATIC),), name="account")
    weeks = keras.Input((T, len(TEMPORAL)), name="weeks")
    lstm = keras.layers.LSTM(1, name="memory")
    dense = keras.layers.Dense(1, name="account_dense")
    joined = keras.layers.Concatenate()([dense(account), lstm(keras.layers.Masking(0.0)(weeks))])
    head = keras.layers.Dense(1, activation="sigmoid", name="churn")
    out = keras.Model([account, weeks], head(joined))
    kernel = np.zeros((len(TEMPORAL), 4))           # gates i, f, c, o
    kernel[:, 2] = [W_SUPPORT, W_USAGE, 0.0]         # only the cell input reads the history
    lstm.set_weights([kernel, np.zeros((1, 4)), np.array([6.0, 6.0, 0.0, 6.0])])
    dense.set_weights([np.array([[0.01], [-0.005]]), np.zeros(1)])
    head.set_weights([np.array([[1.0], [3.0]]), np.array([-1.5])])
    return out


def write(folder: Path, n: int = 40, seed: int = 3, padded_every: int = 3, extra: dict | None = None) -> Path:
    """The bundle folder: every ``padded_every``-th customer has 6 to 40 real weeks (padded at the
    start: the temporal table leaves the other weeks out). ``extra``: more bundle.json keys."""
    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model().save(folder / "model.keras")
    ids = [f"W{k:03d}" for k in range(n)]
    real = {cid: int(rng.integers(6, 41)) if k % padded_every == 0 else T for k, cid in enumerate(ids)}
    static = pd.DataFrame({"customer_id": ids, "plan_price": rng.uniform(10, 50, n).round(2),
                           "age": rng.integers(18, 80, n), "churned": rng.integers(0, 2, n)})
    static.to_csv(folder / "static.csv", index=False)
    level = dict(zip(ids, rng.uniform(0.1, 0.9, n)))  # each customer's own support level: the driver varies
    rows = [{"customer_id": cid, "week": WEEKS[t],
             "support": round(float(np.clip(level[cid] + rng.normal(0, 0.1), 0.05, 1.0)), 3),
             "usage": round(float(rng.uniform(0.05, 1.0)), 3), "logins": round(float(rng.uniform(0.05, 1.0)), 3)}
            for cid in ids for t in range(T - real[cid], T)]
    pd.DataFrame(rows).to_csv(folder / "temporal.csv", index=False)
    config = {"period_column": "week", "label_column": "churned", "positive_label": 1,
              "temporal_padding": "start", "output_names": ["churn"], **(extra or {})}
    (folder / "bundle.json").write_text(json.dumps(config, indent=1))
    return folder


def short_customers(folder: Path) -> list[str]:
    """The ids whose history is shorter than the 64 weeks (padded)."""
    table = pd.read_csv(Path(folder) / "temporal.csv", dtype={"customer_id": str})
    counts = table.groupby("customer_id").size()
    return sorted(counts[counts < T].index)
