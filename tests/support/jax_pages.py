"""Every dashboard page's numbers through AppTest on this process's Keras backend, for tests/app/test_jax_pages.py
(which runs it in a process started with KERAS_BACKEND=jax, and on TensorFlow in its own process):

    python -m tests.support.jax_pages WORK     # prints the pages' numbers as one line of JSON

What drives churn (from a store of every customer computed in this process, so by this backend's engine), Compare,
What-if (an edit and the search), Cohort, Diagnostics (with the integration-points chart and the faithfulness
checks) and Data & model.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path


def _numbers(at, keys) -> dict:
    from tests.support.apptest import array, charts, errors

    assert not at.exception, [e.value for e in at.exception]
    assert not errors(at), errors(at)
    shown, got = charts(at), {}
    for key in keys:
        for i, trace in enumerate(shown[key]["data"]):
            for axis in ("x", "y", "z"):
                try:
                    got[f"{key}/{i}/{axis}"] = array(trace[axis]).tolist()
                except (KeyError, ValueError, TypeError):
                    pass
    return got


def _predictions(at) -> dict:
    return {m.label.split(":")[0]: float(m.value) for m in at.metric if ": predicted" in m.label}


def _clicked(at, label: str, starts: bool = False):
    from tests.support.apptest import errors

    next(b for b in at.button if (b.label.startswith(label) if starts else b.label == label)).click().run()
    assert not at.exception and not errors(at), errors(at)
    return at


def _whatif(out: dict) -> None:
    from tests.support.apptest import app, plain

    at = _clicked(app({"customer": "C00002", "steps": "32"}, page="pages/whatif.py"), "Apply this edit")
    out["whatif_edit"] = _predictions(at)
    out["whatif_scenario"] = at.query_params["whatif"]
    _clicked(at, "Search")
    out["whatif_found"] = any("bring the prediction from" in plain(s.value) for s in at.success)
    out["whatif_search"] = _predictions(_clicked(at, "Show these edits above"))


def pages(work: Path) -> dict:
    """The numbers every page shows, on this process's backend; ``work``: a fresh folder for the stores and a copy
    of the demo bundle. Sets EXPLAIN_STORES and EXPLAIN_BUNDLE while it runs, and puts them back after."""
    import keras

    from explain.batch.local import run_batch_job
    from explain.bundle.load import load_bundle
    from explain.core.settings import Settings
    from tests.support.apptest import DEMO, app, charts, errors, plain

    saved = {name: os.environ.get(name) for name in ("EXPLAIN_STORES", "EXPLAIN_BUNDLE")}
    out = {"backend": keras.config.backend()}
    try:
        os.environ["EXPLAIN_STORES"] = str(work / "stores")
        # What drives churn: a store of every customer made by this process's engine (steps 16: the page's settings)
        folder = work / "demo"
        shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("attributions"))
        run_batch_job(load_bundle(folder), folder / "attributions" / "june", Settings(steps=16), progress=False)
        os.environ["EXPLAIN_BUNDLE"] = str(folder)
        at = app({"steps": "16"}, page="pages/drivers.py")
        out["drivers"] = _numbers(at, ["drivers_ranking"])
        out["drivers_sentence"] = plain(at.info[0].value)
        os.environ.pop("EXPLAIN_BUNDLE")

        at = app({"customer": "C00005", "compare": "C00007", "steps": "32"}, page="pages/compare.py")
        out["compare"] = _numbers(at, ["compare_a", "compare_b", "compare_diff"])
        _whatif(out)
        out["cohort"] = _numbers(app({"steps": "16"}, page="pages/cohort.py"), ["cohort_abs", "cohort_signed"])

        at = app({"customer": "C00003", "steps": "32"}, page="pages/diagnostics.py")
        out["diagnostics"] = _numbers(at, ["diag_points", "diag_path"])
        next(b for b in at.button if b.label.startswith("Run faithfulness checks")).click().run()
        out["faithfulness"] = _numbers(at, ["faith_deletion", "faith_insertion", "faith_occlusion"])
        out["diagnostics_charts"] = sorted(charts(at))

        at = app(page="pages/data.py")
        assert not at.exception and not errors(at), errors(at)
        out["data"] = [m.label for m in at.metric] + [plain(m.value) for m in at.markdown][:5]
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return out


if __name__ == "__main__":
    print(json.dumps(pages(Path(sys.argv[1]))))
