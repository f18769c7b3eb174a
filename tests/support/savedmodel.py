"""The demo bundle beside a copy whose model is a TensorFlow SavedModel (the SavedModel tests' fixture)."""

from __future__ import annotations

from pathlib import Path

import explain
from tests.conftest import DEMO, private_copy


def demo_pair(root: Path) -> tuple[Path, Path]:
    """(the demo bundle, the same with its model exported by ``model.export`` into savedmodel/ and model.keras
    removed), both private copies under ``root``."""
    keras_dir = private_copy(DEMO, root / "keras")
    sm_dir = private_copy(DEMO, root / "sm")
    explain.load_bundle(keras_dir).model.export(str(sm_dir / "savedmodel"), verbose=False)
    (sm_dir / "model.keras").unlink()
    return keras_dir, sm_dir
