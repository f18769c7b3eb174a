"""`explain serve`'s command line (the installed server is started in tests/browser/test_package.py), the
addresses it refuses without a login in front, and the headers and allowed origins of a server it starts."""

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
                for section, options in config.items() for key, value in options.items() if not isinstance(value, list)}
    expected |= {f"--{section}.{key}={item}" for section, options in config.items() for key, value in options.items()
                 if isinstance(value, list) for item in value or [serve.NO_ORIGIN]}
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


@pytest.mark.parametrize("address, allowed", [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.20", False), ("10.0.0.5", False), ("dashboard.example", False),
])
def test_only_a_loopback_address_is_served_without_a_proxy_that_signs_users_in(address, allowed):
    if allowed:
        assert serve.check_address(address, behind_auth_proxy=False) is None
    else:
        with pytest.raises(serve.ExplainError) as info:
            serve.check_address(address, behind_auth_proxy=False)
        assert str(info.value) == serve.OPEN_ADDRESS.format(address=address)
        assert serve.check_address(address, behind_auth_proxy=True) == serve.PROXY_TRUST


def test_serve_on_every_interface_exits_2_naming_the_two_ways_to_proceed(capsys, monkeypatch):
    started = []
    monkeypatch.setattr(serve.os, "execv", lambda *a: started.append(a))
    monkeypatch.setattr(serve.subprocess, "call", lambda *a, **k: started.append(a))
    assert main(["serve", "--address", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "127.0.0.1" in err and "--behind-auth-proxy" in err and "Traceback" not in err and not started
    assert main(["serve", "--address", "0.0.0.0", "--behind-auth-proxy", "--port", "8766"]) in (0, None)
    err = capsys.readouterr().err
    assert "--behind-auth-proxy: listening on 0.0.0.0:8766" in err and "Trusted:" in err
    assert started and "--server.address=0.0.0.0" in started[0][1]  # execv (stubbed) of the launcher


def test_the_served_app_denies_framing_and_trusts_no_other_origin(tmp_path):
    """The production command (``serve.command``: the launcher and the shipped config as flags), started."""
    import json
    import socket
    import subprocess
    import time
    import urllib.request

    from tests.support.processes import stop

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(serve.command(port=port), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    health = dict(response.headers)
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.5)
        with urllib.request.urlopen(url + "/", timeout=10) as response:
            page = dict(response.headers)
        with urllib.request.urlopen(f"{url}/_stcore/host-config", timeout=10) as response:
            origins = json.loads(response.read())["allowedOrigins"]
    finally:
        stop(proc)
        log.close()
    for headers in (health, page):
        assert headers.get("x-frame-options") == "SAMEORIGIN"
        assert headers.get("content-security-policy") == "frame-ancestors 'self'"
    assert origins == [serve.NO_ORIGIN]  # Streamlit's default trusts *.streamlit.app and others
