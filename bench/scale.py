"""How the batch job scales: customers per second and peak memory for 1k, 10k and 100k customers.

    python bench/scale.py                      # 1k, 10k, 100k at 32 steps, chunks of 200
    python bench/scale.py --sizes 1000 5000    # a quicker look
    python bench/scale.py --steps 64 --keep    # keep the generated bundles and outputs
    python bench/scale.py --engine ray --sizes 10000 100000   # local job vs Ray with 1 and 2 workers
    python bench/scale.py --engine ray --sizes 100000 --workers 2   # the local job vs Ray with 2 workers only

Not a test. For each size it writes a generated bundle of the demo's shape to a temporary
folder: the demo's model (not retrained), and demo customers drawn with replacement, their
continuous features jittered (5% of a feature's spread; counts rounded; 0/1 flags kept), under
new ids. Then it runs ``python -m explain batch`` on it in a fresh process and measures:

- job s and customers/s: the batch job itself (as the CLI reports it), without the ~5 s of
  importing TensorFlow and the time to load and validate the bundle (load+import s); it
  includes about 1 s of fixed start-up (tracing the compiled function, the manifest);
- steady c/s and ms/customer: from the first chunk file to the last one (file times);
- peak RSS: the child's ``ru_maxrss`` (``os.wait4``), which includes loading the bundle;
- a data-set-wide baseline (mean, median) is computed once per bundle and reused by every
  chunk (``explainer.baseline_for`` caches it by content hash); ``--baseline zero``
  shows the batch machinery alone;
- RSS at the first and at the last chunk (psutil, sampled every 0.1 s): flat if the job holds
  one chunk at a time.

The 1k run comes first; if it predicts over 15 minutes for the largest size, the steps are
halved until it does not, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "bundles" / "demo"
BUDGET_S = 15 * 60


def cpu_model() -> str:
    """The CPU's name (``/proc/cpuinfo``), or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def generate_bundle(folder: Path, n: int, seed: int = 0) -> Path:
    """A bundle of ``n`` customers of the demo's shape (see the module docstring)."""
    config = json.loads((DEMO / "bundle.json").read_text())
    id_col, period_col = config.get("id_column", "customer_id"), config.get("period_column", "period")
    static = pd.read_csv(DEMO / "static.csv", dtype={id_col: str})
    temporal = pd.read_csv(DEMO / "temporal.csv", dtype={id_col: str, period_col: str})
    temporal = temporal.sort_values([id_col, period_col], kind="stable")
    periods = sorted(temporal[period_col].unique())
    static = static.set_index(id_col)
    demo_ids = static.index.to_numpy()
    t_features = [c for c in temporal.columns if c not in (id_col, period_col)]
    cube = temporal.set_index([id_col, period_col]).loc[:, t_features].to_numpy()
    cube = cube.reshape(len(demo_ids), len(periods), len(t_features))  # sorted ids, periods
    order = {cid: k for k, cid in enumerate(sorted(demo_ids))}

    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(demo_ids), size=n)
    width = len(str(n))
    ids = np.array([f"G{k + 1:0{width + 1}d}" for k in range(n)], dtype=object)

    def jitter(values: np.ndarray) -> np.ndarray:
        values = values.astype(np.float64)
        unique = np.unique(values)
        if len(unique) <= 2:  # flags, labels
            return values
        noisy = values + rng.normal(0.0, 0.05 * values.std(), size=values.shape)
        if np.all(unique == np.round(unique)):
            noisy = np.round(noisy)
        return np.clip(noisy, unique.min(), unique.max())

    picked = static.iloc[rows]
    new_static = pd.DataFrame({id_col: ids})
    label = config.get("label_column")
    for column in static.columns:
        values = picked[column].to_numpy()
        new_static[column] = values if column == label else jitter(values)
    new_cube = cube[[order[cid] for cid in demo_ids[rows]]]
    for j in range(len(t_features)):
        new_cube[:, :, j] = jitter(new_cube[:, :, j])
    new_temporal = pd.DataFrame({id_col: np.repeat(ids, len(periods)),
                                 period_col: np.tile(np.asarray(periods, dtype=object), n)})
    for j, column in enumerate(t_features):
        new_temporal[column] = new_cube[:, :, j].reshape(-1)

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(DEMO / "model.keras", folder / "model.keras")
    shutil.copy2(DEMO / "bundle.json", folder / "bundle.json")
    new_static.to_parquet(folder / "static.parquet", index=False)
    new_temporal.to_parquet(folder / "temporal.parquet", index=False)
    return folder


def run_batch(bundle: Path, out: Path, steps: int, chunk: int, baseline: str = "mean", engine: tuple = ()) -> dict:
    """``python -m explain batch`` in a fresh process: times, peak RSS and sampled RSS (of that
    process: with ``--engine ray`` the driver, whose workers are Ray's)."""
    log = out.parent / f"{out.name}.log"
    command = [sys.executable, "-m", "explain", "batch", "--bundle", str(bundle), "--out", str(out),
               "--steps", str(steps), "--batch-size", str(chunk), "--baseline", baseline, *engine]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    started = time.perf_counter()
    with open(log, "w") as stdout:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=stdout, stderr=subprocess.DEVNULL, env=env)
    watch = psutil.Process(proc.pid)
    samples = []  # (chunks written, rss MiB)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        try:
            rss = watch.memory_info().rss / 2**20
            parts = sum(1 for name in os.listdir(out) if name.startswith("part-")) if out.is_dir() else 0
            samples.append((parts, rss))
        except (psutil.Error, OSError):
            pass
        time.sleep(0.1)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"batch failed ({proc.returncode}): {' '.join(command)}\n{text}")
    job = float(re.search(r"computed \d+.* in ([\d.]+) s", text).group(1))
    chunks = [p for p, _ in samples if p > 0]
    first = next((rss for p, rss in samples if p >= 1), float("nan"))
    last = max((rss for p, rss in samples if chunks and p >= max(chunks)), default=float("nan"))
    size = sum(f.stat().st_size for f in out.rglob("*.parquet")) / 2**20
    # steady rate: from the first chunk file written to the last one (their modification times)
    parts = sorted(out.glob("part-*.parquet"))
    steady = float("nan")
    if len(parts) > 1:
        times = [p.stat().st_mtime for p in parts]  # the Ray engine writes chunks out of order
        span = max(times) - min(times)
        customers = json.loads((out / "_manifest.json").read_text())["customers"]["count"]
        first_chunk = min(customers, chunk)
        steady = (customers - first_chunk) / span if span > 0 else float("nan")
    return {"wall_s": wall, "job_s": job, "steady_customers_per_s": steady, "peak_rss_mib": usage.ru_maxrss / 1024,
            "rss_first_chunk_mib": first, "rss_last_chunk_mib": last, "output_mib": size}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=200, help="customers per chunk (--batch-size)")
    parser.add_argument("--baseline", default="mean",
                        help="baseline (default mean, the CLI's default; 'zero' costs nothing per chunk)")
    parser.add_argument("--keep", action="store_true", help="keep the generated bundles and outputs")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="ray: for each size, the local job and --engine ray with 1 and 2 workers, in one run")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                        help="with --engine ray: the --workers counts to run (default 1 2)")
    args = parser.parse_args()
    if args.engine == "ray":
        return compare_ray(args)

    work = Path(tempfile.mkdtemp(prefix="explain-scale-"))
    steps = args.steps
    sizes = sorted(args.sizes)
    rows = []
    print(f"machine: {cpu_model()}, {platform.machine()}, {os.cpu_count()} cores, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}; baseline {args.baseline}; "
          f"demo-shaped bundles (9 static, 12 periods x 6 temporal), chunks of {args.chunk}, work dir {work}")
    header = (f"{'customers':>9} {'steps':>5} {'chunks':>6} {'load+import s':>13} {'job s':>7} "
              f"{'customers/s':>11} {'steady c/s':>10} {'ms/customer':>11} {'peak RSS MiB':>12} {'RSS 1st chunk':>13} "
              f"{'RSS last chunk':>14} {'output MiB':>10}")
    try:
        for n in sizes:
            bundle = generate_bundle(work / f"bundle-{n}", n, seed=n)
            figures = run_batch(bundle, work / f"out-{n}.parquet", steps, args.chunk, args.baseline)
            rate = n / figures["job_s"]
            if not rows:
                projected = max(sizes) / rate
                print(f"{n} customers: {rate:.0f} customers/s at {steps} steps -> {max(sizes)} customers "
                      f"in about {projected / 60:.1f} min")
                if projected > BUDGET_S:
                    while projected > BUDGET_S and steps > 8:
                        steps //= 2
                        projected /= 2
                    print(f"over {BUDGET_S // 60} min: measuring every size at {steps} steps instead")
                    figures = run_batch(bundle, work / f"out-{n}-again.parquet", steps, args.chunk, args.baseline)
                    rate = n / figures["job_s"]
                print(header)
            row = {"customers": n, "steps": steps, "chunks": -(-n // args.chunk), "customers_per_s": rate,
                   **figures}
            rows.append(row)
            print(f"{n:>9} {steps:>5} {row['chunks']:>6} {figures['wall_s'] - figures['job_s']:>13.1f} "
                  f"{figures['job_s']:>7.1f} {rate:>11.0f} {figures['steady_customers_per_s']:>10.0f} "
                  f"{1000 / figures['steady_customers_per_s']:>11.3f} {figures['peak_rss_mib']:>12.0f} "
                  f"{figures['rss_first_chunk_mib']:>13.0f} {figures['rss_last_chunk_mib']:>14.0f} "
                  f"{figures['output_mib']:>10.1f}", flush=True)
            if not args.keep:
                shutil.rmtree(work / f"out-{n}.parquet", ignore_errors=True)
                shutil.rmtree(work / f"out-{n}-again.parquet", ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(f"cost: x{b['customers'] / a['customers']:.0f} customers -> x{b['job_s'] / a['job_s']:.1f} job time; "
              f"memory: peak RSS x{b['peak_rss_mib'] / a['peak_rss_mib']:.2f}, "
              f"RSS growth from first to last chunk at {b['customers']}: "
              f"{b['rss_last_chunk_mib'] - b['rss_first_chunk_mib']:+.0f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))


def compare_ray(args) -> None:
    """The local job and ``--engine ray --workers N`` (``--workers``, default 1 and 2) on the same
    generated bundles; the driver's RSS at the first and the last chunk shows whether it stays flat."""
    import ray

    work = Path(tempfile.mkdtemp(prefix="explain-scale-ray-"))
    print(f"machine: {cpu_model()}, {platform.machine()}, {os.cpu_count()} cores, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB, "
          f"Python {platform.python_version()}, ray {ray.__version__}, load average {os.getloadavg()[0]:.1f} at the "
          f"start; baseline {args.baseline}, {args.steps} steps, chunks of {args.chunk}; each Ray run starts its own "
          f"local Ray ({os.cpu_count()} CPUs); RSS 1st/last chunk: the driver's, sampled every 0.1 s; "
          "*max RSS: ru_maxrss of the command, the largest of it and the processes it reaped")
    print(f"{'customers':>9} {'engine':>14} {'job s':>7} {'customers/s':>11} {'vs local':>8} {'max RSS MiB*':>15} "
          f"{'RSS 1st chunk':>13} {'RSS last chunk':>14} {'load avg':>8}")
    rows = []
    try:
        for n in sorted(args.sizes):
            bundle = generate_bundle(work / f"bundle-{n}", n, seed=n)
            local_rate = None
            runs = [("local", ())] + [(f"ray, {w} worker{'s' if w > 1 else ''}",
                                       ("--engine", "ray", "--workers", str(w)))
                                      for w in args.workers]
            for name, engine in runs:
                out = work / f"out-{n}-{len(rows)}.parquet"
                figures = run_batch(bundle, out, args.steps, args.chunk, args.baseline, engine)
                rate = n / figures["job_s"]
                local_rate = local_rate or rate
                rows.append({"customers": n, "engine": name, "customers_per_s": rate, **figures})
                print(f"{n:>9} {name:>14} {figures['job_s']:>7.1f} {rate:>11.0f} {rate / local_rate:>8.2f} "
                      f"{figures['peak_rss_mib']:>15.0f} {figures['rss_first_chunk_mib']:>13.0f} "
                      f"{figures['rss_last_chunk_mib']:>14.0f} {os.getloadavg()[0]:>8.1f}", flush=True)
                shutil.rmtree(out, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
