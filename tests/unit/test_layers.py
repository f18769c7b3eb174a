"""The package's layers, read from the source (AST; nothing is imported): imports only go down, and no cycle.

core, modelfile < bundle < analysis, demo < plots, batch < entry points (cli, serve, the package's API).
Imports inside functions count: they are still a dependency, only a later one.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "explain"
RANK = {"core": 0, "modelfile": 0, "bundle": 1, "analysis": 2, "demo": 2, "plots": 3, "batch": 3}
ENTRY = 4  # explain/__init__.py, __main__.py, cli.py, serve.py
FORBIDDEN = ("streamlit", "ui", "app", "pages")
MAX_TOP_MODULES = 10


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py") if "_dashboard" not in p.parts}


def _imports(path: Path, name: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` of ``path`` names, at any depth of the file."""
    found = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from explain.core import ig`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("explain."):
            found.add(node.value)  # importlib.import_module("explain.x") in the lazy __getattr__ tables
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path, name) if m in modules and m != name}
    return graph


def _rank(module: str) -> int:
    parts = module.split(".")
    return RANK.get(parts[1], ENTRY) if len(parts) > 1 else ENTRY


def test_explain_never_imports_streamlit_or_the_app():
    offenders = []
    for name, path in _modules().items():
        for imported in _imports(path, name):
            if imported.split(".")[0] in FORBIDDEN:
                offenders.append(f"{name} imports {imported}")
    assert not offenders, offenders


def test_lower_layers_never_import_higher_ones():
    offenders = [f"{a} (layer {_rank(a)}) imports {b} (layer {_rank(b)})"
                 for a, targets in _graph().items() for b in targets
                 if _rank(b) > _rank(a) and not a.endswith("__init__") and a.count(".") >= 2]
    assert not offenders, "\n".join(offenders)


def test_plots_and_batch_do_not_import_each_other():
    graph = _graph()
    offenders = [f"{a} imports {b}" for a, targets in graph.items() for b in targets
                 if a.count(".") >= 1 and b.count(".") >= 1 and _rank(a) == _rank(b) == 3
                 and a.split(".")[1] != b.split(".")[1]]
    assert not offenders, offenders


def test_no_import_cycle():
    graph = _graph()
    # a package's __init__ that lazily names its submodules is not a real edge back (PEP 562 tables)
    edges = {a: {b for b in targets if not (a == b.rsplit(".", 1)[0] or b == a.rsplit(".", 1)[0])}
             for a, targets in graph.items()}
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_top_of_the_package_is_short():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    subpackages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert set(RANK) <= set(subpackages), subpackages


@pytest.mark.parametrize("package", sorted(RANK))
def test_importing_a_subpackage_stays_light(package):
    """A subpackage's ``__init__`` imports no submodule (so `import explain.core.errors` never loads TensorFlow)."""
    init = PACKAGE / package / "__init__.py"
    imported = _imports(init, f"explain.{package}")
    assert not {m for m in imported if m.startswith("explain.")} - {f"explain.{package}"}, imported


@pytest.mark.parametrize("package", sorted(RANK))
def test_a_subpackage_names_every_module_it_holds(package):
    """``explain.<package>.X`` works without an import for every module X of the folder (the lazy table is whole)."""
    init = (PACKAGE / package / "__init__.py").read_text(encoding="utf-8")
    table = next(ast.literal_eval(node.value) for node in ast.parse(init).body
                 if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_MODULES")
    assert set(table) == {p.stem for p in (PACKAGE / package).glob("*.py") if p.stem != "__init__"}


MAX_FUNCTION_LINES = 80


def test_no_function_of_the_package_is_over_80_lines():
    """Readable functions: a longer one is split into named steps (docstrings and comments count as lines)."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "\n".join(long)
