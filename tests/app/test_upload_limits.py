"""The owner's bundle and a visitor's upload are measured against their own limits (issue 25): with the
server's upload limits lowered (``--upload-limit``), the very files of the startup bundle, uploaded through
the Data & model page, are refused by name before anything is read, while the startup bundle itself (the
owner's, OWNER_LIMITS) stays open and computes."""

import sys

from tests.app.test_hostile import demo_still_active, refused
from tests.support.apptest import DEMO, app, bundle_files, upload

UPLOAD_CELLS = 10_000  # the demo's static table has 3,000 customers x more than 4 columns


def test_the_startup_bundles_own_files_uploaded_are_refused_by_the_upload_limits(monkeypatch):
    monkeypatch.delenv("EXPLAIN_BUNDLE", raising=False)
    monkeypatch.setattr(sys, "argv", [sys.argv[0], "--upload-limit", f"max_table_cells={UPLOAD_CELLS}"])
    at = upload(app(page="pages/data.py"), bundle_files(DEMO))
    message = refused(at, "static.csv", "max_table_cells", f"{UPLOAD_CELLS:,}", "--upload-limit max_table_cells=N")
    assert "--limit max_table_cells" not in message  # the owner's option would not change the uploads' limit
    demo_still_active(at)  # the same tables, as the owner's startup bundle: open, and the Customer page computes
