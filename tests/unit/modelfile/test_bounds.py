"""Issue 25's attacks as a table: each hostile file (small on disk, huge once built) is refused with one
short message naming the limit to raise, within a time and a memory bound measured in a fresh interpreter
(``tests.support.processes.measured``: wall time, and the rise of the process's RSS while the call runs).

Model files go through ``safe_load.check_model_file`` (what every upload and bundle goes through first);
tables and bundle.json through ``validate_bundle`` of a folder holding the hostile file (nothing else of
the bundle is built: no model, so no TensorFlow in the measured process).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from explain.bundle import config as bundle_config
from explain.bundle import tables
from explain.core.bounded_json import load_bounded, shape
from explain.core.errors import ExplainError
from explain.core.text import MESSAGE_LIMIT, capped, listing
from explain.modelfile import config as model_config
from explain.modelfile.limits import DEFAULT_LIMITS, Limits, limit_arguments, parse_limits
from tests.support import hostile as H
from tests.support.processes import measured

SECONDS = 10            # issue 25: each row refused within 10 s
GROWTH = 300 * 1024**2  # ... with the RSS growing by at most 300 MB
ROOT = Path(__file__).resolve().parents[3]


def literal(template: str) -> str:
    """The longest fixed piece of a message template (the text between its {fields})."""
    return max(re.split(r"\{[^{}]*\}", template), key=len).strip()


# (case, builder(folder) -> path of the model file, template, words the message must hold)
MODELS = [
    ("config.json with 1,000,000 refused entries", lambda d: H.refused_entries_file(d / "m.keras", 1_000_000),
     model_config.CONFIG_TOO_LARGE, ["config.json", "max_json_bytes"]),
    ("config.json with 200,000 refused entries", lambda d: H.refused_entries_file(d / "m.keras", 200_000),
     model_config.CONFIG_TOO_LARGE, ["200,001 objects", "max_config_entries"]),
    ("config.json with 15,000 refused entries", lambda d: H.refused_entries_file(d / "m.keras", 15_000),
     model_config.UNSAFE_CONFIG, ["15,000 part(s)", "Lambda", "... and 14,9"]),
    ("Sequential of 2,000 layers", lambda d: H.long_sequential_file(d / "m.keras", 2_000),
     model_config.TOO_MANY_LAYERS, ["2,000 layers", "max_layers"]),
    ("config.json nested 200,000 deep", lambda d: H.deep_config_file(d / "m.keras", 200_000),
     model_config.CONFIG_TOO_LARGE, ["nested more than 64 levels", "max_json_depth"]),
]

# (case, builder(folder) writing one bundle file, template, words the report must hold)
FILES = [
    ("static.parquet of 20 M rows of zeros", lambda d: H.zeros_parquet(d / "static.parquet", 20_000_000),
     tables.TABLE_TOO_LARGE, ["20,000,000 rows x 2 columns", "max_table_cells"]),
    ("static.parquet of 400 M rows of zeros", lambda d: H.zeros_parquet(d / "static.parquet", 400_000_000),
     tables.TABLE_TOO_LARGE, ["400,000,000 rows", "max_table_cells"]),
    ("static.csv of 12.5 M rows (50 MB)", lambda d: H.long_csv(d / "static.csv", 12_500_000),
     tables.TABLE_TOO_LARGE, ["12,500,001 rows x 2 columns", "max_table_cells"]),
    ("static.csv of 30,000 columns", lambda d: H.wide_bad_csv(d / "static.csv", 30_000),
     tables.TABLE_TOO_LARGE, ["30,001 columns", "max_table_columns"]),
    ("static.parquet with a column of lists", lambda d: H.nested_parquet(d / "static.parquet"),
     tables.NESTED_COLUMNS, ["'tenure'"]),
    ("bundle.json nested 200,000 deep", lambda d: (d / "bundle.json").write_bytes(H.deep_json(200_000)),
     bundle_config.JSON_TOO_LARGE, ["bundle.json", "max_json_depth"]),
    ("bundle.json listing 1,000,000 features", lambda d: (d / "bundle.json").write_bytes(H.long_json_list(10**6)),
     bundle_config.JSON_TOO_LARGE, ["1,000,00", "max_json_values"]),
    ("static.csv of 900 text columns: 900 problems", lambda d: H.wide_bad_csv(d / "static.csv", 900),
     "... and {count:,} more problems", ["column 'f0' must hold numbers", "more problems"]),
]


def check_measure(result: dict, template: str, words: list[str]) -> None:
    text = result["text"]
    assert literal(template) in text, text[:2000]
    for word in words:
        assert word in text, (word, text[:2000])
    assert len(text) <= MESSAGE_LIMIT, len(text)
    assert result["seconds"] <= SECONDS, result["seconds"]
    assert result["growth"] <= GROWTH, f"RSS grew by {result['growth'] / 2**20:.0f} MB"


@pytest.mark.parametrize("case, build, template, words", MODELS, ids=[row[0] for row in MODELS])
def test_hostile_model_file_is_refused_quickly_and_briefly(case, build, template, words, tmp_path):
    path = build(tmp_path)
    assert path.stat().st_size < 2 * 1024**2  # small on disk, whatever it declares
    result = measured("from explain.modelfile import safe_load",
                      f"safe_load.check_model_file({str(path)!r}, display_name='m.keras')")
    assert result["error"] == "UnsafeModelError"
    check_measure(result, template, words)


@pytest.mark.parametrize("case, build, template, words", FILES, ids=[row[0] for row in FILES])
def test_hostile_bundle_file_is_refused_quickly_and_briefly(case, build, template, words, tmp_path):
    build(tmp_path)
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) < 50 * 1024**2  # under the upload limit
    result = measured("import pyarrow.parquet\nfrom explain.bundle.load import validate_bundle",
                      f"validate_bundle({str(tmp_path)!r})")
    assert result["error"] is None
    check_measure(result, template, words)


# ----------------------------------------------------------------------------- the pieces, on their own


def test_the_layers_counted_are_the_layers_keras_builds():
    """A real Functional model holding a Sequential: Keras' own layer count (nested models counted)
    is the count the walker refuses over."""
    import keras

    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(3)], name="inner")
    x = keras.Input((4,))
    model = keras.Model(x, keras.layers.Dense(1)(inner(x)))
    config = keras.saving.serialize_keras_object(model)

    def count(layer):
        inside = getattr(layer, "layers", [])
        return 1 + sum(count(sub) for sub in inside) if inside else 1

    expected = sum(count(layer) for layer in model.layers if not isinstance(layer, keras.layers.InputLayer))
    assert expected == 4  # inner, its two Dense, the last Dense
    assert model_config.check_config(config, "m.keras", DEFAULT_LIMITS.but(max_layers=expected)) >= 0
    with pytest.raises(ExplainError, match="has 4 layers"):
        model_config.check_config(config, "m.keras", DEFAULT_LIMITS.but(max_layers=expected - 1))


@pytest.mark.parametrize("text, depth, values", [
    (b'{"a": [1, 2, {"b": "[[[,,,"}]}', 3, 6),
    (b'"a \\" [ {"', 0, 1),
    (b"[" * 1000 + b"]" * 1000, 1000, 1001),
    (b'[[], [[]], [[[]]]]', 4, 10),  # 7 containers, 2 commas, 1
])
def test_json_shape_is_read_from_the_bytes(text, depth, values):
    assert shape(text) == (depth, values)


def test_bounded_json_parses_what_fits_and_names_the_limit_otherwise():
    assert load_bounded(b'\xef\xbb\xbf{"a": [1, 2]}', max_bytes=100, max_depth=2, max_values=10) == {"a": [1, 2]}
    for raw, field in [(b"[[[1]]]", "max_json_depth"), (b"[1,2,3,4,5,6,7,8,9,10,11]", "max_json_values"),
                       (b" " * 101, "max_json_bytes")]:
        with pytest.raises(ValueError) as info:
            load_bounded(raw, max_bytes=100, max_depth=2, max_values=10)
        assert info.value.field == field and field in info.value.reason


def test_a_csv_is_measured_on_its_bytes():
    limits = DEFAULT_LIMITS.but(max_table_cells=6, max_table_columns=3)
    assert tables._csv_size("s.csv", b"id,a\n1,2\n3,4\n", limits) is None  # 3 lines x 2
    assert "4 rows x 2 columns = 8 cells" in tables._csv_size("s.csv", b"id,a\n1,2\n3,4\n5,6\n", limits)
    assert "7 values on 2 lines" in tables._csv_size("s.csv", b"id\n1,2,3,4,5,6\n", limits)  # a row longer
    assert "4 columns" in tables._csv_size("s.csv", b"a,b,c,d\n", limits)


def test_listing_cuts_a_long_list_and_counts_the_rest():
    lines = listing((f"problem {i}" for i in range(1_000_000)), total=1_000_000)
    assert lines[:2] == ["problem 0", "problem 1"] and len(lines) == 21
    assert lines[-1] == "... and 999,980 more"
    assert listing(["x" * 9000] * 3)[0].endswith("characters not shown)")
    assert listing(["a", "b"]) == ["a", "b"]


def test_every_explain_error_is_capped():
    error = ExplainError("x" * 10**6)
    assert len(str(error)) == MESSAGE_LIMIT and str(error).endswith("characters not shown)")
    assert capped("short") == "short"


def test_limits_are_raised_from_the_command_line_only_by_name():
    limits = parse_limits(["max_table_cells=5e7", "max_params=none", "max_layers=1_000"])
    assert (limits.max_table_cells, limits.max_params, limits.max_layers) == (50_000_000, None, 1000)
    assert parse_limits(limit_arguments(limits)[1::2]) == limits
    for bad in ["max_rows=1", "max_layers", "max_layers=-1", "max_layers=many"]:
        with pytest.raises(ExplainError, match="--limit"):
            parse_limits([bad])
    assert Limits() == DEFAULT_LIMITS and limit_arguments(DEFAULT_LIMITS) == []


def test_check_prints_a_short_report_for_a_model_of_15000_refused_entries(tmp_path):
    H.refused_entries_file(tmp_path / "model.keras", 15_000)
    out = subprocess.run([sys.executable, "-m", "explain", "check", "--bundle", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert literal(model_config.UNSAFE_CONFIG) in out.stdout and re.search(r"\.\.\. and 14,9\d\d more", out.stdout)
    assert len(out.stdout) <= MESSAGE_LIMIT + 1, len(out.stdout)


def test_a_raised_limit_lets_the_file_through(tmp_path):
    H.long_sequential_file(tmp_path / "m.keras", 300)
    from explain.modelfile import safe_load

    with pytest.raises(ExplainError, match="max_layers"):
        safe_load.check_model_file(tmp_path / "m.keras")
    assert safe_load.check_model_file(tmp_path / "m.keras", limits=DEFAULT_LIMITS.but(max_layers=300))
