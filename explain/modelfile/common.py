"""What every model file format shares: the path and size checks, the sniffing of a file's
first bytes, the HDF5 dataset walk (a .keras file's ``model.weights.h5``, a legacy ``.h5``
model), the final Keras load and the messages of these steps.

Used by ``explain.modelfile.safe_load`` (.keras) and ``explain.modelfile.h5`` (legacy HDF5), which re-export the
templates.  Standard library only at import time (the memory-capped child of
``safe_load`` imports it before its cap); h5py and Keras are imported when used.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from explain.core.errors import refusal
from explain.core.text import one_line

if TYPE_CHECKING:
    from explain.modelfile.trust import TrustedCode

SAVE_HINT = 'save the model with Keras 3 using model.save("model.keras") and use that file'

NOT_FOUND = "{path}: no such file. To fix: check the path, or " + SAVE_HINT + "."
IS_DIRECTORY = (
    "{path} is a folder, not a .keras model file. To fix: pass the model file itself; "
    + SAVE_HINT + "."
)
SAVEDMODEL = (
    "{path} is a TensorFlow SavedModel ({where}), which this tool does not load: a "
    "SavedModel holds a TensorFlow graph that can read files and run operations of its "
    "own. To fix: in a trusted environment, load it with the Keras/TensorFlow version "
    "that wrote it (tf.keras.models.load_model), or rebuild the architecture with Keras 3 "
    'layers and copy the weights, then save it with model.save("model.keras") and use '
    "that file."
)
EMPTY_FILE = "{path} is empty (0 bytes). To fix: " + SAVE_HINT + " (upload it again)."
FILE_TOO_LARGE = (
    "{path} is {size:,} bytes, over the limit of {limit:,} bytes for a model file. "
    "To fix: use a smaller model, or raise it with --limit max_file_bytes=N on the command line if you "
    "trust this file."
)
LOAD_FAILED = (
    "{path} passed the safety checks but Keras could not load it: {error}. To fix: check "
    "that it was saved by Keras 3 with model.save(\"model.keras\") and uses only built-in "
    "Keras layers."
)
LOAD_OUT_OF_MEMORY = (
    "{path}: the model is too large to load, this machine ran out of memory ({error}). "
    "To fix: use a smaller model."
)

ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
SAVEDMODEL_NAMES = frozenset({"saved_model.pb", "saved_model.pbtxt"})


@dataclass(frozen=True)
class ModelFileReport:
    """What the static checks learnt about a model file that passed every one of them
    (``members`` is empty for an .h5 file, whose ``uncompressed_bytes`` are its datasets' bytes)."""

    path: Path
    size_bytes: int
    uncompressed_bytes: int
    members: tuple[str, ...]
    estimated_params: int
    weights_bytes: int


def check_path(path: Path, shown: str, max_file_bytes: int) -> int:
    """The path is a non-empty file (not a folder, not a SavedModel) under the size limit;
    returns its size."""
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if p.name in SAVEDMODEL_NAMES)
        if found:
            raise refusal(SAVEDMODEL, path=shown, where=f"a folder with {found[0]}")
        raise refusal(IS_DIRECTORY, path=shown)
    if not path.is_file():
        raise refusal(NOT_FOUND, path=shown)
    if path.name in SAVEDMODEL_NAMES:
        raise refusal(SAVEDMODEL, path=shown, where=f"the graph file {path.name}")
    size = path.stat().st_size
    if size == 0:
        raise refusal(EMPTY_FILE, path=shown)
    if size > max_file_bytes:
        raise refusal(FILE_TOO_LARGE, path=shown, size=size, limit=max_file_bytes)
    return size


def sniff_kind(head: bytes) -> str:
    if head.startswith(EMPTY_ZIP_MAGIC):
        return "an empty zip archive"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "a Python pickle, which must never be loaded from an untrusted source"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "binary data"
    if text and all(ch.isprintable() or ch in "\r\n\t" for ch in text):
        if text.lstrip().startswith(("{", "[")):
            return "JSON text; a config.json alone is not a model"
        return "a text file"
    return "binary data"


def is_hdf5(handle, size: int) -> bool:
    # HDF5 files start with the signature at offset 0 or after a user block of 512,
    # 1024, 2048 ... bytes.
    offset = 0
    while offset + len(HDF5_MAGIC) <= size and offset <= 1 << 20:
        handle.seek(offset)
        if handle.read(len(HDF5_MAGIC)) == HDF5_MAGIC:
            return True
        offset = 512 if offset == 0 else offset * 2
    return False


def hdf5_datasets(h5) -> tuple[int, list[str]]:
    """(declared bytes of every dataset, what reads other files) of an open ``h5py.File``:
    external or soft links, datasets stored in external files, virtual datasets.  h5py's
    errors on a damaged file propagate (each caller names the file with its own template)."""
    import h5py

    total = 0
    bad: list[str] = []

    def visit(name, link):
        nonlocal total
        if isinstance(link, (h5py.ExternalLink, h5py.SoftLink)):
            bad.append(f"has a link {name!r} to {getattr(link, 'filename', '') or link.path!r}")
            return None
        obj = h5.get(name)
        if isinstance(obj, h5py.Dataset):
            if obj.external:
                bad.append(f"stores the dataset {name!r} in an external file")
            elif obj.is_virtual:
                bad.append(f"maps the dataset {name!r} onto other files (virtual dataset)")
            total += int(obj.size or 0) * int(obj.dtype.itemsize)
        return None

    h5.visititems_links(visit)
    return total, bad


def is_memory_error(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError) or "ResourceExhausted" in type(exc).__name__:
            return True
        if "OOM when allocating" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class KerasPath:
    """A path Keras routes to the right loader: the file itself if it ends in ``suffix``
    (``.keras``, ``.h5``), else a link (or copy) named ``model{suffix}`` in a temporary folder."""

    def __init__(self, path: Path, suffix: str = ".keras"):
        self.path = path
        self.suffix = suffix
        self._tmp: str | None = None

    def __enter__(self) -> str:
        if self.path.suffix == self.suffix:
            return str(self.path)
        self._tmp = tempfile.mkdtemp(prefix="explain-safe-load-")
        link = Path(self._tmp, "model" + self.suffix)
        try:
            link.symlink_to(self.path.resolve())
        except OSError:
            shutil.copyfile(self.path, link)
        return str(link)

    def __exit__(self, *exc_info) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def trusted_names(trusted: "TrustedCode | None") -> frozenset[str]:
    """The names the refusal walk lets through for ``trusted`` (none without it)."""
    return trusted.names() if trusted is not None else frozenset()


def keras_load(path: Path, shown: str, suffix: str = ".keras", trusted: "TrustedCode | None" = None):
    """``keras.saving.load_model(safe_mode=True, compile=False)`` of a checked file, with
    ``trusted``'s objects as ``custom_objects``; any failure is an ``UnsafeModelError``
    (LOAD_FAILED or LOAD_OUT_OF_MEMORY) naming ``shown``."""
    import keras

    objects = dict(trusted.objects) if trusted is not None else None
    try:
        with KerasPath(path, suffix) as keras_path:
            return keras.saving.load_model(keras_path, custom_objects=objects, safe_mode=True, compile=False)
    except Exception as exc:  # noqa: BLE001 - every Keras failure becomes one message
        template = LOAD_OUT_OF_MEMORY if is_memory_error(exc) else LOAD_FAILED
        raise refusal(template, path=shown, error=one_line(exc)) from exc
