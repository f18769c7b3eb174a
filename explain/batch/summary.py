"""The drivers summary of a store on disk: ``explain.drivers``' result, computed once per store and kept next to it.

``<store>.drivers-<key>.npz`` (:data:`SUMMARY`): the result's numbers and text (:func:`to_parts`; an ``.npz`` of
arrays, its JSON description in the entry :data:`DESCRIPTION`), read without pickle (:func:`from_parts` gives an
equal ``Drivers`` back). ``key``: a digest of what the result depends on (the store's manifest and finishing time,
the earlier store's, the window, the seed, the bundle's content hash and :data:`PARTS_VERSION`). A folder that
cannot be written keeps no summary; a damaged or foreign file reads as None (recomputed and replaced); the
:data:`KEEP_SUMMARIES` most recently written summaries of a store are kept, older ones removed.

Two smaller files are kept the same way (:func:`side_path`: keyed by the store, its manifest and the options):
``<store>.shares-<key>.npz``, a run's bootstrap groups for drivers over runs (:func:`read_sums`,
:func:`write_sums`: (groups, features) numbers, whatever the store's size), and ``<store>.movers-<key>.json``,
the biggest movers of a store of the ``previous`` baseline (:func:`read_json`, :func:`write_json_beside`).
"""

from __future__ import annotations

import glob
import hashlib
import json
import struct
import zipfile
from pathlib import Path

import numpy as np

from explain.analysis.drivers import (
    Drift,
    DriftRow,
    Driver,
    Drivers,
    Feature,
    Group,
    Ranked,
    Segment,
    Sums,
    TimeProfile,
)
from explain.batch.store import Store
from explain.core.files import write_atomic

# 4: segments named by raising, non-negligible effects (a summary of 3 holds the old names);
# 5: a time profile's last share no longer kept (TimeProfile.last_share is its last bar);
# 6: each segment's rows kept in their order (highest risk first), the per-customer arrays mapped on reading
PARTS_VERSION = 6
SUMMARY = "{name}.drivers-{key}.npz"
DESCRIPTION = "described"  # the npz entry holding the JSON description
# per customer (and each segment's "segment<k>_rows"): mapped from the file, not read
MAPPED = ("values", "attributions", "prediction", "segment_of", "outcome")
KEEP_SUMMARIES = 8  # of one store (windows, earlier stores): the most recently written; older ones are removed


def summary_path(bundle, store: Store, earlier: Store | None, window, seed: int) -> Path:
    """Where the summary of ``store`` (against ``earlier``) with these options is kept."""
    def mark(s: Store | None):
        return None if s is None else [str(Path(s.path).resolve()), s.manifest]
    key = json.dumps({"version": PARTS_VERSION, "store": mark(store), "against": mark(earlier), "window": window,
                      "seed": seed, "bundle": getattr(bundle, "content_hash", None)}, sort_keys=True, default=str)
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    folder = Path(store.path)
    return folder.parent / SUMMARY.format(name=folder.name, key=digest)


def side_path(store: Store, kind: str, options: dict, suffix: str) -> Path:
    """Where a smaller result of ``store`` (``kind``: "shares", "movers") with these ``options`` is kept: next to the
    store, keyed by its folder, manifest, the options and :data:`PARTS_VERSION`."""
    key = json.dumps({"version": PARTS_VERSION, "store": [str(Path(store.path).resolve()), store.manifest],
                      **options}, sort_keys=True, default=str)
    folder = Path(store.path)
    return folder.parent / f"{folder.name}.{kind}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]}.{suffix}"


def read_sums(path: Path) -> Sums | None:
    """A run's bootstrap groups kept at ``path`` (:func:`write_sums`), or None (none, or unreadable: recomputed)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return Sums(np.asarray(data["sums"], np.float64), np.asarray(data["counts"], np.float64))
    except (OSError, ValueError, KeyError, EOFError):
        return None


def write_sums(path: Path, sums: Sums) -> bool:
    """Keep a run's bootstrap groups at ``path`` (:func:`side_path` of "shares"; atomically), the store's older ones
    beyond :data:`KEEP_SUMMARIES` removed; False when the folder cannot be written."""
    def save(temporary: Path) -> None:
        with open(temporary, "wb") as out:
            np.savez(out, sums=sums.sums, counts=sums.counts)
    try:
        write_atomic(path, save)
    except OSError:
        return False
    prune_summaries(path, kind="shares")
    return True


def read_json(path: Path) -> dict | None:
    """A JSON document kept next to a store, or None (none, or unreadable: recomputed)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_json_beside(path: Path, document: dict, kind: str) -> bool:
    """Keep ``document`` at ``path`` (:func:`side_path` of ``kind``; atomically), the store's older files of that
    kind beyond :data:`KEEP_SUMMARIES` removed; False when the folder cannot be written."""
    text = json.dumps(document, default=_plain)
    try:
        write_atomic(path, lambda temporary: Path(temporary).write_text(text, encoding="utf-8"))
    except OSError:
        return False
    prune_summaries(path, kind=kind)
    return True


def read_summary(path: Path) -> Drivers | None:
    """The summary at ``path``, or None when there is none or it cannot be read (recomputed). The per-customer
    arrays (:data:`MAPPED`) are mapped from the file, not read: the page touches only the rows its bounded samples
    draw (a 1,000,000-customer summary, 300 MB, opens in a fraction of a second)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            described = json.loads(str(data[DESCRIPTION]))
            if described.get("version") != PARTS_VERSION:  # not read further: recomputed
                raise ValueError(f"a drivers summary of version {described.get('version')!r}, not {PARTS_VERSION}")
            names = [k for k in data.files if k != DESCRIPTION]
            arrays = {k: _mapped(path, data.zip, k) if k in MAPPED or k.endswith("_rows") else None for k in names}
            arrays = {k: data[k] if a is None else a for k, a in arrays.items()}
        return from_parts(arrays, described)
    except (OSError, ValueError, KeyError, TypeError, IndexError, EOFError, struct.error, zipfile.BadZipFile):
        return None


def _mapped(path: Path, archive: zipfile.ZipFile, name: str) -> np.ndarray | None:
    """The array ``name`` of the .npz at ``path`` mapped from the file (copy on write: the file never changes),
    or None when its member is compressed (read instead). ``np.savez`` stores members uncompressed: a member's
    .npy starts after its local header (30 bytes, its name and its extra field)."""
    info = archive.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as file:
        file.seek(info.header_offset)
        local = file.read(30)
        if local[:4] != b"PK\x03\x04":
            raise ValueError(f"{path}: member {name} has no local header")
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        file.seek(info.header_offset + 30 + name_length + extra_length)
        version = np.lib.format.read_magic(file)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = header(file)
        offset = file.tell()
    if dtype.hasobject or offset + dtype.itemsize * int(np.prod(shape)) > info.header_offset + 30 + name_length + \
            extra_length + info.file_size:
        raise ValueError(f"{path}: member {name} is not a plain array of its stated size")
    if 0 in shape:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="c", shape=shape, order="F" if fortran else "C", offset=offset)


def write_summary(path: Path, d: Drivers) -> bool:
    """Write ``d`` to ``path`` (atomically: a temporary file renamed); False when the folder cannot be written."""
    arrays, described = to_parts(d)
    text = json.dumps(described, default=_plain)
    def save(temporary: Path) -> None:
        with open(temporary, "wb") as out:
            np.savez(out, **arrays, **{DESCRIPTION: np.array(text)})

    try:
        write_atomic(path, save)  # 0666 minus the umask, as any file the project writes
    except OSError:
        return False
    prune_summaries(path)
    return True


def prune_summaries(path: Path, keep: int = KEEP_SUMMARIES, kind: str = "drivers") -> list[Path]:
    """Remove the summaries of ``path``'s store beyond the ``keep`` most recently written (``path``
    always stays): each window and earlier store makes one (20-30 MB at 20,000 x 365 x 24), and one
    keyed by a store that was rewritten is never read again. ``kind``: "drivers" (:data:`SUMMARY`), or
    "shares" and "movers" (:func:`side_path`'s files). The files removed."""
    name = path.name.split(f".{kind}-", 1)[0]
    pattern = f"{glob.escape(name)}.{kind}-*{''.join(path.suffixes[-1:])}"
    found = []
    for other in path.parent.glob(pattern):
        try:
            found.append((other.stat().st_mtime_ns, other))
        except OSError:
            continue
    old = [other for _, other in sorted(found, reverse=True) if other != path][max(0, keep - 1):]
    for other in old:
        try:
            other.unlink(missing_ok=True)
        except OSError:  # held open elsewhere (a summary mapped by a running dashboard, on a system that refuses)
            continue
    return old


def _plain(value):
    """numpy scalars as Python numbers (the description's JSON)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def to_parts(d: Drivers) -> tuple[dict, dict]:
    """(numbers: {name: array} of numbers and text only, description: a JSON-able dict) that
    :func:`from_parts` turns back into an equal :class:`Drivers` (what :func:`write_summary` writes)."""
    index = {f: j for j, f in enumerate(d.features)}
    arrays = {"customers": np.asarray(d.customers).astype(str), "prediction": d.prediction, "values": d.values,
              "attributions": d.attributions, "segment_of": d.segment_of}
    if d.outcome is not None:
        arrays["outcome"] = d.outcome
    for k, p in enumerate(d.time_profiles):
        arrays.update({f"profile{k}_mean_abs": p.mean_abs, f"profile{k}_mean_signed": p.mean_signed,
                       f"profile{k}_customers": p.customers})
    for k, s in enumerate(d.segments):
        arrays[f"segment{k}_mean"] = s.mean_attributions
        arrays[f"segment{k}_rows"] = np.asarray(s.rows, np.int64)  # highest risk first: not sorted again on reading
    described = {
        "version": PARTS_VERSION, "features": [[f.name, f.label, f.input, f.role, f.unit] for f in d.features],
        "window": d.window, "sentence": d.sentence, "source": d.source, "baseline": d.baseline,
        "groups": [[g.name, list(g.columns), g.found, g.mean_abs, g.mean_signed, g.share, g.together, g.customers,
                    g.value_effect, g.binary] for g in d.groups],
        "silhouette": [[k, v] for k, v in d.silhouette.items()],
        "ranking": [[index[r.feature], r.mean_abs, r.mean_signed, r.share, r.customers, r.value_effect, r.binary]
                    for r in d.ranking],
        "profiles": [[p.input, list(p.periods), p.recent_periods] for p in d.time_profiles],
        "segments": [[s.name, s.size, s.share, s.mean_prediction, s.churn_rate,
                      [[index[v.feature], v.mean_attribution, v.words, _number(v.segment_value),
                        _number(v.everyone_value), v.measure] for v in s.drivers]] for s in d.segments],
        "drift": None if d.drift is None else {
            "rows": [[index[r.feature], r.before, r.after, r.low, r.high] for r in d.drift.rows],
            "customers": [d.drift.customers_before, d.drift.customers_after], "level": d.drift.level,
            "resamples": d.drift.resamples, "sentence": d.drift.sentence}}
    return arrays, described


def from_parts(arrays: dict, described: dict) -> Drivers:
    """The :class:`Drivers` that :func:`to_parts` gave these parts of."""
    if described.get("version") != PARTS_VERSION:
        raise ValueError(f"a drivers summary of version {described.get('version')!r}, not {PARTS_VERSION}")
    features = tuple(Feature(*f) for f in described["features"])
    customers = np.asarray(arrays["customers"]).astype(object)  # Python str (a segment's ids: one tolist)
    prediction, segment_of = np.asarray(arrays["prediction"]), np.asarray(arrays["segment_of"], np.int64)
    outcome = arrays.get("outcome")
    segments = []
    for k, (name, size, share, mean_prediction, churn, drivers) in enumerate(described["segments"]):
        rows = np.asarray(arrays[f"segment{k}_rows"], np.int64)
        segments.append(Segment(name, size, share, mean_prediction, churn,
                                tuple(Driver(features[j], m, w, _nan(here), _nan(everyone), measure)
                                      for j, m, w, here, everyone, measure in drivers),
                                np.asarray(arrays[f"segment{k}_mean"]), rows, tuple(customers[rows].tolist())))
    profiles = tuple(TimeProfile(key, tuple(periods), np.asarray(arrays[f"profile{k}_mean_abs"]),
                                 np.asarray(arrays[f"profile{k}_mean_signed"]),
                                 np.asarray(arrays[f"profile{k}_customers"]), recent)
                     for k, (key, periods, recent) in enumerate(described["profiles"]))
    change = described["drift"]
    if change is not None:
        change = Drift(tuple(DriftRow(features[j], *numbers) for j, *numbers in change["rows"]), *change["customers"],
                       change["level"], change["resamples"], change["sentence"])
    return Drivers(features=features, customers=customers, prediction=prediction,
                   outcome=None if outcome is None else np.asarray(outcome), values=np.asarray(arrays["values"]),
                   attributions=np.asarray(arrays["attributions"]), window=described["window"],
                   ranking=tuple(Ranked(features[j], *numbers) for j, *numbers in described["ranking"]),
                   sentence=described["sentence"], time_profiles=profiles, segments=tuple(segments),
                   segment_of=segment_of, silhouette={int(k): v for k, v in described["silhouette"]}, drift=change,
                   source=dict(described["source"]), baseline=described["baseline"],
                   groups=tuple(Group(name, tuple(columns), tuple(features[j] for j in columns), found, *numbers)
                                for name, columns, found, *numbers in described["groups"]))


def _nan(value) -> float:
    return float("nan") if value is None else float(value)


def _number(value) -> float | None:
    """A float of the description: None for NaN or infinity (JSON has neither)."""
    return float(value) if np.isfinite(value) else None
