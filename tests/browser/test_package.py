"""The installable package: build the sdist and the wheel (from the sdist, as `python -m build`
does), install the wheel into a fresh virtual environment, and use it from outside the
repository: `explain check` (the console script's entry point) on a bundle written by `save_bundle` in the same
interpreter, then `explain serve` (the console script) until
/_stcore/health answers ok and (with Debian's Chromium) the Customer page draws its heatmap.

The venv sees the packages of the interpreter running the tests (TensorFlow is not reinstalled) and
the wheel is installed with --no-deps, so nothing is downloaded. When the tests themselves run inside
a virtual environment, ``--system-site-packages`` would see the base interpreter's packages only, so
the new venv also gets a ``.pth`` file naming the running interpreter's site-packages.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.browser.served import CHROMIUM, end
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 120  # seconds until /_stcore/health answers ok
NOT_COPIED = (".git", "__pycache__", ".pytest_cache", "build", "dist", "*.egg-info", "attributions", "tests",
              "bench", "docs", "tmp", "out", "venv", ".venv")

pytestmark = pytest.mark.slow

WRITE_BUNDLE = """
import sys, numpy as np, keras, explain
keras.utils.set_random_seed(0)
s_in, t_in = keras.Input((3,), name="s"), keras.Input((4, 2), name="t")
h = keras.layers.Concatenate()([s_in, keras.layers.Flatten()(t_in)])
model = keras.Model([t_in, s_in], keras.layers.Dense(1, activation="sigmoid")(h))
rng = np.random.default_rng(0)
path = explain.save_bundle(sys.argv[1], model, rng.normal(size=(5, 3)), rng.normal(size=(5, 4, 2)),
                           ids=["u1", "u2", "u3", "u4", "u5"], temporal_features=["calls", "usage"])
print(explain.__file__)
print(path)
# `explain check` on it, in the same interpreter: the console script `explain` of the installed wheel (its entry
# point, as bin/explain calls it; bin/explain itself serves below): one start of TensorFlow, not two
from importlib.metadata import entry_points
(command,) = entry_points(group="console_scripts", name="explain")
print(command.value)
sys.stdout.flush()
sys.exit(command.load()(["check", "--bundle", str(path)]))
"""


def _run(*args, cwd, env, timeout=600):
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


def _dashboard_sources() -> set[str]:
    """What the wheel must carry: every file of the dashboard's source in the repository."""
    found = {"app.py", ".streamlit/config.toml"}
    for folder in ("pages", "ui"):
        found |= {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")}
    found |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "bundles" / "demo").iterdir() if p.is_file()}
    return found


def _see_running_packages(venv_python: Path, *, cwd, env) -> None:
    """Make the packages of the interpreter running the tests visible in the new venv (after its own)."""
    if sys.prefix == sys.base_prefix:
        return  # the system's interpreter: --system-site-packages already sees them
    purelib = _run(venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                   cwd=cwd, env=env).stdout.strip()
    (Path(purelib) / "_running_interpreter.pth").write_text("\n".join(site.getsitepackages()) + "\n")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, venv bin folder, a folder outside the repository, env) with the wheel installed."""
    base = tmp_path_factory.mktemp("package")
    source = base / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_COPIED))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EXPLAIN_BUNDLE")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", base / "dist", source, cwd=base, env=env)
    wheels = list((base / "dist").glob("explain-*.whl"))
    assert len(wheels) == 1 and list((base / "dist").glob("explain-*.tar.gz"))
    # without its own pip (ensurepip: seconds of CPU): the venv sees this interpreter's pip, which installs into the
    # environment of the interpreter running it, the venv
    _run(sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", base / "venv", cwd=base, env=env)
    bin_dir = base / "venv" / "bin"
    _see_running_packages(bin_dir / "python", cwd=base, env=env)
    _run(bin_dir / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", wheels[0],
         cwd=base, env=env)
    outside = base / "elsewhere"
    outside.mkdir()
    return {"python": bin_dir / "python", "bin": bin_dir, "cwd": outside, "env": env, "wheel": wheels[0]}


def test_wheel_carries_the_dashboard_and_no_top_level_ui(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    shipped = {n.removeprefix("explain/_dashboard/") for n in names if n.startswith("explain/_dashboard/")}
    assert shipped == _dashboard_sources()
    assert {n.split("/")[0] for n in names} == {"explain", "explain-0.1.0.dist-info"}  # no top-level ui/ or pages/
    assert not any("__pycache__" in n or "/attributions/" in n for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "explain = explain.cli:main" in zipfile.ZipFile(installed["wheel"]).read(entry_points).decode()


def test_installed_check_and_serve(installed, tmp_path):
    python, cwd, env = installed["python"], installed["cwd"], installed["env"]
    out = _run(python, "-c", WRITE_BUNDLE, tmp_path / "bundle", cwd=cwd, env=env).stdout.splitlines()
    assert Path(out[0]).is_relative_to(python.parent.parent)  # imported from the venv, not the repository
    assert out[2] == "explain.cli:main"  # the check below ran through the installed console script's entry point
    check = "\n".join(out[3:])
    assert "is valid: 5 customers, 3 static features, 4 periods x 2 temporal features" in check

    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([str(installed["bin"] / "explain"), "serve", "--bundle", str(tmp_path / "bundle"),
                             "--port", str(port)], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        health = None
        while health != "ok":
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "no answer from /_stcore/health"
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    health = response.read().decode().strip()
            except OSError:
                time.sleep(0.5)
        assert health == "ok"
        command = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert str(python.parent.parent / "lib").encode() in command[1]  # the packaged launcher of app.py
        assert command[1].endswith(b"explain/_dashboard/ui/launch.py")
        if os.path.exists(CHROMIUM):
            _customer_page_draws(url)
    finally:
        end(proc)  # a SIGKILL to its process group: no test here reads the shutdown
        log.close()


def _customer_page_draws(url: str) -> None:
    """The packaged app runs: its `ui` imports resolve and the Customer page draws the heatmap."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.set_default_timeout(120_000)
            page.goto(f"{url}/?customer=u2")
            page.wait_for_selector(".js-plotly-plot")
            rows = page.wait_for_function(
                "() => { for (const gd of document.querySelectorAll('.js-plotly-plot')) {"
                "  const t = (gd._fullData || []).find(t => t.type === 'heatmap'); if (t) return t.y; } }").json_value()
            assert list(rows) == ["calls", "usage"]
            assert page.get_by_role("heading", name="Customer u2").first.is_visible()
            assert page.query_selector("[data-testid=stException]") is None
        finally:
            browser.close()
