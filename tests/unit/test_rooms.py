"""The code's rooms (issue 39), read from the source (AST; nothing imported): short functions, short pages,
arrays that travel together as one object rather than long parameter lists, one name for the request.

The same limits the issue's outside check applies: no function over 60 lines in explain/, ui/, pages/ and
app.py; no page of 110 lines or more; at most 10 functions under explain/ with more than 6 positional
parameters (``self``/``cls`` not counted, keyword-only ones after ``*`` not counted); ``Settings`` has
no second name.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 60
MAX_PAGE_LINES = 110
MAX_POSITIONAL = 6
MAX_WIDE_FUNCTIONS = 10


def _files(*roots: str) -> list[Path]:
    out = []
    for root in roots:
        path = ROOT / root
        out += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    return out


def _functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _positional(node) -> int:
    names = [a.arg for a in node.args.posonlyargs + node.args.args]
    return len(names) - (1 if names and names[0] in ("self", "cls") else 0)


def _where(path: Path, node) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"


def test_no_function_is_longer_than_60_lines():
    long = [f"{_where(p, f)} ({f.end_lineno - f.lineno + 1} lines)"
            for p in _files("explain", "ui", "pages", "app.py") for f in _functions(p)
            if f.end_lineno - f.lineno + 1 > MAX_LINES]
    assert not long, long


def test_every_page_is_short():
    lines = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in _files("pages")}
    long = {name: n for name, n in lines.items() if n >= MAX_PAGE_LINES}
    assert not long, long


def test_few_functions_take_more_than_six_positional_parameters():
    wide = [f"{_where(p, f)} ({_positional(f)})" for p in _files("explain") for f in _functions(p)
            if _positional(f) > MAX_POSITIONAL]
    assert len(wide) <= MAX_WIDE_FUNCTIONS, wide


def test_settings_has_one_name():
    aliases = []
    for path in _files("explain", "ui", "pages", "app.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == "Settings"):
                aliases.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom):
                aliases += [f"{path.relative_to(ROOT)}:{node.lineno}" for a in node.names
                            if a.name == "Settings" and a.asname not in (None, "Settings")]
    assert not aliases, aliases
