"""`python -m explain compare-models`: JSON with the contract's keys (DESIGN.md), an HTML report that opens
offline, the demo model against itself (tau 1) and against a copy whose static branch is cut, and a challenger
file opened by the bundle model's rules: a missing, damaged, unsafe or over-limit file is one line and exit 2."""

import html
import json

import keras
import pytest

from explain.cli import main
from explain.core.errors import ExplainError
from explain.modelfile.limits import OWNER_LIMITS
from tests.support.challenger import cut_static

KEYS = {"kendall_tau", "changed", "disagreements", "champion_ranking", "challenger_ranking", "customers",
        "top3_overlap", "settings", "sentence"}
FAST = ["--customers", "30", "--steps", "16"]


@pytest.fixture(scope="module")
def cut_file(bundle_dir, tmp_path_factory):
    """The demo model with the Dense layer that reads the static input zeroed, saved as a .keras file."""
    return cut_static(bundle_dir / "model.keras", tmp_path_factory.mktemp("challenger"))


def compare(bundle_dir, challenger, out, *more):
    return main(["compare-models", "--bundle", str(bundle_dir), "--challenger", str(challenger), *FAST,
                 "--out", str(out), *more])


def test_the_demo_against_itself_writes_the_contracts_json(bundle_dir, tmp_path, capsys):
    out = tmp_path / "self.json"
    assert compare(bundle_dir, bundle_dir / "model.keras", out) == 0
    doc = json.loads(out.read_text())
    assert KEYS <= set(doc) and {"value", "low", "high"} <= set(doc["kendall_tau"])
    assert doc["kendall_tau"]["value"] >= 0.99 and doc["disagreements"] == []
    assert all(abs(c["challenger_share"] - c["champion_share"]) < 1e-6 for c in doc["changed"])
    assert doc["customers"] == 30 and doc["settings"]["steps"] == 16
    assert [r["feature"] for r in doc["champion_ranking"]] == [r["feature"] for r in doc["challenger_ranking"]]
    printed = capsys.readouterr().out
    assert doc["sentence"] in printed and f"wrote {out}" in printed
    assert "Kendall's tau-b of the rankings: 1.000" in printed


def test_a_cut_static_branch_in_json_and_html(bundle_dir, cut_file, tmp_path, capsys):
    out = tmp_path / "cut.json"
    assert compare(bundle_dir, cut_file, out) == 0
    doc = json.loads(out.read_text())
    assert doc["kendall_tau"]["value"] <= 0.8
    static = set(json.loads((bundle_dir / "bundle.json").read_text())["static_features"])
    top = doc["changed"][:3]
    said = [c for c in top if c["feature"] in static]
    assert said and all(" no longer matter" in c["words"] and c["challenger_share"] == 0.0 for c in said)
    printed = capsys.readouterr().out
    assert said[0]["words"] in printed and f"{len(doc['disagreements'])} of 30 customers" in printed
    for d in doc["disagreements"]:
        assert (d["champion_score"] >= 0.5) != (d["challenger_score"] >= 0.5)
        assert d["champion_reasons"] and {"feature", "attribution"} <= set(d["champion_reasons"][0])

    page = tmp_path / "cut.html"
    assert compare(bundle_dir, cut_file, page) == 0
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<script src=" not in text  # plotly.js inline: opens offline
    assert doc["sentence"] in html.unescape(text)
    assert all(html.escape(d["customer"]) in text for d in doc["disagreements"])


def bigger_model():
    static, temporal = keras.Input(shape=(9,), name="static"), keras.Input(shape=(12, 6), name="temporal")
    z = keras.layers.Concatenate()([static, keras.layers.LSTM(64)(temporal)])
    return keras.Model({"static": static, "temporal": temporal}, keras.layers.Dense(1, activation="sigmoid")(z))


def lambda_model():
    static, temporal = keras.Input(shape=(9,), name="static"), keras.Input(shape=(12, 6), name="temporal")
    z = keras.layers.Lambda(lambda x: x * 2.0)(static)
    z = keras.layers.Concatenate()([z, keras.layers.Flatten()(temporal)])
    return keras.Model({"static": static, "temporal": temporal}, keras.layers.Dense(1, activation="sigmoid")(z))


@pytest.mark.parametrize("make, options, words", [
    (None, [], "is not a file"),
    (lambda p: p.write_text("garbage"), [], "was refused before loading"),
    (lambda p: lambda_model().save(p), [], "was refused before loading"),
    (lambda p: bigger_model().save(p), ["--limit", "max_params=10000"], "was refused before loading"),
])
def test_a_bad_challenger_is_one_line_and_exit_2(bundle_dir, tmp_path, capsys, make, options, words):
    path = tmp_path / "challenger.keras"
    if make is not None:
        make(path)
    assert OWNER_LIMITS.max_params is None or OWNER_LIMITS.max_params > 10000
    assert compare(bundle_dir, path, tmp_path / "out.json", *options) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"error: The challenger model {path}") and words in err[0], err
    assert "Traceback" not in "\n".join(err)
    assert not (tmp_path / "out.json").exists()


def test_another_input_shape_and_a_bad_suffix_exit_2(bundle_dir, tmp_path, capsys):
    static, temporal = keras.Input(shape=(8,)), keras.Input(shape=(12, 6))
    other = keras.Model([static, temporal], keras.layers.Dense(1)(
        keras.layers.Concatenate()([static, keras.layers.Flatten()(temporal)])))
    path = tmp_path / "other.keras"
    other.save(path)
    assert compare(bundle_dir, path, tmp_path / "out.json") == 2
    assert "does not take the inputs of the bundle's model" in capsys.readouterr().err
    assert compare(bundle_dir, bundle_dir / "model.keras", tmp_path / "out.txt") == 2
    assert "must end in .json or .html" in capsys.readouterr().err


def test_serve_passes_the_challenger_to_the_app_beside_the_trust_and_limits(bundle_dir, cut_file, tmp_path):
    from explain import serve
    from explain.cli import build_parser
    from ui import launch, startup

    args = build_parser().parse_args(["serve", "--bundle", str(bundle_dir), "--challenger", str(cut_file)])
    assert args.challenger == str(cut_file)
    argv = serve.command(bundle_dir, challenger=cut_file, limits=OWNER_LIMITS.but(max_layers=300))
    _, app_args = launch.streamlit_args(argv[2:])
    assert app_args[app_args.index("--challenger") + 1] == str(cut_file.resolve())
    assert "--limit" in app_args  # the app opens the challenger under the same limits as the bundle
    assert startup.challenger_path(app_args) == cut_file.resolve()
    assert startup.challenger_path(["--bundle", str(bundle_dir)]) is None
    with pytest.raises(ExplainError, match="--challenger .* is not a file"):
        serve.command(bundle_dir, challenger=tmp_path / "missing.keras")


LAYERS_PY = '''
import keras
from keras import ops


@keras.saving.register_keras_serializable(package="compare_test")
class Swish(keras.layers.Layer):
    def call(self, x):
        return x * ops.sigmoid(x)
'''


def test_a_challenger_with_custom_layers_opens_with_trust_code_only(bundle_dir, tmp_path, capsys):
    from explain.modelfile import trust

    code = tmp_path / "layers.py"
    code.write_text(LAYERS_PY)
    swish = trust.load_trusted_code(code).objects["compare_test>Swish"]
    static, temporal = keras.Input(shape=(9,), name="static"), keras.Input(shape=(12, 6), name="temporal")
    z = keras.layers.Concatenate()([swish()(keras.layers.Dense(4)(static)), keras.layers.LSTM(4)(temporal)])
    path = tmp_path / "custom.keras"
    keras.Model({"static": static, "temporal": temporal}, keras.layers.Dense(1, activation="sigmoid")(z)).save(path)
    assert compare(bundle_dir, path, tmp_path / "refused.json") == 2
    assert "was refused before loading" in capsys.readouterr().err
    out = tmp_path / "trusted.json"
    assert compare(bundle_dir, path, out, "--trust-code", str(code)) == 0
    captured = capsys.readouterr()
    assert captured.err.count("trusted code loaded: layers.py") == 1  # one loader for the bundle and the challenger
    assert json.loads(out.read_text())["customers"] == 30
