"""The only way a model file is opened: a Keras 3 ``.keras`` file, or a legacy ``.h5``.

A model file is user input: a Keras file can name Python code (a ``Lambda`` layer's
bytecode, a custom class, a module to import), a local file to read (a lookup layer's
vocabulary, a ``TFSMLayer``'s SavedModel) or a layer so large that building it exhausts
memory.  Everything here runs **before** Keras sees the file, reads only the zip's central
directory, ``config.json`` and the HDF5 metadata of the weights, and refuses with a message
that names the file, says what is wrong and how to fix it (``UnsafeModelError``).

Public API:

* :func:`check_model_file` -- the static checks of a ``.keras`` file only (no TensorFlow op
  runs, nothing is built); returns a :class:`ModelFileReport` or raises ``UnsafeModelError``.
* :func:`load_model` -- the static checks, then
  ``keras.saving.load_model(path, safe_mode=True, compile=False)``.
* :func:`load_model_isolated` -- for uploads: the static checks, then a trial load in a
  child process under a memory cap (``RLIMIT_AS``) and a timeout (:func:`trial_load`), then the
  load in this process under the same limits (:func:`load_after_trial`).
* :func:`open_model` / :func:`check_file` -- the same for either format, by the file's
  name: ``.h5`` / ``.hdf5`` go to ``explain.modelfile.h5`` (legacy HDF5 models), anything else is a
  ``.keras`` file.

Every loader takes ``limits=Limits(...)`` (``explain.modelfile.limits``) and ``display_name`` (the
name shown for a file saved under a temporary name); :func:`load_model`, :func:`open_model`
and :func:`check_file` take ``trusted=`` (a ``explain.modelfile.trust.TrustedCode``, from
``--trust-code``, never for uploads).  The walk over the architecture lives in
``explain.modelfile.config``, what both formats share in ``explain.modelfile.common``, the child
process in ``explain.modelfile.trial``; their templates are re-exported here.

The message templates are module-level constants (``NOT_A_ZIP`` ...), formatted with
``str.format``; tests import them instead of copying strings.  Every template names the
file (``{path}``) and contains ``To fix:``.
"""

from __future__ import annotations

import re
import shutil
import struct
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from explain.core.errors import UnsafeModelError, refusal
from explain.core.text import one_line
from explain.modelfile import h5
from explain.modelfile.common import (  # noqa: F401
    EMPTY_ZIP_MAGIC,
    IS_DIRECTORY,
    LOAD_FAILED,
    LOAD_OUT_OF_MEMORY,
    NOT_FOUND,
    SAVE_HINT,
    SAVEDMODEL,
    SAVEDMODEL_NAMES,
    ZIP_MAGIC,
    ModelFileReport,
    check_path,
    hdf5_datasets,
    is_hdf5,
    keras_load,
    sniff_kind,
    trusted_names,
)
from explain.modelfile.config import (  # noqa: F401
    CONFIG_TOO_LARGE,
    REASON_DENIED_CLASS,
    REASON_FUNCTION,
    REASON_LAMBDA,
    REASON_MALFORMED,
    REASON_MODULE,
    REASON_NO_MODULE,
    REASON_NOT_MODELING,
    REASON_PY_LAMBDA,
    REASON_REGISTERED,
    REASON_VOCAB_FILE,
    TOO_MANY_LAYERS,
    TOO_MANY_PARAMS,
    UNSAFE_CONFIG,
    UNSAFE_ITEM,
    check_config,
    parse_config,
)
from explain.modelfile.limits import (  # noqa: F401
    DEFAULT_LIMITS,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_PARAMS,
    DEFAULT_MAX_UNCOMPRESSED_BYTES,
    DEFAULT_MEMORY_LIMIT_BYTES,
    DEFAULT_TIMEOUT_S,
    MAX_CONFIG_BYTES,
    Limits,
)
from explain.modelfile.trial import TrialVerdict, run_trial, slot

if TYPE_CHECKING:
    from explain.modelfile.trust import TrustedCode

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_PARAMS",
    "DEFAULT_MAX_UNCOMPRESSED_BYTES",
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "DEFAULT_TIMEOUT_S",
    "Limits",
    "ModelFileReport",
    "UnsafeModelError",
    "check_file",
    "check_model_file",
    "load_model",
    "load_after_trial",
    "load_model_isolated",
    "open_model",
    "trial_load",
]

# --------------------------------------------------------------------------- messages

HDF5 = (
    "{path} is a legacy HDF5 (.h5) Keras model, not a Keras 3 .keras file. To fix: name it "
    "with the .h5 suffix (a bundle may hold model.h5 instead of model.keras; it gets the same "
    'checks), or in a trusted environment run model = keras.saving.load_model("model.h5") and '
    'then model.save("model.keras"), and use the .keras file.'
)
NOT_A_ZIP = (
    "{path} is not a Keras 3 model: a .keras file is a zip archive (it starts with the "
    "bytes 'PK'), this file starts with {head} ({kind}). To fix: " + SAVE_HINT + "."
)
CORRUPT_ZIP = (
    "{path} is a damaged zip archive ({reason}). To fix: " + SAVE_HINT
    + " and copy or upload it again."
)
FILE_TOO_LARGE = (
    "{path} is {size:,} bytes, over the limit of {limit:,} bytes for a model file. "
    "To fix: use a smaller model, or raise it with --limit max_file_bytes=N on the command line if you "
    "trust this file."
)
TOO_MANY_MEMBERS = (
    "{path} holds {count:,} files, over the limit of {limit:,}; a .keras file holds "
    "config.json, metadata.json, model.weights.h5 and possibly assets/. To fix: "
    + SAVE_HINT + ", or raise it with --limit max_members=N on the command line if you trust this "
    "file."
)
UNCOMPRESSED_TOO_LARGE = (
    "{path} would unpack to {size:,} bytes, over the limit of {limit:,} bytes (a "
    "decompression bomb or an oversized model). To fix: use a smaller model, or raise "
    "max_uncompressed_bytes if you trust this file."
)
UNSAFE_MEMBER = (
    "{path} contains the archive member {name!r}, which {why}; unpacking it could write "
    "outside the extraction folder (zip slip). To fix: " + SAVE_HINT
    + " instead of editing the archive by hand."
)
MISSING_CONFIG = (
    "{path} is a zip archive but not a Keras 3 model: it has no config.json (it holds "
    "{names}). To fix: " + SAVE_HINT + "."
)
UNEXPECTED_MEMBERS = (
    "{path} contains files a .keras model does not have: {names} (expected config.json, "
    "metadata.json, model.weights.h5 and assets/). To fix: " + SAVE_HINT
    + " instead of editing the archive by hand."
)
BAD_CONFIG = (
    "{path}: config.json cannot be read ({reason}). To fix: " + SAVE_HINT + "."
)
BAD_WEIGHTS = (
    "{path}: model.weights.h5 {reason}. To fix: " + SAVE_HINT + "."
)
SERVER_LOAD_TOO_SLOW = (
    "{path}: loading the model took {cpu:.1f} s of CPU time in the trial, over the limit of {limit:g} s for "
    "loading it again in this server (max_load_cpu_s). To fix: use a smaller model (fewer layers), or raise it "
    "with --upload-limit max_load_cpu_s=N (explain serve) if you trust the people who upload."
)
WEIGHTS_TOO_LARGE = (
    "{path}: model.weights.h5 declares {size:,} bytes of weights, over the limit of "
    "{limit:,} bytes. To fix: use a smaller model, or raise it with --limit max_uncompressed_bytes=N "
    "on the command line if you trust this file."
)

_EXPECTED_MEMBERS = frozenset({"config.json", "metadata.json", "model.weights.h5"})
_WEIGHTS_MEMBER = "model.weights.h5"


# --------------------------------------------------------------------------- the file


def _declared_member_count(handle, size: int) -> int:
    """Number of entries from the End Of Central Directory record (zip64 aware).

    Read before ``zipfile`` builds one object per entry, so that a file declaring
    millions of members is refused for the price of a few bytes.
    """
    tail_len = min(size, 22 + 0xFFFF + 20)
    handle.seek(size - tail_len)
    tail = handle.read(tail_len)
    pos = tail.rfind(EMPTY_ZIP_MAGIC)
    while pos >= 0 and pos + 22 > len(tail):
        pos = tail.rfind(EMPTY_ZIP_MAGIC, 0, pos)
    if pos < 0:
        raise zipfile.BadZipFile("no end-of-archive record; the file is probably truncated")
    count = struct.unpack("<H", tail[pos + 10 : pos + 12])[0]
    locator = pos - 20
    if locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
        eocd64_offset = struct.unpack("<Q", tail[locator + 8 : locator + 16])[0]
        if eocd64_offset + 56 > size:
            raise zipfile.BadZipFile("the zip64 end-of-archive record points past the end")
        handle.seek(eocd64_offset)
        record = handle.read(56)
        if record[:4] != b"PK\x06\x06":
            raise zipfile.BadZipFile("the zip64 end-of-archive record is missing")
        count = max(count, struct.unpack("<Q", record[32:40])[0])
    return count


def _member_problem(name: str) -> str | None:
    if "\x00" in name:
        return "has a NUL byte in its name"
    unified = name.replace("\\", "/")
    if unified.startswith("/") or re.match(r"[A-Za-z]:", unified):
        return "has an absolute path"
    if ".." in PurePosixPath(unified).parts:
        return "has a '..' component"
    return None


def _check_weights(zf: zipfile.ZipFile, path_text: str, max_bytes: int) -> int:
    """Walk the HDF5 metadata of the weights: sizes, links and external storage."""
    import h5py

    with tempfile.TemporaryFile() as spool:
        with zf.open(_WEIGHTS_MEMBER) as member:
            shutil.copyfileobj(member, spool, 1024**2)
        spool.seek(0)
        try:
            h5file = h5py.File(spool, "r")
        except Exception as exc:  # noqa: BLE001 - any parse error means "not HDF5"
            raise refusal(
                BAD_WEIGHTS, path=path_text, reason=f"is not a valid HDF5 file ({one_line(exc)})"
            ) from None
        try:
            with h5file:
                total, bad = hdf5_datasets(h5file)
        except Exception as exc:  # noqa: BLE001
            raise refusal(
                BAD_WEIGHTS, path=path_text, reason=f"cannot be read ({one_line(exc)})"
            ) from None
    if bad:
        raise refusal(BAD_WEIGHTS, path=path_text, reason="; ".join(bad[:5]))
    if total > max_bytes:
        raise refusal(WEIGHTS_TOO_LARGE, path=path_text, size=total, limit=max_bytes)
    return total


def check_model_file(
    path,
    *,
    limits: Limits = DEFAULT_LIMITS,
    display_name: str | None = None,
    trusted: "TrustedCode | None" = None,
) -> ModelFileReport:
    """Check a ``.keras`` file without building the model; raise ``UnsafeModelError``.

    In order: the path is a file (not a folder, not a SavedModel), its size, its magic
    bytes (zip; HDF5 and others refused), the zip's central directory (member count,
    member names, declared uncompressed size, expected members), ``config.json`` (every
    class it names is a built-in Keras class or function, no lambda, no custom object,
    no lookup vocabulary read from a file; all offending entries are listed at once), the
    estimated number of weights (``limits.max_params``; ``None`` disables it) and the HDF5
    metadata of ``model.weights.h5`` (declared sizes, no external links or storage).
    ``trusted``: the owner's ``--trust-code`` objects, which pass the class checks.
    """
    path = Path(path)
    shown = display_name or str(path)
    size = check_path(path, shown, limits.max_file_bytes)
    with open(path, "rb") as handle:
        zf = _open_zip(handle, shown, size, limits.max_members)
        with zf:
            infos = zf.infolist()
            names, total = _check_members(infos, shown, limits)
            config = _read_config(zf, shown, limits)
            params = check_config(config, shown, limits, trusted_names(trusted))
            weights_bytes = 0
            if _WEIGHTS_MEMBER in names:
                weights_bytes = _check_weights(zf, shown, limits.max_uncompressed_bytes)
    return ModelFileReport(
        path=path, size_bytes=size, uncompressed_bytes=total, members=tuple(names),
        estimated_params=params, weights_bytes=weights_bytes,
    )


def _open_zip(handle, shown: str, size: int, max_members: int) -> zipfile.ZipFile:
    """The archive of an open file, once its magic bytes and its declared member count pass."""
    head = handle.read(16)
    if not head.startswith(ZIP_MAGIC):
        if is_hdf5(handle, size):
            raise refusal(HDF5, path=shown)
        raise refusal(NOT_A_ZIP, path=shown, head=repr(head[:8]), kind=sniff_kind(head))
    try:
        count = _declared_member_count(handle, size)
    except zipfile.BadZipFile as exc:
        raise refusal(CORRUPT_ZIP, path=shown, reason=str(exc)) from None
    if count > max_members:
        raise refusal(TOO_MANY_MEMBERS, path=shown, count=count, limit=max_members)
    handle.seek(0)
    try:
        return zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise refusal(CORRUPT_ZIP, path=shown, reason=one_line(exc)) from None


def _check_members(infos, shown: str, limits: Limits) -> tuple[list[str], int]:
    """(member names, their uncompressed size): count, names, total size, no SavedModel, the members a .keras
    file has and no others."""
    if len(infos) > limits.max_members:
        raise refusal(TOO_MANY_MEMBERS, path=shown, count=len(infos), limit=limits.max_members)
    names = [info.filename for info in infos]
    seen: set[str] = set()
    for name in names:
        why = _member_problem(name)
        if why is None and name in seen:
            why = "appears twice"
        if why:
            raise refusal(UNSAFE_MEMBER, path=shown, name=name, why=why)
        seen.add(name)
    total = sum(info.file_size for info in infos)
    if total > limits.max_uncompressed_bytes:
        raise refusal(UNCOMPRESSED_TOO_LARGE, path=shown, size=total, limit=limits.max_uncompressed_bytes)
    savedmodel = [n for n in names if PurePosixPath(n).name in SAVEDMODEL_NAMES]
    if savedmodel:
        raise refusal(SAVEDMODEL, path=shown, where=f"a zip archive with {savedmodel[0]}")
    if "config.json" not in seen:
        listed = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
        raise refusal(MISSING_CONFIG, path=shown, names=listed or "nothing")
    unexpected = [n for n in names if n not in _EXPECTED_MEMBERS and not n.startswith("assets/")]
    if unexpected:
        listed = ", ".join(repr(n) for n in unexpected[:5])
        if len(unexpected) > 5:
            listed += f" and {len(unexpected) - 5} more"
        raise refusal(UNEXPECTED_MEMBERS, path=shown, names=listed)
    return names, total


def _read_config(zf: zipfile.ZipFile, shown: str, limits: Limits) -> dict:
    """``config.json`` parsed, within its limits (size, objects, depth, values; ``parse_config``), and
    describing a Keras object."""
    config_info = zf.getinfo("config.json")
    if config_info.file_size > limits.max_json_bytes:
        reason = f"it is {config_info.file_size:,} bytes, over the limit max_json_bytes={limits.max_json_bytes:,}"
        raise refusal(CONFIG_TOO_LARGE, path=shown, part="config.json", reason=reason, field="max_json_bytes")
    try:
        raw = zf.read("config.json")
    except Exception as exc:  # noqa: BLE001 - bad zip data
        raise refusal(BAD_CONFIG, path=shown, reason=one_line(exc)) from None
    return parse_config(raw, shown, "config.json", limits, BAD_CONFIG)


# --------------------------------------------------------------------------- loading


def load_model(path, *, limits: Limits = DEFAULT_LIMITS, display_name: str | None = None,
               trusted: "TrustedCode | None" = None):
    """Open a Keras 3 ``.keras`` file safely and return the ``keras.Model``.

    Runs :func:`check_model_file` (nothing of the file runs before it passes), then
    ``keras.saving.load_model(path, safe_mode=True, compile=False)`` (with ``trusted``'s
    objects as ``custom_objects``).  Any failure is an ``UnsafeModelError`` naming the file
    (``display_name`` if given, for uploads saved under a temporary name), what is wrong and
    how to fix it.  The model is built in this process: for files from untrusted users
    prefer :func:`load_model_isolated`.
    """
    path = Path(path)
    check_model_file(path, limits=limits, display_name=display_name, trusted=trusted)
    return keras_load(path, display_name or str(path), ".keras", trusted)


def load_model_isolated(path, *, limits: Limits = DEFAULT_LIMITS, display_name: str | None = None):
    """Load an untrusted model file without risking this process's memory (never trusted code):
    :func:`trial_load`, then :func:`load_after_trial` with its verdict.

    1. The static checks in this process (:func:`check_file`: fast; refuses code, custom
       objects, bombs and, from the architecture, models over ``limits.max_params`` weights,
       ``max_layers`` layers or ``max_config_entries`` config entries).
    2. A trial ``keras.saving.load_model`` in a child process (``python -c``) whose
       address space is capped at ``limits.memory_limit_bytes`` (``RLIMIT_AS``; TensorFlow
       alone needs about 2 GiB) and which is killed after ``limits.timeout_s`` seconds.
       Running out of memory there raises ``UnsafeModelError`` (ISOLATED_TOO_LARGE), a
       timeout ISOLATED_TIMEOUT, more than ``limits.cpu_limit_s`` of CPU time ISOLATED_CPU.  This
       backstops what the estimate cannot see.  At most ``trial.TRIAL_SLOTS`` loads run at once.
       ``memory_limit_bytes=0`` runs the child without a memory cap.
    3. The load in this process, bounded by the child's verdict (:func:`load_after_trial`).

    A ``.h5`` / ``.hdf5`` name is a legacy HDF5 model (``explain.modelfile.h5``), anything else a
    ``.keras`` file.  POSIX only (``resource``).  The child costs one TensorFlow import
    (several seconds).
    """
    verdict = trial_load(path, limits=limits, display_name=display_name)
    return load_after_trial(path, verdict, limits=limits, display_name=display_name)


def trial_load(path, *, limits: Limits = DEFAULT_LIMITS, display_name: str | None = None) -> TrialVerdict:
    """Steps 1 and 2 of :func:`load_model_isolated`: the static checks, then the trial load in a capped child;
    its ``TrialVerdict`` (how long the load took there), or ``UnsafeModelError``."""
    path = Path(path)
    check_file(path, limits=limits, display_name=display_name)
    return run_trial(path, display_name or str(path), limits, ".h5" if h5.is_hdf5_name(path) else ".keras")


def load_after_trial(path, verdict: TrialVerdict, *, limits: Limits = DEFAULT_LIMITS,
                     display_name: str | None = None):
    """The load in this process of a model whose trial passed (``verdict``, from :func:`trial_load` of the same
    bytes), under the same limits: refused (SERVER_LOAD_TOO_SLOW) before it starts when the trial's load took
    more than ``limits.max_load_cpu_s`` of CPU time (this load would take as long, on the server's cores); the
    static checks run again on the file (sizes, layers, config entries); and it holds one of the trial slots,
    so that at most ``trial.TRIAL_SLOTS`` model loads, in children or here, run at once."""
    shown = display_name or str(path)
    if verdict.cpu_s is not None and verdict.cpu_s > limits.max_load_cpu_s:
        raise refusal(SERVER_LOAD_TOO_SLOW, path=shown, cpu=verdict.cpu_s, limit=float(limits.max_load_cpu_s))
    with slot(limits, shown):
        return open_model(path, limits=limits, display_name=display_name)


def check_file(path, *, limits: Limits = DEFAULT_LIMITS, display_name: str | None = None,
               trusted: "TrustedCode | None" = None) -> ModelFileReport:
    """:func:`check_model_file`, or ``explain.modelfile.h5.check_hdf5_file`` for a ``.h5`` / ``.hdf5`` name."""
    check = h5.check_hdf5_file if h5.is_hdf5_name(path) else check_model_file
    return check(path, limits=limits, display_name=display_name, trusted=trusted)


def open_model(path, *, limits: Limits = DEFAULT_LIMITS, display_name: str | None = None,
               trusted: "TrustedCode | None" = None):
    """:func:`load_model`, or ``explain.modelfile.h5.load_hdf5_model`` for a ``.h5`` / ``.hdf5`` name:
    the loader of bundles (``model.keras`` or ``model.h5``)."""
    load = h5.load_hdf5_model if h5.is_hdf5_name(path) else load_model
    return load(path, limits=limits, display_name=display_name, trusted=trusted)
