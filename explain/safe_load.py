"""The only way a ``.keras`` file is opened.

A model file is user input: a Keras file can name Python code (a ``Lambda`` layer's
bytecode, a custom class, a module to import), a local file to read (a lookup layer's
vocabulary, a ``TFSMLayer``'s SavedModel) or a layer so large that building it exhausts
memory.  Everything here runs **before** Keras sees the file, reads only the zip's central
directory, ``config.json`` and the HDF5 metadata of the weights, and refuses with a message
that names the file, says what is wrong and how to fix it (``UnsafeModelError``).

Public API:

* :func:`check_model_file` -- the static checks only (no TensorFlow op runs, nothing is
  built); returns a :class:`ModelFileReport` or raises ``UnsafeModelError``.
* :func:`load_model` -- the static checks, then
  ``keras.saving.load_model(path, safe_mode=True, compile=False)``.
* :func:`load_model_isolated` -- for uploads: the static checks, then a trial load in a
  child process under a memory cap (``RLIMIT_AS``) and a timeout, then :func:`load_model`.

The message templates are module-level constants (``NOT_A_ZIP`` ...), formatted with
``str.format``; tests import them instead of copying strings.  Every template names the
file (``{path}``) and contains ``To fix:``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from explain.errors import UnsafeModelError

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_PARAMS",
    "DEFAULT_MAX_UNCOMPRESSED_BYTES",
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "DEFAULT_TIMEOUT_S",
    "ModelFileReport",
    "UnsafeModelError",
    "check_model_file",
    "load_model",
    "load_model_isolated",
]

# --------------------------------------------------------------------------- limits

DEFAULT_MAX_FILE_BYTES = 200 * 1024**2  # 200 MiB on disk
DEFAULT_MAX_UNCOMPRESSED_BYTES = 1024**3  # 1 GiB once unpacked (sum of all members)
DEFAULT_MAX_MEMBERS = 1000
DEFAULT_MAX_PARAMS = 50_000_000  # estimated from config.json, before anything is built
# Virtual memory (RLIMIT_AS) of the trial-load child.  Importing TensorFlow alone reserves
# about 1.5-2 GiB of address space (thread stacks, allocator arenas, shared libraries);
# 8 GiB leaves room for a model up to the 1 GiB weight cap, while a layer that needs
# tens of GiB fails in the child instead of in the caller.
DEFAULT_MEMORY_LIMIT_BYTES = 8 * 1024**3
DEFAULT_TIMEOUT_S = 120.0

_MAX_CONFIG_BYTES = 64 * 1024**2  # config.json is read into memory and parsed
_TRIAL_MARK = "@@explain.safe_load@@"

# --------------------------------------------------------------------------- messages

_SAVE_HINT = 'save the model with Keras 3 using model.save("model.keras") and use that file'

NOT_FOUND = "{path}: no such file. To fix: check the path, or " + _SAVE_HINT + "."
IS_DIRECTORY = (
    "{path} is a folder, not a .keras model file. To fix: pass the model file itself; "
    + _SAVE_HINT + "."
)
SAVEDMODEL = (
    "{path} is a TensorFlow SavedModel ({where}), which this tool does not load: a "
    "SavedModel holds a TensorFlow graph that can read files and run operations of its "
    "own. To fix: in a trusted environment, load it with the Keras/TensorFlow version "
    "that wrote it (tf.keras.models.load_model), or rebuild the architecture with Keras 3 "
    'layers and copy the weights, then save it with model.save("model.keras") and use '
    "that file."
)
HDF5 = (
    "{path} is a legacy HDF5 (.h5) Keras model, not a Keras 3 .keras file; HDF5 models "
    "are refused because their loader has fewer safety checks. To fix: in a trusted "
    'environment, run model = keras.saving.load_model("model.h5") and then '
    'model.save("model.keras"), and use the .keras file.'
)
EMPTY_FILE = "{path} is empty (0 bytes). To fix: " + _SAVE_HINT + " (upload it again)."
NOT_A_ZIP = (
    "{path} is not a Keras 3 model: a .keras file is a zip archive (it starts with the "
    "bytes 'PK'), this file starts with {head} ({kind}). To fix: " + _SAVE_HINT + "."
)
CORRUPT_ZIP = (
    "{path} is a damaged zip archive ({reason}). To fix: " + _SAVE_HINT
    + " and copy or upload it again."
)
FILE_TOO_LARGE = (
    "{path} is {size:,} bytes, over the limit of {limit:,} bytes for a model file. "
    "To fix: use a smaller model, or raise max_file_bytes if you trust this file."
)
TOO_MANY_MEMBERS = (
    "{path} holds {count:,} files, over the limit of {limit:,}; a .keras file holds "
    "config.json, metadata.json, model.weights.h5 and possibly assets/. To fix: "
    + _SAVE_HINT + ", or raise max_members if you trust this file."
)
UNCOMPRESSED_TOO_LARGE = (
    "{path} would unpack to {size:,} bytes, over the limit of {limit:,} bytes (a "
    "decompression bomb or an oversized model). To fix: use a smaller model, or raise "
    "max_uncompressed_bytes if you trust this file."
)
UNSAFE_MEMBER = (
    "{path} contains the archive member {name!r}, which {why}; unpacking it could write "
    "outside the extraction folder (zip slip). To fix: " + _SAVE_HINT
    + " instead of editing the archive by hand."
)
MISSING_CONFIG = (
    "{path} is a zip archive but not a Keras 3 model: it has no config.json (it holds "
    "{names}). To fix: " + _SAVE_HINT + "."
)
UNEXPECTED_MEMBERS = (
    "{path} contains files a .keras model does not have: {names} (expected config.json, "
    "metadata.json, model.weights.h5 and assets/). To fix: " + _SAVE_HINT
    + " instead of editing the archive by hand."
)
BAD_CONFIG = (
    "{path}: config.json cannot be read ({reason}). To fix: " + _SAVE_HINT + "."
)
UNSAFE_CONFIG = (
    "{path} was refused before loading: {count} part(s) of its config.json could run "
    "code or read files on this machine:\n{problems}"
)
# One line of UNSAFE_CONFIG's {problems}.  {where} is the path in the config, for
# example "functional > inner_model > layers[2]".
UNSAFE_ITEM = "- at {where}: layer {layer!r} ({class_name}): {why} To fix: {fix}"
TOO_MANY_PARAMS = (
    "{path}: the model is too large: it declares about {params:,} weights (about {gib:.1f} "
    "GiB in float32), over the limit of {limit:,}; largest layers: {largest}. To fix: use a "
    "smaller model, or raise max_params if you trust this file."
)
BAD_WEIGHTS = (
    "{path}: model.weights.h5 {reason}. To fix: " + _SAVE_HINT + "."
)
WEIGHTS_TOO_LARGE = (
    "{path}: model.weights.h5 declares {size:,} bytes of weights, over the limit of "
    "{limit:,} bytes. To fix: use a smaller model, or raise max_uncompressed_bytes if you "
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
ISOLATED_TOO_LARGE = (
    "{path}: the model is too large to load: loading it needed more than {limit} of "
    "memory ({detail}). To fix: use a smaller model, or raise memory_limit_bytes if you "
    "trust this file."
)
ISOLATED_TIMEOUT = (
    "{path}: loading the model took too long (more than {timeout:g} s) and was stopped. "
    "To fix: use a smaller model, or raise timeout_s if you trust this file."
)
ISOLATED_FAILED = (
    "{path}: the trial load in a separate process failed ({detail}). To fix: if the "
    "detail mentions memory, raise memory_limit_bytes (TensorFlow alone needs about 2 GiB "
    "of address space); otherwise check that Keras and TensorFlow import in this "
    "environment."
)

# Why a part of config.json is refused, and how to fix it: (why, fix) pairs.
REASON_LAMBDA = (
    "a Lambda layer stores Python bytecode that would run when the model is loaded or "
    "called.",
    "replace the Lambda by built-in layers (for example keras.layers.Normalization, "
    "Rescaling, Reshape or Concatenate), or do that preprocessing outside the model, "
    "then save it again.",
)
REASON_PY_LAMBDA = (
    "its {field} is a Python lambda (stored bytecode that would run).",
    "use a built-in Keras function by name (for example activation=\"relu\") instead of "
    "a lambda, then save the model again.",
)
REASON_DENIED_CLASS = {
    "TFSMLayer": (
        "a TFSMLayer loads a TensorFlow SavedModel from a path on this machine and runs "
        "its graph.",
        "rebuild this part with built-in Keras layers and save the model again.",
    ),
    "TorchModuleWrapper": (
        "a TorchModuleWrapper holds a pickled PyTorch module (arbitrary code).",
        "rebuild this part with built-in Keras layers and save the model again.",
    ),
    "JaxLayer": (
        "a JaxLayer wraps Python functions that are not part of Keras.",
        "rebuild this part with built-in Keras layers and save the model again.",
    ),
    "FlaxLayer": (
        "a FlaxLayer wraps a Flax module (Python code that is not part of Keras).",
        "rebuild this part with built-in Keras layers and save the model again.",
    ),
}
REASON_MODULE = (
    "its module {module!r} is not part of Keras; loading it would import and run code "
    "from that module.",
    "use built-in Keras layers only, then save the model again.",
)
REASON_NO_MODULE = (
    "it names no module, so Keras would look {class_name!r} up among the custom objects "
    "registered in this process.",
    "use built-in Keras layers only, then save the model again.",
)
REASON_NOT_MODELING = (
    "{module}.{class_name} is a Keras utility, not a part of a model.",
    "use built-in Keras layers only, then save the model again.",
)
REASON_REGISTERED = (
    "it is a custom object registered as {registered!r} (with "
    "@keras.saving.register_keras_serializable); its code is not part of Keras.",
    "rebuild it with built-in Keras layers (custom layers cannot be uploaded), then save "
    "the model again.",
)
REASON_FUNCTION = (
    "its {field} refers to the Python function {module}.{name}, which is not a built-in "
    "Keras function.",
    "use a built-in Keras function by name (for example activation=\"relu\"), then save "
    "the model again.",
)
REASON_VOCAB_FILE = (
    "its vocabulary is the file path {vocabulary!r}, which would be read from this "
    "machine when the model is loaded.",
    "pass the vocabulary as a list (vocabulary=[...]) or call layer.adapt(...) before "
    "saving, so that it is stored inside the .keras file.",
)
REASON_MALFORMED = (
    "this entry is malformed ({detail}).",
    'save the model again with model.save("model.keras") instead of editing config.json.',
)

# --------------------------------------------------------------------------- constants

_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_EXPECTED_MEMBERS = frozenset({"config.json", "metadata.json", "model.weights.h5"})
_WEIGHTS_MEMBER = "model.weights.h5"
_SAVEDMODEL_NAMES = frozenset({"saved_model.pb", "saved_model.pbtxt"})

# Serialized values (tensors, arrays, bytes...) that Keras decodes as data, never as code.
_DATA_CLASSES = frozenset(
    {"__keras_tensor__", "__tensor__", "__numpy__", "__bytes__", "__ellipsis__"}
)
# Keras namespaces whose objects are not parts of a model.
_NON_MODELING_PREFIXES = (
    "keras.utils",
    "keras.config",
    "keras.saving",
    "keras.models.load",
    "keras.src.utils",
    "keras.src.saving",
    "keras.src.export",
    "keras.src.legacy.saving",
    "keras.preprocessing",
)
# Where built-in Keras functions live (activations, initializers...).
_FUNCTION_MODULES = frozenset(
    {"activations", "constraints", "initializers", "losses", "metrics", "optimizers",
     "regularizers", "ops"}
)
_FUNCTION_NAME_DENYLIST = frozenset({"get", "deserialize", "serialize"})
_LOOKUP_CLASSES = frozenset({"StringLookup", "IntegerLookup", "TextVectorization"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ModelFileReport:
    """What :func:`check_model_file` learnt about a file that passed every check."""

    path: Path
    size_bytes: int
    uncompressed_bytes: int
    members: tuple[str, ...]
    estimated_params: int
    weights_bytes: int


def _refuse(template: str, items: list[str] | None = None, **fields) -> UnsafeModelError:
    error = UnsafeModelError(template.format(**fields))
    # Callers that list every problem (``python -m explain check``) read this.
    error.problems = list(items) if items else [str(error)]
    return error


# --------------------------------------------------------------------------- the file


def _sniff_kind(head: bytes) -> str:
    if head.startswith(_EMPTY_ZIP_MAGIC):
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


def _is_hdf5(handle, size: int) -> bool:
    # HDF5 files start with the signature at offset 0 or after a user block of 512,
    # 1024, 2048 ... bytes.
    offset = 0
    while offset + len(_HDF5_MAGIC) <= size and offset <= 1 << 20:
        handle.seek(offset)
        if handle.read(len(_HDF5_MAGIC)) == _HDF5_MAGIC:
            return True
        offset = 512 if offset == 0 else offset * 2
    return False


def _declared_member_count(handle, size: int) -> int:
    """Number of entries from the End Of Central Directory record (zip64 aware).

    Read before ``zipfile`` builds one object per entry, so that a file declaring
    millions of members is refused for the price of a few bytes.
    """
    tail_len = min(size, 22 + 0xFFFF + 20)
    handle.seek(size - tail_len)
    tail = handle.read(tail_len)
    pos = tail.rfind(_EMPTY_ZIP_MAGIC)
    while pos >= 0 and pos + 22 > len(tail):
        pos = tail.rfind(_EMPTY_ZIP_MAGIC, 0, pos)
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
            h5 = h5py.File(spool, "r")
        except Exception as exc:  # noqa: BLE001 - any parse error means "not HDF5"
            raise _refuse(
                BAD_WEIGHTS, path=path_text, reason=f"is not a valid HDF5 file ({_one_line(exc)})"
            ) from None
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

        try:
            with h5:
                h5.visititems_links(visit)
        except Exception as exc:  # noqa: BLE001
            raise _refuse(
                BAD_WEIGHTS, path=path_text, reason=f"cannot be read ({_one_line(exc)})"
            ) from None
    if bad:
        raise _refuse(BAD_WEIGHTS, path=path_text, reason="; ".join(bad[:5]))
    if total > max_bytes:
        raise _refuse(WEIGHTS_TOO_LARGE, path=path_text, size=total, limit=max_bytes)
    return total


def check_model_file(
    path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
    max_params: int | None = DEFAULT_MAX_PARAMS,
    display_name: str | None = None,
) -> ModelFileReport:
    """Check a ``.keras`` file without building the model; raise ``UnsafeModelError``.

    In order: the path is a file (not a folder, not a SavedModel), its size, its magic
    bytes (zip; HDF5 and others refused), the zip's central directory (member count,
    member names, declared uncompressed size, expected members), ``config.json`` (every
    class it names is a built-in Keras class or function, no lambda, no custom object,
    no lookup vocabulary read from a file; all offending entries are listed at once),
    the estimated number of weights (``max_params``; ``None`` disables it) and the HDF5
    metadata of ``model.weights.h5`` (declared sizes, no external links or storage).
    """
    path = Path(path)
    shown = display_name or str(path)
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if p.name in _SAVEDMODEL_NAMES)
        if found:
            raise _refuse(SAVEDMODEL, path=shown, where=f"a folder with {found[0]}")
        raise _refuse(IS_DIRECTORY, path=shown)
    if not path.is_file():
        raise _refuse(NOT_FOUND, path=shown)
    if path.name in _SAVEDMODEL_NAMES:
        raise _refuse(SAVEDMODEL, path=shown, where=f"the graph file {path.name}")
    size = path.stat().st_size
    if size == 0:
        raise _refuse(EMPTY_FILE, path=shown)
    if size > max_file_bytes:
        raise _refuse(FILE_TOO_LARGE, path=shown, size=size, limit=max_file_bytes)

    with open(path, "rb") as handle:
        head = handle.read(16)
        if not head.startswith(_ZIP_MAGIC):
            if _is_hdf5(handle, size):
                raise _refuse(HDF5, path=shown)
            raise _refuse(NOT_A_ZIP, path=shown, head=repr(head[:8]), kind=_sniff_kind(head))
        try:
            count = _declared_member_count(handle, size)
        except zipfile.BadZipFile as exc:
            raise _refuse(CORRUPT_ZIP, path=shown, reason=str(exc)) from None
        if count > max_members:
            raise _refuse(TOO_MANY_MEMBERS, path=shown, count=count, limit=max_members)
        handle.seek(0)
        try:
            zf = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise _refuse(CORRUPT_ZIP, path=shown, reason=_one_line(exc)) from None
        with zf:
            infos = zf.infolist()
            if len(infos) > max_members:
                raise _refuse(TOO_MANY_MEMBERS, path=shown, count=len(infos), limit=max_members)
            names = [info.filename for info in infos]
            seen: set[str] = set()
            for name in names:
                why = _member_problem(name)
                if why is None and name in seen:
                    why = "appears twice"
                if why:
                    raise _refuse(UNSAFE_MEMBER, path=shown, name=name, why=why)
                seen.add(name)
            total = sum(info.file_size for info in infos)
            if total > max_uncompressed_bytes:
                raise _refuse(
                    UNCOMPRESSED_TOO_LARGE, path=shown, size=total, limit=max_uncompressed_bytes
                )
            savedmodel = [n for n in names if PurePosixPath(n).name in _SAVEDMODEL_NAMES]
            if savedmodel:
                raise _refuse(SAVEDMODEL, path=shown, where=f"a zip archive with {savedmodel[0]}")
            if "config.json" not in seen:
                listed = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
                raise _refuse(MISSING_CONFIG, path=shown, names=listed or "nothing")
            unexpected = [
                n for n in names if n not in _EXPECTED_MEMBERS and not n.startswith("assets/")
            ]
            if unexpected:
                listed = ", ".join(repr(n) for n in unexpected[:5])
                if len(unexpected) > 5:
                    listed += f" and {len(unexpected) - 5} more"
                raise _refuse(UNEXPECTED_MEMBERS, path=shown, names=listed)

            config_info = zf.getinfo("config.json")
            if config_info.file_size > _MAX_CONFIG_BYTES:
                raise _refuse(
                    BAD_CONFIG, path=shown,
                    reason=f"it is {config_info.file_size:,} bytes, over {_MAX_CONFIG_BYTES:,}",
                )
            try:
                config = json.loads(zf.read("config.json").decode("utf-8"))
            except RecursionError:
                raise _refuse(BAD_CONFIG, path=shown, reason="it is nested too deeply") from None
            except Exception as exc:  # noqa: BLE001 - bad zip data, bad UTF-8, bad JSON
                raise _refuse(BAD_CONFIG, path=shown, reason=_one_line(exc)) from None
            if not (isinstance(config, dict) and isinstance(config.get("class_name"), str)):
                raise _refuse(BAD_CONFIG, path=shown, reason="it does not describe a Keras object")

            walker = _ConfigWalker()
            try:
                walker.walk_root(config)
            except RecursionError:
                raise _refuse(BAD_CONFIG, path=shown, reason="it is nested too deeply") from None
            if walker.problems:
                raise _refuse(
                    UNSAFE_CONFIG, items=walker.problems, path=shown,
                    count=len(walker.problems), problems="\n".join(walker.problems),
                )
            params = sum(n for _, n in walker.params)
            if max_params is not None and params > max_params:
                largest = sorted(walker.params, key=lambda item: -item[1])[:3]
                raise _refuse(
                    TOO_MANY_PARAMS, path=shown, params=params, gib=params * 4 / 1024**3,
                    limit=max_params,
                    largest=", ".join(f"{label}: {n:,}" for label, n in largest),
                )
            weights_bytes = 0
            if _WEIGHTS_MEMBER in seen:
                weights_bytes = _check_weights(zf, shown, max_uncompressed_bytes)
    return ModelFileReport(
        path=path, size_bytes=size, uncompressed_bytes=total, members=tuple(names),
        estimated_params=params, weights_bytes=weights_bytes,
    )


# --------------------------------------------------------------------------- config.json


def _as_int(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _prod(values) -> int:
    out = 1
    for v in values:
        v = _as_int(v)
        out *= v if v else 1
    return out


def _shape_from_build_config(node: dict):
    build = node.get("build_config")
    if isinstance(build, dict):
        for key in ("input_shape", "query_shape", "shape"):
            shape = build.get(key)
            if isinstance(shape, list) and shape:
                return shape
    return None


def _last_dim(shape) -> int | None:
    if isinstance(shape, list) and shape and not isinstance(shape[0], (list, dict)):
        return _as_int(shape[-1])
    return None


def _inbound_last_dim(node: dict) -> int | None:
    best = None
    for inbound in node.get("inbound_nodes") or []:
        args = inbound.get("args") if isinstance(inbound, dict) else None
        for arg in args or []:
            if isinstance(arg, dict) and arg.get("class_name") == "__keras_tensor__":
                conf = arg.get("config")
                dim = _last_dim(conf.get("shape")) if isinstance(conf, dict) else None
                if dim is not None:
                    best = dim if best is None else max(best, dim)
    return best


def _kernel_volume(cfg: dict) -> int:
    kernel = cfg.get("kernel_size", 1)
    return _prod(kernel if isinstance(kernel, list) else [kernel])


def _estimate_params(class_name: str, cfg: dict, shape) -> int:
    """Weights a layer will allocate when built (best effort; 0 when unknown)."""
    last = _last_dim(shape) or 1
    units = _as_int(cfg.get("units")) or 0
    filters = _as_int(cfg.get("filters")) or 0
    channels_first = cfg.get("data_format") == "channels_first"
    channels = last
    if channels_first and isinstance(shape, list) and len(shape) > 1:
        channels = _as_int(shape[1]) or 1
    if class_name == "Dense":
        return last * units + units
    if class_name == "EinsumDense":
        out = cfg.get("output_shape")
        return last * _prod(out if isinstance(out, list) else [out])
    if class_name in ("LSTM", "LSTMCell"):
        return 4 * units * (last + units + 1)
    if class_name in ("GRU", "GRUCell"):
        return 3 * units * (last + units + 2)
    if class_name in ("SimpleRNN", "SimpleRNNCell"):
        return units * (last + units + 1)
    if class_name.startswith("ConvLSTM"):
        return 4 * filters * (_kernel_volume(cfg) * (channels + filters) + 1)
    if class_name == "Embedding":
        return (_as_int(cfg.get("input_dim")) or 0) * (_as_int(cfg.get("output_dim")) or 0)
    if class_name.startswith("Conv") and class_name[4:6] in ("1D", "2D", "3D"):
        return _kernel_volume(cfg) * channels * filters + filters
    if class_name.startswith("DepthwiseConv"):
        multiplier = _as_int(cfg.get("depth_multiplier")) or 1
        return _kernel_volume(cfg) * channels * multiplier + channels * multiplier
    if class_name.startswith("SeparableConv"):
        multiplier = _as_int(cfg.get("depth_multiplier")) or 1
        depthwise = _kernel_volume(cfg) * channels * multiplier
        return depthwise + channels * multiplier * filters + filters
    if class_name == "MultiHeadAttention":
        heads = _as_int(cfg.get("num_heads")) or 0
        key_dim = _as_int(cfg.get("key_dim")) or 0
        value_dim = _as_int(cfg.get("value_dim")) or key_dim
        return heads * (key_dim * 2 * last + value_dim * 2 * last) + 4 * heads * key_dim
    if class_name in ("BatchNormalization", "LayerNormalization", "Normalization",
                      "GroupNormalization", "RMSNormalization"):
        return 4 * channels
    if class_name == "PReLU" and isinstance(shape, list):
        return _prod(shape[1:])
    return 0


class _ConfigWalker:
    """Walks config.json like Keras' deserializer does, collecting refusals and sizes."""

    def __init__(self):
        self.problems: list[str] = []
        self.params: list[tuple[str, int]] = []

    def walk_root(self, root: dict) -> None:
        conf = root.get("config")
        name = conf.get("name") if isinstance(conf, dict) else None
        # With compile=False Keras drops the top-level compile_config unread.
        self._node(root, (), name if isinstance(name, str) else "model", None, ("model", "?"),
                   skip_keys=("compile_config",))

    # -- helpers
    def _problem(self, where: tuple[str, ...], owner, reason, **fields) -> None:
        why, fix = reason
        self.problems.append(
            UNSAFE_ITEM.format(
                where=" > ".join(where), layer=owner[0], class_name=owner[1],
                why=why.format(**fields), fix=fix.format(**fields),
            )
        )

    def _value(self, value, trail, pos, owner, shape):
        if isinstance(value, dict):
            if "class_name" in value:
                self._node(value, trail, pos, shape, owner)
            else:
                for key, item in value.items():
                    self._value(item, trail, _join(pos, key), owner, shape)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self._value(item, trail, f"{pos}[{i}]", owner, shape)

    def _node(self, node: dict, trail, pos, shape, owner, skip_keys=()) -> None:
        class_name = node.get("class_name")
        where = trail + (pos,)
        conf = node.get("config")
        if not isinstance(class_name, str) or not class_name:
            self._problem(where, owner, REASON_MALFORMED, detail="class_name is not a name")
            return
        if class_name in _DATA_CLASSES:
            return
        field = pos or "value"
        if class_name == "__lambda__":
            self._problem(where, owner, REASON_PY_LAMBDA, field=field)
            return
        if class_name == "__slice__":
            self._value(conf, trail, pos, owner, shape)
            return
        module = node.get("module")
        registered = node.get("registered_name")
        if class_name == "function":
            self._function(node, where, owner, field)
            return
        if class_name == "__typespec__":
            class_name = node.get("spec_name")
            if not isinstance(class_name, str):
                self._problem(where, owner, REASON_MALFORMED, detail="spec_name is not a name")
                return
        name = conf.get("name") if isinstance(conf, dict) else None
        me = (name if isinstance(name, str) else pos, class_name)
        if not _IDENTIFIER.match(class_name):
            self._problem(where, me, REASON_MALFORMED, detail=f"class_name {class_name!r}")
            return
        if registered is not None and registered != class_name:
            self._problem(where, me, REASON_REGISTERED, registered=registered)
            return
        if module is None:
            self._problem(where, me, REASON_NO_MODULE, class_name=class_name)
            return
        if not isinstance(module, str):
            self._problem(where, me, REASON_MALFORMED, detail="module is not a string")
            return
        if module != "keras" and not module.startswith("keras."):
            self._problem(where, me, REASON_MODULE, module=module)
            return
        if class_name == "Lambda":
            self._problem(where, me, REASON_LAMBDA)
            return
        if class_name in REASON_DENIED_CLASS:
            self._problem(where, me, REASON_DENIED_CLASS[class_name])
            return
        if any(module == p or module.startswith(p + ".") for p in _NON_MODELING_PREFIXES):
            self._problem(where, me, REASON_NOT_MODELING, module=module, class_name=class_name)
            return
        if isinstance(conf, dict):
            vocabulary = conf.get("vocabulary")
            if class_name in _LOOKUP_CLASSES and isinstance(vocabulary, str):
                self._problem(where, me, REASON_VOCAB_FILE, vocabulary=vocabulary)
                return
        own_shape = _shape_from_build_config(node)
        if own_shape is None and node.get("inbound_nodes"):
            dim = _inbound_last_dim(node)
            own_shape = [None, dim] if dim is not None else None
        if own_shape is not None:
            shape = own_shape
        if isinstance(conf, dict):
            params = _estimate_params(class_name, conf, shape)
            if params:
                self.params.append((f"{me[0]} ({class_name})", params))
        child_trail = trail + (me[0],)
        for key, value in node.items():
            if key in ("class_name", "module", "registered_name") or key in skip_keys:
                continue
            if key == "config" and isinstance(value, dict):
                for ckey, cvalue in value.items():
                    self._value(cvalue, child_trail, ckey, me, shape)
            else:
                self._value(value, child_trail, key, me, shape)

    def _function(self, node: dict, where, owner, field) -> None:
        module = node.get("module")
        name = node.get("config")
        registered = node.get("registered_name")
        ok = isinstance(name, str) and bool(_IDENTIFIER.match(name))
        ok = ok and name not in _FUNCTION_NAME_DENYLIST
        ok = ok and registered in (None, "function", name)
        if ok and module == "builtins":
            ok = _is_keras_builtin_function(name)
        elif ok and isinstance(module, str) and module.startswith("keras."):
            parts = module.split(".")
            section = parts[2] if parts[1] == "src" and len(parts) > 2 else parts[1]
            ok = section in _FUNCTION_MODULES
        else:
            ok = False
        if not ok:
            self._problem(where, owner, REASON_FUNCTION, field=field, module=module, name=name)


def _join(pos: str, key: str) -> str:
    return f"{pos}.{key}" if pos else key


def _is_keras_builtin_function(name: str) -> bool:
    import keras

    for section in ("activations", "constraints", "initializers", "losses", "metrics",
                    "optimizers", "regularizers"):
        if callable(getattr(getattr(keras, section, None), name, None)):
            return True
    return False


# --------------------------------------------------------------------------- loading


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line (whitespace collapsed, TF's {{node}} noise removed)."""
    text = " ".join(re.sub(r"\{\{.*?\}\}", "", str(exc)).split())
    summary = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return summary if len(summary) <= limit else summary[: limit - 3] + "..."


def _is_memory_error(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError) or "ResourceExhausted" in type(exc).__name__:
            return True
        if "OOM when allocating" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class _KerasPath:
    """A path Keras routes to its zip loader: the file itself, or a .keras link to it."""

    def __init__(self, path: Path):
        self.path = path
        self._tmp: str | None = None

    def __enter__(self) -> str:
        if self.path.suffix == ".keras":
            return str(self.path)
        self._tmp = tempfile.mkdtemp(prefix="explain-safe-load-")
        link = Path(self._tmp, "model.keras")
        try:
            link.symlink_to(self.path.resolve())
        except OSError:
            shutil.copyfile(self.path, link)
        return str(link)

    def __exit__(self, *exc_info) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def load_model(
    path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
    max_params: int | None = DEFAULT_MAX_PARAMS,
    display_name: str | None = None,
):
    """Open a Keras 3 ``.keras`` file safely and return the ``keras.Model``.

    Runs :func:`check_model_file` (nothing of the file runs before it passes), then
    ``keras.saving.load_model(path, safe_mode=True, compile=False)``.  Any failure is an
    ``UnsafeModelError`` naming the file (``display_name`` if given, for uploads saved
    under a temporary name), what is wrong and how to fix it.  The model is built in
    this process: for files from untrusted users prefer :func:`load_model_isolated`.
    """
    path = Path(path)
    shown = display_name or str(path)
    check_model_file(
        path, max_file_bytes=max_file_bytes, max_uncompressed_bytes=max_uncompressed_bytes,
        max_members=max_members, max_params=max_params, display_name=display_name,
    )
    import keras

    try:
        with _KerasPath(path) as keras_path:
            return keras.saving.load_model(keras_path, safe_mode=True, compile=False)
    except Exception as exc:  # noqa: BLE001 - every Keras failure becomes one message
        template = LOAD_OUT_OF_MEMORY if _is_memory_error(exc) else LOAD_FAILED
        raise _refuse(template, path=shown, error=_one_line(exc)) from exc


# The trial load: a fresh interpreter that runs _trial_main from this module, capped before it
# imports anything heavy (importing ``explain`` and this module pulls in only the standard
# library: the package's names are imported lazily). It loads with Keras only (the parent
# already ran the static checks) and reports one JSON line per stage.
_TRIAL_CODE = ("import sys; sys.path.insert(0, sys.argv[1]); "
               "from explain.safe_load import _trial_main; _trial_main(sys.argv[2:])")
_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)


def _trial_main(argv: list[str]) -> None:
    """The child of :func:`load_model_isolated`: argv = [keras path, memory limit (bytes), mark].

    Reports on stdout, one ``mark + JSON`` line per stage: ``imported`` once Keras is, then
    ``ok``, ``error``, ``memory`` or ``import-failed`` with a one-line detail.
    """
    import resource

    keras_path, limit, mark = argv[0], int(argv[1]), argv[2]

    def say(status: str, detail: str = "", end: bool = True) -> None:
        sys.stdout.write("\n" + mark + json.dumps({"status": status, "detail": detail}) + "\n")
        sys.stdout.flush()
        if end:
            os._exit(0)

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        import keras
    except BaseException as exc:  # noqa: BLE001 - reported, the child ends
        say("import-failed", _one_line(exc))
    say("imported", end=False)
    try:
        keras.saving.load_model(keras_path, safe_mode=True, compile=False)
    except BaseException as exc:  # noqa: BLE001 - reported, the child ends
        say("memory" if _is_memory_error(exc) else "error", _one_line(exc))
    say("ok")

_MEMORY_MARKERS = ("bad_alloc", "ResourceExhausted", "MemoryError", "OOM when allocating",
                   "Cannot allocate memory", "out of memory", "pthread_create")


def _stderr_summary(stderr: str) -> str:
    """The most telling line of a dead child's stderr (an assertion, an error...)."""
    lines = [ln.strip() for ln in stderr.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("@")]  # skip stack frames
    for key in ("Check failed", "what():", "terminate called", "Error", "error"):
        for line in lines:
            if key in line:
                return line[:200]
    return lines[-1][:200] if lines else ""


def _trial_env() -> dict[str, str]:
    env = dict(os.environ)
    # Fewer threads and malloc arenas: a smaller, more predictable address space.
    env.update({
        "MALLOC_ARENA_MAX": "2", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": env.get("KERAS_BACKEND", "tensorflow"),
        # The oneDNN allocator retries a failed allocation for 10 s; the plain one fails
        # at once.  The child only checks that the model loads, so numerics do not matter.
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    return env


def _human_bytes(n: int) -> str:
    if n >= 1024**3:
        return f"{n / 1024**3:g} GiB"
    return f"{n / 1024**2:g} MiB"


def load_model_isolated(
    path,
    *,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
    max_params: int | None = DEFAULT_MAX_PARAMS,
    display_name: str | None = None,
):
    """Load an untrusted ``.keras`` file without risking this process's memory.

    1. :func:`check_model_file` in this process (fast; refuses code, custom objects,
       bombs and, from config.json, models over ``max_params`` weights).
    2. A trial ``keras.saving.load_model`` in a child process (``python -c``) whose
       address space is capped at ``memory_limit_bytes`` (``RLIMIT_AS``; TensorFlow alone
       needs about 2 GiB) and which is killed after ``timeout_s`` seconds.  Running out
       of memory there raises ``UnsafeModelError`` (ISOLATED_TOO_LARGE), a timeout
       ISOLATED_TIMEOUT.  This backstops what the estimate cannot see.
       ``memory_limit_bytes=0`` runs the child without a memory cap.
    3. :func:`load_model` in this process, returning the ``keras.Model``.

    POSIX only (``resource``).  The child costs one TensorFlow import (several seconds).
    """
    path = Path(path)
    shown = display_name or str(path)
    caps = dict(
        max_file_bytes=max_file_bytes, max_uncompressed_bytes=max_uncompressed_bytes,
        max_members=max_members, max_params=max_params, display_name=display_name,
    )
    check_model_file(path, **caps)

    workdir = tempfile.mkdtemp(prefix="explain-trial-load-")
    try:
        with _KerasPath(path) as keras_path:
            proc = subprocess.Popen(
                [sys.executable, "-c", _TRIAL_CODE, _PROJECT_ROOT, keras_path, str(int(memory_limit_bytes)),
                 _TRIAL_MARK],
                cwd=workdir, env=_trial_env(), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            )
            try:
                out, err = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    proc.kill()
                proc.communicate()
                raise _refuse(ISOLATED_TIMEOUT, path=shown, timeout=float(timeout_s)) from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace")
    result: dict = {}
    for line in reversed(stdout.splitlines()):
        if line.startswith(_TRIAL_MARK):
            try:
                result = json.loads(line[len(_TRIAL_MARK):])
            except ValueError:
                result = {}
            break
    limit_text = _human_bytes(int(memory_limit_bytes))
    if result.get("status") in (None, "imported"):
        # Died without reporting: killed, aborted (std::bad_alloc, a failed thread
        # creation) or crashed.  Under RLIMIT_AS that is nearly always memory.
        code = proc.returncode
        how = f"exit status {code}" if code >= 0 else f"killed by signal {_signal_name(-code)}"
        detail = f"{how}: {_stderr_summary(stderr)}".rstrip(": ")
        memory = code == -signal.SIGKILL or any(m in stderr for m in _MEMORY_MARKERS)
        if result.get("status") == "imported" and (memory or code < 0):
            raise _refuse(ISOLATED_TOO_LARGE, path=shown, limit=limit_text, detail=detail)
        if not result:
            detail = f"it died before Keras was imported, {detail}"
        raise _refuse(ISOLATED_FAILED, path=shown, detail=detail)
    status, detail = result.get("status"), str(result.get("detail", ""))
    if status == "memory":
        raise _refuse(ISOLATED_TOO_LARGE, path=shown, limit=limit_text, detail=detail)
    if status == "import-failed":
        raise _refuse(ISOLATED_FAILED, path=shown,
                      detail=f"Keras did not import under a {limit_text} limit: {detail}")
    if status == "error":
        raise _refuse(LOAD_FAILED, path=shown, error=detail)
    return load_model(path, **caps)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)

