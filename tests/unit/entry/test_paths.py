"""No page shows the server's file paths (issue 16): the bundle is named by its folder name only,
errors of a bad startup bundle name files relative to it, and other absolute paths are cut to
their last part. The full paths stay in the server log."""

import shutil

import pytest

from explain.core.text import hide_paths
from tests.support.apptest import DEMO, app, errors

PAGES = ["pages/customer.py", "pages/compare.py", "pages/cohort.py", "pages/diagnostics.py", "pages/data.py",
         "pages/whatif.py"]

pytestmark = pytest.mark.skipif(not (DEMO / "model.keras").is_file(), reason="the demo bundle is not built")


def page_text(at) -> str:
    """Every element's protobuf text on the page (sidebar included), as the browser receives it."""
    out = []

    def walk(node):
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(out)


@pytest.fixture
def deployed(tmp_path, monkeypatch):
    """The demo bundle at a server path that names a user and a mount point."""
    folder = tmp_path / "home" / "alice-secret" / "mnt" / "churn"
    shutil.copytree(DEMO, folder, ignore=shutil.ignore_patterns("attributions"))
    monkeypatch.setenv("EXPLAIN_BUNDLE", str(folder))
    return folder


def test_no_page_shows_the_bundle_path(deployed):
    at = app()
    for page in PAGES:
        if page != "pages/customer.py":
            at.switch_page(page).run()
        assert not at.exception and not errors(at), (page, errors(at))
        text = page_text(at)
        assert "alice-secret" not in text and str(deployed) not in text, page
        if page == "pages/data.py":
            assert "churn\\ncontent hash" in text  # the bundle is named by its folder only


def test_a_broken_startup_bundle_is_reported_without_its_path(deployed):
    (deployed / "static.csv").unlink()
    at = app()
    problems = " ".join(errors(at))
    assert "static" in problems and "churn" in problems, problems  # which file, in which bundle folder
    assert "alice-secret" not in page_text(at)


def test_hide_paths_keeps_names_relative_to_the_bundle():
    root = "/srv/app/bundles/demo"
    assert hide_paths(f"{root}/model.keras could not be opened", root) == "demo/model.keras could not be opened"
    assert (hide_paths(f"static.csv is missing from {root}: expected", root)
            == "static.csv is missing from demo: expected")
    assert hide_paths("see /usr/lib/python3/site.py, line 3") == "see site.py, line 3"
    # not paths: URLs, fractions, units, relative names
    for text in ("https://example.com/a/b", "3/12 months", "GB/month", "demo/model.keras", "(baseline / input)"):
        assert hide_paths(text) == text

