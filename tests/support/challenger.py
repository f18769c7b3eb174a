"""A challenger for the champion-against-challenger tests: the demo model with its static branch cut."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np


def cut_static(model_file: Path, folder: Path) -> Path:
    """The model of ``model_file`` with the Dense layer that reads the static input zeroed (kernel and bias), saved
    as ``folder/cut.keras``: its static features no longer matter."""
    model = keras.saving.load_model(model_file, compile=False)
    layer = model.get_layer("static_dense")
    layer.set_weights([np.zeros_like(w) for w in layer.get_weights()])
    path = Path(folder) / "cut.keras"
    model.save(path)
    return path
