"""Hostile input through the app: each bad upload gets a clear message on the Data & model page,
nothing runs, nothing half-opened stays, and the bundle in use (the demo) keeps working.

Every upload here goes through the page (AppTest): the file uploader, the "Check and open"
button, ``ui.uploads.open_upload`` (size check, names, the model opened in a memory-capped child
process, the tables). The hostile files are built once per module (tests/support/hostile.py); the
tables are a 30-customer cut of the demo bundle, so that each case is quick.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explain.bundle import load as B
from explain.modelfile import safe_load as sl
from tests.support import hostile as H
from tests.support.apptest import DEMO, app, bundle_files, charts, errors, plain, upload
from ui import show, uploads

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")

SMALL = 30  # customers in the small bundle
PERIODS = 12
PAGES = ["pages/customer.py", "pages/compare.py", "pages/cohort.py", "pages/diagnostics.py", "pages/data.py"]
MODEL_NAME = "churn_model.keras"  # the uploaded model's own name: messages show it, not the server's path


def literal(template: str) -> str:
    """The longest fixed piece of a message template (the text between its {fields})."""
    return max(re.split(r"\{[^{}]*\}", template), key=len).strip()


def why(reason) -> str:
    text = reason[0]
    return text.split("{", 1)[0] if "{" in text else text


@pytest.fixture(autouse=True)
def _demo_bundle(monkeypatch):
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)


# ----------------------------------------------------------------------------- the hostile files, once


def small_bundle(folder: Path, customers: int = SMALL) -> Path:
    return H.small_bundle(DEMO, folder, customers, PERIODS)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{"small": small bundle folder, "models": {kind: hostile model file}, "marker", "secret", "root"}."""
    root = tmp_path_factory.mktemp("hostile")
    small = small_bundle(root / "small")
    tiny = H.tiny_model_file(root / "tiny.keras")
    marker = root / "pwned"
    secret = root / "secret.txt"
    secret.write_text("password\n")
    models = {
        "lambda": H.lambda_file(root / "lambda.keras", str(marker)),
        "nested": H.nested_lambda_file(root / "nested.keras"),
        "module": H.module_outside_keras_file(tiny, root / "module.keras"),
        "lookup": H.lookup_file(tiny, root / "lookup.keras", secret),
        "hdf5": H.hdf5_file(root / "hdf5.keras"),
        "savedmodel": H.savedmodel_zip(root / "savedmodel.keras"),
        "slip": H.zip_slip_file(tiny, root / "slip.keras"),
        "bomb": H.bomb_file(tiny, root / "bomb.keras", sl.DEFAULT_MAX_UNCOMPRESSED_BYTES + 1024**2),
        "huge": H.huge_dense_file(tiny, root / "huge.keras"),
    }
    models["empty"] = root / "empty.keras"
    models["empty"].write_bytes(b"")
    assert models["bomb"].stat().st_size < 5 * 1024**2  # about 1 MB that unpacks to over 1 GiB
    return {"root": root, "small": small, "models": models, "marker": marker, "secret": secret}


def mutated(built, tmp_path, mutate) -> dict:
    """The small bundle's files after ``mutate(folder)`` (on a copy)."""
    folder = tmp_path / "bundle"
    shutil.copytree(built["small"], folder)
    mutate(folder)
    return bundle_files(folder)


def upload_folders() -> set[str]:
    """This process's upload folders (named by its pid: other tests running at once make their own)."""
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"{uploads.UPLOAD_PREFIX}{os.getpid()}-*")}


# ----------------------------------------------------------------------------- checks


def refused(at, *fragments: str) -> str:
    """The page says the upload was not opened, with every fragment, and no traceback or server path."""
    assert not at.exception, [e.value for e in at.exception]
    assert any(s.value == "The upload was not opened" for s in at.subheader)
    messages = " ".join(errors(at))
    for fragment in fragments:
        assert fragment in messages, f"{fragment!r} not in:\n{messages}"
    assert "Traceback" not in messages and uploads.UPLOAD_PREFIX not in messages, messages
    return messages


def demo_still_active(at) -> None:
    """The startup demo bundle is still this session's bundle, and the Customer page computes."""
    assert "upload_active" not in at.session_state or not at.session_state["upload_active"]
    assert any("3000 customers" in m.value and "from the startup bundle" in m.value for m in at.markdown)
    at.switch_page("pages/customer.py").run()
    assert not at.exception and not errors(at), errors(at)
    assert "temporal_heatmap" in charts(at)
    assert at.session_state["customer"].startswith("C0")


def opened(at, customers: int = SMALL) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not errors(at), errors(at)
    assert any(f"{customers} customers" in plain(s.value) for s in at.success)
    assert at.session_state["upload_active"]
    assert any(f"{customers} customers" in m.value and "this session's upload" in m.value for m in at.markdown)


# ----------------------------------------------------------------------------- model files

MODEL_CASES = [
    ("lambda", [why(sl.REASON_LAMBDA), "layer 'evil' (Lambda)", "outer > layers[1]"]),
    ("nested", ["functional > inner_model > layers[2]", "(Lambda)"]),
    ("module", ["'os'", "is not part of Keras"]),
    ("lookup", [why(sl.REASON_VOCAB_FILE), "(StringLookup)", "vocabulary=[...]"]),
    ("hdf5", ["legacy HDF5 (.h5) Keras model", 'model.save("model.keras")']),
    ("savedmodel", ["TensorFlow SavedModel", "saved_model.pb"]),
    ("slip", ["'../evil'", "'..' component", "zip slip"]),
    ("bomb", ["would unpack to", "decompression bomb", "1,073,741,824"]),
    ("huge", ["the model is too large", "10,000,100,000 weights", "dense (Dense)"]),
    ("empty", ["is empty (0 bytes)"]),
]


@pytest.mark.parametrize("kind, fragments", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_hostile_model_file_is_refused_and_the_demo_stays(built, kind, fragments):
    before = upload_folders()
    files = bundle_files(built["small"])
    files.pop("model.keras")
    files[MODEL_NAME] = built["models"][kind].read_bytes()
    at = upload(app(page="pages/data.py"), files)
    messages = refused(at, "model.keras was refused before loading", MODEL_NAME, "To fix", *fragments)
    if kind == "lookup":  # the file it would read, by name: absolute paths never reach the page (issue 16)
        assert built["secret"].name in messages and str(built["secret"]) not in messages
    assert not built["marker"].exists(), "the Lambda layer's code ran"
    assert upload_folders() <= before, "a refused upload left its folder behind"
    demo_still_active(at)


def test_uploads_are_opened_in_a_separate_process(built, tmp_path, monkeypatch):
    calls = []
    real = sl.trial_load

    def spy(path, **kwargs):
        calls.append(kwargs.get("display_name"))
        return real(path, **kwargs)

    monkeypatch.setattr(sl, "trial_load", spy)
    with uploads._TRIAL_LOCK:  # forget earlier trial loads; the verdict found here stays for the later tests
        uploads._TRIAL_PASSED.clear()
    files = bundle_files(built["small"])
    files[MODEL_NAME] = files.pop("model.keras")
    at = upload(app(page="pages/data.py"), files)
    opened(at)
    assert calls == [MODEL_NAME]
    # the same model again (a table was fixed): the static checks run, the child process does not
    at = upload(app(page="pages/data.py"), files)
    opened(at)
    assert calls == [MODEL_NAME]


# ----------------------------------------------------------------------------- tables


def _over_limit(folder: Path) -> None:
    (folder / "static.csv").write_bytes(b"x" * (uploads.upload_limit_bytes() + 1))


def _drop_row(index):
    return lambda header, rows: (header, rows[:index] + rows[index + 1:])


REFUSED_TABLES = [
    ("over-the-upload-limit", _over_limit,
     ["static.csv is", "over this app's limit", "per uploaded file", "Nothing was opened"]),
    ("binary-renamed-csv", H.write_bytes("static.csv", H.PNG_BYTES),
     ["static.csv cannot be read as a CSV file: it is not text"]),
    ("empty-file", H.write_bytes("static.csv", b""), ["static.csv is empty"]),
    ("header-only", H.write_bytes("temporal.csv", (DEMO / "temporal.csv").read_text().splitlines()[0].encode() + b"\n"),
     ["temporal.csv has a header but no data rows"]),
    ("nan", H.set_cell("static.csv", 2, "age", "NaN"), ["column 'age' has 1 missing value(s)", "row 2"]),
    ("inf", H.set_cell("temporal.csv", 5, "support_calls", "inf"),
     ["column 'support_calls' has 1 infinite value(s)", "row 5"]),
    ("decimal-comma", H.set_cell("static.csv", 3, "monthly_charge", "12,5"),
     ["column 'monthly_charge' must hold numbers", "'12,5'", B.DECIMAL_COMMA_FIX]),
    ("text", H.set_cell("temporal.csv", 8, "bill_amount", "abc"),
     ["column 'bill_amount' must hold numbers", "'abc'", "C00001, 2025-08"]),
    ("missing-column", H.edit_rows("static.csv", H.drop_column("age")),
     ["column 'age' is missing from static.csv", "static_features"]),
    ("duplicate-ids", H.set_cell("static.csv", 4, "customer_id", "C00003"),
     [literal(B.DUPLICATE_IDS), "'C00003'"]),
    ("id-only-in-static", H.set_cell("static.csv", 5, "customer_id", "C99999"),
     ["have no rows in temporal.csv", "'C99999'"]),
    ("id-only-in-temporal", H.edit_rows("temporal.csv",
                                        lambda h, r: (h, r + [["C77777", *row[1:]] for row in r[:PERIODS]])),
     ["have no rows in static.csv", "'C77777'"]),
    ("wrong-period-count", H.edit_rows("temporal.csv", _drop_row(9)),
     [literal(B.WRONG_PERIOD_COUNT), "12"]),
    ("duplicate-periods", H.edit_rows("temporal.csv", lambda h, r: (h, r + [r[13]])),
     [literal(B.DUPLICATE_PERIODS), "C00002"]),
]


@pytest.mark.parametrize("mutate, fragments", [c[1:] for c in REFUSED_TABLES], ids=[c[0] for c in REFUSED_TABLES])
def test_bad_table_is_refused_with_a_clear_message_and_the_demo_stays(built, tmp_path, mutate, fragments):
    before = upload_folders()
    at = upload(app(page="pages/data.py"), mutated(built, tmp_path, mutate))
    refused(at, *fragments)
    assert upload_folders() <= before
    demo_still_active(at)


def test_every_problem_of_a_table_is_listed_at_once(built, tmp_path):
    mutate = H.both(H.set_cell("static.csv", 2, "age", "NaN"), H.set_cell("static.csv", 3, "tenure_months", "inf"),
                    H.set_cell("static.csv", 4, "monthly_charge", "12,5"),
                    H.set_cell("temporal.csv", 8, "bill_amount", "abc"))
    at = upload(app(page="pages/data.py"), mutated(built, tmp_path, mutate))
    refused(at, "The bundle has 4 problem(s)", "'age'", "'tenure_months'", "'12,5'", "'abc'")
    assert len(at.error) == 5  # the heading and one message per problem


LOADED_TABLES = [
    ("reordered-columns", H.both(H.edit_rows("static.csv", H.reverse_columns),
                                 H.edit_rows("temporal.csv", H.reverse_columns)),
     []),
    ("extra-column", H.edit_rows("static.csv", H.add_column("notes", "vip")), ["'notes'", "were ignored"]),
    ("unsorted-periods", H.edit_rows("temporal.csv", lambda h, r: (h, r[::-1])),
     ["were not in period order", "sorted by 'period'"]),
]


@pytest.mark.parametrize("mutate, notes", [c[1:] for c in LOADED_TABLES], ids=[c[0] for c in LOADED_TABLES])
def test_acceptable_table_loads_with_a_note(built, tmp_path, mutate, notes):
    at = upload(app(page="pages/data.py"), mutated(built, tmp_path, mutate))
    opened(at)
    captions = " ".join(plain(c.value) for c in at.caption)
    for note in notes:
        assert note in captions, captions
    # the values are the small bundle's, in the model's feature order, whatever the column order
    expected = pd.read_csv(built["small"] / "static.csv", dtype={"customer_id": str})
    shown = at.dataframe[0].value
    assert shown["id"].tolist() == expected["customer_id"].head(20).tolist()
    np.testing.assert_allclose(shown.iloc[:, 1:10].to_numpy(float), expected.iloc[:20, 1:10].to_numpy(float), rtol=1e-6)
    folder = Path(at.session_state["upload_active"])
    assert folder.is_dir() and folder.name.startswith(uploads.UPLOAD_PREFIX)
    assert sorted(p.name for p in folder.iterdir()) == ["bundle.json", "model.keras", "static.csv", "temporal.csv"]

    at.switch_page("pages/customer.py").run()
    assert not at.exception and not errors(at) and "temporal_heatmap" in charts(at)
    assert at.session_state["customer"] in set(expected["customer_id"])
    at.switch_page("pages/data.py").run()
    next(b for b in at.button if b.label == "Back to the startup bundle").click().run()
    assert not folder.exists(), "going back to the startup bundle leaves the upload's folder"
    demo_still_active(at)


# ----------------------------------------------------------------------------- names that are markup

HOSTILE_NAMES = H.rename_features_to_markup


def unescaped(text: str) -> str:
    """What is left of markdown ``text`` once every backslash-escaped character is removed."""
    return re.sub(r"\\.", "", text)


def assert_inert(at) -> None:
    """Every markdown element that shows a hostile name shows it escaped; charts and tables as text."""
    elements = [*at.markdown, *at.caption, *at.info, *at.warning, *at.error, *at.success, *at.title,
                *at.subheader, *at.header]
    texts = [e.value for e in elements] + [m.label for m in at.metric] + [e.label for e in at.expander]
    for text in texts:
        rest = unescaped(text)
        assert "<img" not in rest, text
        assert "\\href" not in rest and "javascript:" not in rest, text
        for name in (H.EVIL_HTML, H.EVIL_LATEX):
            if name in plain(text):
                assert show.md(name) in text, text
    for key, spec in charts(at).items():
        text = json.dumps(spec)
        assert "<img" not in text, key
        if "onerror" in text:
            assert "&lt;img src=x onerror=alert(1)&gt;" in text, key
        assert "$\\\\href" not in text, key  # no LaTeX delimiter before the name ($ is written &#36;)
    for frame in at.dataframe:
        value = frame.value
        cells = ([str(c) for c in value.columns] + [str(i) for i in value.index]
                 + value.astype(str).to_numpy().ravel().tolist())
        for cell in cells:
            if "onerror" in cell:
                assert cell == H.EVIL_HTML  # a table shows the name as plain text


def test_feature_names_that_are_markup_show_as_text_on_every_page(built, tmp_path):
    at = upload(app(page="pages/data.py"), mutated(built, tmp_path, HOSTILE_NAMES))
    opened(at)
    assert_inert(at)
    assert any(H.EVIL_HTML in [str(c) for c in f.value.columns] for f in at.dataframe)
    assert any(H.EVIL_LATEX in [str(c) for c in f.value.columns] for f in at.dataframe)
    seen = set()
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception and not errors(at), (page, errors(at))
        assert_inert(at)
        for spec in charts(at).values():
            text = json.dumps(spec)
            seen |= {name for name, escaped in ((H.EVIL_HTML, "&lt;img src=x onerror=alert(1)&gt;"),
                                                 (H.EVIL_LATEX, "&#36;\\\\href{javascript:alert(1)}{x}&#36;"))
                     if escaped in text}
        if page == "pages/customer.py":  # the first line names the drivers; any hostile name in it is text
            sentence = next(plain(m.value) for m in at.markdown if "likely to churn" in m.value)
            assert "mainly because" in sentence and "<img" not in sentence.replace(H.EVIL_HTML, "")
    assert seen == {H.EVIL_HTML, H.EVIL_LATEX}, "a hostile name never reached a chart"
