"""The JAX side of tests/unit/core/test_backends.py's comparisons, as tests that its ONE pytest process on JAX
(KERAS_BACKEND=jax) runs after the re-run sets, so that JAX, Keras and pytest start once for all of them (each
process start costs seconds of CPU, and a computation compiled there once is compiled once).

Not collected by the ordinary test run (the name is not test_*.py); test_backends.py names this file on the JAX
process's command line with EXPLAIN_JAX_SIDE set to a folder holding what the TensorFlow side prepared (the unlike
models, the customers file), and reads what these tests write there:

    unlike.npz        IG of every unlike model on its settings (tests.support.backends.attribute, COMPARED)
    cli.csv, cli.parquet   ``attribute`` and ``batch`` of the command line on the demo (COMMANDS)
    customer_page.json     the Customer page's heatmap and metrics (tests.support.backends.customer_page)

Each writes its file only when it passed; test_backends.py checks this file's outcomes in the JUnit report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import keras
import pytest

from tests.support.backends import attribute, customer_page

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "bundles" / "demo"
needs_demo = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


def commands(folder: Path, stem: str) -> list[list[str]]:
    """The command line's two runs on the demo (five customers; two of them through ``attribute``), writing
    ``folder/stem.csv`` and ``folder/stem.parquet``; ``folder/ids.txt``: the customers file."""
    return [["attribute", "--bundle", str(DEMO), "--customer", "C00001", "--customer", "C00002",
             "--out", str(folder / f"{stem}.csv")],
            ["batch", "--bundle", str(DEMO), "--customers-file", str(folder / "ids.txt"), "--steps", "auto",
             "--out", str(folder / f"{stem}.parquet")]]


def _folder() -> Path:
    return Path(os.environ["EXPLAIN_JAX_SIDE"])


def test_unlike_models_attribute_on_jax():
    assert keras.config.backend() == "jax"
    attribute(_folder() / "models", _folder() / "unlike.npz")


@needs_demo
def test_the_command_line_on_jax():
    from explain.cli import main

    assert keras.config.backend() == "jax"
    assert [main(command) for command in commands(_folder(), "cli")] == [0, 0]


@needs_demo
def test_the_customer_page_on_jax(monkeypatch):
    assert keras.config.backend() == "jax"
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)
    monkeypatch.setenv("EXPLAIN_STORES", str(_folder() / "stores"))  # no store another test left: computed here
    page = customer_page()
    (_folder() / "customer_page.json").write_text(json.dumps(page))
