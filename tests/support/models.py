"""Small models with known attributions, shared by the engine tests."""

import keras
import numpy as np

S, T, F = 5, 6, 3


def linear_model(seed=0, temporal_first=False):
    """f(s, t) = s . ws + sum(t * wt) + c: IG is exactly (x - b) * w."""
    rng = np.random.default_rng(seed)
    ws = rng.normal(size=(S, 1))
    wt = rng.normal(size=(T * F, 1))
    s_in = keras.Input((S,), name="features")
    t_in = keras.Input((T, F), name="history")
    d_s = keras.layers.Dense(1, use_bias=True)
    d_t = keras.layers.Dense(1, use_bias=False)
    out = keras.layers.Add()([d_s(s_in), d_t(keras.layers.Flatten()(t_in))])
    model = keras.Model([t_in, s_in] if temporal_first else [s_in, t_in], out)
    d_s.set_weights([ws, np.array([0.3])])
    d_t.set_weights([wt])
    return model, ws[:, 0], wt[:, 0].reshape(T, F)


def lstm_model(seed=0, temporal_first=False, units=8, ignore=None):
    """A small seeded LSTM churn-like model with a sigmoid head.

    ignore=("static", j) or ("temporal", j) zeroes every weight reading that feature.
    """
    keras.utils.set_random_seed(seed)
    s_in = keras.Input((S,), name="static_in")
    t_in = keras.Input((T, F), name="temporal_in")
    dense = keras.layers.Dense(8, activation="tanh")
    lstm = keras.layers.LSTM(units)
    h = keras.layers.Concatenate()([dense(s_in), lstm(t_in)])
    out = keras.layers.Dense(1, activation="sigmoid")(h)
    model = keras.Model([t_in, s_in] if temporal_first else [s_in, t_in], out)
    if ignore is not None:
        role, j = ignore
        layer = dense if role == "static" else lstm
        weights = layer.get_weights()
        weights[0][j, :] = 0.0
        layer.set_weights(weights)
    return model


def data(n=6, seed=1):
    rng = np.random.default_rng(seed)
    return {"static": rng.normal(size=(n, S)).astype("float32"),
            "temporal": rng.normal(size=(n, T, F)).astype("float32")}


def zero_baseline():
    return {"static": np.zeros((1, S)), "temporal": np.zeros((1, T, F))}
