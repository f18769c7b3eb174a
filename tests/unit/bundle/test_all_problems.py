"""Every problem of every file in one pass (issue 17): a bundle with several independent problems
at once -- a missing static column, a duplicated id, a NaN in a monthly value, a customer with a
period missing -- is reported with all of them by the loader, by `python -m explain check` and by
the Data & model page's upload."""

import pytest

from explain.bundle.load import validate_bundle
from explain.cli import main
from tests.support.apptest import DEMO, app, bundle_files, errors, upload
from tests.support.hostile import read_csv, small_bundle, write_csv

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


def broken_bundle(folder):
    """The small demo bundle with four independent problems; returns what each one must mention."""
    bundle = small_bundle(DEMO, folder)
    header, rows = read_csv(bundle / "static.csv")
    k = header.index("age")
    header, rows = header[:k] + header[k + 1:], [r[:k] + r[k + 1:] for r in rows]  # 1. a column removed
    twin = rows[4][0]
    rows[5][0] = twin  # 2. the 6th customer gets the 5th customer's id
    write_csv(bundle / "static.csv", header, rows)
    header, rows = read_csv(bundle / "temporal.csv")
    usage, nan_customer = header.index("data_usage_gb"), rows[30][0]
    rows[30][usage] = "nan"  # 3. a NaN (customer 3, its 7th month)
    short = rows[12 * 9][0]
    del rows[12 * 9 + 3]  # 4. customer 10 loses a month
    write_csv(bundle / "temporal.csv", header, rows)
    return bundle, {"missing column": ["'age'", "static.csv"], "duplicate id": [repr(twin), "static.csv"],
                    "NaN": ["data_usage_gb", nan_customer], "period count": [repr(short), "has 11"]}


def _listed(messages: list[str], expected: dict) -> dict:
    """Which expected problems no message mentions (all their words in one message)."""
    return {name: words for name, words in expected.items()
            if not any(all(w in m for w in words) for m in messages)}


def test_the_loader_lists_every_problem_of_every_file(tmp_path):
    bundle, expected = broken_bundle(tmp_path / "broken")
    report = validate_bundle(bundle)
    assert _listed([str(p) for p in report.problems], expected) == {}


def test_check_lists_every_problem(tmp_path, capsys):
    bundle, expected = broken_bundle(tmp_path / "broken")
    # the command's own function, in this process (tests/unit/entry/test_cli.py runs `python -m explain check`
    # itself on a broken bundle: the process exits with main()'s 1)
    code = main(["check", "--bundle", str(bundle)])
    done = capsys.readouterr()
    assert code == 1, done.err
    assert _listed(done.out.splitlines(), expected) == {}, done.out


def test_the_upload_page_lists_every_problem(tmp_path):
    bundle, expected = broken_bundle(tmp_path / "broken")
    at = upload(app(page="pages/data.py"), bundle_files(bundle))
    assert not at.exception
    assert _listed(errors(at), expected) == {}, errors(at)
