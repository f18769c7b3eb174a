"""Which bundle the server opens at start-up: the one place that reads ``sys.argv`` and the
environment.

    streamlit run app.py -- --bundle DIR      (or --bundle=DIR)
    EXPLAIN_BUNDLE=DIR streamlit run app.py
    streamlit run app.py                      the demo bundle, bundles/demo
    streamlit run app.py -- --bundle DIR --trust-code layers.py
                                              the owner's custom layers for that bundle (never uploads)
    streamlit run app.py -- --bundle DIR --trust-model
                                              that bundle's TensorFlow SavedModel (savedmodel/) may be opened
                                              (never an upload's)
    streamlit run app.py -- --limit max_table_cells=50000000
                                              a size limit of the startup bundle's files, over the owner's
                                              limits (``explain.modelfile.limits.OWNER_LIMITS``; repeat for several)
    streamlit run app.py -- --upload-limit max_table_cells=1000000
                                              a size limit of the files visitors upload (over UPLOAD_LIMITS)
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from explain.core.errors import ExplainError

ROOT = Path(__file__).resolve().parent.parent
DEMO_DIR = ROOT / "bundles" / "demo"
ENV_VAR = "EXPLAIN_BUNDLE"


def _option(name: str, argv: list[str] | None) -> str | None:
    args = sys.argv[1:] if argv is None else argv
    for k, arg in enumerate(args):
        if arg == name and k + 1 < len(args):
            return args[k + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _options(name: str, argv: list[str] | None) -> list[str]:
    args = sys.argv[1:] if argv is None else argv
    found = []
    for k, arg in enumerate(args):
        if arg == name and k + 1 < len(args):
            found.append(args[k + 1])
        elif arg.startswith(name + "="):
            found.append(arg.split("=", 1)[1])
    return found


@functools.cache
def _limits(given: tuple[str, ...], flag: str):
    from explain.modelfile.limits import OWNER_LIMITS, UPLOAD_LIMITS, parse_limits

    return parse_limits(list(given), OWNER_LIMITS if flag == "--limit" else UPLOAD_LIMITS, flag)


def before_tensorflow() -> None:
    """Keras' and TensorFlow's import, when it comes, without their unused optional imports (scikit-learn, IPython,
    JAX: seconds less of the first page's wait) and with XLA's executables kept on disk
    (``explain.core.backend.prepare_process``). Imports neither Keras nor TensorFlow."""
    from explain.core import backend

    backend.prepare_process()


def limits(argv: list[str] | None = None):
    """The size limits of the startup bundle (the owner's own, ``OWNER_LIMITS``), changed by the owner's
    ``--limit FIELD=VALUE`` options (``explain serve --limit ...``); ``ExplainError`` for an option that is not
    a limit."""
    return _limits(tuple(_options("--limit", argv)), "--limit")


def upload_limits(argv: list[str] | None = None):
    """The size limits of every file a visitor uploads (``UPLOAD_LIMITS``), changed by the owner's
    ``--upload-limit FIELD=VALUE`` options only (``explain serve --upload-limit ...``)."""
    return _limits(tuple(_options("--upload-limit", argv)), "--upload-limit")


def bundle_path(argv: list[str] | None = None, environ=None) -> Path:
    """``--bundle DIR`` in ``argv`` (default ``sys.argv[1:]``), else ``$EXPLAIN_BUNDLE``, else the demo."""
    environ = os.environ if environ is None else environ
    given = _option("--bundle", argv)
    if given is not None:
        return Path(given).expanduser()
    if environ.get(ENV_VAR):
        return Path(environ[ENV_VAR]).expanduser()
    return DEMO_DIR


def trusted_code(argv: list[str] | None = None):
    """The ``explain.modelfile.trust.TrustedCode`` of ``--trust-code FILE`` (imported once per process), or None.

    Raises ``TrustError`` (an ``ExplainError`` naming the file) when FILE cannot be used."""
    given = _option("--trust-code", argv)
    if given is None:
        return None
    from explain.modelfile import trust

    return trust.load_trusted_code(Path(given).expanduser())


def challenger_path(argv: list[str] | None = None) -> Path | None:
    """``--challenger MODEL`` of the app's arguments (default ``sys.argv[1:]``), or None: the frame asks it before
    the page style (light: no TensorFlow), the Champion vs challenger page opens it (``ui.models``)."""
    given = _option("--challenger", argv)
    return None if given is None else Path(given).expanduser()


def trust_model(argv: list[str] | None = None) -> bool:
    """Whether the owner passed ``--trust-model``: the startup bundle's SavedModel may be opened."""
    return "--trust-model" in (sys.argv[1:] if argv is None else argv)


def model_loader(argv: list[str] | None = None):
    """The model loader of the startup bundle: with ``--trust-code``, ``safe_load.open_model`` with
    its objects; with ``--trust-model``, a ``savedmodel.TrustModel`` (a SavedModel folder opens too); else None
    (the default). Uploads never use it."""
    trusted = trusted_code(argv)
    loader = None
    if trusted is not None:
        from explain.modelfile import safe_load

        loader = functools.partial(safe_load.open_model, trusted=trusted, limits=limits(argv))
    if trust_model(argv):
        from explain.modelfile.savedmodel import TrustModel

        loader = TrustModel(loader, limits(argv))
    return loader


def trusted_badge(argv: list[str] | None = None) -> str | None:
    """"trusted code loaded: layers.py" when ``--trust-code`` was given and imported, else None."""
    try:
        trusted = trusted_code(argv)
    except ExplainError:  # the bundle's error says why (its loader raised the same)
        return None
    return trusted.badge if trusted is not None else None


def owner_arguments(argv: list[str] | None = None) -> list[str]:
    """The owner's options of the startup bundle as ``python -m explain batch`` takes them (``--trust-code FILE``,
    ``--trust-model``, ``--limit FIELD=VALUE`` ...): a process that opens the same bundle as the server does
    (``ui.stores``' job of the launch)."""
    code = _option("--trust-code", argv)
    words = ["--trust-code", str(Path(code).expanduser())] if code is not None else []
    words += ["--trust-model"] if trust_model(argv) else []
    return words + [word for given in _options("--limit", argv) for word in ("--limit", given)]
