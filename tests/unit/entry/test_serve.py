"""`explain serve`'s command line (the installed server is started in tests/browser/test_package.py), the
addresses it refuses without a login in front, and the headers and allowed origins of a server it starts."""

import re
import tomllib
from pathlib import Path

import pytest

from explain import access, serve
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
    from ui import cache, url

    bundle = cache.open_bundle(ROOT / "bundles" / "demo")
    cache.warm_up(bundle)

    def computed(*args, **kwargs):
        raise AssertionError("computed again: the warm-up did not fill this cache entry")

    monkeypatch.setattr(cache, "explain_customers", computed)
    monkeypatch.setattr(cache.cohort, "scores", computed)
    scores = cache.predictions(bundle)
    default = str(bundle.ids[int(np.argmax(scores))])
    link, warnings = url.decode({}, bundle, default_customer=default)  # a first visit: no query string
    assert link.customer == default and not warnings
    assert link.settings.key() == Settings().resolved(bundle.output_names).key()
    attribution, _ = cache._attributions(bundle, bundle.content_hash, (default,), link.settings.key())
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
    assert "127.0.0.1" in err and "--behind-auth-proxy" in err and "--auth oidc" in err and "Traceback" not in err
    assert not started
    assert main(["serve", "--address", "0.0.0.0", "--behind-auth-proxy", "--port", "8766"]) in (0, None)
    err = capsys.readouterr().err
    assert "--behind-auth-proxy: listening on 0.0.0.0:8766" in err and "Trusted:" in err
    assert started and "--server.address=0.0.0.0" in started[0][1]  # execv (stubbed) of the launcher


@pytest.mark.parametrize("failure", [PermissionError(13, "Permission denied"), FileNotFoundError(2, "No such file")])
def test_a_python_that_cannot_be_started_is_one_line_naming_it(capsys, monkeypatch, failure):
    def refuse(*args, **kwargs):
        raise failure

    monkeypatch.setattr(serve.os, "execv", refuse)
    monkeypatch.setattr(serve.subprocess, "call", refuse)
    assert main(["serve", "--port", "8767"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "cannot start the dashboard" in err and failure.strerror in err
    assert serve.sys.executable in err or "python" in err.lower()


OIDC = ["--auth", "oidc", "--oidc-metadata", "https://login.example.com/.well-known/openid-configuration",
        "--client-id", "dashboard", "--allow", "ana@example.com", "--allow", "@Team.Example"]
SECRET = 'se"cr\\et-ü-0123456789'  # a quote, a backslash and a non-ASCII letter: written as TOML escapes them


@pytest.fixture
def no_exec(monkeypatch):
    """``serve``'s exec of the launcher, stubbed: the argv lists it would have run."""
    started = []
    monkeypatch.setattr(serve.os, "execv", lambda *a: started.append(a[1]))
    monkeypatch.setattr(serve.subprocess, "call", lambda *a, **k: started.append(a[0]))
    monkeypatch.delenv(serve.AUTH_DIR_ENV, raising=False)
    monkeypatch.delenv(serve.SECRET_ENV, raising=False)
    yield started
    folder = serve.os.environ.pop(serve.AUTH_DIR_ENV, None)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def test_with_a_login_every_interface_is_served_and_the_secrets_stay_private(capsys, no_exec):
    args = ["serve", "--address", "0.0.0.0", "--port", "8767", *OIDC, "--client-secret", SECRET,
            "--redirect-uri", "https://dash.example.com/oauth2callback"]
    assert main(args) in (0, None)
    out, err = capsys.readouterr()
    assert "Trusted:" not in err and "login: OpenID Connect through https://login.example.com" in err
    assert SECRET not in out + err and "cookie_secret" not in out + err
    argv = no_exec[0]
    assert "--server.address=0.0.0.0" in argv
    path = Path(next(a for a in argv if a.startswith("--secrets.files=")).split("=", 1)[1])
    assert path.name == "secrets.toml" and path.parent.name == ".streamlit"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    assert serve.os.environ[serve.AUTH_DIR_ENV] == str(path.parent.parent)  # the launcher removes it at exit
    written = tomllib.loads(path.read_text(encoding="utf-8"))
    assert written["auth"]["client_secret"] == SECRET and written["auth"]["client_id"] == "dashboard"
    assert written["auth"]["redirect_uri"] == "https://dash.example.com/oauth2callback"
    assert written["auth"]["server_metadata_url"] == "https://login.example.com/.well-known/openid-configuration"
    assert len(written["auth"]["cookie_secret"]) >= 32
    assert written["access"]["allow"] == ["ana@example.com", "@team.example"]
    assert SECRET not in repr(serve.oidc_settings(*OIDC[3:6:2], SECRET, ["a@b.org"]))


def test_the_client_secret_can_come_from_the_environment(monkeypatch, capsys, no_exec):
    monkeypatch.setenv(serve.SECRET_ENV, SECRET)
    assert main(["serve", "--port", "8768", *OIDC]) in (0, None)
    path = Path(next(a for a in no_exec[0] if a.startswith("--secrets.files=")).split("=", 1)[1])
    written = tomllib.loads(path.read_text(encoding="utf-8"))
    assert written["auth"]["client_secret"] == SECRET
    assert written["auth"]["redirect_uri"] == "http://localhost:8768/oauth2callback"  # the loopback default
    assert SECRET not in str(no_exec[0])  # not on the command line either


@pytest.mark.parametrize("args, template", [
    (["--auth", "oidc", "--client-id", "x", "--client-secret", "y", "--allow", "a@b.org"], serve.AUTH_MISSING),
    ([*OIDC], serve.AUTH_MISSING),  # no client secret, none in the environment
    ([*OIDC, "--client-secret", "s", "--address", "0.0.0.0"], serve.REDIRECT_NEEDED),
    ([*OIDC, "--client-secret", "s", "--redirect-uri", "https://dash.example.com/"], serve.BAD_URL),
    ([*OIDC[:3], "ftp://login.example.com/", *OIDC[4:], "--client-secret", "s"], serve.BAD_URL),
    ([*OIDC, "--client-secret", "s", "--allow", "example.com"], access.BAD_ENTRY),
    (["--allow", "a@b.org"], serve.AUTH_ONLY),
    (["--address", "192.168.1.20"], serve.OPEN_ADDRESS),
])
def test_bad_login_options_exit_2_with_a_message_and_write_nothing(capsys, no_exec, args, template):
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err
    assert literal(template) in err and "Traceback" not in err and not no_exec
    assert serve.AUTH_DIR_ENV not in serve.os.environ


def test_a_login_in_secrets_toml_also_opens_every_interface(tmp_path):
    path = tmp_path / "secrets.toml"
    auth = ('[auth]\nredirect_uri = "https://d.example/oauth2callback"\ncookie_secret = "c"\nclient_id = "i"\n'
            'client_secret = "s"\nserver_metadata_url = "https://l.example/.well-known/openid-configuration"\n')
    path.write_text(auth)
    assert not serve.secrets_login([path])  # no allow-list: nobody would be let in, so no login counts
    path.write_text(auth + '[access]\nallow = ["@example.com"]\n')
    assert serve.secrets_login([path])
    path.write_text(auth.replace('client_id = "i"\n', "") + '[access]\nallow = ["@example.com"]\n')
    assert not serve.secrets_login([path])
    assert not serve.secrets_login([tmp_path / "none.toml"])
    assert serve.check_address("0.0.0.0", behind_auth_proxy=False, login=True) is None


def test_the_launcher_removes_only_the_login_folder_serve_wrote(tmp_path):
    import tempfile

    from ui import launch

    assert not launch.remove_at_exit(str(tmp_path))  # not explain serve's: left alone
    assert not launch.remove_at_exit(None)
    folder = tempfile.mkdtemp(prefix=serve.AUTH_PREFIX)
    try:
        assert launch.remove_at_exit(folder)
    finally:
        Path(folder).rmdir()


def test_the_owners_and_the_uploads_limits_reach_the_app_apart(tmp_path):
    from explain.modelfile.limits import OWNER_LIMITS, UPLOAD_LIMITS
    from ui import startup

    argv = serve.command(tmp_path, limits=OWNER_LIMITS.but(max_layers=300),
                         upload_limits=UPLOAD_LIMITS.but(max_table_cells=1000))
    app_args = argv[argv.index("--") + 1:]
    assert app_args[2:] == ["--limit", "max_layers=300", "--upload-limit", "max_table_cells=1000"]
    assert startup.limits(app_args) == OWNER_LIMITS.but(max_layers=300)
    assert startup.upload_limits(app_args) == UPLOAD_LIMITS.but(max_table_cells=1000)
    assert "--limit" not in serve.command(tmp_path)  # the defaults: nothing to say


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


def test_the_secrets_of_a_killed_server_are_swept_and_nothing_else(tmp_path):
    """A server killed with SIGKILL cannot remove its explain-auth-* folder at exit: the next
    `explain serve --auth oidc` removes it (its server.pid names a process that is gone), and only it:
    a running server's folder, a recent folder without server.pid, a link, a file and another user's
    folder stay; a day-old folder without server.pid goes."""
    import os
    import subprocess
    import sys
    import time

    def folder(name, pid=None, age=0.0):
        path = tmp_path / f"explain-auth-{name}"
        (path / ".streamlit").mkdir(parents=True)
        (path / ".streamlit" / "secrets.toml").write_text("[auth]\n")
        if pid is not None:
            (path / serve.OWNER_FILE).write_text(str(pid))
        if age:
            os.utime(path, (time.time() - age, time.time() - age))
        return path

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        killed = folder("killed", pid=int(ended.stdout))
        alive = folder("alive", pid=running.pid)
        recent, old = folder("recent"), folder("old", age=2 * 86400)
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (tmp_path / "explain-auth-link").symlink_to(outside)
        (tmp_path / "explain-auth-file").write_text("not a folder")
        theirs = folder("theirs", pid=int(ended.stdout))
        if os.getuid() == 0:
            os.chown(theirs, 12345, 12345)
        else:  # only root can give a folder away: none of the user's to check then
            theirs = None
        removed = serve.sweep_auth_folders(tmp_path)
    finally:
        running.kill()
        running.wait()
    assert sorted(removed) == sorted([killed, old])
    assert not killed.exists() and not old.exists()
    assert alive.exists() and recent.exists() and outside.exists() and (tmp_path / "explain-auth-file").exists()
    assert theirs is None or theirs.exists()
    assert serve.sweep_auth_folders(tmp_path) == [alive]  # its server has ended since: swept now


def test_the_server_writes_its_id_beside_the_secrets(no_exec, capsys):
    import os

    assert main(["serve", "--port", "8769", *OIDC, "--client-secret", SECRET]) in (0, None)
    path = Path(next(a for a in no_exec[0] if a.startswith("--secrets.files=")).split("=", 1)[1])
    assert (path.parent.parent / serve.OWNER_FILE).read_text() == str(os.getpid())  # serve execs Streamlit
