"""The deterministic demo churn data set and model.

``build_demo(out_dir)`` writes a bundle folder (``model.keras``, ``static.csv``,
``temporal.csv``, ``bundle.json``) plus ``demo_metrics.json``. A rebuild with the same
arguments writes byte-identical tables and ``bundle.json`` and a model whose predictions match
within 1e-5 (same library versions, CPU).

The customers
-------------
Synthetic telecom customers ``C00001`` ... with 9 static features (all numeric, raw units):
``tenure_months``, ``contract_month_to_month`` (0/1), ``contract_two_year`` (0/1; both 0 means
a one-year contract), ``monthly_charge`` (USD), ``num_products``, ``autopay`` (0/1), ``age``
(years), ``support_plan`` (0/1), ``region_urban`` (0/1); and 12 monthly periods ``2025-01`` ...
``2025-12`` of 6 temporal features: ``data_usage_gb``, ``support_calls``, ``late_payments``,
``dropped_calls``, ``app_logins``, ``bill_amount`` (USD). About 30 % of customers see their data
usage fall over the last three months, about 30 % see their support calls rise over them; the
two are drawn independently of each other and of the static features.

The churn rule (the ground truth IG should recover)
---------------------------------------------------
Computed from the values written to the tables (after rounding)::

    support_rise = mean(support_calls, 2025-10..2025-12) - mean(support_calls, 2025-01..2025-09)
    usage_change = mean(data_usage_gb, 2025-10..2025-12) / mean(data_usage_gb, 2025-01..2025-09) - 1
    late_recent  = sum(late_payments, 2025-07..2025-12)
    score = -3.3 + 2.0 * contract_month_to_month - 0.045 * tenure_months
            + 1.2 * support_rise - 5.0 * usage_change + 0.9 * late_recent + noise
    noise ~ Normal(0, 0.3)          (factors the tables do not show)
    churned ~ Bernoulli(1 / (1 + exp(-score)))

So the planted drivers are a month-to-month contract (risk), tenure (long tenure protects,
short tenure adds risk), rising support calls and falling data usage in the last three months,
and recent late payments. ``contract_two_year``, ``monthly_charge``, ``num_products``,
``autopay``, ``age``, ``support_plan``, ``region_urban``, ``dropped_calls``, ``app_logins`` and
``bill_amount`` do not enter the rule (some correlate with drivers: short tenure goes with
month-to-month contracts, ``autopay`` with fewer late payments, ``bill_amount`` with usage).

The model
---------
Raw values in, ``keras.layers.Normalization`` inside (the mean and variance of the training
rows, as ``adapt`` would compute them):
``static`` (None, 9) -> Normalization -> Dense(16, relu);
``temporal`` (None, 12, 6) -> Normalization -> LSTM(32);
Concatenate -> Dense(16, relu) -> Dense(1, sigmoid) named ``churn``.
Trained (Adam, binary cross-entropy, a numpy-shuffled batch loop) on a fixed 80 % of the
customers; the held-out AUC (rank formula) and the churn rate go to ``demo_metrics.json``.

``build_demo`` calls ``keras.utils.set_random_seed(seed)`` and
``tf.config.experimental.enable_op_determinism()`` (on TensorFlow); both are process-wide and stay set.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULT_DEMO_DIR = Path(__file__).resolve().parents[2] / "bundles" / "demo"

ID_COLUMN = "customer_id"
PERIOD_COLUMN = "period"
LABEL_COLUMN = "churned"
OUTPUT_NAME = "churn"
PERIODS = [f"2025-{month:02d}" for month in range(1, 13)]

# Column -> (display name, unit, decimals written to the CSV).
STATIC_COLUMNS = {
    "tenure_months": ("Tenure (months)", "months", 0),
    "contract_month_to_month": ("Month-to-month contract", "0/1", 0),
    "contract_two_year": ("Two-year contract", "0/1", 0),
    "monthly_charge": ("Monthly charge (USD)", "USD", 2),
    "num_products": ("Number of products", "products", 0),
    "autopay": ("Autopay", "0/1", 0),
    "age": ("Age (years)", "years", 0),
    "support_plan": ("Premium support plan", "0/1", 0),
    "region_urban": ("Urban region", "0/1", 0),
}
TEMPORAL_COLUMNS = {
    "data_usage_gb": ("Data usage (GB)", "GB", 2),
    "support_calls": ("Support calls", "calls", 0),
    "late_payments": ("Late payments", "payments", 0),
    "dropped_calls": ("Dropped calls", "calls", 0),
    "app_logins": ("App logins", "logins", 0),
    "bill_amount": ("Bill amount (USD)", "USD", 2),
}

# The churn rule (see the module docstring); the same numbers are written to demo_metrics.json.
RULE_INTERCEPT = -3.3
RULE_WEIGHTS = {
    "contract_month_to_month": 2.0,
    "tenure_months": -0.045,
    "support_rise": 1.2,
    "usage_change": -5.0,
    "late_recent": 0.9,
}
RULE_NOISE_SD = 0.3
RULE_TEXT = (
    "support_rise = mean(support_calls, 2025-10..2025-12) - mean(support_calls, 2025-01..2025-09); "
    "usage_change = mean(data_usage_gb, 2025-10..2025-12) / mean(data_usage_gb, 2025-01..2025-09) - 1; "
    "late_recent = sum(late_payments, 2025-07..2025-12); "
    "score = -3.3 + 2.0 * contract_month_to_month - 0.045 * tenure_months + 1.2 * support_rise "
    "- 5.0 * usage_change + 0.9 * late_recent + Normal(0, 0.3); "
    "churned ~ Bernoulli(sigmoid(score))"
)
PLANTED_DRIVERS = {
    "static": ["contract_month_to_month", "tenure_months"],
    "temporal": ["support_calls", "data_usage_gb", "late_payments"],
}

TRAIN_FRACTION = 0.8
EPOCHS = 12
BATCH_SIZE = 64
LEARNING_RATE = 1e-3


def build_demo(out_dir: str | os.PathLike | None = None, *, n_customers: int = 3000,
               seed: int = 7) -> Path:
    """Write the demo bundle into ``out_dir`` (default ``bundles/demo``) and return its path.

    Every file is first written to a temporary folder inside ``out_dir`` and then moved into
    place, so a failed build leaves no half-written file.
    """
    if n_customers < 20:
        raise ValueError(f"n_customers must be at least 20 to split train/test; got {n_customers}.")
    out = Path(out_dir) if out_dir is not None else DEFAULT_DEMO_DIR
    out.mkdir(parents=True, exist_ok=True)

    static, temporal, rule_score = make_demo_tables(n_customers, seed)
    static_csv = _csv_bytes(static, STATIC_COLUMNS, LABEL_COLUMN)
    temporal_csv = _csv_bytes(temporal, TEMPORAL_COLUMNS)
    static_x, temporal_x, labels = _as_written(static_csv, temporal_csv, n_customers)
    order = np.random.default_rng(seed + 1).permutation(n_customers)
    n_train = int(round(TRAIN_FRACTION * n_customers))
    train, test = np.sort(order[:n_train]), np.sort(order[n_train:])

    model = train_demo_model(static_x[train], temporal_x[train], labels[train], seed)
    scores = np.concatenate([
        np.asarray(model({"static": static_x[k:k + 1024], "temporal": temporal_x[k:k + 1024]},
                         training=False))[:, 0] for k in range(0, n_customers, 1024)])
    metrics = {
        "n_customers": n_customers,
        "seed": seed,
        "n_train": int(train.size),
        "n_test": int(test.size),
        "churn_rate": round(float(labels.mean()), 4),
        "churn_rate_test": round(float(labels[test].mean()), 4),
        "auc_test": round(auc(labels[test], scores[test]), 4),
        "auc_train": round(auc(labels[train], scores[train]), 4),
        "auc_test_of_true_score": round(auc(labels[test], rule_score[test]), 4),
        **_RULE_AND_TRAINING,
    }
    return write_bundle_files(out, model, static_csv, temporal_csv, _bundle_json(), metrics)


# demo_metrics.json: the rule the labels were drawn from and how the model was trained
_RULE_AND_TRAINING = {
    "rule": RULE_TEXT,
    "rule_intercept": RULE_INTERCEPT,
    "rule_weights": RULE_WEIGHTS,
    "planted_drivers": PLANTED_DRIVERS,
    "training": {"epochs": EPOCHS, "batch_size": BATCH_SIZE,
                 "learning_rate": LEARNING_RATE, "train_fraction": TRAIN_FRACTION},
}


def _as_written(static_csv: bytes, temporal_csv: bytes, n_customers: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(static (n, S), temporal (n, T, F), labels): the model learns from the tables exactly as written (parsed
    back from the CSV bytes)."""
    static_read = pd.read_csv(io.BytesIO(static_csv), dtype={ID_COLUMN: str})
    temporal_read = pd.read_csv(io.BytesIO(temporal_csv), dtype={ID_COLUMN: str, PERIOD_COLUMN: str})
    static_x = static_read[list(STATIC_COLUMNS)].to_numpy(np.float32)
    # temporal rows are (customer, period) in order: (n * T, F) -> (n, T, F)
    temporal_x = temporal_read[list(TEMPORAL_COLUMNS)].to_numpy(np.float32).reshape(
        n_customers, len(PERIODS), len(TEMPORAL_COLUMNS))
    return static_x, temporal_x, static_read[LABEL_COLUMN].to_numpy(np.int64)


def _bundle_json() -> dict:
    """The demo's bundle.json."""
    return {
        "id_column": ID_COLUMN,
        "period_column": PERIOD_COLUMN,
        "static_features": list(STATIC_COLUMNS),
        "temporal_features": list(TEMPORAL_COLUMNS),
        "display_names": {c: spec[0] for c, spec in {**STATIC_COLUMNS, **TEMPORAL_COLUMNS}.items()},
        "units": {c: spec[1] for c, spec in {**STATIC_COLUMNS, **TEMPORAL_COLUMNS}.items()},
        "output_names": [OUTPUT_NAME],
        "label_column": LABEL_COLUMN,
        "positive_label": 1,
    }


def write_bundle_files(out: Path, model, static_csv: bytes, temporal_csv: bytes, bundle_json: dict,
                       metrics: dict) -> Path:
    """A demo bundle's five files, written into a staging folder inside ``out`` and then moved
    in one by one, so that ``out`` never holds a half-written file."""
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=out))
    try:
        (staging / "static.csv").write_bytes(static_csv)
        (staging / "temporal.csv").write_bytes(temporal_csv)
        (staging / "bundle.json").write_bytes(json_bytes(bundle_json))
        (staging / "demo_metrics.json").write_bytes(json_bytes(metrics))
        model.save(staging / "model.keras")
        for name in ("model.keras", "static.csv", "temporal.csv", "bundle.json", "demo_metrics.json"):
            os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def make_demo_tables(n_customers: int = 3000, seed: int = 7
                     ) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """The demo tables, rounded as written: (static with label, temporal long, true score). One random stream
    draws, in this order, the customers, their histories, the rule's noise and the outcomes."""
    rng = np.random.default_rng(seed)
    n, t = n_customers, len(PERIODS)
    customers = _customers(rng, n)
    histories = _histories(rng, customers, t)
    score = _rule_score(rng, customers, histories, t)
    churned = (rng.random(n) < 1 / (1 + np.exp(-score))).astype(np.int64)

    ids = np.array([f"C{i:05d}" for i in range(1, n + 1)])
    static = pd.DataFrame({ID_COLUMN: ids, **customers, LABEL_COLUMN: churned})
    temporal = pd.DataFrame({
        ID_COLUMN: np.repeat(ids, t), PERIOD_COLUMN: np.tile(PERIODS, n),
        **{name: values.ravel() for name, values in histories.items()},
    })
    return static, temporal, score


def _customers(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """The static columns, in the table's order."""
    tenure = np.clip(np.round(rng.gamma(1.5, 20.0, n)), 1, 72)
    p_month_to_month = 0.75 - 0.006 * tenure
    month_to_month = (rng.random(n) < p_month_to_month).astype(float)
    two_year = ((1 - month_to_month) * (rng.random(n) < 0.5)).astype(float)
    num_products = 1.0 + rng.binomial(4, 0.3, n)
    monthly_charge = np.round(np.clip(20 + 18 * num_products + rng.normal(0, 8, n), 15, 150), 2)
    autopay = (rng.random(n) < 0.6 - 0.2 * month_to_month).astype(float)
    age = np.clip(np.round(rng.normal(45, 15, n)), 18, 85)
    support_plan = (rng.random(n) < 0.3).astype(float)
    region_urban = (rng.random(n) < 0.65).astype(float)
    return {"tenure_months": tenure, "contract_month_to_month": month_to_month, "contract_two_year": two_year,
            "monthly_charge": monthly_charge, "num_products": num_products, "autopay": autopay, "age": age,
            "support_plan": support_plan, "region_urban": region_urban}


def _histories(rng: np.random.Generator, customers: dict, t: int) -> dict[str, np.ndarray]:
    """The temporal columns as (n, T) arrays, in the table's order."""
    n = len(customers["age"])
    month = np.arange(t)
    last3 = month >= t - 3
    # data usage: a personal level, a gentle trend, noise; ~30 % fall over the last 3 months.
    level = rng.lognormal(np.log(8.0), 0.5, n)[:, None]
    trend = 1 + rng.normal(0, 0.01, n)[:, None] * month
    falls = rng.random(n) < 0.3
    depth = np.where(falls, rng.uniform(0.3, 0.8, n), 0.0)[:, None]
    fall = 1 - depth * np.clip(month - (t - 4), 0, 3) / 3       # 1, ..., 1, 1-d/3, 1-2d/3, 1-d
    usage = np.round(np.clip(level * trend * fall * rng.lognormal(0, 0.12, (n, t)), 0.05, None), 2)
    # support calls: a personal rate; ~30 % see it rise over the last 3 months.
    rate = rng.gamma(2.0, 0.25, n)[:, None]
    rises = rng.random(n) < 0.3
    rise = np.where(rises, rng.uniform(1.0, 3.0, n), 0.0)[:, None] * last3
    support_calls = rng.poisson(rate + rise).astype(float)
    p_late = 0.02 + 0.12 * (1 - customers["autopay"])[:, None] * rng.random(n)[:, None]
    late_payments = (rng.random((n, t)) < p_late).astype(float)
    dropped_calls = rng.poisson((1.5 + 1.0 * (1 - customers["region_urban"]))[:, None], (n, t)).astype(float)
    app_logins = rng.poisson(np.clip(25 - 0.25 * customers["age"], 2, None)[:, None], (n, t)).astype(float)
    bill_amount = np.round(customers["monthly_charge"][:, None] + 2.0 * np.clip(usage - 15, 0, None)
                           + rng.normal(0, 1.5, (n, t)), 2)
    return {"data_usage_gb": usage, "support_calls": support_calls, "late_payments": late_payments,
            "dropped_calls": dropped_calls, "app_logins": app_logins, "bill_amount": bill_amount}


def _rule_score(rng: np.random.Generator, customers: dict, histories: dict, t: int) -> np.ndarray:
    """The true churn score of RULE_TEXT, its noise drawn last."""
    last3 = np.arange(t) >= t - 3
    support_calls, usage = histories["support_calls"], histories["data_usage_gb"]
    support_rise = support_calls[:, last3].mean(1) - support_calls[:, ~last3].mean(1)
    usage_change = usage[:, last3].mean(1) / usage[:, ~last3].mean(1) - 1
    late_recent = histories["late_payments"][:, t - 6:].sum(1)
    return (RULE_INTERCEPT
            + RULE_WEIGHTS["contract_month_to_month"] * customers["contract_month_to_month"]
            + RULE_WEIGHTS["tenure_months"] * customers["tenure_months"]
            + RULE_WEIGHTS["support_rise"] * support_rise
            + RULE_WEIGHTS["usage_change"] * usage_change
            + RULE_WEIGHTS["late_recent"] * late_recent
            + rng.normal(0, RULE_NOISE_SD, len(support_rise)))


def train_demo_model(static_x: np.ndarray, temporal_x: np.ndarray, labels: np.ndarray,
                     seed: int):
    """Build and fit the demo model on raw values (normalisation inside the model)."""
    import keras

    keras.utils.set_random_seed(seed)
    if keras.config.backend() == "tensorflow":  # a TensorFlow switch; nothing to import under KERAS_BACKEND=jax
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()

    static_in = keras.Input(shape=static_x.shape[1:], name="static")
    temporal_in = keras.Input(shape=temporal_x.shape[1:], name="temporal")
    # Normalisation statistics of the training rows (what adapt() computes, without tf.data).
    static_norm = keras.layers.Normalization(
        axis=-1, mean=static_x.mean(axis=0), variance=static_x.var(axis=0),
        name="static_normalization")
    temporal_norm = keras.layers.Normalization(
        axis=-1, mean=temporal_x.mean(axis=(0, 1)), variance=temporal_x.var(axis=(0, 1)),
        name="temporal_normalization")
    s = keras.layers.Dense(16, activation="relu", name="static_dense")(static_norm(static_in))
    h = keras.layers.LSTM(32, name="temporal_lstm")(temporal_norm(temporal_in))
    z = keras.layers.Concatenate(name="concat")([s, h])
    z = keras.layers.Dense(16, activation="relu", name="joint_dense")(z)
    out = keras.layers.Dense(1, activation="sigmoid", name=OUTPUT_NAME)(z)
    model = keras.Model({"static": static_in, "temporal": temporal_in}, out, name="demo_churn")

    return train(model, {"static": static_x, "temporal": temporal_x}, labels, seed)


def train(model, x: dict, labels, seed: int, *, epochs: int = EPOCHS, batch_size: int = BATCH_SIZE,
          learning_rate: float = LEARNING_RATE):
    """Binary cross-entropy with Adam in a plain batch loop (not fit): the shuffling is numpy's,
    seeded, and no tf.data pipeline is built. ``x``: the model's inputs by name."""
    import keras

    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="binary_crossentropy")
    rng = np.random.default_rng(seed)
    targets = labels.astype(np.float32)[:, None]
    for _ in range(epochs):
        order = rng.permutation(len(targets))
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            model.train_on_batch({key: value[batch] for key, value in x.items()}, targets[batch])
    return model


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC by the rank (Mann-Whitney) formula, ties given their average rank."""
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=np.float64)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = pd.Series(scores).rank(method="average").to_numpy()
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _csv_bytes(frame: pd.DataFrame, columns: dict, label: str | None = None) -> bytes:
    """Fixed column order, fixed decimals, '\\n' line endings: the same bytes on every build."""
    out = pd.DataFrame({c: frame[c] for c in frame.columns if c in (ID_COLUMN, PERIOD_COLUMN)})
    for name, (_, _, decimals) in columns.items():
        out[name] = [f"{v:.{decimals}f}" for v in frame[name].to_numpy(np.float64)]
    if label is not None:
        out[label] = frame[label].astype(np.int64).astype(str)
    return out.to_csv(index=False, lineterminator="\n").encode("utf-8")


def json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
