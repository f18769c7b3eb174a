"""Atomic file output: a file is written whole under its name, or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

TEMP_SUFFIX = ".part"  # temporary files are ``.<name>.<random>.part`` next to the target


def write_atomic(path, write: Callable[[Path], object], *, readable: bool = True) -> Path:
    """Call ``write(temporary_path)``, then rename onto ``path``: never a half-written file.

    The temporary file is private (0600) while it is written; the result gets the usual
    permissions (0666 minus the umask), as a file written with ``open`` would, unless
    ``readable=False`` keeps it private (the server's copies of uploaded files).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        if readable:
            os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_bytes_atomic(path, data: bytes, *, readable: bool = True) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_bytes(data), readable=readable)


def make_readable(folder) -> Path:
    """Give a folder made private by ``tempfile.mkdtemp`` (0700) the usual permissions (0777 minus
    the umask), as ``mkdir`` would; returns it."""
    os.chmod(folder, 0o777 & ~umask())
    return Path(folder)


def user_cache() -> Path:
    """This tool's folder in the user's cache directory: ``$XDG_CACHE_HOME/explain``, else ``~/.cache/explain`` (the
    array caches of bundles whose folder cannot be written, TensorFlow's XLA executables)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "explain"


def umask() -> int:
    """The process umask, read without changing it (os.umask would, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


# The first characters that make a spreadsheet read a cell as a formula (OWASP's "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame):
    """A copy of the DataFrame ``frame`` for a CSV download: every text cell that starts with
    FORMULA_STARTS gets a leading ``'``, so that a spreadsheet shows it as text instead of running it
    (``=HYPERLINK(...)`` from a customer id or a feature name). Numbers stay numbers: only text cells
    change, and a negative number is a number, not text."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or str(out[column].dtype) in ("string", "str"):
            out[column] = out[column].map(
                lambda v: "'" + v if isinstance(v, str) and v.startswith(FORMULA_STARTS) else v)
    return out


def csv_download(frame) -> str:
    """``frame`` as CSV text for people and spreadsheets: :func:`spreadsheet_safe`, without the index, with
    RFC 4180's CRLF line ends (so that a text holding a lone CR or LF is quoted and stays one cell)."""
    return spreadsheet_safe(frame).to_csv(index=False, lineterminator="\r\n")
