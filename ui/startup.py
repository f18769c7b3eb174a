"""Which bundle the server opens at start-up: the one place that reads ``sys.argv`` and the
environment.

    streamlit run app.py -- --bundle DIR      (or --bundle=DIR)
    EXPLAIN_BUNDLE=DIR streamlit run app.py
    streamlit run app.py                      the demo bundle, bundles/demo
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO_DIR = ROOT / "bundles" / "demo"
ENV_VAR = "EXPLAIN_BUNDLE"


def bundle_path(argv: list[str] | None = None, environ=None) -> Path:
    """``--bundle DIR`` in ``argv`` (default ``sys.argv[1:]``), else ``$EXPLAIN_BUNDLE``, else the demo."""
    args = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    for k, arg in enumerate(args):
        if arg == "--bundle" and k + 1 < len(args):
            return Path(args[k + 1]).expanduser()
        if arg.startswith("--bundle="):
            return Path(arg.split("=", 1)[1]).expanduser()
    if environ.get(ENV_VAR):
        return Path(environ[ENV_VAR]).expanduser()
    return DEMO_DIR
