"""The second demo: categorical embeddings and variable-length histories.

``build_demo_embedding(out_dir)`` writes ``bundles/demo-embedding`` (``model.keras``,
``static.csv``, ``temporal.csv``, ``bundle.json``, ``demo_metrics.json``); a rebuild writes
byte-identical tables and ``bundle.json`` (same library versions, CPU).

The customers
-------------
Synthetic telecom customers ``E00001`` ... with three numeric static features
(``tenure_months``, ``monthly_charge`` in USD, ``age`` in years), two categorical ones
(``contract``: integer codes 0 = month-to-month, 1 = one-year, 2 = two-year, read by an
``Embedding`` directly; ``plan``: the text ``basic``, ``plus`` or ``premium``, read through a
``StringLookup`` with its vocabulary in the model's config), and a monthly history of three
features (``support_calls``, ``data_usage_gb``, ``late_payments``) over 2025-01 ... 2025-12.
A customer who joined less than 12 months ago has only ``tenure_months`` months of history:
the temporal table has fewer rows for them, and the model sees their history padded at the
start with 0 behind a ``Masking(0.0)`` layer (``bundle.json``: ``"temporal_padding": "start"``).
Data usage is at least 0.05 GB, so no real month is all zeros.

The churn rule (the ground truth)
---------------------------------
Over each customer's real months (L = min(tenure, 12) >= 4)::

    support_rise = mean(support_calls, last 3 months) - mean(support_calls, the months before)
    late_recent  = sum(late_payments, last 6 real months)
    score = -2.6 + 1.8 * [contract = month-to-month] + 0.9 * [plan = basic] - 0.9 * [plan = premium]
            - 0.04 * tenure_months + 1.2 * support_rise + 0.9 * late_recent + Normal(0, 0.3)
    churned ~ Bernoulli(sigmoid(score))

Planted drivers: contract, plan, tenure, rising support calls, recent late payments.
``monthly_charge`` (higher for richer plans), ``age`` and ``data_usage_gb`` do not enter it.

The model
---------
``customer`` (None, 3) -> Normalization -> Dense(8, relu); ``contract`` (None, 1) int32 ->
Embedding(3, 3); ``plan`` (None, 1) string -> StringLookup -> Embedding(4, 3) (index 0 is
out-of-vocabulary); ``history`` (None, 12, 3) -> Masking(0.0) -> LSTM(16);
Concatenate -> Dense(16, relu) -> Dense(1, sigmoid) named ``churn``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pandas as pd

from explain.demo.churn import auc, train, write_bundle_files

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "bundles" / "demo-embedding"
ID_COLUMN, PERIOD_COLUMN, LABEL_COLUMN, OUTPUT_NAME = "customer_id", "period", "churned", "churn"
PERIODS = [f"2025-{month:02d}" for month in range(1, 13)]
CONTRACTS = ["month-to-month", "one-year", "two-year"]  # integer codes 0, 1, 2
PLANS = ["basic", "plus", "premium"]
# Column -> (display name, unit, decimals written to the CSV); None: written as is (categories).
NUMERIC_COLUMNS = {
    "tenure_months": ("Tenure (months)", "months", 0),
    "monthly_charge": ("Monthly charge (USD)", "USD", 2),
    "age": ("Age (years)", "years", 0),
}
CATEGORICAL_COLUMNS = {"contract": ("Contract", "code"), "plan": ("Plan", "")}
TEMPORAL_COLUMNS = {
    "support_calls": ("Support calls", "calls", 0),
    "data_usage_gb": ("Data usage (GB)", "GB", 2),
    "late_payments": ("Late payments", "payments", 0),
}
RULE_INTERCEPT = -2.6
RULE_WEIGHTS = {"contract=month-to-month": 1.8, "plan=basic": 0.9, "plan=premium": -0.9,
                "tenure_months": -0.04, "support_rise": 1.2, "late_recent": 0.9}
RULE_TEXT = ("over each customer's real months: support_rise = mean(support_calls, last 3) - "
             "mean(support_calls, before); late_recent = sum(late_payments, last 6); score = -2.6 "
             "+ 1.8 [contract = month-to-month] + 0.9 [plan = basic] - 0.9 [plan = premium] - 0.04 "
             "tenure_months + 1.2 support_rise + 0.9 late_recent + Normal(0, 0.3); "
             "churned ~ Bernoulli(sigmoid(score))")
PLANTED_DRIVERS = {"static": ["contract", "plan", "tenure_months"],
                   "temporal": ["support_calls", "late_payments"]}
TRAIN_FRACTION, EPOCHS, BATCH_SIZE, LEARNING_RATE = 0.8, 25, 64, 3e-3


def make_tables(n_customers: int = 2000, seed: int = 11) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """(static table with label, temporal long table with only real months, true score)."""
    rng = np.random.default_rng(seed)
    n, t = n_customers, len(PERIODS)
    tenure = np.clip(np.round(rng.gamma(1.4, 18.0, n)), 4, 72)
    contract = np.where(rng.random(n) < 0.7 - 0.006 * tenure, 0, rng.integers(1, 3, n))
    plan = rng.choice(3, size=n, p=[0.45, 0.35, 0.20])
    monthly_charge = np.round(np.clip(30 + 20 * plan + rng.normal(0, 8, n), 15, 150), 2)
    age = np.clip(np.round(rng.normal(44, 14, n)), 18, 85)

    length = np.minimum(tenure, t).astype(int)
    month = np.arange(t)
    real = month[None, :] >= (t - length)[:, None]               # history ends at 2025-12
    last3 = month >= t - 3
    rate = rng.gamma(2.0, 0.3, n)[:, None]
    rises = rng.random(n) < 0.3
    support = rng.poisson(rate + np.where(rises, rng.uniform(1.0, 3.0, n), 0.0)[:, None] * last3).astype(float)
    usage = np.round(np.clip(rng.lognormal(np.log(6.0), 0.5, n)[:, None] * rng.lognormal(0, 0.15, (n, t)),
                             0.05, None), 2)
    late = (rng.random((n, t)) < rng.uniform(0.01, 0.12, n)[:, None]).astype(float)

    before = real & ~last3
    support_rise = (support * last3).sum(1) / 3 - (support * before).sum(1) / before.sum(1)
    late_recent = (late * (month >= t - 6)).sum(1)
    score = (RULE_INTERCEPT + 1.8 * (contract == 0) + 0.9 * (plan == 0) - 0.9 * (plan == 2)
             - 0.04 * tenure + 1.2 * support_rise + 0.9 * late_recent + rng.normal(0, 0.3, n))
    churned = (rng.random(n) < 1 / (1 + np.exp(-score))).astype(np.int64)

    ids = np.array([f"E{i:05d}" for i in range(1, n + 1)])
    static = pd.DataFrame({ID_COLUMN: ids, "tenure_months": tenure, "monthly_charge": monthly_charge,
                           "age": age, "contract": contract.astype(np.int64),
                           "plan": np.array(PLANS, dtype=object)[plan], LABEL_COLUMN: churned})
    rows, cols = np.nonzero(real)                               # customer-major, months in order
    temporal = pd.DataFrame({ID_COLUMN: ids[rows], PERIOD_COLUMN: np.array(PERIODS)[cols],
                             "support_calls": support[rows, cols], "data_usage_gb": usage[rows, cols],
                             "late_payments": late[rows, cols]})
    return static, temporal, score


def model_inputs(static: pd.DataFrame, temporal: pd.DataFrame) -> dict:
    """The model's four inputs from the tables as written, histories padded at the start with 0."""
    n, t = len(static), len(PERIODS)
    history = np.zeros((n, t, len(TEMPORAL_COLUMNS)), np.float32)
    position = pd.Series(np.arange(n), index=static[ID_COLUMN].to_numpy())
    rows = position.loc[temporal[ID_COLUMN].to_numpy()].to_numpy()
    cols = pd.Series(range(t), index=PERIODS).loc[temporal[PERIOD_COLUMN].to_numpy()].to_numpy()
    history[rows, cols] = temporal[list(TEMPORAL_COLUMNS)].to_numpy(np.float32)
    return {"customer": static[list(NUMERIC_COLUMNS)].to_numpy(np.float32),
            "contract": static[["contract"]].to_numpy(np.int32),
            "plan": static[["plan"]].to_numpy(dtype=object).astype(str),
            "history": history}


def train_model(x: dict, labels: np.ndarray, seed: int):
    import keras

    keras.utils.set_random_seed(seed)
    if keras.config.backend() == "tensorflow":  # a TensorFlow switch; nothing to import under KERAS_BACKEND=jax
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    customer = keras.Input((len(NUMERIC_COLUMNS),), name="customer")
    contract = keras.Input((1,), dtype="int32", name="contract")
    plan = keras.Input((1,), dtype="string", name="plan")
    history = keras.Input((len(PERIODS), len(TEMPORAL_COLUMNS)), name="history")
    norm = keras.layers.Normalization(mean=x["customer"].mean(0), variance=x["customer"].var(0),
                                      name="customer_normalization")
    c = keras.layers.Dense(8, activation="relu", name="customer_dense")(norm(customer))
    e_contract = keras.layers.Flatten()(keras.layers.Embedding(3, 3, name="contract_embedding")(contract))
    lookup = keras.layers.StringLookup(vocabulary=PLANS, name="plan_lookup")
    e_plan = keras.layers.Flatten()(keras.layers.Embedding(4, 3, name="plan_embedding")(lookup(plan)))
    h = keras.layers.LSTM(16, name="history_lstm")(keras.layers.Masking(0.0, name="padding")(history))
    z = keras.layers.Dense(16, activation="relu", name="joint_dense")(
        keras.layers.Concatenate(name="concat")([c, e_contract, e_plan, h]))
    out = keras.layers.Dense(1, activation="sigmoid", name=OUTPUT_NAME)(z)
    model = keras.Model({"customer": customer, "contract": contract, "plan": plan, "history": history},
                        out, name="demo_embedding_churn")
    return train(model, x, labels, seed, epochs=EPOCHS, batch_size=BATCH_SIZE, learning_rate=LEARNING_RATE)


def build_demo_embedding(out_dir: str | os.PathLike | None = None, *, n_customers: int = 2000,
                         seed: int = 11) -> Path:
    """Write the bundle into ``out_dir`` (default ``bundles/demo-embedding``); files land atomically."""
    if n_customers < 20:
        raise ValueError(f"n_customers must be at least 20 to split train/test; got {n_customers}.")
    out = Path(out_dir) if out_dir is not None else DEFAULT_DIR
    out.mkdir(parents=True, exist_ok=True)
    static, temporal, rule_score = make_tables(n_customers, seed)
    static_csv = _csv(static, [ID_COLUMN], {**NUMERIC_COLUMNS}, ["contract", "plan", LABEL_COLUMN])
    temporal_csv = _csv(temporal, [ID_COLUMN, PERIOD_COLUMN], TEMPORAL_COLUMNS, [])
    static_read = pd.read_csv(io.BytesIO(static_csv), dtype={ID_COLUMN: str, "plan": str})
    temporal_read = pd.read_csv(io.BytesIO(temporal_csv), dtype={ID_COLUMN: str, PERIOD_COLUMN: str})
    x = model_inputs(static_read, temporal_read)
    labels = static_read[LABEL_COLUMN].to_numpy(np.int64)
    order = np.random.default_rng(seed + 1).permutation(n_customers)
    n_train = int(round(TRAIN_FRACTION * n_customers))
    train, test = np.sort(order[:n_train]), np.sort(order[n_train:])
    model = train_model({key: value[train] for key, value in x.items()}, labels[train], seed)
    scores = np.asarray(model({key: value for key, value in x.items()}, training=False))[:, 0]
    metrics = {
        "n_customers": n_customers, "seed": seed, "n_train": int(train.size), "n_test": int(test.size),
        "churn_rate": round(float(labels.mean()), 4),
        "auc_test": round(auc(labels[test], scores[test]), 4),
        "auc_train": round(auc(labels[train], scores[train]), 4),
        "auc_test_of_true_score": round(auc(labels[test], rule_score[test]), 4),
        "history_months": {"min": int(temporal.groupby(ID_COLUMN).size().min()),
                           "mean": round(float(temporal.groupby(ID_COLUMN).size().mean()), 2),
                           "customers_with_padding": int((temporal.groupby(ID_COLUMN).size() < 12).sum())},
        "rule": RULE_TEXT, "rule_intercept": RULE_INTERCEPT, "rule_weights": RULE_WEIGHTS,
        "planted_drivers": PLANTED_DRIVERS,
        "training": {"epochs": EPOCHS, "batch_size": BATCH_SIZE, "learning_rate": LEARNING_RATE,
                     "train_fraction": TRAIN_FRACTION},
    }
    names = {c: spec[0] for c, spec in {**NUMERIC_COLUMNS, **CATEGORICAL_COLUMNS, **TEMPORAL_COLUMNS}.items()}
    units = {c: spec[1] for c, spec in {**NUMERIC_COLUMNS, **TEMPORAL_COLUMNS}.items()}
    bundle_json = {
        "id_column": ID_COLUMN, "period_column": PERIOD_COLUMN,
        "inputs": {
            "customer": {"features": list(NUMERIC_COLUMNS), "display_name": "Customer"},
            "contract": {"features": ["contract"], "display_name": "Contract"},
            "plan": {"features": ["plan"], "display_name": "Plan"},
            "history": {"features": list(TEMPORAL_COLUMNS), "display_name": "Monthly history"},
        },
        "temporal_padding": "start",
        "categories": {"contract": {str(code): name for code, name in enumerate(CONTRACTS)}},
        "display_names": names, "units": units, "output_names": [OUTPUT_NAME],
        "label_column": LABEL_COLUMN, "positive_label": 1,
    }
    return write_bundle_files(out, model, static_csv, temporal_csv, bundle_json, metrics)


def _csv(frame: pd.DataFrame, keys: list[str], numeric: dict, as_is: list[str]) -> bytes:
    """Fixed column order and decimals, '\\n' line endings: the same bytes on every build."""
    out = pd.DataFrame({c: frame[c] for c in keys})
    for name, (_, _, decimals) in numeric.items():
        out[name] = [f"{v:.{decimals}f}" for v in frame[name].to_numpy(np.float64)]
    for name in as_is:
        out[name] = frame[name].astype(str)
    return out.to_csv(index=False, lineterminator="\n").encode("utf-8")
