"""The notebook's compare_models: a bundle folder and a model file (opened by a bundle model's rules), or the
objects themselves; the same numbers as explain.analysis.models.compare_models."""

import keras
import numpy as np
import pytest

from explain.analysis import models
from explain.bundle.load import load_bundle
from explain.core.errors import ExplainError
from explain.core.settings import Settings
from explain.notebook import compare_models


def test_paths_and_objects_give_the_same_comparison(bundle_dir):
    by_path = compare_models(bundle_dir, bundle_dir / "model.keras", customers=12, steps=16)
    assert by_path.kendall_tau.value == 1.0 and by_path.disagreements == ()
    assert by_path.challenger_name == str(bundle_dir / "model.keras")
    bundle = load_bundle(bundle_dir)
    model = keras.models.clone_model(bundle.model)
    model.set_weights([np.zeros_like(w) if "static_dense" in w.path else w.numpy()
                       for w in bundle.model.weights])  # the static branch cut
    by_object = compare_models(bundle, model, customers=12, steps=16, seed=3)
    reference = models.compare_models(bundle, model, customers=12, settings=Settings(steps=16, seed=3), seed=3)
    assert by_object.to_dict() == reference.to_dict()
    assert by_object.kendall_tau.value < 0.8


def test_a_missing_challenger_file_is_named(bundle_dir, tmp_path):
    with pytest.raises(ExplainError, match="The challenger model .*nothing.keras is not a file"):
        compare_models(bundle_dir, tmp_path / "nothing.keras", customers=4, steps=16)
