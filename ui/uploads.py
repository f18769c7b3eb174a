"""Uploads: one session's own bundle, from the Data & model page's file uploader.

An upload is checked (sizes, names, the model loaded first in a memory-capped child process,
the tables) and opened into an :class:`UploadSpace`, a private temporary folder of this
session. Session state: ``_upload`` (the space), ``upload_active`` (its folder, or None),
``upload_result`` (what the last attempt gave, shown by :func:`result_ui`).

A folder is named ``explain-upload-<server pid>-<session id>-*``: :func:`sweep` removes those of
sessions the server no longer holds (every SWEEP_EVERY seconds once a session has uploaded, and at
each upload) and those of servers that are gone (also when a server starts, ``ui/launch.py``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from functools import partial
from pathlib import Path

import streamlit as st

from explain.bundle import load as bundle_io
from explain.core import periods
from explain.core.errors import BundleError, ExplainError
from ui import runtime, show, startup

LOG = logging.getLogger("explain.app")
UPLOAD_PREFIX = "explain-upload-"
SWEEP_EVERY = 60  # seconds between two sweeps of the folders of ended sessions
_FOLDER = re.compile(re.escape(UPLOAD_PREFIX) + r"(\d+)-(\w+)-\w+\Z")  # pid, session (its word characters)
UPLOAD_TOO_LARGE = ("{name} is {size:,} bytes, over this app's limit of {limit:,} bytes ({limit_mb} MB) per "
                    "uploaded file. Nothing was opened. To fix: upload a smaller file (for example Parquet "
                    "instead of CSV, or fewer customers), or start the app with a larger "
                    "--server.maxUploadSize if you trust its users.")
OWNER_OPTION = re.compile(r"--limit (?=[a-z_]+=)")  # the refusals' "raise it with --limit FIELD=N" (the owner's)
TRIAL_CACHE_SIZE = 64  # model files (sha256) whose isolated trial load already succeeded
# "pb": a SavedModel's saved_model.pb gets this app's refusal in words (never opened from an upload), not the
# browser's "file type not allowed"
FILE_TYPES = ["keras", "csv", "parquet", "pq", "json", "pb"]


class UploadSpace:
    """One upload of one session: a private temporary folder and the bundle opened from it.

    The folder (``explain-upload-<pid>-<session>-*`` under the system temp dir) holds the files
    under the names the app chooses (model.keras, static.csv, ...). It is removed by :meth:`close`
    (a new upload replaces this one, or the user goes back to the startup bundle), by :func:`sweep`
    once the server no longer holds its session, when this object is garbage collected, or when
    the server exits (``weakref.finalize``).
    """

    def __init__(self, session: str | None = None):
        owner = _owner(session)
        self.folder = Path(tempfile.mkdtemp(prefix=f"{UPLOAD_PREFIX}{os.getpid()}-{owner}-"))
        self.bundle = None
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.folder), True)

    def close(self) -> None:
        self.bundle = None
        self._finalizer()  # removes the folder once; later calls do nothing

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive


def _owner(session: str | None) -> str:
    return re.sub(r"\W", "", session or "") or "nosession"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep(known: set[str] | None, root: str | os.PathLike | None = None) -> list[Path]:
    """Remove the upload folders under ``root`` (the temp dir) that no session uses any more: those of this
    server whose session is not in ``known`` (None: this process cannot tell, keep them) and those of
    servers that have exited. Returns the folders removed; another live server's folders stay."""
    removed, owners = [], None if known is None else {_owner(session) for session in known}
    for folder in Path(root or tempfile.gettempdir()).glob(UPLOAD_PREFIX + "*"):
        match = _FOLDER.match(folder.name)
        if match is None or not folder.is_dir():
            continue
        pid, session = int(match.group(1)), match.group(2)
        gone = (not _alive(pid)) if pid != os.getpid() else (owners is not None and session not in owners)
        if gone:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        LOG.info("removed %d upload folder(s) of ended sessions", len(removed))
    return removed


_SWEEPER: list[threading.Thread] = []


def _sweep_forever() -> None:
    while True:
        time.sleep(SWEEP_EVERY)
        try:
            sweep(runtime.known_sessions())
        except Exception:  # noqa: BLE001 - never stop sweeping
            LOG.warning("sweeping the upload folders failed", exc_info=True)


def start_sweeper() -> None:
    """Sweep now, and every SWEEP_EVERY seconds in a background thread of this server (started once)."""
    sweep(runtime.known_sessions())
    with _TRIAL_LOCK:
        if not _SWEEPER:
            _SWEEPER.append(threading.Thread(target=_sweep_forever, name="explain-upload-sweeper", daemon=True))
            _SWEEPER[0].start()


def upload_limit_bytes() -> int:
    """The per-file upload limit: the server's ``server.maxUploadSize`` (MB)."""
    return int(st.get_option("server.maxUploadSize")) * 1024 * 1024


def check_upload_sizes(files: dict, limit: int) -> None:
    """``BundleError`` naming every file over ``limit`` bytes (before anything is written).

    The server refuses such files already; this check also holds when files reach the page
    another way (AppTest, a proxy that allows larger bodies, a changed config).
    """
    problems = [UPLOAD_TOO_LARGE.format(name=name, size=len(data), limit=limit, limit_mb=limit // 1024**2)
                for name, data in files.items() if len(data) > limit]
    if problems:
        raise BundleError("\n".join(problems), problems)


_TRIAL_PASSED: "OrderedDict[str, object]" = OrderedDict()  # sha256 -> the trial's verdict (safe_load.TrialVerdict)
_TRIAL_LOCK = threading.Lock()


def load_upload_model(path: Path, display_name: str, limits=None):
    """Open an uploaded model under the server's ``limits`` (default: ``ui.startup.upload_limits``): static checks,
    a trial load in a memory-capped child process (``safe_load.trial_load``), then the load here under the same
    limits, bounded by the trial's verdict (``safe_load.load_after_trial``).

    A file whose trial load already succeeded (same bytes: the user fixed a table and uploads
    the same model again) skips the child process and reuses its verdict; the static checks still run.
    """
    from explain.modelfile import safe_load

    limits = startup.upload_limits() if limits is None else limits
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    with _TRIAL_LOCK:
        verdict = _TRIAL_PASSED.get(digest)
    if verdict is None:
        verdict = safe_load.trial_load(path, display_name=display_name, limits=limits)
        with _TRIAL_LOCK:
            _TRIAL_PASSED[digest] = verdict
            while len(_TRIAL_PASSED) > TRIAL_CACHE_SIZE:
                _TRIAL_PASSED.popitem(last=False)
    return safe_load.load_after_trial(path, verdict, display_name=display_name, limits=limits)


def current_bundle():
    """This session's uploaded bundle, or None (the startup bundle is in use)."""
    space = st.session_state.get("_upload")
    return space.bundle if space is not None else None


def is_active() -> bool:
    return bool(st.session_state.get("upload_active"))


def open_upload(files: dict) -> "bundle_io.Bundle":
    """Check and open uploaded files as this session's bundle; ``ExplainError`` if invalid.

    On success the new bundle replaces this session's previous upload (whose folder is
    removed); on failure nothing changes and the new folder is removed at once. A TensorFlow SavedModel's file
    is refused before anything else (a program: never opened from an upload, ``explain.modelfile.savedmodel``).
    """
    refuse_savedmodel(files)
    check_upload_sizes(files, upload_limit_bytes())
    start_sweeper()
    model_name = next((str(n) for n in files if str(n).lower().endswith(".keras")), bundle_io.MODEL_FILE)
    space = UploadSpace(runtime.session_id())
    try:
        bundle = bundle_io.load_bundle_from_uploads(
            files, space.folder, loader=partial(load_upload_model, display_name=Path(model_name).name),
            limits=startup.upload_limits())
    except ExplainError as error:
        space.close()
        raise upload_option(error)
    except BaseException:
        space.close()
        raise
    space.bundle = bundle
    use_upload(space)
    return bundle


def refuse_savedmodel(files: dict) -> None:
    """``BundleError`` naming every uploaded file that belongs to a TensorFlow SavedModel (savedmodel/, saved_model.pb,
    variables/...): the dashboard never opens one from an upload, whatever the server trusts."""
    from explain.modelfile import savedmodel

    problems = [savedmodel.FROM_UPLOAD.format(name=str(name)) for name in files
                if savedmodel.is_savedmodel_part(str(name))]
    if problems:
        raise BundleError("\n".join(problems), problems)


def upload_option(error: ExplainError) -> ExplainError:
    """``error`` (a refusal of an upload) with its "raise it with --limit FIELD=N" hints naming the option that
    changes the uploads' limits, ``--upload-limit`` (``--limit`` changes the owner's bundle's); changed in place."""
    def fix(text):
        return OWNER_OPTION.sub("--upload-limit ", str(text))

    error.args = (fix(error.args[0]) if error.args else "", *error.args[1:])
    if getattr(error, "problems", None):
        error.problems = [dataclasses.replace(p, message=fix(p.message)) if dataclasses.is_dataclass(p)
                          and hasattr(p, "message") else fix(p) for p in error.problems]
    return error


def use_upload(space: UploadSpace | None) -> None:
    """Make ``space`` this session's bundle (None: back to the startup bundle); the previous
    upload's folder is removed, and so is the Cohort page's job of the previous bundle."""
    previous = st.session_state.get("_upload")
    if previous is not None and previous is not space:
        previous.close()
    st.session_state["_upload"] = space
    st.session_state["upload_active"] = str(space.folder) if space is not None else None
    st.session_state.pop("cohort_job", None)


# ----------------------------------------------------------------------------- the Data & model page's widgets


def _request_upload() -> None:
    st.session_state["_upload_requested"] = True


def uploader_ui() -> bool:
    """The uploader and its button; True once after the button was pressed.

    The button's callback sets a flag rather than the button returning True: the flag
    survives a rerun that starts before the page body runs (see ``ui.runtime.ensure_frame_ran``).
    """
    files = st.file_uploader("Bundle files: model.keras, static and temporal tables (.csv or .parquet), "
                             "optional bundle.json", accept_multiple_files=True, type=FILE_TYPES, key="upload_files")
    st.button("Check and open", type="primary", disabled=not files, icon=":material/fact_check:",
              on_click=_request_upload)
    return bool(st.session_state.pop("_upload_requested", False)) and bool(files)


def open_uploaded_files() -> None:
    """Check the uploader's files and switch to them if valid; the result is shown by :func:`result_ui`."""
    files = {f.name: f.getvalue() for f in st.session_state.get("upload_files") or []}
    try:
        with st.spinner("Checking the files and opening the model in a separate process..."):
            bundle = open_upload(files)
    except Exception as exc:  # shown as a list of problems; the bundle in use does not change
        st.session_state["upload_result"] = ("error", exc)
    else:
        st.session_state["upload_result"] = ("ok", f"Opened the uploaded bundle: {bundle.n_customers} customers, "
                                                   f"{bundle.n_static} static features, {bundle.n_periods} periods x "
                                                   f"{bundle.n_temporal} {periods.words(bundle).adjective} features.")
    st.rerun()  # the sidebar and every page now use the new bundle


def back_to_startup() -> None:
    use_upload(None)
    st.session_state.pop("upload_result", None)


def result_ui() -> None:
    """What the last upload gave: every problem, or a success note."""
    kind, payload = st.session_state.get("upload_result", (None, None))
    if kind == "error":
        st.subheader("The upload was not opened")
        show.error(payload)
        st.caption("Fix the files and upload them again; the bundle in use has not changed.")
    elif kind == "ok":
        st.success(show.md(payload))
