"""The launcher's order (issue 42): what the first page needs first (imports, bundle, scores, the default view's
attribution), then a wait for the first visitor's page, then the rest (the challenger, the What drives churn store
in a process of its own at the lowest priority); the warmed default view of a padded bundle is the one its page
reads (nothing computed twice); the separate store job's command reads back to the same settings, its store is the
one the page finds, shared by a second request, and its values are the in-process job's; a failed job says why."""

from __future__ import annotations

import shutil
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

from explain.batch.local import run_batch_job
from explain.batch.store import open_store
from explain.batch.stores import STORES_ENV, stores_of
from explain.bundle.load import load_bundle
from explain.core.settings import Settings
from tests.support import padded
from tests.support.apptest import app, charts, errors, heatmap
from tests.unit.batch.test_drivers import build
from ui import cache, frame, launch, stores


class Recorder:
    """Stands for ui.frame, ui.cache and ui.startup in ``launch._warm``: records each call in order."""

    def __init__(self):
        self.calls, self.first_page_done, self.heatmap_out = [], threading.Event(), threading.Event()

    @contextmanager
    def part(self, name):
        self.calls.append(f"start {name}")
        yield
        self.calls.append(f"end {name}")

    def heatmap_sent(self, timeout):
        self.calls.append(f"heatmap sent? (up to {timeout:g} s)")
        return self.heatmap_out.wait(timeout)

    def warm_xla(self, bundle):
        self.calls.append(f"xla of {bundle}")

    def answered(self, timeout):
        self.calls.append(f"answered? (up to {timeout:g} s)")
        return self.first_page_done.wait(timeout)

    def bundle_path(self):
        return "BUNDLE"

    def open_bundle(self, path):
        self.calls.append(f"open {path}")
        return "the bundle"

    def predictions(self, bundle):
        self.calls.append(f"scores of {bundle}")

    def warm_first(self, bundle):
        self.calls.append(f"first view of {bundle}")

    def warm_background(self, bundle, *, separate):
        self.calls.append(f"background of {bundle}, separate={separate}")


def test_the_first_page_comes_first_and_the_background_waits_for_its_answer(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(launch, "_open_challenger", lambda: rec.calls.append("challenger"))
    worker = threading.Thread(target=launch._warm, args=(rec, rec, rec), daemon=True)
    worker.start()

    def reached(call):
        deadline = time.monotonic() + 10
        while call not in rec.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        return list(rec.calls)

    before = reached("start first-heatmap-wait")  # the first visitor's heatmap is not out: nothing else
    assert before == ["start bundle-open", "open BUNDLE", "end bundle-open", "start scores", "scores of the bundle",
                      "end scores", "start first-attribution", "first view of the bundle", "end first-attribution",
                      "start first-heatmap-wait", f"heatmap sent? (up to {launch.FIRST_WAIT:g} s)"]
    rec.heatmap_out.set()  # the heatmap is out: a long history's XLA calls, then a wait for the whole first page
    more = reached("start first-answer-wait")
    assert more[len(before):] == ["end first-heatmap-wait", "start xla", "xla of the bundle", "end xla",
                                  "start first-answer-wait", f"answered? (up to {launch.FIRST_WAIT:g} s)"]
    before = more
    rec.first_page_done.set()
    worker.join(10)
    assert rec.calls[len(before):] == ["end first-answer-wait", "start challenger", "challenger", "end challenger",
                                       "start background", "background of the bundle, separate=True",
                                       "end background"]
    names = [c.removeprefix("start ") for c in rec.calls if c.startswith("start ")]
    assert names == list(launch.ORDER[1:])  # the order the module says (the imports come before _warm)


def test_the_customer_pages_heatmap_is_the_cue_for_a_long_historys_compile(monkeypatch):
    """``frame.heatmap_sent``: False until a session has sent its heatmap (``ui.speed.heatmap_first``, the Customer
    page) or a script run has finished (``frame.timed``); the Customer page's first run sends it before it ends."""
    from ui import speed

    def finished_run():
        with frame.timed("drivers"):  # a first visitor on another page: its run finished
            pass

    monkeypatch.setattr(speed, "FIRST_SHOWN", threading.Event())
    monkeypatch.setattr(frame, "_ANSWERED", threading.Event())
    assert not frame.heatmap_sent(0.05)
    timer = threading.Timer(0.1, finished_run)
    timer.start()
    assert frame.heatmap_sent(10)
    timer.join()
    monkeypatch.setattr(speed, "FIRST_SHOWN", threading.Event())
    sent = []
    real = speed.heatmap_first
    monkeypatch.setattr(speed, "heatmap_first", lambda: (real(), sent.append(frame._ANSWERED.is_set())))
    monkeypatch.setattr(frame, "_ANSWERED", threading.Event())
    at = app()
    assert not at.exception and speed.FIRST_SHOWN.is_set()
    assert sent and sent[0] is False  # the heatmap's cue came before the run had finished
    assert any(t["type"] == "heatmap" for spec in charts(at).values() for t in spec["data"])


def test_a_finished_script_run_is_the_first_answer(capsys, monkeypatch):
    monkeypatch.setenv(frame.TIMING_ENV, "1")
    with frame.timed("customer"):
        pass
    assert frame.answered(0.0)
    frame.note("scores", 1.25)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("explain-timing run=customer seconds=") and " at=" in err[0]
    assert err[1].startswith("explain-timing part=scores seconds=1.2500 at=")
    at = float(err[1].split(" at=")[1])
    assert abs(at - time.time()) < 60


def test_the_warmed_default_view_of_a_padded_bundle_is_the_one_its_page_draws(tmp_path, monkeypatch):
    folder = padded.write(tmp_path / "bundle")
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "stores"))
    bundle = cache.open_bundle(folder)
    assert not bundle.plain  # padded: warmed too now (was the first visitor's work)
    cache.warm_first(bundle)
    default = cache.default_customer(bundle)
    warmed, _ = cache._attributions(bundle, bundle.content_hash, (default,), Settings().for_bundle(bundle).key())

    def computed(*args, **kwargs):
        raise AssertionError("computed again: the page did not find the warmed attribution")

    monkeypatch.setattr(cache, "explain_customers", computed)
    at = app()
    assert not errors(at), errors(at)
    assert at.selectbox(key="customer").value == default  # the default view, drawn from the warmed attribution
    heatmaps = [heatmap(spec)["z"] for spec in charts(at).values() if any(t["type"] == "heatmap" for t in spec["data"])]
    assert heatmaps and np.isfinite(heatmaps[0]).any()
    assert warmed.static.shape == (1, len(bundle.static_features))


@pytest.mark.parametrize("given", [Settings(steps="auto"), Settings(baseline="median", steps=32, space="logit",
                                                                    method="left", seed=7)])
def test_the_separate_jobs_command_reads_back_to_the_same_settings(tmp_path, given, monkeypatch):
    from explain.cli import build_parser, settings_from_args

    path, _ = build(tmp_path / "bundle", n=(5, 5, 5))
    bundle = load_bundle(path)
    settings = given.for_bundle(bundle)
    monkeypatch.delenv(stores.NICE_ENV, raising=False)
    command = stores.batch_command(bundle, tmp_path / "out", settings)
    if shutil.which("nice"):
        assert command[:3] == [shutil.which("nice"), "-n", "19"]  # the lowest priority
        for value, nice in (("0", "0"), ("7", "7"), ("20", "19"), ("low", "19")):  # out of 0-19: the default
            monkeypatch.setenv(stores.NICE_ENV, value)
            assert stores.batch_command(bundle, tmp_path / "out", settings)[:3] == [shutil.which("nice"), "-n", nice]
    args = build_parser().parse_args(command[command.index("-m") + 2:])
    assert args.command == "batch" and args.bundle == str(path) and args.out == str(tmp_path / "out")
    assert settings_from_args(args).for_bundle(bundle).key() == settings.key()


# The separate job at the tests' own priority: at nice 19 beside the other test processes it waited for the CPU
# (116 s of a full run in three workers, about 20 s alone); what it computes does not depend on its priority.
SAME_PRIORITY = "0"


def test_the_separate_store_is_the_pages_shared_and_equal_to_the_in_process_one(tmp_path, monkeypatch):
    path, _ = build(tmp_path / "bundle", n=(10, 10, 10))
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "stores"))
    monkeypatch.setenv(stores.NICE_ENV, SAME_PRIORITY)
    bundle = load_bundle(path)
    settings = stores.background(Settings().for_bundle(bundle))
    job = stores.start(bundle, settings, separate=True)
    assert stores.start(bundle, settings) is job and stores.start(bundle, settings, separate=True) is job  # shared
    deadline = time.monotonic() + 240
    while job.state in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job.state == "finished", job.error
    assert job.done == job.total == 30 and job.fraction == 1.0
    found = stores_of(bundle).best(Settings().for_bundle(bundle))  # what the page reads
    assert found is not None and found.path == job.folder
    reference = tmp_path / "in-process"
    run_batch_job(bundle, reference, settings, chunk_size=stores.CHUNK, progress=False)
    ids = [str(i) for i in bundle.ids]
    ours, theirs = open_store(job.folder).arrays(bundle, ids), open_store(reference).arrays(bundle, ids)
    np.testing.assert_allclose(ours.static, theirs.static, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours.temporal, theirs.temporal, rtol=1e-6, atol=1e-9)
    stores.forget(bundle, settings)


def test_a_separate_job_that_fails_says_why(tmp_path, monkeypatch):
    path, _ = build(tmp_path / "bundle", n=(3, 3, 3))
    monkeypatch.setenv(STORES_ENV, str(tmp_path / "stores"))
    monkeypatch.setenv(stores.NICE_ENV, SAME_PRIORITY)
    bundle = load_bundle(path)
    settings = stores.background(Settings(baseline="cohort:nobody").for_bundle(bundle))
    job = stores.start(bundle, settings, separate=True)
    deadline = time.monotonic() + 240
    while job.state in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job.state == "failed"
    assert "nobody" in job.error and "Traceback" not in job.error and "\n" not in job.error
    stores.forget(bundle, settings)


def test_the_background_step_leaves_the_what_if_cards_medians_for_every_session(bundle_dir, monkeypatch):
    """After the first page, the launcher's background step computes the data's ranges and the bundle's medians the
    Customer page's what-if card reads (about 5 s on 20,000 x 365 x 24): a high-risk customer's card then computes
    none, in any session (the ranges are one shared object, not a copy per call)."""
    from explain.analysis import whatif

    monkeypatch.setattr(whatif, "_MEDIANS", {})  # none kept from other tests
    monkeypatch.setattr(stores, "start", lambda *args, **kwargs: None)  # no store job: only the medians matter here
    calls = []
    medians = whatif.monthly_medians
    monkeypatch.setattr(whatif, "monthly_medians", lambda *a: calls.append(a[1]) or medians(*a))
    bundle = cache.open_bundle(bundle_dir)
    cache.warm_background(bundle)
    assert calls == [None]  # every customer's medians, once
    observed = cache.observed(bundle)
    assert cache.observed(bundle) is observed  # shared as it is
    high = str(bundle.ids[int(np.argmax(cache.predictions(bundle)))])
    context = cache.whatif_context(bundle, high, Settings().for_bundle(bundle))
    first = context.median(None)
    assert calls == [None] and first is whatif.bundle_medians(bundle, observed)
    np.testing.assert_allclose(first["static"], np.median(bundle.static, axis=0))
