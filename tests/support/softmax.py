"""A softmax ["stay", "churn"] bundle with a known churn probability, unlike the demo: the history is the
model's first input, p(churn) = sigmoid(w . x + c) over the static features and the flattened history."""

from __future__ import annotations

import json

import keras
import numpy as np
import pandas as pd

S, T, F, N = 3, 5, 2, 40


def softmax_bundle(folder, **config):
    """Softmax over [0, w . x + c]: p(churn) = sigmoid(w . x + c), p(stay) = 1 - p(churn)."""
    rng = np.random.default_rng(4)
    s_in, t_in = keras.Input((S,), name="profile"), keras.Input((T, F), name="months")
    joined = keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])
    dense = keras.layers.Dense(2, activation="softmax", name="classes")
    model = keras.Model([t_in, s_in], dense(joined))  # the history first: unlike the demo
    w = rng.normal(0, 0.6, size=S + T * F)
    dense.set_weights([np.stack([np.zeros_like(w), w], axis=1), np.array([0.0, -0.3])])
    folder.mkdir(parents=True)
    model.save(folder / "model.keras")
    ids = [f"S{k:02d}" for k in range(N)]
    static = pd.DataFrame(rng.normal(size=(N, S)), columns=["a", "b", "c"])
    static.insert(0, "customer_id", ids)
    static["left"] = rng.integers(0, 2, N)
    static.to_csv(folder / "static.csv", index=False)
    rows = [{"customer_id": cid, "period": f"2025-0{t + 1}", "x": rng.normal(), "y": rng.normal()}
            for cid in ids for t in range(T)]
    pd.DataFrame(rows).to_csv(folder / "temporal.csv", index=False)
    (folder / "bundle.json").write_text(json.dumps({"output_names": ["stay", "churn"], "label_column": "left",
                                                    **config}))
    return folder, w
