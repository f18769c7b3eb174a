"""The array cache: a big bundle's checked arrays, written once, memory-mapped on every later open.

The first open of a bundle whose tables take at least ``MIN_BYTES`` on disk writes what the table checks
produced -- every model input's array, the customer ids, the labels, the period labels, the feature columns
and the notes -- as ``.npy`` files with a manifest, into ``<bundle>/.explain-cache``, or, when the bundle's
folder cannot be written, into ``$XDG_CACHE_HOME/explain/<hash of the folder's path>`` (``~/.cache/explain``
by default). A later open (:func:`read`) checks that the bundle's files are the ones the cache was built
from: the same names (and the same alternatives absent: a ``static.parquet`` added next to ``static.csv``
counts), each with the same size, modification time, change time and inode, or else the same sha256
content hash; then it verifies every cache file's size and CRC-32 and memory-maps the arrays
(``numpy.load(mmap_mode="r")``). The tables are not read at all, and memory holds the rows a command uses.

A changed, added or removed bundle file makes the cache stale; a damaged one (a file missing, cut or
altered, a manifest that does not add up) is never trusted: either way the loader checks the tables again
and writes a new cache. A cache serves only opens whose table size limits (``explain.modelfile.limits``) are
as loose as the ones it was built under: stricter limits measure the tables again. Written atomically: a
temporary folder renamed into place. The cache format is versioned (``FORMAT``): a cache from another
version of the loader is rebuilt.
``EXPLAIN_ARRAY_CACHE=off`` turns the cache off.

A bundle of the array layout (:mod:`explain.bundle.arrays`) holds its histories as ``.npy`` files already: the
cache copies none of them; its manifest names the bundle's own file for each (``bundle_file``), and a later open
maps that file once ``_fresh`` found every bundle file unchanged. The cache then records that the files were
checked (the one full read of the values) and holds the small arrays (ids, static values, labels).

The manifest also keeps the data-wide mean of every numeric input's features (``statistics``: over every customer
and real period, the mean baseline's reference), computed where the values are read anyway: by the array layout's
one read of every value, or, for the long layout, from the checked arrays before the cache is written
(:func:`statistics`). The mean baseline then takes them (``explain.core.baselines.stored_statistic``) and no later
process reads a whole memory-mapped history for it. They are covered by the manifest's checksum like the rest;
JSON keeps a float64 exactly.

Every customer's model output (the dashboard's risk ranking and customer box need them all: 20,000 customers of
365 days through an LSTM take tens of seconds) is kept beside a cache once computed (:func:`write_scores`,
``scores.npy`` with its content hash, size and CRC-32 in ``scores.json``), and read back by any later process of the
same bundle content (:func:`read_scores`); only where an array cache of that content is, never for small bundles.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from explain.core.baselines import feature_statistic
from explain.core.files import make_readable, user_cache, write_atomic

CACHE_DIR = ".explain-cache"
# bump FORMAT when the checks produce other arrays or notes from the same files (5: bundle.json "groups" is
# checked; a cache of 4 kept the note that called it an unknown key)
FORMAT = 5
MIN_BYTES = 16 << 20     # tables smaller than this open in well under a second: no cache
ENVIRONMENT = "EXPLAIN_ARRAY_CACHE"
PIECE = 1 << 24          # bytes read at a time for hashes and checksums
MANIFEST = "manifest.json"
SCORES, SCORES_META = "scores.npy", "scores.json"


@dataclass
class Checked:
    """What the table checks of a bundle produced: enough to assemble its ``Bundle`` again without the tables."""

    ids: np.ndarray                      # (n,) object: customer ids as text
    arrays: dict                         # every model input's array by the engine's key
    labels: np.ndarray | None
    periods: dict                        # temporal key -> period labels
    features: dict                       # engine key -> table columns
    notes: list
    content_hash: str
    mapped: dict = field(default_factory=dict)  # key -> the bundle's own .npy file holding that array (array layout)
    statistics: dict = field(default_factory=dict)  # key -> {"mean": (F,) float64, "mask_value": value or None}


@dataclass
class Sources:
    """The bundle files the arrays come from, in content-hash order, and the names that must stay absent."""

    used: list                           # model, static table, temporal table(s), bundle.json when present
    absent: list                         # the other table format of each table, model.keras beside model.h5, ...


def enabled() -> bool:
    return os.environ.get(ENVIRONMENT, "on").strip().lower() not in ("0", "off", "no", "false")


def content_hash(folder: Path, names: list[str]) -> str:
    """sha256 of the files' bytes one after the other (the bundle's content hash), a piece at a time."""
    digest = hashlib.sha256()
    for name in names:
        with open(folder / name, "rb") as handle:
            while piece := handle.read(PIECE):
                digest.update(piece)
    return digest.hexdigest()


def places(folder: Path) -> list[Path]:
    """Where a bundle's cache may be: in its folder, then in the user's cache directory."""
    base = user_cache()
    key = hashlib.sha256(str(folder.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return [folder / CACHE_DIR, base / key]


def read(folder: Path, limits: dict | None = None) -> Checked | None:
    """The bundle's cached arrays (memory-mapped), or None: no cache, off, stale or damaged, or built under
    looser table ``limits`` ({name: value or None for no limit}) than these (then the tables are measured)."""
    if not enabled():
        return None
    for place in places(folder):
        try:
            found = _open(place, folder, limits or {})
        except (KeyError, TypeError, ValueError, AttributeError):  # a manifest of another shape: not trusted
            found = None
        if found is not None:
            return found
    return None


def _open(place: Path, folder: Path, limits: dict) -> Checked | None:
    manifest = _manifest(place)
    if manifest is None or manifest.get("format") != FORMAT or not _within(manifest["limits"], limits) \
            or not _fresh(folder, manifest):
        return None
    arrays = _arrays(place, manifest["arrays"], folder)
    if arrays is None:
        return None
    labels = arrays.pop("labels", None)
    if labels is not None:  # small: in memory, as the loader made them
        labels = np.array(labels, dtype=object if manifest["labels_are_text"] else labels.dtype)
    inputs = {key: arrays[f"input:{key}"] for key in manifest["inputs"]}
    statistics = {key: {"mean": np.array(entry["mean"], np.float64), "mask_value": entry["mask_value"]}
                  for key, entry in manifest["statistics"].items()}
    return Checked(ids=np.asarray(arrays["ids"]).astype(object), arrays=inputs, labels=labels,
                   periods=manifest["periods"], features=manifest["features"], notes=manifest["notes"],
                   content_hash=manifest["content_hash"], statistics=statistics)


def worth_writing(folder: Path, used: list[str]) -> bool:
    """Whether :func:`write` will try to write a cache for a bundle of these files (on, tables big enough)."""
    return enabled() and sum((folder / name).stat().st_size for name in used) >= MIN_BYTES


def statistics(layout, arrays: dict, known: dict | None = None) -> dict:
    """``known`` and the mean of every other numeric input's features in ``arrays`` (float arrays; static ones
    over customers, histories over customers and real periods, as the mean baseline takes them)."""
    out = dict(known or {})
    for spec in layout.specs:
        values = arrays.get(spec.key)
        if spec.kind != "numeric" or spec.key in out or values is None or np.asarray(values).dtype.kind != "f":
            continue
        mask_value = None if spec.role == "static" else spec.mask_value
        out[spec.key] = {"mean": feature_statistic(values, "mean", mask_value), "mask_value": mask_value}
    return out


def write(folder: Path, sources: Sources, checked: Checked, limits: dict | None = None) -> Path | None:
    """Write the cache of a bundle that has just been checked under the table ``limits``; where it went, or None
    (off, small tables, texts that cannot be memory-mapped, or no place that can be written: the bundle opens the
    same, only slower)."""
    if not worth_writing(folder, sources.used):
        return None
    if any(np.asarray(a).dtype == object for a in checked.arrays.values()):
        return None
    arrays = {"ids": np.asarray(checked.ids, dtype=str),
              **{f"input:{key}": value for key, value in checked.arrays.items() if key not in checked.mapped}}
    bundle_files = {f"input:{key}": {"bundle_file": name, "dtype": str(checked.arrays[key].dtype),
                                     "shape": list(checked.arrays[key].shape)} for key, name in checked.mapped.items()}
    if checked.labels is not None:
        arrays["labels"] = (np.asarray(checked.labels, dtype=str) if checked.labels.dtype == object
                            else checked.labels)
    manifest = {"format": FORMAT, "content_hash": checked.content_hash, "limits": dict(limits or {}),
                "files": [_stat(folder, name) for name in sources.used], "absent": list(sources.absent),
                "inputs": list(checked.arrays), "labels_are_text": bool(
                    checked.labels is not None and checked.labels.dtype == object),
                "periods": {k: list(v) for k, v in checked.periods.items()},
                "features": {k: list(v) for k, v in checked.features.items()}, "notes": list(checked.notes),
                "statistics": {k: {"mean": [float(x) for x in v["mean"]],
                                   "mask_value": None if v["mask_value"] is None else float(v["mask_value"])}
                               for k, v in checked.statistics.items()}}
    for place in places(folder):
        try:
            _write_at(place, arrays, manifest, bundle_files)
            return place
        except OSError:  # read-only folder, disk full, a race with another writer: try the next place
            continue
    return None


# ---- reading --------------------------------------------------------------------------------------------

def _manifest(place: Path) -> dict | None:
    """The manifest, if it is there and its own checksum adds up."""
    try:
        data = json.loads((place / MANIFEST).read_text(encoding="utf-8"))
        stored = data.pop("checksum")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return data if stored == _checksum(data) else None


def _within(built: dict, now: dict) -> bool:
    """Tables that passed the limits ``built`` pass ``now``: every limit now is as loose (None: no limit)."""
    return all(now.get(name) is None or (limit is not None and limit <= now[name]) for name, limit in built.items()) \
        and set(now) <= set(built)


def _fresh(folder: Path, manifest: dict) -> bool:
    """The bundle's files are the ones the cache was built from."""
    if any((folder / name).exists() for name in manifest["absent"]):
        return False
    names = [entry["name"] for entry in manifest["files"]]
    try:
        now = [_stat(folder, name) for name in names]
    except OSError:
        return False
    if now == manifest["files"]:
        return True
    return content_hash(folder, names) == manifest["content_hash"]  # copied or touched: the same bytes?


def _arrays(place: Path, entries: dict, folder: Path) -> dict | None:
    """Every array memory-mapped, after its file's size and CRC-32 are verified; None if any is damaged. An
    array-layout bundle's histories are mapped from the bundle's own files (``_fresh`` found them unchanged)."""
    out = {}
    for key, entry in entries.items():
        own = "bundle_file" in entry
        path = folder / entry["bundle_file"] if own else place / entry["file"]
        if own and Path(entry["bundle_file"]).name != entry["bundle_file"]:
            return None
        try:
            if not own and (path.stat().st_size != entry["size"] or _crc32(path) != entry["crc32"]):
                return None
            value = np.load(path, mmap_mode="r" if entry["shape"] and np.prod(entry["shape"]) else None,
                            allow_pickle=False)
        except (OSError, ValueError):
            return None
        if str(value.dtype) != entry["dtype"] or list(value.shape) != entry["shape"]:
            return None
        out[key] = value
    return out


# ---- writing --------------------------------------------------------------------------------------------

def _write_at(place: Path, arrays: dict, manifest: dict, bundle_files: dict | None = None) -> None:
    place.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(place.parent, os.W_OK):
        raise PermissionError(f"{place.parent} is not writable")
    staging = Path(tempfile.mkdtemp(prefix=f"{CACHE_DIR}.writing-", dir=place.parent))
    if place.name == CACHE_DIR:
        make_readable(staging)  # 0777 minus the umask, as mkdir would (the user cache stays private)
    old = None
    try:
        entries = {}
        for k, (key, value) in enumerate(arrays.items()):
            name = f"a{k}.npy"
            np.save(staging / name, value, allow_pickle=False)
            entries[key] = {"file": name, "dtype": str(value.dtype), "shape": list(value.shape),
                            "size": (staging / name).stat().st_size, "crc32": _crc32(staging / name)}
        manifest = {**manifest, "arrays": {**entries, **(bundle_files or {})}}
        (staging / MANIFEST).write_text(json.dumps({**manifest, "checksum": _checksum(manifest)}), encoding="utf-8")
        if place.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{CACHE_DIR}.old-", dir=place.parent))
            os.replace(place, old / "cache")
        os.replace(staging, place)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _stat(folder: Path, name: str) -> dict:
    """One file of the bundle as the manifest records it: ``name`` relative to ``folder`` (a SavedModel's files are
    under savedmodel/), its size, times and inode."""
    st = (folder / name).stat()
    return {"name": str(name), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino}


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while piece := handle.read(PIECE):
            crc = zlib.crc32(piece, crc)
    return crc


def _checksum(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()


# ---- every customer's scores ------------------------------------------------------------------------------

def _current(folder: Path, content: str) -> list[Path]:
    """The cache places of ``folder`` whose (checksummed) manifest is of this bundle content."""
    found = []
    for place in places(folder):
        manifest = _manifest(place)
        if manifest is not None and manifest.get("format") == FORMAT and manifest.get("content_hash") == content:
            found.append(place)
    return found


def read_kept(folder: Path | None, content: str, name: str, key: dict) -> object | None:
    """What :func:`write_kept` kept under ``name`` for this bundle content and this ``key`` (the settings it was
    made with), or None (nothing kept, another content or key, unreadable)."""
    if folder is None or not content or not enabled():
        return None
    for place in _current(Path(folder), content):
        try:
            kept = json.loads((place / f"kept-{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(kept, dict) and kept.get("content_hash") == content and kept.get("key") == key:
            return kept.get("value")
    return None


def write_kept(folder: Path | None, content: str, name: str, key: dict, value) -> Path | None:
    """Keep a small JSON ``value`` (a result derived from the bundle's arrays, such as its feature groups) beside
    the array cache of this bundle content, with the ``key`` it was made with; where, or None (no such cache)."""
    if folder is None or not content or not enabled():
        return None
    text = json.dumps({"content_hash": content, "key": key, "value": value})
    for place in _current(Path(folder), content):
        try:
            write_atomic(place / f"kept-{name}.json", lambda temporary: temporary.write_text(text, encoding="utf-8"))
            return place
        except OSError:
            continue
    return None


def holds(folder: Path | None, content: str) -> bool:
    """Whether an array cache of this bundle content is there, beside which scores can be kept."""
    return folder is not None and bool(content) and enabled() and bool(_current(Path(folder), content))


def read_scores(folder: Path | None, content: str, shape: tuple) -> np.ndarray | None:
    """The model outputs (n, K) of every customer of the bundle content ``content``, stored by :func:`write_scores`,
    or None (none stored, another content, another shape, or damaged: a file that does not match its CRC-32)."""
    if folder is None or not content or not enabled():
        return None
    for place in _current(Path(folder), content):
        try:
            meta = json.loads((place / SCORES_META).read_text(encoding="utf-8"))
            path = place / SCORES
            if meta.get("content_hash") != content or path.stat().st_size != meta["size"] \
                    or _crc32(path) != meta["crc32"]:
                continue
            scores = np.load(path, allow_pickle=False)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if scores.shape == tuple(shape) and scores.dtype == np.float64:
            return scores
    return None


def write_scores(folder: Path | None, content: str, scores: np.ndarray) -> Path | None:
    """Keep ``scores`` (n, K) float64 beside the array cache of this bundle content (written atomically: a
    temporary file renamed into place); where, or None (no cache of this content, or no place to write)."""
    if folder is None or not content or not enabled():
        return None
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    for place in _current(Path(folder), content):
        try:
            meta = {"content_hash": content}

            def save(temporary: Path) -> None:
                with open(temporary, "wb") as out:
                    np.save(out, scores, allow_pickle=False)
                meta.update(size=temporary.stat().st_size, crc32=_crc32(temporary))

            write_atomic(place / SCORES, save)  # 0666 minus the umask
            (place / SCORES_META).write_text(json.dumps(meta), encoding="utf-8")
            return place
        except OSError:
            continue
    return None
