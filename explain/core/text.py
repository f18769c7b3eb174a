"""Small text helpers of every error message: an error on one line, and "a, b and N more" lists.

Standard library only (the memory-capped child of ``safe_load`` imports it before its cap).
"""

from __future__ import annotations

import itertools
import re
from typing import Iterable

EXAMPLES_SHOWN = 5
LINES_SHOWN = 20         # problems listed in one message; the rest are counted ("... and 9,980 more")
LINE_LIMIT = 2500        # characters of one listed problem (a refused model's message lists its own parts)
MESSAGE_LIMIT = 4000     # characters of any message shown in the app or printed by the command line


def one_line(error: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line (whitespace collapsed, TF's {{node}} noise removed),
    cut to ``limit`` characters."""
    text = " ".join(re.sub(r"\{\{.*?\}\}", "", str(error)).split())
    summary = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return summary if len(summary) <= limit else summary[: limit - 3] + "..."


def first_line(error: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, cut to ``limit`` characters: for errors whose later lines are a
    traceback or a dump (a model that fails to load)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def examples(values: Iterable, limit: int = EXAMPLES_SHOWN, total: int | None = None,
             quote: bool = True, more: bool = True) -> str:
    """The first ``limit`` values, quoted (``'a', 'b'``), and `` and N more`` when ``total``
    (default: how many values there are) is larger and ``more`` is true."""
    values = list(values)
    total = len(values) if total is None else total
    shown = [repr(str(v)) if quote else str(v) for v in values[:limit]]
    text = ", ".join(shown)
    if more and total > len(shown):
        text += f" and {total - len(shown)} more"
    return text


# An absolute POSIX path of two or more parts (not the tail of a URL or of a relative path).
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])/(?:[^\s'\"`/:,;()\[\]<>]+/)+[^\s'\"`/:,;()\[\]<>]*")


def hide_paths(text, root=None) -> str:
    """``text`` with the server's absolute paths removed, for what a visitor sees: a path inside
    the folder ``root`` becomes relative to its parent (``demo/model.keras``), any other absolute
    path its last part (``/srv/app/x.csv`` -> ``x.csv``). The full paths stay in the server log."""
    text = str(text)
    if root is not None:
        root = str(root).rstrip("/")
        names = {root}
        try:
            from pathlib import Path

            names.add(str(Path(root).resolve()))
        except OSError:
            pass
        for name in sorted(names, key=len, reverse=True):
            if name.startswith("/") and name != "/":
                text = text.replace(name, name.rsplit("/", 1)[-1])
    return _ABSOLUTE_PATH.sub(lambda m: m.group().rstrip("/").rsplit("/", 1)[-1] or m.group(), text)


def unit_after(label: str, unit: str | None) -> str | None:
    """The unit to write after a value next to ``label``: None for ``0/1`` and when the label
    already names it ("Tenure (months) = 6", "Number of products = 1", not "... = 1 products")."""
    if not unit or unit == "0/1" or str(unit).lower() in str(label).lower():
        return None
    return str(unit)


def capped(text, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters, saying how much was left out: a message built
    from a hostile file (a million refused entries, a column name of a megabyte) stays short."""
    text = str(text)
    if len(text) <= limit:
        return text
    tail = f" ... ({len(text) - limit:,} more characters not shown)"
    return text[: max(limit - len(tail), 0)] + tail


def listing(lines: Iterable, total: int | None = None, limit: int = LINES_SHOWN, budget: int = MESSAGE_LIMIT - 400,
            more: str = "... and {count:,} more") -> list[str]:
    """The first lines of a list of problems, each :func:`capped` to LINE_LIMIT characters, as many
    as fit ``limit`` lines and ``budget`` characters, then ``more`` with the count of the others
    (``total``: how many there are, when ``lines`` holds only the first ones)."""
    if total is None:
        lines = list(lines)
        total = len(lines)
    shown, used = [], 0
    for line in itertools.islice(lines, limit):
        line = capped(line, LINE_LIMIT)
        if shown and used + len(line) > budget:
            break
        shown.append(line)
        used += len(line) + 1
    if total > len(shown):
        shown.append(more.format(count=total - len(shown)))
    return shown
