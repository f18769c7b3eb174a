"""Two sets of limits (issue 25): the owner's bundles, named on the command line, are checked against
OWNER_LIMITS (tables as large as real data: a 20,000 customers x 365 days x 24 features table opens without
--limit), the files visitors upload against UPLOAD_LIMITS (today's defaults). Both bound the model file and
JSON alike, so that a crafted file is refused either way."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from explain.bundle.tables import oversized_table
from explain.cli import build_parser, limits_from_args
from explain.modelfile.limits import (
    DEFAULT_LIMITS,
    OWNER_LIMITS,
    UPLOAD_LIMITS,
    Limits,
    limit_arguments,
    parse_limits,
)
from ui import startup

CUSTOMERS, DAYS, FEATURES = 20_000, 365, 24


@pytest.fixture(scope="module")
def year_of_days(tmp_path_factory):
    """temporal.parquet of 20,000 customers x 365 days x 24 features (7.3 M rows x 26 columns, 190 M cells):
    written one block of customers at a time (the same rows repeated), so the file is small and quick to make;
    its metadata says what a reader would have to hold."""
    path = tmp_path_factory.mktemp("owner") / "temporal.parquet"
    block = 200  # customers per row group
    rows = block * DAYS
    columns = {"customer_id": pa.array(np.repeat(np.arange(block), DAYS).astype(str)),
               "day": pa.array(np.tile(np.arange(DAYS), block), pa.int32())}
    columns.update({f"f{k}": pa.array(np.zeros(rows, np.float32)) for k in range(FEATURES)})
    table = pa.table(columns)
    with pq.ParquetWriter(path, table.schema) as writer:
        for _ in range(CUSTOMERS // block):
            writer.write_table(table, row_group_size=rows)
    return path


def test_a_years_daily_table_is_refused_as_an_upload_and_opened_as_the_owners(year_of_days):
    metadata = pq.ParquetFile(year_of_days).metadata
    assert (metadata.num_rows, metadata.num_columns) == (CUSTOMERS * DAYS, FEATURES + 2)
    problem, _ = oversized_table(year_of_days, UPLOAD_LIMITS)
    assert problem is not None and "max_table_cells" in problem and "temporal.parquet" in problem
    assert oversized_table(year_of_days, OWNER_LIMITS) == (None, b"")
    cells = CUSTOMERS * DAYS * (FEATURES + 2)
    assert cells > UPLOAD_LIMITS.max_table_cells and cells * 8 > UPLOAD_LIMITS.max_table_bytes
    assert cells < OWNER_LIMITS.max_table_cells and cells * 8 < OWNER_LIMITS.max_table_bytes


def test_the_owners_set_differs_only_in_the_tables():
    assert UPLOAD_LIMITS == DEFAULT_LIMITS == Limits()
    changed = {name for name in Limits.__dataclass_fields__
               if getattr(OWNER_LIMITS, name) != getattr(UPLOAD_LIMITS, name)}
    assert changed == {"max_table_cells", "max_table_columns", "max_table_bytes"}
    # the model file and JSON stay bounded for the owner's files too: a crafted file cannot crash the process
    for name in ("max_json_depth", "max_json_values", "max_json_bytes", "max_layers", "max_config_entries",
                 "max_params", "max_file_bytes", "timeout_s", "cpu_limit_s"):
        assert getattr(OWNER_LIMITS, name) == getattr(UPLOAD_LIMITS, name)


@pytest.mark.parametrize("command", [["check", "--bundle", "b"], ["attribute", "--bundle", "b", "--customer", "c",
                                                                   "--out", "o.csv"],
                                     ["batch", "--bundle", "b", "--out", "o"], ["serve"]])
def test_the_command_lines_bundles_get_the_owners_limits(command):
    assert limits_from_args(build_parser().parse_args(command)) == OWNER_LIMITS
    raised = limits_from_args(build_parser().parse_args([*command, "--limit", "max_layers=400"]))
    assert raised == OWNER_LIMITS.but(max_layers=400)


def test_the_dashboard_reads_the_two_sets_apart():
    assert startup.limits([]) == OWNER_LIMITS and startup.upload_limits([]) == UPLOAD_LIMITS
    argv = ["--bundle", "b", "--limit", "max_table_cells=5", "--upload-limit", "max_table_cells=7"]
    assert startup.limits(argv).max_table_cells == 5 and startup.upload_limits(argv).max_table_cells == 7
    arguments = limit_arguments(OWNER_LIMITS.but(max_json_depth=10), OWNER_LIMITS, "--limit")
    assert arguments == ["--limit", "max_json_depth=10"]
    assert parse_limits(arguments[1::2], OWNER_LIMITS) == OWNER_LIMITS.but(max_json_depth=10)
    with pytest.raises(Exception) as info:
        startup.upload_limits(["--upload-limit", "max_nothing=1"])
    assert str(info.value).startswith("--upload-limit 'max_nothing=1'")
