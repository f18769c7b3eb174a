"""Real-size bundles (issue 26): open, check and explain one customer, long tables against ``.npy`` arrays.

    python bench/big_bundle.py                          # both parts: 20k in both layouts, then 200k arrays
    python bench/big_bundle.py --part 20k               # 20,000 x 365 x 24 (+40 static), long and arrays
    python bench/big_bundle.py --part 200k              # 200,000 x 365 x 24 in the array layout (7 GB)
    python bench/big_bundle.py --dir /tmp/x --keep      # generate into (or reuse) /tmp/x and keep it
    python bench/big_bundle.py --customers 2000 --big 20000   # smaller, quicker
    python bench/big_bundle.py --old-ref 4fe7236        # also the pandas long-format code before issue 26

The bundles are what ``save_bundle`` writes: the model, ``bundle.json`` and the static table's schema come from
``save_bundle`` itself on the first customers; the tables are then written with those schemas a chunk of
customers at a time (``save_bundle`` on 20,000 x 365 x 24 long holds several GB). Histories start at random days
and are padded at the start with the model's mask value 0. The model is ``Masking(0) -> LSTM(64)`` on the
history, ``Dense(32)`` on the 40 static features, concatenated, ``Dense(1, sigmoid)``; seeded and UNTRAINED
(training changes nothing in how a bundle is opened; attribution cost is the same for any weights).

* **long**: the temporal table in long Parquet (one row per customer and day, 7.3 million rows for 20k).
* **arrays**: the same values (the same seeded generator) as ``temporal.npy`` (``explain.bundle.arrays``),
  written with plain file writes a chunk at a time (the generator never holds more than a chunk).

Measured in one run, each step in its own ``python -m explain`` process (time = wall clock, memory = the
process's peak RSS from ``wait4``): ``check`` on the first open (array cache removed: long reads and checks the
tables, arrays reads every value once), ``check`` on the second open, ``attribute`` for one customer (64
gauss-legendre steps, mean baseline), for each layout, with the ratios arrays / long; and for the 200k bundle,
in one Python process each: open it, then explain one customer (zero and mean baselines), timed apart. The
long layout runs with the table size limits raised (``LIMITS``: the defaults refuse a table of 190 million
cells); the array layout with the default limits. The 200k bundle (7 GB) is deleted at the end unless
``--keep``. Only for this benchmark; no test times anything.
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
sys.path.insert(0, str(ROOT))
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


def _blocks(rng, first: tuple, customers: int, periods: int, features: int, n_static: int):
    """(count, ids, static, temporal) of every chunk of customers, in order: ``first`` (the block already drawn for
    save_bundle), then the next ones drawn from the same seeded generator."""
    for start in range(0, customers, CHUNK):
        count = min(CHUNK, customers - start)
        yield (count, *(first if not start else customer_block(rng, start, count, periods, features, n_static)))


def _static_table(ids, static, names, schema):
    import pyarrow as pa

    return pa.table({"customer_id": pa.array(ids, pa.string()), **{c: static[:, j] for j, c in enumerate(names)}},
                    schema=schema)


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
        for count, ids, static, temporal in _blocks(rng, (ids, static, temporal), customers, periods, features,
                                                    n_static):
            writers["static"].write_table(_static_table(ids, static, config["static_features"], schemas["static"]))
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


def generate_arrays(folder: Path, customers: int, periods: int, features: int, n_static: int, seed: int) -> None:
    """The same customers as :func:`generate` (the same seeded generator) in the array layout: save_bundle on the
    first customers, then the static table and temporal.npy a chunk at a time (plain writes: the page cache holds
    what was written, not this process)."""
    import pyarrow.parquet as pq

    from explain.bundle.save import save_bundle

    rng = np.random.default_rng(seed)
    period_labels = [str(d) for d in np.datetime64("2024-01-01") + np.arange(periods)]
    model = build_model(n_static, periods, features, seed)
    ids, static, temporal = customer_block(rng, 0, min(CHUNK, customers), periods, features, n_static)
    save_bundle(folder, model, static, temporal, ids=ids, periods=period_labels, layout="arrays",
                static_features=[f"s{j:02d}" for j in range(n_static)],
                temporal_features=[f"daily_{j:02d}" for j in range(features)], overwrite=True)
    schema = pq.read_schema(folder / "static.parquet")
    config = json.loads((folder / "bundle.json").read_text())
    shape = (customers, periods, features)
    header = np.lib.format.header_data_from_array_1_0(np.zeros((0,), np.float32))
    header["shape"] = shape
    writer = pq.ParquetWriter(folder / "static.parquet.part", schema)
    with open(folder / "temporal.npy.part", "wb") as npy:
        np.lib.format.write_array_header_1_0(npy, header)
        try:
            names = config["inputs"]["static"]["features"] if "inputs" in config else config["static_features"]
            for count, ids, static, temporal in _blocks(rng, (ids, static, temporal), customers, periods, features,
                                                        n_static):
                writer.write_table(_static_table(ids, static, names, schema))
                npy.write(temporal.astype(np.float32).tobytes())
        finally:
            writer.close()
    config["arrays"]["histories"]["temporal"]["shape"] = list(shape)
    (folder / "bundle.json.part").write_text(json.dumps(config, indent=1))
    for name in ("static.parquet", "temporal.npy", "bundle.json"):
        os.replace(folder / f"{name}.part", folder / name)


def run_measured(command: list[str], cwd: Path, env: dict, ok: tuple = (0, 1)) -> tuple[float, float, str]:
    """(seconds, peak RSS in GB, output) of one process; an exit status outside ``ok`` stops the bench (``check``
    exits 1 when it lists problems, which is a measured run too)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if process.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{text[-3000:]}")
    return seconds, usage.ru_maxrss / 2**20, text


def old_tree(ref: str, into: Path) -> Path:
    """``explain/`` of git ref ``ref`` unpacked into ``into`` (the code path to compare with)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "explain"], check=True, capture_output=True)
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


EXPLAIN_ONE = """
import sys, time
t0 = time.perf_counter()
from explain.analysis.explainer import explain_customers
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
bundle = load_bundle(sys.argv[1])
t1 = time.perf_counter()
a = explain_customers(bundle, [sys.argv[2]], Settings(steps=64, baseline=sys.argv[3]))
t2 = time.perf_counter()
print(f"open {t1 - t0:.2f} s, explain one customer {t2 - t1:.2f} s, prediction {a.prediction[0]:.4f}, "
      f"delta {a.delta[0]:+.1e}, temporal is {type(bundle.temporal).__name__}")
"""


def clear_cache(folder: Path) -> None:
    from explain.bundle.cache import places

    for place in places(folder):
        shutil.rmtree(place, ignore_errors=True)


def steps(folder: Path, customer: str, out: Path, limits: list[str]) -> dict:
    """check (first open), check (second open), attribute one customer: (seconds, peak GB, output) each."""
    check = [sys.executable, "-m", "explain", "check", "--bundle", str(folder), *limits]
    attribute = [sys.executable, "-m", "explain", "attribute", "--bundle", str(folder), "--customer", customer,
                 "--baseline", "mean", "--steps", "64", "--out", str(out), *limits]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    clear_cache(folder)
    return {"check (first open)": run_measured(check, out.parent, env),
            "check (second open)": run_measured(check, out.parent, env),
            "attribute one customer": run_measured(attribute, out.parent, env)}


def size_gb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 2**30


def part_20k(args, work: Path) -> None:
    folders = {"long": work / f"long-{args.customers}", "arrays": work / f"arrays-{args.customers}"}
    for layout, make in (("long", generate), ("arrays", generate_arrays)):
        if not (folders[layout] / "bundle.json").is_file():
            start = time.perf_counter()
            make(folders[layout], args.customers, args.periods, args.features, args.static, args.seed)
            print(f"generated {folders[layout]} in {time.perf_counter() - start:.0f} s")
        print(f"{layout}: {args.customers:,} x {args.periods} x {args.features} + {args.static} static, "
              f"{size_gb(folders[layout]):.2f} GB on disk")
    customer = f"C{args.customers // 2:07d}"
    limits = [word for field in LIMITS for word in ("--limit", field)]
    print(f"machine: {os.cpu_count()} cores; {uptime()}")
    found = {"long": steps(folders["long"], customer, work / "long.json", limits),
             "arrays": steps(folders["arrays"], customer, work / "arrays.json", [])}
    if args.old_ref.lower() != "none":
        old_dir = old_tree(args.old_ref, work / "old")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(old_dir))
        check = [sys.executable, "-m", "explain", "check", "--bundle", str(folders["long"])]
        found["old"] = {"check (first open)": run_measured(check, old_dir, env)}
    print(f"{'step':<26}{'long s':>8}{'long GB':>9}{'arrays s':>10}{'arrays GB':>11}{'time x':>8}{'memory x':>10}")
    for step in found["long"]:
        (ls, lg, _), (as_, ag, _) = found["long"][step], found["arrays"][step]
        print(f"{step:<26}{ls:>8.1f}{lg:>9.2f}{as_:>10.1f}{ag:>11.2f}{as_ / ls:>8.2f}{ag / lg:>10.2f}")
    if "old" in found:
        print("old code ({}): check {:.1f} s, {:.2f} GB".format(args.old_ref, *found["old"]["check (first open)"][:2]))
    same = json.loads((work / "long.json").read_text()) == json.loads((work / "arrays.json").read_text())
    print(f"time x, memory x: arrays / long. The same attributions in both layouts: {same}. {uptime()}")
    said = [line for line in found["arrays"]["check (second open)"][2].splitlines() if line.startswith("Bundle")]
    print("check says (arrays):", said[0] if said else "?")


def part_200k(args, work: Path) -> None:
    folder = work / f"arrays-{args.big}"
    if not (folder / "bundle.json").is_file():
        start = time.perf_counter()
        generate_arrays(folder, args.big, args.periods, args.features, args.static, args.seed)
        print(f"generated {folder} in {time.perf_counter() - start:.0f} s; "
              f"generator peak RSS {resource_peak_gb():.2f} GB")
    print(f"arrays: {args.big:,} x {args.periods} x {args.features} + {args.static} static, "
          f"{size_gb(folder):.2f} GB on disk; machine: {os.cpu_count()} cores; {uptime()}")
    customer = f"C{args.big // 2:07d}"
    found = steps(folder, customer, work / "big.json", [])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    for baseline in ("zero", "mean"):
        found[f"open + explain ({baseline})"] = run_measured(
            [sys.executable, "-c", EXPLAIN_ONE, str(folder), customer, baseline], work, env)
    print(f"{'step':<30}{'time s':>8}{'peak GB':>9}")
    for step, (seconds, peak, text) in found.items():
        said = text.strip().splitlines()[-1] if step.startswith("open") else ""
        print(f"{step:<30}{seconds:>8.1f}{peak:>9.2f}  {said}")
    print(uptime())


def resource_peak_gb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def uptime() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("20k", "200k", "both"), default="both")
    parser.add_argument("--customers", type=int, default=20_000, help="customers of the two-layout part")
    parser.add_argument("--big", type=int, default=200_000, help="customers of the array-only part")
    parser.add_argument("--periods", type=int, default=365)
    parser.add_argument("--features", type=int, default=24)
    parser.add_argument("--static", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, help="generate into (or reuse bundles in) this folder (default: /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the generated bundles")
    parser.add_argument("--old-ref", default="none",
                        help=f"also check with the code of this git ref (e.g. {OLD_REF}, before issue 26)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="big-bundle-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.part in ("20k", "both"):
            part_20k(args, work)
        if args.part in ("200k", "both"):
            part_200k(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
