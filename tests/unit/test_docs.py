"""The README and the docs site: the code blocks they mark for testing run and print what the page says, the README
stays short, and ``mkdocs build --strict`` builds the site (every link, every API object found).

A block is marked by ``<!-- test: NAME -->`` on the line before its fenced ``python`` block; the plain block after
``<!-- output: NAME -->`` is the output the page shows for it (its numbers may vary: they come from an untrained model).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250

CODE = re.compile(r"<!-- test: (?P<name>[\w-]+) -->\s*```python\n(?P<body>.*?)```", re.S)
OUTPUT = re.compile(r"<!-- output: (?P<name>[\w-]+) -->\s*```\n(?P<body>.*?)```", re.S)
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


def marked(path: Path, pattern: re.Pattern) -> dict[str, str]:
    return {m["name"]: m["body"] for m in pattern.finditer(path.read_text(encoding="utf-8"))}


def template(shown_line: str) -> re.Pattern:
    """The shown line with every number free: the words, names and punctuation must match exactly."""
    pieces = re.split(NUMBER, shown_line)
    return re.compile("^" + f"({NUMBER})".join(re.escape(p) for p in pieces) + "$")


def run_python(code: str, cwd: Path, name: str) -> subprocess.CompletedProcess:
    """``code`` as a script in ``cwd``, importing this checkout's ``explain``."""
    script = cwd / f"{name}.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, script.name], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def run_marked(path: Path, name: str, cwd: Path) -> list[str]:
    """Run the block ``name`` of ``path`` in ``cwd``; check its output line by line against the page's; the lines."""
    code, shown = marked(path, CODE)[name], marked(path, OUTPUT)[name].strip().splitlines()
    printed = run_python(code, cwd, name).stdout.strip().splitlines()
    assert len(printed) == len(shown), (printed, shown)
    for got, want in zip(printed, shown):
        assert template(want).match(got), f"printed {got!r}, the page shows {want!r}"
    return printed


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move the details to docs/"


def test_readme_links_to_files_that_exist():
    text = README.read_text(encoding="utf-8")
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t}
    assert {"docs/screenshot_customer.png", "LICENSE", "docs/getting-started.md"} <= targets
    missing = sorted(t for t in targets if not (ROOT / t).exists())
    assert not missing, f"README.md links to missing files: {missing}"


def test_every_marked_block_shows_its_output():
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        code, output = marked(path, CODE), marked(path, OUTPUT)
        assert set(code) == set(output), f"{path.name}: blocks {sorted(code)}, outputs {sorted(output)}"
        for name, body in code.items():
            ast.parse(body, filename=f"{path.name}:{name}")
    assert "quickstart" in marked(README, CODE)
    assert "quickstart-docs" in marked(DOCS / "getting-started.md", CODE)


def test_template_frees_numbers_only():
    line = template("score 0.375, baseline 0.482, attributions sum to -0.106, gap -1e-08")
    assert line.match("score 0.9, baseline 12.5, attributions sum to +0.1, gap 3e-09")
    assert line.match("score 0.9, baseline 12.5, total 0.1, gap 3e-09") is None


def verify_readme(folder: Path) -> list[str]:
    """An independent reference, in this process (the page's block ran in its own): the saved bundle's sizes, and
    the saved model itself at customer 0 and at the mean baseline."""
    import numpy as np

    import explain

    b = explain.load_bundle(folder)
    x = [b.static[:1], b.temporal[:1]]
    mean_month = b.temporal.mean(axis=(0, 1))            # the mean baseline: per feature over customers and months
    base = [b.static.mean(axis=0, keepdims=True), np.broadcast_to(mean_month, (1,) + b.temporal.shape[1:])]
    return [f"{len(b.ids)} {b.static.shape} {b.temporal.shape} {b.output_names}",
            f"{float(np.asarray(b.model(x))[0, 0])} {float(np.asarray(b.model(base))[0, 0])}"]


@pytest.mark.slow
def test_readme_quickstart_runs_and_adds_up(tmp_path):
    printed = run_marked(README, "quickstart", tmp_path)
    assert printed[0] == "(5, 3) (5, 12, 2)"
    score, baseline, total, gap = map(float, template(marked(README, OUTPUT)["quickstart"].splitlines()[1])
                                      .match(printed[1]).groups())
    assert abs(gap) < 1e-4                                        # 64 Gauss-Legendre steps: converged
    assert abs(score - baseline - total) <= 1.5e-3 + abs(gap)     # printed to 3 decimals
    heatmap = (tmp_path / "heatmap.html").read_text(encoding="utf-8")
    assert '"type":"heatmap"' in heatmap.replace(" ", "")
    # An independent reference: the saved model itself at customer 0 and at the mean baseline.
    check = verify_readme(tmp_path / "my_bundle")
    assert check[0] == "50 (50, 3) (50, 12, 2) ['churn']"
    f_x, f_b = map(float, check[1].split())
    assert abs(f_x - score) <= 6e-4 and abs(f_b - baseline) <= 6e-4, (check, printed)


def verify_docs(folder: Path) -> list[str]:
    """The saved bundle's ids, names, periods, output and units, read back in this process."""
    import explain

    b = explain.load_bundle(folder)
    return [f"{list(b.ids[:2])} {len(b.ids)} {b.static_features} {b.temporal_features} {b.periods[0]} {b.periods[-1]}",
            f"{b.output_names} {b.units}"]


@pytest.mark.slow
def test_docs_quickstart_runs_with_names(tmp_path):
    printed = run_marked(DOCS / "getting-started.md", "quickstart-docs", tmp_path)
    statics = ast.literal_eval(printed[0])
    assert list(statics) == ["tenure", "monthly_charge"]
    shape, steps, gap = re.fullmatch(r"(\(.*?\)) (\[.*?\]) (\S+)", printed[1]).groups()
    assert shape == "(2, 12, 2)"
    assert all(s in (16, 32, 64, 128, 256, 512, 1024) for s in ast.literal_eval(steps))   # auto doubles from 16
    assert float(gap) < 1e-3
    check = verify_docs(tmp_path / "churn_bundle")
    assert check[0] == ("['C000', 'C001'] 50 ['tenure', 'monthly_charge'] ['support_calls', 'late_payments'] "
                        "2025-01 2025-12")
    assert check[1] == "['churn'] {'tenure': 'years'}"


MKDOCS_PACKAGES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _missing_docs_packages() -> list[str]:
    missing = []
    for name in MKDOCS_PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(name)
    return missing


@pytest.mark.slow
@pytest.mark.skipif(bool(_missing_docs_packages()),
                    reason=f"the docs packages are not installed ({', '.join(_missing_docs_packages())}): "
                           "pip install -r requirements-docs.txt")
def test_mkdocs_build_strict(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    api = (site / "python-api" / "index.html").read_text(encoding="utf-8")
    for name in ("explain.core.ig.integrated_gradients", "explain.bundle.load.Bundle", "explain.core.settings.Settings",
                 "explain.analysis.explainer.explain_customers", "explain.bundle.save.save_bundle",
                 "explain.figures.heatmap"):
        assert f'id="{name}"' in api, f"the API page has no entry for {name}"
    log = (site / "benchmark-log" / "index.html").read_text(encoding="utf-8")
    assert "Benchmark results" in log and "966 MiB" in log       # bench/RESULTS.md included as it is
    assert (site / "screenshot_customer.png").is_file()
