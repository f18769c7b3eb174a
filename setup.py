"""The one build step pyproject.toml cannot declare: ship the dashboard inside the package.

The dashboard's source stays where the repository keeps it (``app.py``, ``pages/``, ``ui/``,
``.streamlit/config.toml`` and the demo bundle ``bundles/demo``). Building a wheel copies
those files, found by glob, into ``explain/_dashboard/`` with the same relative layout, so
that ``explain serve`` runs ``explain/_dashboard/app.py`` and its ``from ui import ...``
resolves to ``explain/_dashboard/ui`` (Streamlit puts the script's folder first on
``sys.path``): no top-level ``ui`` package is installed. MANIFEST.in puts the same files in
the sdist. An editable install copies nothing: ``explain serve`` then runs the repository's
own ``app.py``.
"""

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DASHBOARD_GLOBS = ("app.py", "pages/**/*", "ui/**/*", ".streamlit/config.toml", "bundles/demo/*")
SKIPPED = ("__pycache__", ".pyc", ".pyo")


def dashboard_files(root: Path = ROOT) -> list[Path]:
    """The dashboard's files, relative to ``root``: every file the globs match, no caches."""
    found = set()
    for pattern in DASHBOARD_GLOBS:
        for path in root.glob(pattern):
            relative = path.relative_to(root)
            if path.is_file() and not any(part == "__pycache__" for part in relative.parts) \
                    and not path.name.endswith(SKIPPED):
                found.add(relative)
    return sorted(found)


class BuildWithDashboard(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "explain" / "_dashboard"
        if target.exists():
            shutil.rmtree(target)
        for relative in dashboard_files():
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, destination)


# metadata: pyproject.toml
setup(packages=find_packages(include=["explain", "explain.*"]), cmdclass={"build_py": BuildWithDashboard})
