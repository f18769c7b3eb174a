# %% [markdown]
# # From a notebook to the dashboard
#
# A Keras model with a static input (one row of customer features) and a temporal input
# (12 months of history), explained with Integrated Gradients, drawn with Plotly, saved as a
# bundle and opened in the dashboard. Run it as a script (`python examples/notebook.py`, after
# `pip install .`) or cell by cell in Jupyter / VS Code (`# %%` cells). It writes into the
# current folder: `churn_bundle/`, `heatmap.html`, `heatmap.json` and `report.html`.

# %%
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pandas as pd

import explain

# %% [markdown]
# ## Data: a DataFrame of static features and an (n, T, F) array of monthly history

# %%
rng = np.random.default_rng(7)
n, months = 600, 12
statics = ["tenure_months", "monthly_charge", "month_to_month"]
variables = ["support_calls", "data_usage_gb"]
churn_static_data = pd.DataFrame({
    "tenure_months": rng.integers(1, 72, n).astype("float32"),
    "monthly_charge": rng.normal(60, 15, n).astype("float32"),
    "month_to_month": rng.integers(0, 2, n).astype("float32"),
}, index=[f"K{i:04d}" for i in range(n)])          # the index holds the customer ids
churn_var_data = np.stack([rng.poisson(1.0, (n, months)),
                           rng.gamma(4.0, 2.0, (n, months))], axis=-1).astype("float32")
# The rule we plant: short tenure, a monthly contract and many recent support calls churn.
score = (-0.05 * churn_static_data["tenure_months"].to_numpy() + 1.5 * churn_static_data["month_to_month"].to_numpy()
         + 0.8 * churn_var_data[:, -3:, 0].sum(axis=1) - 2.0)
churned = (score + rng.logistic(size=n) > 0).astype(int)

# %% [markdown]
# ## A small two-input model (Normalization inside, so it reads raw values), fitted briefly

# %%
keras.utils.set_random_seed(0)
static_in = keras.Input((len(statics),), name="static")
temporal_in = keras.Input((months, len(variables)), name="history")
norm_s = keras.layers.Normalization()
norm_t = keras.layers.Normalization()
norm_s.adapt(churn_static_data.to_numpy())
norm_t.adapt(churn_var_data.reshape(-1, len(variables)))
h = keras.layers.Concatenate()([keras.layers.Dense(8, activation="relu")(norm_s(static_in)),
                                keras.layers.LSTM(8)(norm_t(temporal_in))])
lstm = keras.Model([static_in, temporal_in], keras.layers.Dense(1, activation="sigmoid")(h))
lstm.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
lstm.fit([churn_static_data.to_numpy(), churn_var_data], churned, epochs=4, batch_size=64, verbose=0)

# %% [markdown]
# ## The seed question's call: the model takes a list `[static, temporal]`

# %%
inputs = [churn_static_data.iloc[:1, :].values.astype(np.float32), churn_var_data[:1, :, :]]
print("prediction of the first customer:", float(lstm(inputs)[0, 0]))

# %% [markdown]
# ## Integrated Gradients: the same list, and a baseline list in the same order
#
# Both inputs move together from the baseline to the customer (the joint path), so the
# attributions add up to prediction minus baseline prediction (`a.delta` is what is left).

# %%
baseline = [churn_static_data.to_numpy().mean(axis=0, keepdims=True),      # (1, S): the data's mean
            churn_var_data.mean(axis=(0, 1), keepdims=True).repeat(months, axis=1)]  # (1, T, F)
a = explain.integrated_gradients(lstm, inputs, baseline, steps=64)
print("static attributions:", {name: round(float(v), 4) for name, v in zip(statics, a.static[0])})
print("delta (completeness gap):", float(a.delta[0]))

# %% [markdown]
# ## Figures: a bundle in memory gives the names, then the dashboard's heatmap

# %%
periods = [f"2025-{m:02d}" for m in range(1, months + 1)]
names = dict(periods=periods, temporal_features=variables, labels=churned, output_names=["churn"],
             display_names={"tenure_months": "Tenure", "support_calls": "Support calls"},
             units={"tenure_months": "months", "data_usage_gb": "GB"})
bundle = explain.Bundle.from_objects(lstm, churn_static_data, churn_var_data, **names)
# `a` holds one customer (row 0), the bundle all of them: ids=[...] matches the rows.
fig = explain.figures.heatmap(a, bundle, customer=0, ids=[bundle.ids[0]],
                              baseline={"static": baseline[0], "temporal": baseline[1]})
# In Jupyter: fig.show()
fig.write_html("heatmap.html", include_plotlyjs=True)
fig.write_json("heatmap.json")
explain.figures.html(a, bundle, customer=0, ids=[bundle.ids[0]], path="report.html")

# %% [markdown]
# ## Save the bundle and open it in the dashboard

# %%
path = explain.save_bundle("churn_bundle", lstm, churn_static_data, churn_var_data, overwrite=True, **names)
print(f"saved {path}; check it with:  explain check --bundle {path}")
print(f"open the dashboard with:     explain serve --bundle {path} --port 8501")
