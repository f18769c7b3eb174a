"""The engine on Keras' JAX backend against its TensorFlow backend (explain/core/backend*.py).

Keras picks its backend when it is imported, so every JAX run is a separate process started with
KERAS_BACKEND=jax; the TensorFlow side of a comparison runs in this (TensorFlow) process, or in a process of its
own where this one is not on TensorFlow. The three sets of re-run tests (property, analysis, safe loading) and the
JAX side of the comparisons of unlike models, of the command line and of the Customer page (tests.support.jax_side)
share one JAX pytest process (the fixture jax_reruns), and every JAX process of a test session shares JAX's
persistent compilation cache (tests.support.backends.jax_compilation_cache). Skipped where JAX is not installed
(the ``jax`` extra: requirements-jax.txt).
"""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explain.batch.store import read_store
from tests.support.backends import customer_page, jax_cache_environment, jax_process_flags

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[3]
TOLERANCE = 1e-5  # of the largest attribution

# The engine's property tests, run as they are under JAX (those that compare against a hand-written
# tf.GradientTape reference need TensorFlow tensors and stay TensorFlow-only; the others are here). Of the cut's path
# sums and of its compiled calls, the LSTM's (the GRU's run on TensorFlow; 15 s and 10 s of CPU here).
PROPERTY_TESTS = [
    "tests/unit/core/test_ig.py::test_exact_on_linear_model",
    "tests/unit/core/test_ig.py::test_completeness_shrinks_with_steps",
    "tests/unit/core/test_ig.py::test_delta_is_reported_exactly",
    "tests/unit/core/test_ig.py::test_ignored_feature_gets_exactly_zero",
    "tests/unit/core/test_ig.py::test_batch_size_does_not_change_results",
    "tests/unit/core/test_ig.py::test_input_order_and_names_do_not_matter",
    "tests/unit/core/test_ig.py::test_logit_space_uses_pre_activation",
    "tests/unit/core/test_ig.py::test_target_by_name_and_multiclass",
    "tests/unit/core/test_ig.py::test_errors",
    "tests/unit/core/test_inputs.py::test_categorical_baselines_mode_chosen_and_mean_embedding",
    "tests/unit/core/test_inputs.py::test_three_inputs_exact_on_linear_model",
    "tests/unit/core/test_inputs.py::test_masked_auto_steps_stay_low_and_raw_zero_baseline_is_refused",
    "tests/unit/core/test_inputs.py::test_unused_third_input_is_a_note_and_gets_exact_zeros",
    "tests/unit/core/test_inputs.py::test_float64_model_input_stays_float64",
    "tests/unit/core/test_padded_baseline.py",
    "tests/unit/core/test_ig_adaptive.py::test_auto_is_exact_on_a_linear_model_after_the_first_try",
    "tests/unit/core/test_ig_adaptive.py::test_auto_does_not_depend_on_batch_size_or_row_groups",
    "tests/unit/core/test_backend_jax.py",
    "tests/unit/core/test_cut.py::test_cut_path_sums_equal_the_full_ones_and_a_reference_on_real_periods[lstm]",
    "tests/unit/core/test_cut.py::test_compiled_cut_calls_equal_the_graph_calls_and_the_reference[lstm]",
]
# What is built on the engine: faithfulness checks, the what-if search, the local batch. Not the batch
# test that chunk boundaries change no number by more than 1e-7: under JAX, XLA's CPU kernels round a
# float32 output differently for other batch shapes (2 float32 steps, 1.2e-7, seen on a prediction of 0.91). Not the
# tests whose JAX part another test covers, each 10-20 s of CPU here: the Diagnostics page's faithfulness button and
# the demo's faithfulness report, its deletion curves, randomisation and occlusion (14 s of CPU for the report alone;
# tests/app/test_jax_pages.py clicks the button on JAX, compares the curves and the occlusion with TensorFlow's and
# sees the randomisation chart drawn; the checks' own tests on small models run here), the demo's what-if search
# (the search's other tests run here), the batch resumed after a SIGKILL (a subprocess; the store's resume does not
# depend on the backend, and the command line's batch on JAX is tests.support.jax_side's).
ANALYSIS_TESTS = [
    "tests/unit/analysis/test_faithfulness.py",
    "tests/unit/analysis/test_whatif.py",
    "tests/unit/batch/test_batch.py",
    "--deselect", "tests/unit/batch/test_batch.py::test_chunk_boundaries_do_not_change_any_number",
    "--deselect", "tests/unit/analysis/test_faithfulness.py::test_diagnostics_page_runs_the_checks_only_when_asked",
    "--deselect", "tests/unit/analysis/test_faithfulness.py::test_demo_ig_deletion_falls_faster_than_random_orders",
    "--deselect", "tests/unit/analysis/test_faithfulness.py::"
                  "test_demo_randomisation_falls_at_the_first_layer_and_leaves_the_model_alone",
    "--deselect", "tests/unit/analysis/test_faithfulness.py::test_demo_occlusion_agrees_with_ig",
    "--deselect", "tests/unit/analysis/test_whatif.py::"
                  "test_on_the_demo_the_search_brings_a_high_risk_customer_below_one_half",
    "--deselect", "tests/unit/batch/test_batch.py::test_resume_after_sigkill_gives_the_uninterrupted_rows",
]
# Safe loading: the same refusals, before any code runs, with the trial child on JAX.
SAFE_LOAD_TESTS = [
    "tests/unit/modelfile/test_safe_load.py::test_clean_two_input_model_loads_and_predicts_identically",
    "tests/unit/modelfile/test_safe_load.py::test_lambda_that_writes_a_marker_is_refused_and_never_runs",
    "tests/unit/modelfile/test_safe_load.py::test_nested_model_hiding_a_lambda_is_refused_with_its_path",
    "tests/unit/modelfile/test_safe_load.py::test_custom_registered_layer_is_refused",
    "tests/unit/modelfile/test_safe_load.py::test_tampered_config_is_refused",
]


@pytest.fixture(scope="module", autouse=True)
def jax_cache(tmp_path_factory):
    """JAX's persistent compilation cache for every process these tests start (one folder per test session, shared
    with the JAX test files of every pytest worker); this process's environment as it was afterwards."""
    yield from jax_cache_environment(tmp_path_factory)


def run(args, backend: str, timeout: float = 900, check: bool = True, **environment) -> subprocess.CompletedProcess:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", **environment,
               **(jax_process_flags() if backend == "jax" else {}))
    out = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert not check or out.returncode == 0, \
        f"{backend}: {' '.join(args[:4])} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def on_tensorflow() -> bool:
    """Whether this process's Keras is on TensorFlow, so that a comparison's TensorFlow side can run here."""
    import keras

    return keras.config.backend() == "tensorflow"


def assert_close(tf_values, jax_values, what):
    scale = max(float(np.abs(tf_values).max()), 1e-12)
    worst = float(np.abs(np.asarray(tf_values) - np.asarray(jax_values)).max()) / scale
    assert worst <= TOLERANCE, f"{what}: JAX differs from TensorFlow by {worst:.2e} of the largest"


def _sets(arguments):
    """The test files and node ids of a set, without its pytest options."""
    return [a for i, a in enumerate(arguments)
            if not a.startswith("-") and (i == 0 or arguments[i - 1] != "--deselect")]


RERUN_TESTS = ("test_the_engines_property_tests_pass_on_jax", "test_faithfulness_what_if_and_batch_tests_pass_on_jax",
               "test_safe_loading_refuses_the_same_files_on_jax")
JAX_SIDE = "tests/support/jax_side.py"  # the JAX side of the comparisons below, run after the sets


@pytest.fixture(scope="module")
def jax_reruns(request, tmp_path_factory):
    """The property, analysis and safe-loading sets (where one of their tests runs) and the JAX side of the
    comparisons of unlike models, of the command line and of the Customer page (tests.support.jax_side) in ONE
    pytest process on JAX (one start of JAX, Keras and pytest instead of four): {(file, test name without its
    parameters): [outcome of each test]} from its JUnit report, the run's output, and the folder of what the JAX
    side wrote (the unlike models, built first: here where this process is on TensorFlow, else in a process of
    their own)."""
    from tests.support import backends

    side = tmp_path_factory.mktemp("jax-side")
    if on_tensorflow():
        backends.build(side / "models")
    else:
        run(["-m", "tests.support.backends", "build", str(side / "models")], "tensorflow")
    (side / "ids.txt").write_text("C00001\nC00002\nC00003\nC00004\nC00005\n")
    sets = [*PROPERTY_TESTS, *ANALYSIS_TESTS, *SAFE_LOAD_TESTS] \
        if any(item.name in RERUN_TESTS for item in request.session.items) else []
    report = side / "report.xml"
    out = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *sets, JAX_SIDE], "jax",
              timeout=2400, check=False, EXPLAIN_JAX_SIDE=str(side))
    assert out.returncode in (0, 1) and report.is_file(), f"the JAX run did not run:\n{out.stdout[-3000:]}\n" \
                                                          f"{out.stderr[-3000:]}"
    outcomes = {}
    for case in ElementTree.parse(report).iter("testcase"):
        module, name = case.get("classname", ""), case.get("name", "")
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        outcomes.setdefault((module, name.split("[")[0]), []).append(outcome)
    return outcomes, out.stdout, side


def jax_side(jax_reruns, test: str) -> Path:
    """The folder of what the JAX side wrote, once its ``test`` (tests.support.jax_side) passed."""
    outcomes, stdout, side = jax_reruns
    assert outcomes.get(("tests.support.jax_side", test)) == ["passed"], \
        f"{test} on JAX: {outcomes.get(('tests.support.jax_side', test))}:\n{stdout[-5000:]}"
    return side


def assert_set_passed(jax_reruns, arguments, skips_allowed: bool):
    """Every file and test of the set ran under JAX and passed (none failed, none skipped unless allowed)."""
    outcomes, stdout, _ = jax_reruns
    for entry in _sets(arguments):
        file, _, name = entry.partition("::")
        name = name.split("[")[0]  # one parameter set of a test: its outcomes are under the test's name
        module = file.removesuffix(".py").replace("/", ".")
        seen = [o for (m, n), found in outcomes.items() if (m == module or m.startswith(module + "."))
                and (not name or n == name) for o in found]
        assert "passed" in seen, f"{entry}: no test passed on JAX ({seen}):\n{stdout[-3000:]}"
        bad = [o for o in seen if o != "passed" and (o != "skipped" or not skips_allowed)]
        assert not bad, f"{entry} on JAX: {bad}:\n{stdout[-3000:]}"


def test_the_engines_property_tests_pass_on_jax(jax_reruns):
    assert_set_passed(jax_reruns, PROPERTY_TESTS, skips_allowed=False)


def test_faithfulness_what_if_and_batch_tests_pass_on_jax(jax_reruns):
    assert_set_passed(jax_reruns, ANALYSIS_TESTS, skips_allowed=True)
    outcomes, _, _ = jax_reruns
    assert ("tests.unit.batch.test_batch", "test_chunk_boundaries_do_not_change_any_number") not in outcomes


def test_safe_loading_refuses_the_same_files_on_jax(jax_reruns):
    assert_set_passed(jax_reruns, SAFE_LOAD_TESTS, skips_allowed=True)


def test_unlike_models_give_the_same_attributions_on_both_backends(jax_reruns, tmp_path):
    from tests.support import backends
    from tests.support.backends import COMPARED, SETTINGS

    side = jax_side(jax_reruns, "test_unlike_models_attribute_on_jax")  # the models built, JAX's numbers
    if on_tensorflow():  # TensorFlow's numbers in this process, else in one of their own
        backends.attribute(side / "models", tmp_path / "tensorflow.npz")
    else:
        out = run(["-m", "tests.support.backends", "attribute", str(side / "models"), str(tmp_path / "tensorflow.npz")],
                  "tensorflow")
        assert json.loads(out.stdout.strip().splitlines()[-1]) == {"backend": "tensorflow"}
    tf_results, jax_results = np.load(tmp_path / "tensorflow.npz"), np.load(side / "unlike.npz")
    assert sorted(tf_results.files) == sorted(jax_results.files)
    names = {key.split("/")[0] for key in tf_results.files}
    assert names == set(COMPARED) == {"gru", "conv1d_temporal_first", "dense_only", "embedding", "masking",
                                      "two_temporal", "softmax", "float64"}
    assert {setting for settings in COMPARED.values() for setting in settings} == set(SETTINGS)
    for name in names:
        assert {key.split("/")[1] for key in tf_results.files if key.startswith(f"{name}/")} == set(COMPARED[name])
        for setting in COMPARED[name]:
            keys = [k for k in tf_results.files if k.startswith(f"{name}/{setting}/")
                    and k.rsplit("/", 1)[1] not in ("prediction", "delta")]
            assert keys
            flat_tf = np.concatenate([tf_results[k].ravel() for k in keys])
            flat_jax = np.concatenate([jax_results[k].ravel() for k in keys])
            assert_close(flat_tf, flat_jax, f"{name} {setting}")
            assert_close(tf_results[f"{name}/{setting}/prediction"], jax_results[f"{name}/{setting}/prediction"],
                         f"{name} {setting} prediction")


DEMO = ROOT / "bundles" / "demo"


CLI = """
import sys
sys.path.insert(0, {root!r})
from explain.cli import main
codes = [main(command) for command in {commands!r}]
assert codes == [0, 0], codes
"""


@pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")
def test_the_command_line_gives_the_same_attributions_on_both_backends(jax_reruns, tmp_path):
    from tests.support.jax_side import commands

    side = jax_side(jax_reruns, "test_the_command_line_on_jax")  # JAX's: cli.csv, cli.parquet (main() on JAX)
    (tmp_path / "ids.txt").write_bytes((side / "ids.txt").read_bytes())
    if on_tensorflow():  # the command line's main() in this process
        from explain.cli import main

        assert [main(command) for command in commands(tmp_path, "tensorflow")] == [0, 0]
    else:  # both commands in one process on TensorFlow (python -m explain runs the same main())
        run(["-c", CLI.format(root=str(ROOT), commands=commands(tmp_path, "tensorflow"))], "tensorflow")
    tables = {backend: (pd.read_csv(folder / f"{stem}.csv"), read_store(folder / f"{stem}.parquet")[0])
              for backend, folder, stem in (("tensorflow", tmp_path, "tensorflow"), ("jax", side, "cli"))}
    for index, what in ((0, "attribute"), (1, "batch")):  # the batch: the compact store's long view
        tf_table, jax_table = tables["tensorflow"][index], tables["jax"][index]
        columns = [c for c in tf_table.columns if c != "attribution"]
        assert len(tf_table) == len(jax_table) > 0
        pd.testing.assert_frame_equal(tf_table[columns].reset_index(drop=True),
                                      jax_table[columns].reset_index(drop=True))
        assert_close(tf_table["attribution"].to_numpy(), jax_table["attribution"].to_numpy(), what)


CUSTOMER_PAGE = """
import json, os, sys
sys.path.insert(0, {root!r})
os.environ.pop("EXPLAIN_BUNDLE", None)
from tests.support.backends import customer_page
print(json.dumps(customer_page()))
"""


@pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")
def test_the_customer_page_renders_on_jax_with_the_same_heatmap(jax_reruns, monkeypatch, tmp_path):
    side = jax_side(jax_reruns, "test_the_customer_page_on_jax")  # JAX's page, from a store computed there
    pages = {"jax": json.loads((side / "customer_page.json").read_text())}
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)
    monkeypatch.setenv("EXPLAIN_STORES", str(tmp_path / "tensorflow"))  # no store another test left: computed here
    if on_tensorflow():  # TensorFlow's page in this process
        pages["tensorflow"] = customer_page()
    else:
        out = run(["-c", CUSTOMER_PAGE.format(root=str(ROOT))], "tensorflow")
        pages["tensorflow"] = json.loads(out.stdout.strip().splitlines()[-1])
    for backend in ("tensorflow", "jax"):
        assert pages[backend]["backend"] == backend
        assert any(label.startswith("Predicted") for label in pages[backend]["metrics"])
    assert_close(np.array(pages["tensorflow"]["z"], float), np.array(pages["jax"]["z"], float), "customer heatmap")


WITHOUT_TENSORFLOW = """
import importlib.abc, json, sys
sys.path.insert(0, {root!r})

class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "tensorflow":
            raise ImportError("no TensorFlow on this machine")

sys.meta_path.insert(0, NoTensorFlow())
import numpy as np, keras, explain
from tests.support.models import data, linear_model, zero_baseline
model, ws, wt = linear_model(seed=3)
x = data(3)
a = explain.integrated_gradients(model, x, zero_baseline(), steps=4)
print(json.dumps({{"backend": keras.config.backend(), "tensorflow": "tensorflow" in sys.modules,
                   "static": float(np.abs(a.static - x["static"] * ws).max()),
                   "temporal": float(np.abs(a.temporal - x["temporal"] * wt).max())}}))
"""


def test_jax_alone_is_enough():
    out = run(["-c", WITHOUT_TENSORFLOW.format(root=str(ROOT))], "jax")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["backend"] == "jax" and result["tensorflow"] is False
    assert result["static"] < 1e-6 and result["temporal"] < 1e-6  # exact IG of the linear model
