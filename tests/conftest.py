import gc
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("PYTHONHASHSEED", "0")
# Ray starts its worker processes at nice 15; with the other pytest workers on the same cores they starved (one Ray
# test took 362 s of a 21-minute run in three workers): the tests' Ray clusters, and the CLI's, at normal priority
os.environ.setdefault("RAY_worker_niceness", "0")
# One intra-op thread for TensorFlow (and oneDNN's OpenMP) in every test process and the processes they start (servers,
# command lines, Ray workers): three pytest workers share two cores, the tests' models are small, and the threads'
# hand-offs cost more than they gave: 8-9 % less CPU for TensorFlow-heavy test files (2026-12-07: 86 -> 79 s for
# test_cut, test_outputs and test_inputs; 78 -> 71 s for test_app, test_hostile and test_story)
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Python's cyclic garbage collector less often in the test processes (pytest's workers and the JAX re-runs; not the
# servers and command lines they start): a collection every 50,000 allocations instead of 700, so fewer of the older
# generations' collections, which walk the millions of long-lived objects of TensorFlow, Keras and Streamlit. 66 s
# against 70 s of CPU (mean of four runs each, interleaved, 2026-12-07) for test_app, test_outputs, test_story and
# test_inputs. Tests that look for freed objects call gc.collect() themselves.
gc.set_threshold(50_000, 50, 100)

DEMO = Path(__file__).resolve().parent.parent / "bundles" / "demo"


@pytest.fixture(scope="session", autouse=True)
def dashboard_stores(tmp_path_factory):
    """The stores the dashboard computes by itself (ui.stores) go to a temporary folder, never
    into bundles/demo; a test that needs them elsewhere sets EXPLAIN_STORES itself."""
    os.environ["EXPLAIN_STORES"] = str(tmp_path_factory.mktemp("dashboard-stores"))
    yield


def private_copy(source: Path, parent: Path) -> Path:
    """``parent/<source's name>``: a copy of the bundle folder ``source`` without its stores (attributions/)."""
    folder = Path(parent) / Path(source).name
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("attributions", ".building-*"))
    return folder


@pytest.fixture(scope="session", autouse=True)
def components_scanned_once():
    """Streamlit's scan of the installed packages for components, once per test process as once per server
    (tests.support.component_scan): 0.2 s of CPU and 0.5 s of wall time less for every AppTest after the first."""
    from tests.support.component_scan import scanned_once

    with scanned_once():
        yield


@pytest.fixture(scope="session", autouse=True)
def startup_demo(tmp_path_factory):
    """The bundle the dashboard opens without EXPLAIN_BUNDLE (AppTest runs the app in this process):
    a private copy of bundles/demo without its attributions/ folder, so that a store a manual
    ``streamlit run`` left in bundles/demo/attributions/ is never found by the pages (Cohort, What
    drives churn, the stored attributions), and a rebuild of bundles/demo does not reach a running test.
    ``ui.startup.DEMO_DIR`` is that copy for the whole session; it yields the copy (None without a demo)."""
    if not (DEMO / "model.keras").is_file():
        yield None
        return
    from ui import startup

    folder = private_copy(DEMO, tmp_path_factory.mktemp("startup"))
    real, startup.DEMO_DIR = startup.DEMO_DIR, folder
    yield folder
    startup.DEMO_DIR = real


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    """A private copy of the demo bundle (others may rebuild bundles/demo while this runs)."""
    folder = tmp_path_factory.mktemp("bundle") / "demo"
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("attributions"))
    return folder


@pytest.fixture
def ray_cluster(tmp_path_factory):
    """The ``ray`` module of this pytest worker's local Ray, started by the first test that asks for it and shared
    by the tests after it until the next test's file does not use it (tests/support/ray_cluster.py). Skips where
    Ray is not installed."""
    from tests.support import ray_cluster as cluster

    return cluster.start(tmp_path_factory)


def pytest_runtest_teardown(item, nextitem):
    import sys

    cluster = sys.modules.get("tests.support.ray_cluster")
    if cluster is not None:
        cluster.stop_unless_needed_by(item, nextitem)


# ------------------------------------------------------------------------------- the files a worker runs together
# ``--dist loadfile`` gives each file to one pytest-xdist worker; these files share a worker's session fixture and go
# to one worker together, as one unit of work: the Ray files one local Ray (``ray_cluster``: one start of Ray's own
# processes instead of up to three), the browser files on the demo's ``server`` one ``streamlit run`` (each start
# imports TensorFlow, computes the first attributions and the store of "What drives churn" again)
SHARED_BY_FILES = {  # the shared fixture: the files that use it
    "ray_cluster": ("tests/unit/batch/test_ray_batch.py", "tests/unit/batch/test_ray_jax.py",
                    "tests/unit/batch/test_ray_limits.py"),
    "server": ("tests/browser/test_browser.py", "tests/browser/test_browser_layout.py",
               "tests/browser/test_browser_whatif.py"),
}


def pytest_xdist_make_scheduler(config, log):
    """xdist's loadfile scheduling with the files of each ``SHARED_BY_FILES`` entry as one unit of work."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    together = {file: fixture for fixture, files in SHARED_BY_FILES.items() for file in files}

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return together.get(file, file)

    return SharedFixtureScheduling(config, log)


# ---------------------------------------------------------------------------------------------- the quick run
QUICK_LEAVES_OUT = (  # whole kinds of tests the quick run (--quick) leaves out; CI runs everything
    "tests/browser/",                       # Chromium
    "tests/unit/batch/test_ray",            # Ray's cluster
    "tests/unit/core/test_backends.py",     # the JAX backend in a subprocess
    "tests/app/test_jax_pages.py",          # the dashboard under JAX
)
SLOW_TESTS = Path(__file__).with_name("slow_tests.txt")  # measured: scripts/slow_tests.py


def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true", default=False,
                     help="the quick loop: leave out the browser, Ray, JAX-subprocess and `slow` tests and those "
                          "measured over 1 s (tests/slow_tests.txt); CI runs everything")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--quick"):
        return
    slow = {line.strip() for line in SLOW_TESTS.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")}
    kept, left = [], []
    for item in items:
        node = item.nodeid
        out = (node.startswith(QUICK_LEAVES_OUT) or node in slow
               or item.get_closest_marker("slow") is not None or item.get_closest_marker("browser") is not None)
        (left if out else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
