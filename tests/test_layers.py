"""The package's import graph: no cycle, and no import of the package's own modules inside a
function unless it defers a heavy or optional dependency (CONTRIBUTING.md, "The layers"; the
layers themselves are the import-linter contracts in pyproject.toml, checked by `lint-imports`)."""

import ast
import importlib
import re
from pathlib import Path

import grimp
import pytest

import itemsampling

SRC = Path(itemsampling.__file__).resolve().parent
PACKAGE = "itemsampling"
#: the comment that must sit on the line above a function-level import of the package's own modules
#: (or above the first line of its block of imports): it says which dependency the import defers
DEFERRED = re.compile(r"#\s*deferred:\s*\S")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _own_target(node, module: str, is_package: bool) -> str | None:
    """The package module an import statement names, or None for a third-party / standard one."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names if a.name == PACKAGE or a.name.startswith(PACKAGE + ".")]
        return names[0] if names else None
    if node.level == 0:
        mod = node.module or ""
        return mod if mod == PACKAGE or mod.startswith(PACKAGE + ".") else None
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def function_level_imports(source: str, module: str, is_package: bool = False) -> list:
    """``[(line, statement, target, deferred)]`` for every import of the package's own modules inside
    a function body (any depth); ``deferred`` is whether the line above it, or above the first line
    of its run of consecutive import lines, is a ``# deferred: ...`` comment."""
    lines = source.splitlines()
    tree = ast.parse(source)
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                target = _own_target(child, module, is_package)
                if target is not None:
                    i = child.lineno - 2  # the line above, 0-based
                    while i >= 0 and re.match(r"\s*(from\s+\S+\s+)?import\s", lines[i]):
                        i -= 1
                    deferred = i >= 0 and bool(DEFERRED.search(lines[i]))
                    found.append((child.lineno, lines[child.lineno - 1].strip(), target, deferred))
            visit(child, inside)

    visit(tree, False)
    return found


def _sources():
    for path in sorted(SRC.rglob("*.py")):
        yield path, _module_name(path), path.name == "__init__.py"


def test_function_level_imports_only_defer_a_dependency():
    bad = []
    for path, module, is_package in _sources():
        for line, stmt, _, deferred in function_level_imports(path.read_text(), module, is_package):
            if not deferred:
                bad.append(f"{path.relative_to(SRC.parent)}:{line}: {stmt}")
    assert not bad, ("imports of the package's own modules inside functions, without a '# deferred: <what>' "
                     "comment above them (import at module level, or say which heavy/optional dependency it "
                     "defers):\n" + "\n".join(bad))


def test_the_ast_check_can_fail():
    """The check above on a hand-made module: a bare function-level import is found, a commented one
    passes, third-party and standard imports are not the package's."""
    src = ("import numpy as np\n\n"
           "def f():\n    from .kernel import kernel\n    return kernel\n\n"
           "def g():\n    # deferred: scipy's solvers\n    from .estimators import METHODS\n    from . import plan\n"
           "    import json\n    return METHODS, plan, json\n\n"
           "def h():\n    import itemsampling.metrics\n    from itemsampling import sampling\n    return 0\n")
    found = function_level_imports(src, "itemsampling.mod")
    assert [(line, target, deferred) for line, _, target, deferred in found] == [
        (4, "itemsampling.kernel", False), (9, "itemsampling.estimators", True), (10, "itemsampling", True),
        (15, "itemsampling.metrics", False), (16, "itemsampling", False)]


def _cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_has_no_cycle():
    """Every import statement of the package (inside functions too, grimp reads them all), each
    module (a package's ``__init__`` included) one node: no cycle."""
    g = grimp.build_graph(PACKAGE, cache_dir=None)
    graph = {m: g.find_modules_directly_imported_by(m) for m in g.modules}
    assert len(graph) >= 30
    assert "itemsampling.estimators.grid" in graph["itemsampling.estimators.distribution"]
    assert _cycles(graph) == []


@pytest.mark.parametrize("module, name, home", [
    ("itemsampling.estimators.grid", "grid_fit_rank_distribution", "itemsampling.estimators.distribution"),
    ("itemsampling.estimators.grid", "grid_mes_dual", "itemsampling.estimators.distribution"),
    ("itemsampling.estimators.grid", "grid_corrected_metrics", "itemsampling.estimators.corrected"),
    ("itemsampling.estimators.grid", "grid_estimate_metrics", "itemsampling.estimators.estimate"),
    ("itemsampling.estimators.grid", "GRID_METHODS", "itemsampling.estimators.estimate"),
    ("itemsampling.estimators", "grid_estimate_metrics", "itemsampling.estimators.estimate"),
    ("itemsampling.estimators.distribution", "pool_metric_matrix", "itemsampling.estimators.grid"),
    ("itemsampling.estimators.conditional", "check_target", "itemsampling.estimators.estimate"),
    ("itemsampling.estimators.weighted", "read_weighted_file", "itemsampling.inputs"),
    ("itemsampling.estimators.weighted", "draw_weighted_decoys", "itemsampling.candidates"),
    ("itemsampling.cli", "read_rank_file", "itemsampling.inputs"),
    ("itemsampling.cli", "InputError", "itemsampling.inputs"),
    ("itemsampling.cli", "_k_value", "itemsampling.inputs"),
])
def test_moved_names_keep_their_old_address(module, name, home):
    assert getattr(importlib.import_module(module), name) is getattr(importlib.import_module(home), name)


def test_grid_fit_alias_and_unknown_names():
    from itemsampling.estimators import grid
    from itemsampling.estimators.distribution import FitResult

    assert grid.GridFit is FitResult
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        grid.nope  # noqa: B018
