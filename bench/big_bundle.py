"""Real-size bundles (issue 26): open, check and explain one customer of 20,000 customers x 365 days.

    python bench/big_bundle.py                          # 20,000 x 365 x 24 (+40 static), in a temporary folder
    python bench/big_bundle.py --customers 2000         # smaller, quicker
    python bench/big_bundle.py --keep DIR               # keep (or reuse) the generated bundle in DIR
    python bench/big_bundle.py --old-ref REF            # the long-format path to compare with (default 4fe7236)

The bundle is what ``save_bundle`` writes: the model, ``bundle.json`` and the tables' schemas come from
``save_bundle`` itself on the first customers; the two Parquet tables are then written with those schemas
in chunks of customers (``save_bundle`` on 20,000 x 365 x 24 holds several GB). The temporal table is long
(one row per customer and day, 7.3 million rows), histories start at random days and are padded at the
start with the model's mask value 0. The model is ``Masking(0) -> LSTM(64)`` on the history, ``Dense(32)``
on the 40 static features, concatenated, ``Dense(1, sigmoid)``; seeded and UNTRAINED (training changes
nothing in how a bundle is opened; attribution cost is the same for any weights).

Measured in one run, each step in its own ``python -m explain`` process (time = wall clock, memory = the
process's peak RSS from ``wait4``):

* ``check`` with the code of ``--old-ref`` (default ``4fe7236``, the last commit before issue 26: the pandas
  long-format path, no array cache, so every open is a first open; run from ``git archive REF explain``
  unpacked in a temporary folder; ``--old-ref none`` skips it),
* ``check`` with this tree: first open (the checked arrays are written to the array cache) and second open
  (memory-mapped from the cache), with the table size limits raised (``LIMITS``: the defaults refuse a table
  of 190 million cells),
* ``attribute`` for one customer (64 gauss-legendre steps, mean baseline), old and new (cache warm).

Prints a table with the ratios new / old. Only for this benchmark; no test times anything.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 1000  # customers per Parquet row group written
OLD_REF = "4fe7236"  # the last commit before issue 26: pandas long frames, no array cache
# The default table limits (issue 25: 10 million cells, 256 MiB) refuse a 20,000 x 365 long table (190 million
# cells); the new code runs with them raised, as a user opening a big bundle from the command line would.
LIMITS = ("max_table_cells=2e9", "max_table_bytes=2e10")


def build_model(n_static: int, periods: int, features: int, seed: int):
    """Masking(0) + LSTM(64) on the history, Dense(32) on the static features; untrained, seeded."""
    import keras

    keras.utils.set_random_seed(seed)
    static = keras.Input((n_static,), name="static")
    history = keras.Input((periods, features), name="history")
    h = keras.layers.LSTM(64)(keras.layers.Masking(mask_value=0.0)(history))
    s = keras.layers.Dense(32, activation="relu")(static)
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Concatenate()([s, h]))
    return keras.Model([static, history], out)


def customer_block(rng: np.random.Generator, start: int, count: int, periods: int, features: int,
                   n_static: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(ids, static (count, S), temporal (count, T, F)) with histories padded at the start with zeros."""
    ids = [f"C{start + k:07d}" for k in range(count)]
    static = rng.normal(size=(count, n_static))
    temporal = rng.normal(loc=1.0, size=(count, periods, features))
    lengths = rng.integers(periods // 10, periods + 1, size=count)
    temporal[np.arange(periods)[None, :] < (periods - lengths)[:, None]] = 0.0  # padding: the mask value
    return ids, static, temporal


def generate(folder: Path, customers: int, periods: int, features: int, n_static: int, seed: int) -> None:
    """The bundle in ``folder``: save_bundle on the first customers, then the full tables in its schemas."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from explain.bundle.save import save_bundle

    rng = np.random.default_rng(seed)
    days = np.datetime64("2024-01-01") + np.arange(periods)
    period_labels = [str(d) for d in days]
    model = build_model(n_static, periods, features, seed)
    ids, static, temporal = customer_block(rng, 0, min(CHUNK, customers), periods, features, n_static)
    save_bundle(folder, model, static, temporal, ids=ids, periods=period_labels,
                static_features=[f"s{j:02d}" for j in range(n_static)],
                temporal_features=[f"daily_{j:02d}" for j in range(features)], overwrite=True)
    schemas = {name: pq.read_schema(folder / f"{name}.parquet") for name in ("static", "temporal")}
    config = json.loads((folder / "bundle.json").read_text())
    writers = {name: pq.ParquetWriter(folder / f"{name}.parquet.part", schema) for name, schema in schemas.items()}
    try:
        for start in range(0, customers, CHUNK):
            count = min(CHUNK, customers - start)
            if start:
                ids, static, temporal = customer_block(rng, start, count, periods, features, n_static)
            columns = {"customer_id": pa.array(ids, pa.string()),
                       **{c: static[:, j] for j, c in enumerate(config["static_features"])}}
            writers["static"].write_table(pa.table(columns, schema=schemas["static"]))
            long = temporal.reshape(count * periods, features)  # (customers * periods, F)
            columns = {"customer_id": pa.array(np.repeat(ids, periods), pa.string()),
                       "period": pa.array(np.tile(period_labels, count), pa.string()),
                       **{c: long[:, j] for j, c in enumerate(config["temporal_features"])}}
            writers["temporal"].write_table(pa.table(columns, schema=schemas["temporal"]))
    finally:
        for writer in writers.values():
            writer.close()
    for name in schemas:
        os.replace(folder / f"{name}.parquet.part", folder / f"{name}.parquet")


def run_measured(command: list[str], cwd: Path, env: dict) -> tuple[float, float, str]:
    """(seconds, peak RSS in GB, output) of one process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if process.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{text[-3000:]}")
    return seconds, usage.ru_maxrss / 2**20, text


def old_tree(ref: str, into: Path) -> Path:
    """``explain/`` of git ref ``ref`` unpacked into ``into`` (the code path to compare with)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "explain"], check=True, capture_output=True)
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--customers", type=int, default=20_000)
    parser.add_argument("--periods", type=int, default=365)
    parser.add_argument("--features", type=int, default=24)
    parser.add_argument("--static", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="generate into (or reuse) this folder and keep it")
    parser.add_argument("--old-ref", default=OLD_REF,
                        help=f"git ref of the long-format code path to compare with (default {OLD_REF}; none: skip)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="big-bundle-"))
    folder = args.keep or work / "bundle"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    try:
        if not (folder / "temporal.parquet").is_file():
            start = time.perf_counter()
            generate(folder, args.customers, args.periods, args.features, args.static, args.seed)
            print(f"generated {folder} in {time.perf_counter() - start:.0f} s")
        size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 2**30
        print(f"bundle: {args.customers:,} customers x {args.periods} periods x {args.features} features "
              f"+ {args.static} static; {size:.2f} GB on disk; model Masking(0)+LSTM(64), untrained")
        ids = f"C{args.customers // 2:07d}"
        check = [sys.executable, "-m", "explain", "check", "--bundle", str(folder)]
        attribute = [sys.executable, "-m", "explain", "attribute", "--bundle", str(folder), "--customer", ids,
                     "--baseline", "mean", "--steps", "64", "--out", str(work / "one.json")]
        limits = [word for field in LIMITS for word in ("--limit", field)]  # the new code's size limits, raised
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
        rows = []
        old = None
        if args.old_ref.lower() != "none":
            old_dir = old_tree(args.old_ref, work / "old")  # run from there: `python -m explain` imports it
            old_env = dict(env, PYTHONPATH=str(old_dir))
            old = {"check": run_measured(check, old_dir, old_env),
                   "attribute": run_measured(attribute, old_dir, old_env)}
        from explain.bundle.cache import places

        for place in places(folder):
            shutil.rmtree(place, ignore_errors=True)
        new = {"check (first open)": run_measured(check + limits, work, env),
               "check (second open)": run_measured(check + limits, work, env),
               "attribute (cached)": run_measured(attribute + limits, work, env)}
        print(f"{'step':<24}{'time s':>9}{'peak GB':>9}{'old s':>9}{'old GB':>9}{'time x':>9}{'memory x':>9}")
        for step, (seconds, peak, _) in new.items():
            line = f"{step:<24}{seconds:>9.1f}{peak:>9.2f}"
            if old is not None:
                old_seconds, old_peak, _ = old[step.split(" ")[0]]
                line += (f"{old_seconds:>9.1f}{old_peak:>9.2f}{seconds / old_seconds:>9.2f}"
                         f"{peak / old_peak:>9.2f}")
            rows.append(line)
        print("\n".join(rows))
        print(f"load average {os.getloadavg()[0]:.1f} at the end; time x, memory x: new / old")
        print("check says:", new["check (second open)"][2].strip().splitlines()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
