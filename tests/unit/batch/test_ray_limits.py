"""The Ray engine's table reader is bounded like the bundle reader (issue 25): ``ray_tables.table_layout``
measures each table with the bundle reader's own check (``bundle.tables.oversized_table``) under the job's
limits before it or Ray Data reads a row, and the limits of the command line (``--limit``, over the owner's
limits) reach the planning task on the cluster."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from explain.batch import ray_tables
from explain.bundle.load import load_bundle
from explain.bundle.tables import TABLE_TOO_LARGE
from explain.core.errors import BundleError
from explain.modelfile.limits import OWNER_LIMITS


def literal(template: str) -> str:
    import re

    return max(re.split(r"\{[^{}]*\}", template), key=len).strip()


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory, bundle_dir):
    folder = tmp_path_factory.mktemp("ray-limits") / "parquet"
    folder.mkdir()
    for name in ("model.keras", "bundle.json"):
        shutil.copy2(bundle_dir / name, folder / name)
    for table in ("static", "temporal"):
        pd.read_csv(bundle_dir / f"{table}.csv", dtype={"customer_id": str, "period": str}).to_parquet(
            folder / f"{table}.parquet", index=False)
    return folder


def no_reads(monkeypatch):
    """Arrow's readers, which table_layout would call next: they must not be reached."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    def refuse(*args, **kwargs):
        raise AssertionError("a table over the limits was read")

    monkeypatch.setattr(pacsv, "read_csv", refuse)
    monkeypatch.setattr(pq, "read_table", refuse)


CELLS: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def measured(bundle_dir, parquet_dir):
    for folder in (bundle_dir, parquet_dir):
        for name in ("static", "temporal"):
            path = next(folder.glob(f"{name}.*"))
            table = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
            CELLS[path.name] = table.shape[0] * table.shape[1]


@pytest.mark.parametrize("which", ["csv", "parquet"])
def test_a_table_over_the_limits_is_refused_before_it_is_read(which, bundle_dir, parquet_dir, monkeypatch):
    folder = bundle_dir if which == "csv" else parquet_dir
    bundle = load_bundle(folder)
    no_reads(monkeypatch)
    static, temporal = f"static.{which}", f"temporal.{which}"
    limit = CELLS[static] + 100  # the static table fits (a CSV header counts as a row), the temporal one does not
    assert CELLS[temporal] > limit
    with pytest.raises(BundleError) as info:
        ray_tables.table_layout(folder, bundle, OWNER_LIMITS.but(max_table_cells=limit))
    message = str(info.value)
    assert message.startswith(temporal) and "max_table_cells" in message and f"{limit:,}" in message
    assert literal(TABLE_TOO_LARGE) in message
    with pytest.raises(BundleError, match="max_table_columns"):
        ray_tables.table_layout(folder, bundle, OWNER_LIMITS.but(max_table_columns=3))


def test_within_the_owners_limits_the_layout_is_made(parquet_dir):
    layout = ray_tables.table_layout(parquet_dir, load_bundle(parquet_dir))
    assert layout["files"]["temporal"]["file"] == "temporal.parquet" and layout["n_periods"] > 1


def test_the_command_lines_limits_reach_the_planning_task_on_ray(ray_cluster, bundle_dir, tmp_path, capsys):
    """On the pytest worker's Ray (the conftest fixture), which the command line in this process uses."""
    from explain.cli import main

    out = tmp_path / "store"
    code = main(["batch", "--bundle", str(bundle_dir), "--out", str(out), "--engine", "ray", "--steps", "8",
                 "--limit", "max_table_cells=1000"])
    err = capsys.readouterr().err
    assert code == 2 and "max_table_cells" in err and "1,000" in err and "Traceback" not in err
    assert not out.exists()
