"""The test run's choices in tests/conftest.py: the quick loop's selection (``bash scripts/test.sh --quick``): what it
leaves out exists, and its list of slow tests is read the way scripts/slow_tests.py writes it; the files that one
pytest-xdist worker runs together exist and use the fixture they share."""

import re
from pathlib import Path

from scripts.slow_tests import slow_tests
from tests import conftest

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_left_out_names_tests_that_exist():
    for prefix in conftest.QUICK_LEAVES_OUT:
        assert list(ROOT.glob(prefix + ("*" if not prefix.endswith("/") else "*.py"))), prefix


def test_the_files_run_together_exist_and_use_the_fixture_they_share():
    for fixture, files in conftest.SHARED_BY_FILES.items():
        assert len(files) > 1, fixture
        for file in files:
            text = (ROOT / file).read_text(encoding="utf-8")
            assert re.search(rf"def test_\w+\([^)]*\b{fixture}\b", text), f"{file} has no test that uses {fixture}"
            assert not re.search(rf"def {fixture}\(", text), f"{file} has a {fixture} of its own"


def test_every_listed_slow_test_is_in_a_test_file_that_exists():
    lines = [line for line in conftest.SLOW_TESTS.read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    assert lines and all("::" in line for line in lines)
    files = {str(p.relative_to(ROOT)) for p in ROOT.glob("tests/**/test_*.py")}
    missing = sorted({line.split("::")[0] for line in lines} - files)
    assert not missing, f"tests/slow_tests.txt names files that are gone: {missing}; run scripts/slow_tests.py again"


def test_the_list_is_the_tests_over_the_limit_with_setup_and_teardown_added():
    log = "\n".join([
        "0.60s setup    tests/app/test_a.py::test_one",
        "0.50s call     tests/app/test_a.py::test_one",
        "0.90s call     tests/app/test_a.py::test_two[a b]",
        "0.05s teardown tests/app/test_a.py::test_two[a b]",
        "3.00s call     tests/unit/test_b.py::test_three",
    ])
    assert slow_tests(log) == ["tests/app/test_a.py::test_one", "tests/unit/test_b.py::test_three"]
