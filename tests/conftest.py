import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("PYTHONHASHSEED", "0")

DEMO = Path(__file__).resolve().parent.parent / "bundles" / "demo"


@pytest.fixture(scope="session", autouse=True)
def dashboard_stores(tmp_path_factory):
    """The stores the dashboard computes by itself (ui.stores) go to a temporary folder, never
    into bundles/demo; a test that needs them elsewhere sets EXPLAIN_STORES itself."""
    os.environ["EXPLAIN_STORES"] = str(tmp_path_factory.mktemp("dashboard-stores"))
    yield


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    """A private copy of the demo bundle (others may rebuild bundles/demo while this runs)."""
    folder = tmp_path_factory.mktemp("bundle") / "demo"
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("attributions"))
    return folder
