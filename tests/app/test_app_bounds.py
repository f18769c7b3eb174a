"""Issue 25's attacks through the page: each hostile file is uploaded with an otherwise valid bundle on the
Data & model page (AppTest), and the page shows one short refusal naming the limit, within the issue's
10 s, with no traceback; the bundle in use does not change. (The same files are measured for memory in a
fresh interpreter by tests/unit/modelfile/test_bounds.py.)"""

from __future__ import annotations

import re
import time

import pytest

from explain.bundle import config as bundle_config
from explain.bundle import tables
from explain.core.text import MESSAGE_LIMIT
from explain.modelfile import config as model_config
from tests.support import hostile as H
from tests.support.apptest import DEMO, app, bundle_files, errors, upload

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")
SECONDS = 10


def literal(template: str) -> str:
    return max(re.split(r"\{[^{}]*\}", template), key=len).strip()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return bundle_files(H.small_bundle(DEMO, tmp_path_factory.mktemp("bounds") / "small"))


# (case, {file name: builder(folder) -> bytes}, files of the small bundle to drop, template, words)
CASES = [
    ("1,000,000 refused entries", {"model.keras": lambda d: H.refused_entries_file(d / "m.keras", 10**6).read_bytes()},
     [], model_config.CONFIG_TOO_LARGE, ["max_json_bytes"]),
    ("15,000 refused entries", {"model.keras": lambda d: H.refused_entries_file(d / "m.keras", 15_000).read_bytes()},
     [], model_config.UNSAFE_CONFIG, ["15,000 part(s)", "more"]),
    ("Sequential of 2,000 layers", {"model.keras": lambda d: H.long_sequential_file(d / "m.keras", 2000).read_bytes()},
     [], model_config.TOO_MANY_LAYERS, ["2,000 layers", "max_layers"]),
    ("static.parquet of 20 M rows", {"static.parquet": lambda d: H.zeros_parquet(d / "s.parquet", 20 * 10**6)
                                     .read_bytes()},
     ["static.csv"], tables.TABLE_TOO_LARGE, ["20,000,000 rows", "max_table_cells"]),
    ("static.csv of 12 M rows (48 MB)", {"static.csv": lambda d: H.long_csv(d / "s.csv", 12 * 10**6).read_bytes()},
     [], tables.TABLE_TOO_LARGE, ["12,000,001 rows", "max_table_cells"]),
    ("bundle.json nested 200,000 deep", {"bundle.json": lambda d: H.deep_json(200_000)},
     [], bundle_config.JSON_TOO_LARGE, ["max_json_depth"]),
]


@pytest.mark.parametrize("case, hostile, drop, template, words", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_upload_gets_one_short_refusal_quickly(small, tmp_path, case, hostile, drop, template, words):
    files = {name: data for name, data in small.items() if name not in drop}
    files.update({name: build(tmp_path) for name, build in hostile.items()})
    at = app(page="pages/data.py")
    start = time.perf_counter()
    upload(at, files)
    seconds = time.perf_counter() - start
    assert not at.exception, [e.value for e in at.exception]
    shown = errors(at)
    text = "\n".join(shown)
    # an upload's refusal names the option that raises the uploads' limits (ui.uploads.upload_option)
    assert literal(template.replace("--limit ", "--upload-limit ")) in text, text[:3000]
    for word in words:
        assert word in text, (word, text[:3000])
    assert "Traceback" not in text and "Something went wrong" not in text
    assert len(text) <= MESSAGE_LIMIT + 500, len(text)  # the heading and the problems, each capped
    assert seconds <= SECONDS, seconds
    assert "upload_active" not in at.session_state or not at.session_state["upload_active"]  # nothing opened
