"""The package's import graph has no cycle, module-level or local (inside a function).

Every ``import``/``from ... import`` statement anywhere in a module counts, wherever it
sits (a function-level import only hides a cycle until the function runs), except those
under ``if TYPE_CHECKING:``, which never run. ``from package import name`` is an edge to
the submodule ``package.name`` when there is one, else to the package itself.

Generic over ``src/recprep``: new and moved modules are picked up without editing this test.
Run it as a script to print the graph's edges (``python tests/test_structure.py``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "recprep"

Edge = tuple[str, str, str]  # (importer, imported, "file:line")


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``tree`` at any depth, skipping ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_edges(root: Path = PACKAGE) -> list[Edge]:
    """``(importer, imported, where)`` for each import of a package module by another."""
    modules = module_names(root)
    edges = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _imports(tree):
            where = f"{path.relative_to(root.parent)}:{node.lineno}"
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a name in a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.append((name, target, where))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def describe(component: list[str], edges: list[Edge]) -> str:
    """The edges inside one cycle, one per line, with where each import is."""
    members = set(component)
    inside = sorted({(a, b, w) for a, b, w in edges if a in members and b in members})
    return "\n".join(f"  {a} -> {b}  ({w})" for a, b, w in inside)


def test_the_package_has_no_import_cycle() -> None:
    edges = import_edges()
    assert len({a for a, _, _ in edges}) > 10, "the import graph looks empty: wrong path?"
    found = cycles(edges)
    assert not found, "import cycles (move what both sides need into a lower module):\n" + (
        "\n".join(describe(c, edges) for c in found)
    )


def test_the_cycle_finder_sees_local_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    (package / "d.py").write_text("import pkg.a\n")
    edges = import_edges(package)
    assert {(a, b) for a, b, _ in edges} == {
        ("pkg.a", "pkg.sub.b"), ("pkg.sub.b", "pkg.a"), ("pkg.d", "pkg.a")
    }
    assert cycles(edges) == [["pkg.a", "pkg.sub.b"]]


if __name__ == "__main__":
    for a, b, where in import_edges():
        print(f"{a} -> {b}  ({where})")
    for component in cycles(import_edges()):
        print("cycle:", " ".join(component))
