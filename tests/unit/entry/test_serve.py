"""`explain serve`'s command line (the server itself is started in tests/browser/test_package.py)."""

import re
import tomllib
from pathlib import Path

import pytest

from explain import serve
from explain.cli import main

ROOT = Path(__file__).resolve().parents[3]


def literal(template: str) -> str:
    return max(re.split(r"\{[^{}]*\}", template), key=len).strip()


def test_command_runs_the_checkouts_app_with_its_config(tmp_path):
    argv = serve.command(tmp_path, port=8765)
    assert argv[1] == str(ROOT / "ui" / "launch.py")  # a source checkout: `streamlit run app.py` with a warm-up
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    flags = [a for a in argv if a.startswith("--") and a != "--bundle" and a != "--"]
    expected = {f"--{section}.{key}={str(value).lower() if isinstance(value, bool) else value}"
                for section, options in config.items() for key, value in options.items()}
    assert expected <= set(flags) and "--client.showErrorDetails=none" in flags
    assert "--server.port=8765" in flags and "--server.address=127.0.0.1" in flags
    assert argv[-3:] == ["--", "--bundle", str(tmp_path.resolve())]
    assert "--bundle" not in serve.command(None)  # the app's default: the demo bundle


def test_the_launcher_runs_app_py_with_the_options_and_the_apps_arguments(tmp_path):
    from ui import launch

    argv = serve.command(tmp_path, port=8765)
    args, app_args = launch.streamlit_args(argv[2:])
    assert args[:2] == ["run", str(ROOT / "app.py")] and "--server.port=8765" in args
    assert (args[-3:] == ["--", "--bundle", str(tmp_path.resolve())]
            and app_args == ["--bundle", str(tmp_path.resolve())])
    args, app_args = launch.streamlit_args(serve.command(None)[2:])
    assert "--" not in args and app_args == []


@pytest.mark.parametrize("args, template", [
    (["--bundle", "no/such/folder"], serve.NOT_A_BUNDLE),
    (["--port", "70000"], serve.BAD_PORT),
])
def test_bad_arguments_exit_2_with_a_message(capsys, args, template):
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err
    assert literal(template) in err and "Traceback" not in err


def test_the_warm_up_fills_the_cache_entries_of_the_default_view(monkeypatch):
    # ui/launch.py's thread: afterwards the first visitor's scores and default view are cache hits
    import numpy as np

    from explain.core.settings import Settings
    from ui import state, url

    bundle = state.open_bundle(ROOT / "bundles" / "demo")
    state.warm_up(bundle)

    def computed(*args, **kwargs):
        raise AssertionError("computed again: the warm-up did not fill this cache entry")

    monkeypatch.setattr(state, "explain_customers", computed)
    monkeypatch.setattr(state.cohort, "scores", computed)
    scores = state.predictions(bundle)
    default = str(bundle.ids[int(np.argmax(scores))])
    link, warnings = url.decode({}, bundle, default_customer=default)  # a first visit: no query string
    assert link.customer == default and not warnings
    assert link.settings.key() == Settings().resolved(bundle.output_names).key()
    attribution, _ = state._attributions(bundle, bundle.content_hash, (default,), link.settings.key())
    assert attribution.static.shape == (1, len(bundle.static_features))
