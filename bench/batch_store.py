"""The batch store on long histories (issue 26, items 4 and 5): the long-format store against the compact one.

    python bench/batch_store.py                       # 2,000 customers x 365 days x 24 (+40 static)
    python bench/batch_store.py --customers 20000     # the issue's size (about an hour on 2 cores)
    python bench/batch_store.py --keep DIR            # generate into (or reuse) the bundle in DIR

The bundle is bench/big_bundle.py's (its generator: long Parquet tables as save_bundle writes them, padded
starts, Masking(0) + LSTM(64), untrained). In one run, each step in its own process (peak RSS from wait4):

* batch, 64 Gauss-Legendre steps, mean baseline, chunks of 200, with the code of ``--old-ref`` (default
  a4100d9, the last commit before the compact store: long-format part files, 4096 points per call; run from
  ``git archive REF explain``) and with this tree (compact part files, points per call bounded by the
  history length), each after that code's own ``explain check`` (its array cache: the two codes write caches
  of different formats, and a job finding the other's would rebuild it inside). Customers/s counts the job's
  own time (the bundle opened, settings checked, every chunk computed and written); the time is split into
  the engine (``explain_customers``), the conversion of a chunk's attributions into tables and the writing
  (Parquet + verify), by timers around those functions of ``explain.batch.local`` in the same process;
* the model's own limit: its forward + backward pass (a ``tf.function`` over the same number of points
  per call, ``GradientTape`` of the summed output) over 64 points per customer of 200 customers, as
  bench/benchmark.py's ``limit``, at 4096 and at the batch job's points per call; and the same with the
  calls cut as the engine now cuts them (issue 26 item 5, ``explain.core.cut.Cut``): the customers
  sorted by padding length and each call cut to the periods some row of it has (a clone of the model with
  a free time axis; for Masking + LSTM its output is bit for bit the full one's). The "new" batch job runs
  this tree's engine, which cuts its calls so (its line says whether the cut was on);
* bytes on disk of both stores;
* resume: the compact job killed with SIGKILL after its second chunk is written, rerun: every
  attribution and summary value equal to the uninterrupted store's, bit for bit;
* reading, old store and new: the Cohort page's read (``open_store(path).arrays(bundle, every id)``) and
  what ``explain.drivers`` reads (``Store.rows(bundle)``, every chunk): time and peak RSS.

Prints a table with ratios new / old. Only for this benchmark; no test times anything.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
OLD_REF = "a4100d9"  # the last commit before the compact store: long-format part files
LIMITS = ["--limit", "max_table_cells=2e9", "--limit", "max_table_bytes=2e10"]

# Runs in its own process, with the code under test on PYTHONPATH: the batch job with timers around its parts.
BATCH = r"""
import json, sys, time
import explain.batch.local as local
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from explain.modelfile.limits import Limits
timers = {"engine": 0.0, "conversion": 0.0, "writing": 0.0}
def timed(name, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timers[name] += time.perf_counter() - start
    return wrapper
local.explain_customers = timed("engine", local.explain_customers)
for name in ("long_frame", "chunk_arrays", "summary_frame"):
    if hasattr(local, name):
        setattr(local, name, timed("conversion", getattr(local, name)))
local.write_chunk = timed("writing", local.write_chunk)
local.verify_chunk = timed("writing", local.verify_chunk)
start = time.perf_counter()
bundle = load_bundle(sys.argv[1], limits=Limits(max_table_cells=2_000_000_000, max_table_bytes=20_000_000_000))
opened = time.perf_counter() - start
result = local.run_batch_job(bundle, sys.argv[2], Settings(steps=64), chunk_size=200, progress=False)
from explain.core import engine as engine_module
notes = engine_module.cut_notes(bundle.model) if hasattr(engine_module, "cut_notes") else ""  # old code: no cut
print(json.dumps({"open_s": opened, "job_s": result.seconds, "customers": result.n_customers, **timers,
                  "cut": notes or "no cut (this code has none)"}))
"""

LIMIT = r"""
import json, sys, time
import numpy as np
import tensorflow as tf
from explain.bundle.load import load_bundle
from explain.core.quadrature import alphas_and_weights
from explain.modelfile.limits import Limits
bundle = load_bundle(sys.argv[1], limits=Limits(max_table_cells=2_000_000_000, max_table_bytes=20_000_000_000))
per_call, n = int(sys.argv[2]), 200
xs, xt = np.asarray(bundle.static[:n], np.float32), np.asarray(bundle.temporal[:n], np.float32)
bs, bt = xs.mean(axis=0), np.asarray(bundle.temporal[:2000], np.float32).mean(axis=0)
pad = (xt == 0).all(axis=2)  # the mask value: padded periods stay padded on the path, as in the engine
alphas, _ = alphas_and_weights("gausslegendre", 64)
model, trim = bundle.model, sys.argv[3] == "trim"
if trim:  # the engine change this measures: calls cut to their longest real history (a free time axis)
    import keras
    model = keras.models.clone_model(model, input_tensors=[keras.Input(xs.shape[1:]),
                                                          keras.Input((None, xt.shape[2]))])
    model.set_weights(bundle.model.get_weights())
    order = np.argsort(pad.sum(axis=1))[::-1]  # longest padding first: similar lengths share a call
    xs, xt, pad = xs[order], xt[order], pad[order]
@tf.function(input_signature=[tf.TensorSpec((None,) + xs.shape[1:], tf.float32),
                              tf.TensorSpec((None, None, xt.shape[2]), tf.float32)])
def grads(ps, pt):
    with tf.GradientTape() as tape:
        tape.watch([ps, pt])
        total = tf.reduce_sum(model([ps, pt], training=False)[:, 0])
    return tape.gradient(total, [ps, pt])
rows = max(1, per_call // 64)
calls = []
for start in range(0, n, rows):
    a = alphas[None, :, None]
    ps = (bs + a * (xs[start:start + rows, None] - bs)).reshape(-1, xs.shape[1])
    pt = bt + alphas[None, :, None, None] * (xt[start:start + rows, None] - bt)
    pt = np.where(pad[start:start + rows, None, :, None], 0.0, pt).reshape(-1, *xt.shape[1:])
    if trim:
        pt = pt[:, int(pad[start:start + rows].sum(axis=1).min()):]  # padding every row of the call has
    calls.append((tf.constant(ps.astype(np.float32)), tf.constant(pt.astype(np.float32))))
grads(*calls[0])
same = None
if trim:  # the cut calls give the full model's gradients bit for bit (the cut periods' being 0)? (eager, both)
    def eager(m, a, b):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            total = tf.reduce_sum(m([a, b], training=False)[:, 0])
        return [g.numpy() for g in tape.gradient(total, [a, b])]
    ps, pt = calls[-1]
    t_all, t_cut = xt.shape[1], pt.shape[1]
    full = np.concatenate([np.zeros((pt.shape[0], t_all - t_cut, pt.shape[2]), np.float32), pt.numpy()], axis=1)
    g_full, g_cut = eager(bundle.model, ps, tf.constant(full)), eager(model, ps, pt)
    same = bool(np.array_equal(g_full[0], g_cut[0]) and np.array_equal(g_full[1][:, t_all - t_cut:], g_cut[1])
                and not g_full[1][:, :t_all - t_cut].any())
start = time.perf_counter()
for ps, pt in calls:
    [g.numpy() for g in grads(ps, pt)]
seconds = time.perf_counter() - start
print(json.dumps({"limit_customers_per_s": n / seconds, "points_per_call": rows * 64, "trim": trim,
                  "same_gradients": same}))
"""

READ = r"""
import json, sys, time
from explain.batch.store import open_store
from explain.bundle.load import load_bundle
from explain.modelfile.limits import Limits
bundle = load_bundle(sys.argv[1], limits=Limits(max_table_cells=2_000_000_000, max_table_bytes=20_000_000_000))
store = open_store(sys.argv[2])
start = time.perf_counter()
if sys.argv[3] == "cohort":
    stored = store.arrays(bundle, [str(i) for i in bundle.ids])
    size = stored.temporal.nbytes
else:
    size = sum(r.attributions["temporal"].nbytes for r in store.rows(bundle))
print(json.dumps({"read_s": time.perf_counter() - start, "bytes": size}))
"""


def run_measured(command: list[str], env: dict, cwd: Path) -> tuple[float, float, str]:
    """(seconds, peak RSS in GB, output) of one process that must exit 0 (``big_bundle.run_measured``)."""
    import big_bundle

    return big_bundle.run_measured(command, cwd, env, ok=(0,))


def last_json(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def folder_bundle(folder: Path):
    """What ``points_per_call`` reads of a bundle (its periods), from bundle.json's table without opening it."""
    import pyarrow.parquet as pq

    periods = pq.read_table(folder / "temporal.parquet", columns=["period"])["period"].unique()
    return type("Periods", (), {"n_periods": len(periods)})()


def disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def killed_and_resumed(bundle: Path, out: Path, env: dict, cwd: Path) -> float:
    """The compact job killed with SIGKILL once two chunks are written, then rerun; its seconds in all."""
    command = [sys.executable, "-m", "explain", "batch", "--bundle", str(bundle), "--out", str(out), *LIMITS]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while len(list(out.glob("part-*.parquet"))) < 2 and process.poll() is None:
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    if not list(out.glob("part-*.parquet")) or (out / "_SUCCESS").exists():
        raise SystemExit("the kill did not land mid-run")
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def same_store(a: Path, b: Path) -> bool:
    """Every attribution and summary value of two compact stores equal, bit for bit (NaN at the same cells)."""
    import numpy as np

    from explain.batch.store import read_store

    (arrays_a, summary_a), (arrays_b, summary_b) = read_store(a, long=False), read_store(b, long=False)
    return (summary_a.equals(summary_b) and arrays_a.keys() == arrays_b.keys()
            and all(np.array_equal(arrays_a[k], arrays_b[k], equal_nan=True) for k in arrays_a))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--customers", type=int, default=2000)
    parser.add_argument("--keep", type=Path, help="generate into (or reuse) the bundle in this folder")
    parser.add_argument("--old-ref", default=OLD_REF)
    args = parser.parse_args()
    import big_bundle

    work = Path(tempfile.mkdtemp(prefix="batch-store-"))
    folder = args.keep or work / "bundle"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    try:
        if not (folder / "temporal.parquet").is_file():
            big_bundle.generate(folder, args.customers, 365, 24, 40, 0)
        old_env = dict(env, PYTHONPATH=str(big_bundle.old_tree(args.old_ref, work / "old")))
        print(f"bundle: {args.customers:,} customers x 365 days x 24 + 40 static, Masking(0)+LSTM(64); "
              f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
        rows = {}
        for name, code_env in (("old", old_env), ("new", env)):
            out = work / f"store-{name}"
            # each code's own check first: its array cache (the old code's is of another format, and a job that
            # finds the other one rebuilds it: its peak would be the first open's, not the job's)
            run_measured([sys.executable, "-m", "explain", "check", "--bundle", str(folder), *LIMITS], code_env, work)
            seconds, peak, text = run_measured([sys.executable, "-c", BATCH, str(folder), str(out)], code_env, work)
            rows[name] = {**last_json(text), "wall_s": seconds, "peak_gb": peak, "disk_gb": disk(out) / 1e9}
            for what in ("cohort", "drivers"):
                read_s, read_peak, text = run_measured([sys.executable, "-c", READ, str(folder), str(out), what],
                                                       code_env, work)
                rows[name][f"{what}_read_s"] = last_json(text)["read_s"]
                rows[name][f"{what}_peak_gb"] = read_peak
        from explain.batch.local import points_per_call

        limits = []
        for per_call, trim in ((4096, "full"), (points_per_call(folder_bundle(folder)), "full"),
                               (points_per_call(folder_bundle(folder)), "trim")):
            _, peak, text = run_measured([sys.executable, "-c", LIMIT, str(folder), str(per_call), trim], env, work)
            limits.append({**last_json(text), "peak_gb": peak})
        resumed = work / "store-resumed"
        resume_s = killed_and_resumed(folder, resumed, env, work)
        identical = same_store(resumed, work / "store-new")
        report(rows, limits, args.customers, resume_s, identical)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(rows: dict, limits: dict, n: int, resume_s: float, identical: bool) -> None:
    old, new = rows["old"], rows["new"]
    for row in rows.values():
        row["customers_per_s"] = row["customers"] / row["job_s"]
    measures = [("customers/s (job)", "customers_per_s", "{:.1f}"), ("job s", "job_s", "{:.1f}"),
                ("  engine s", "engine", "{:.1f}"), ("  conversion s", "conversion", "{:.1f}"),
                ("  writing s", "writing", "{:.1f}"), ("bundle open s", "open_s", "{:.1f}"),
                ("batch peak RSS GB", "peak_gb", "{:.2f}"), ("store on disk GB", "disk_gb", "{:.3f}"),
                ("Cohort read (all) s", "cohort_read_s", "{:.1f}"), ("Cohort read peak GB", "cohort_peak_gb", "{:.2f}"),
                ("drivers read s", "drivers_read_s", "{:.1f}"), ("drivers read peak GB", "drivers_peak_gb", "{:.2f}")]
    print(f"{'measure':<24}{'old':>10}{'new':>10}{'new/old':>9}")
    print(f"engine calls, old: {old.get('cut')}; new: {new.get('cut')}")
    for label, key, form in measures:
        ratio = new[key] / old[key] if old[key] else float("nan")
        print(f"{label:<24}{form.format(old[key]):>10}{form.format(new[key]):>10}{ratio:>9.2f}")
    for limit in limits:
        how = (f", each call cut to its longest real history (gradients bit for bit the full model's: "
               f"{limit['same_gradients']})") if limit["trim"] else ""
        print(f"model limit (forward + backward), {limit['points_per_call']} points per call{how}: "
              f"{limit['limit_customers_per_s']:.1f} customers/s, peak {limit['peak_gb']:.2f} GB")
    print(f"resume after SIGKILL ({n:,} customers): {resume_s:.0f} s in all, identical to the uninterrupted "
          f"store: {identical}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
