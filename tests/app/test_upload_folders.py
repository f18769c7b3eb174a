"""Upload folders do not outlive their session (issue 25): each is named after its server and session,
and ``ui.uploads.sweep`` removes those of sessions the server no longer holds and of servers that exited,
never another live server's. Then the whole path through the page: an upload's folder is removed when a
second upload replaces it, and a failed upload leaves none."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.support.apptest import DEMO, app, upload
from tests.support.hostile import small_bundle
from ui import uploads

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


def folder(root: Path, pid: int, session: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"{uploads.UPLOAD_PREFIX}{pid}-{uploads._owner(session)}-", dir=root))
    (path / "static.csv").write_text("customer_id,a\nC1,1\n")
    return path


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_the_folders_of_ended_sessions_and_exited_servers(tmp_path):
    mine, ended = str(uuid.uuid4()), str(uuid.uuid4())
    kept = folder(tmp_path, os.getpid(), mine)
    of_ended = folder(tmp_path, os.getpid(), ended)
    of_exited = folder(tmp_path, dead_pid(), str(uuid.uuid4()))
    of_other_server = folder(tmp_path, os.getppid(), str(uuid.uuid4()))  # alive, not ours: left alone
    unrelated = tmp_path / "explain-upload-notours"
    unrelated.mkdir()

    assert uploads.sweep(None, tmp_path) == [of_exited]  # no session list: only the exited server's
    assert set(uploads.sweep({mine}, tmp_path)) == {of_ended}
    assert kept.is_dir() and of_other_server.is_dir() and unrelated.is_dir()
    assert not of_ended.exists() and not of_exited.exists()
    assert uploads.sweep({mine}, tmp_path) == []


def test_an_upload_space_is_named_after_its_server_and_session():
    session = str(uuid.uuid4())
    space = uploads.UploadSpace(session)
    try:
        match = uploads._FOLDER.match(space.folder.name)
        assert match and int(match.group(1)) == os.getpid() and match.group(2) == session.replace("-", "")
        assert uploads.sweep({session}, space.folder.parent) == [] or space.folder.is_dir()
        assert space.folder.is_dir()
    finally:
        space.close()
    assert not space.folder.exists()


def test_a_replaced_upload_and_a_failed_one_leave_no_folder(tmp_path):
    bundle = small_bundle(DEMO, tmp_path / "small", customers=20)
    files = {name: (bundle / name).read_bytes() for name in ("model.keras", "static.csv", "temporal.csv",
                                                             "bundle.json")}
    at = app(page="pages/data.py")
    upload(at, files)
    first = Path(at.session_state["upload_active"])
    assert first.is_dir() and uploads._FOLDER.match(first.name)
    mine = f"{uploads.UPLOAD_PREFIX}{os.getpid()}-*"  # other tests running at once make their own
    before = set(Path(tempfile.gettempdir()).glob(mine))
    upload(at, files)  # the same files again: a new space replaces the first
    second = Path(at.session_state["upload_active"])
    assert second != first and second.is_dir() and not first.exists()
    upload(at, {**files, "static.csv": b"not,a\ntable"})  # refused: its space is removed at once
    assert at.session_state["upload_active"] == str(second)
    after = set(Path(tempfile.gettempdir()).glob(mine))
    assert after - before == {second}
    next(b for b in at.button if b.label == "Back to the startup bundle").click().run()
    assert not at.session_state["upload_active"] and not second.exists()
