"""``ui.show.md``, the one escaping function of text from a bundle or a URL (issue 25): the text reads the
same, and none of what GFM would turn into a link, an image, HTML or a Streamlit directive survives. The
rendering itself is checked in Chromium by tests/browser/test_browser_inert.py."""

import re

import pytest

from explain.core.text import MESSAGE_LIMIT
from tests.support.apptest import plain
from tests.support.hostile import EVIL_HTML, EVIL_ID, EVIL_IMAGE, EVIL_LATEX, EVIL_LINKS
from ui import show

TEXTS = [EVIL_IMAGE, EVIL_LINKS, EVIL_ID, EVIL_HTML, EVIL_LATEX, "[x](javascript:alert(1))", ":red[alarm]",
         "WWW.EVIL.EXAMPLE", "ftp://files.evil.example", "<https://evil.example>", "a\nb"]


@pytest.mark.parametrize("text", TEXTS)
def test_md_keeps_the_words_and_breaks_every_link_pattern(text):
    out = show.md(text)
    assert plain(out) == text.replace("\n", " ")  # what a visitor reads
    unescaped = re.sub(r"\\(.)", r"\1", out)     # what GFM's autolink literals see
    assert not re.search(r"[a-z]://|www\.|@\w", unescaped, re.IGNORECASE), unescaped
    assert not re.search(r"(?<!\\)[\[\]()<>!:$`*_]", out), out  # markdown, HTML, directives, maths escaped


def test_md_caps_a_huge_text():
    assert len(plain(show.md("x" * 10**6))) <= MESSAGE_LIMIT
