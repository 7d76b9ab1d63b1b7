"""The package's layers: which part of recprep may import which (issue 23).

Every import counts — at module level, inside a function, under ``if TYPE_CHECKING:``,
of a parent package (``from .. import x``) — and so does every dotted path a registry is
given (``"recprep.containers.recordio:RecordIOFormat"``: the registering module depends on
it as surely as on an import). A module may import its own part and the parts below it,
never one above, and never another part of its own layer:

========  ==============================================================================
layer     parts
========  ==============================================================================
0 base    ``recprep._core``, ``recprep.errors``, ``recprep._version``
1         ``recprep.containers`` (formats: file bytes ⇄ records)
2         ``recprep.storage`` (files, names, manifests, side files, commits)
3         ``recprep.codecs`` (an instance ⇄ a record's bytes)
4         ``recprep.executors`` (where tasks run)
5         ``recprep.read``, ``recprep.write`` (sets → instances, instances → sets)
6         ``recprep.tools``, ``recprep.spark``
7         ``recprep.cli``
8         adapters: ``recprep.torch``, ``recprep.tf``, ``recprep.decorators``,
          ``recprep.lightning``
9         the face: ``recprep`` itself (``__init__``, ``registry``, ``names``,
          ``batching``, ``_moved``, ``__main__``), which nothing below imports
========  ==============================================================================

No module imports another part's private module (``_name``) or private name, but the
base's (``recprep._core`` is the base layer's home).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "recprep"

LAYERS: list[tuple[str, ...]] = [
    ("recprep._core", "recprep.errors", "recprep._version"),
    ("recprep.containers",),
    ("recprep.storage",),
    ("recprep.codecs",),
    ("recprep.executors",),
    ("recprep.read", "recprep.write"),
    ("recprep.tools", "recprep.spark"),
    ("recprep.cli",),
    ("recprep.torch", "recprep.tf", "recprep.decorators", "recprep.lightning"),
    ("recprep",),
]

Edge = tuple[str, str, str, bool]  # (importer, imported, where, a private name taken)


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def part_of(module: str) -> str:
    """The part a module belongs to: the longest layer entry that is a prefix of it."""
    best = "recprep"
    for layer in LAYERS:
        for part in layer:
            if (module == part or module.startswith(part + ".")) and len(part) > len(best):
                best = part
    return best


def level(part: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


_DOTTED = re.compile(r"""["'](recprep(?:\.\w+)+)(?::\w+)?["']""")


def _named(node: ast.AST, package: str, known: dict[str, Path]
           ) -> list[tuple[str, int, bool]]:
    """What ``node`` (an import, or a string holding a registry's dotted path) names:
    ``(module, line, a private name taken)``."""
    if isinstance(node, ast.Import):
        return [(alias.name, node.lineno, False) for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        named = []
        for alias in node.names:
            full = f"{base}.{alias.name}"
            private = alias.name.startswith("_") and not alias.name.endswith("__")
            named.append((full if full in known else base, node.lineno,
                          private and full not in known))
        return named
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
        return [(m.group(1), node.lineno, False) for m in _DOTTED.finditer(repr(node.value))
                if m.group(1) in known]  # a registry's lazy path
    return []


def edges(root: Path = PACKAGE) -> list[Edge]:
    """Every import (any depth, TYPE_CHECKING too) and registry dotted path of a module
    of the package, resolved to the module it names."""
    known = modules(root)
    found: list[Edge] = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            for target, line, private in _named(node, package, known):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.append((name, target, f"{path.relative_to(root.parent)}:{line}",
                                  private))
    return found


def _private_module(module: str) -> bool:
    return any(p.startswith("_") and p not in ("_core", "_version", "__init__") for p in
               module.split(".")[1:])


def violations(found: list[Edge]) -> list[str]:
    out = []
    for importer, imported, where, private_name in found:
        a, b = part_of(importer), part_of(imported)
        if a == b or level(a) == level(b) == 0:  # the base's parts build on each other
            continue
        if level(b) >= level(a):
            out.append(f"{importer} -> {imported} ({where}): layer {level(a)} {a} imports "
                       f"layer {level(b)} {b}")
        elif _private_module(imported) or private_name:
            out.append(f"{importer} -> {imported} ({where}): a private module or name of "
                       f"another part")
    return sorted(set(out))


def test_every_import_keeps_to_the_layers() -> None:
    found = edges()
    assert len(found) > 200, "no imports found: wrong path?"
    problems = violations(found)
    assert not problems, "imports across the layers (see this module's docstring):\n" + (
        "\n".join(problems))


def test_the_base_layer_imports_nothing_else_of_recprep() -> None:
    base = [e for e in edges() if level(part_of(e[0])) == 0]
    outside = sorted({f"{a} -> {b}" for a, b, _, _ in base if level(part_of(b)) != 0})
    assert not outside, outside


def test_the_layer_check_sees_what_it_should(tmp_path: Path) -> None:
    """A planted upward import, a function-level one, a TYPE_CHECKING one, a registry path
    and a private import are all found."""
    pkg = tmp_path / "recprep"
    for sub in ("", "_core", "containers", "read", "codecs"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "containers" / "a.py").write_text(textwrap.dedent("""
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from ..read import b
        def f():
            from ..codecs import c
        X = "recprep.read.b:Thing"
    """))
    (pkg / "read" / "b.py").write_text("from ..codecs._hidden import y\n")
    (pkg / "codecs" / "c.py").write_text("")
    (pkg / "codecs" / "_hidden.py").write_text("y = 1\n")
    problems = violations(edges(pkg))
    assert any("containers.a -> recprep.read.b" in p and "layer 1" in p for p in problems)
    assert sum("containers.a -> recprep.read.b" in p for p in problems) >= 1
    assert any("containers.a -> recprep.codecs.c" in p for p in problems)
    assert any("read.b -> recprep.codecs._hidden" in p and "private" in p for p in problems)


# -- defects found on the way (issue 23, item 1) ---------------------------------------------


def test_an_old_module_path_keeps_the_public_functions_functions() -> None:
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("ignore")
        import recprep
        import recprep.convert
        import recprep.prepare
        from recprep.convert import ConvertResult
        assert callable(recprep.convert) and recprep.convert.__name__ == "convert", recprep.convert
        assert callable(recprep.prepare) and recprep.prepare.__name__ == "prepare"
        assert ConvertResult is recprep.ConvertResult
        result = recprep.convert("memory://old-path", [1, 2, 3], 1, "o")
        assert result.records_per_shard == [3]
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_the_strict_mypy_modules_exist() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    strict = [o for o in config["tool"]["mypy"]["overrides"]
              if o.get("disallow_untyped_defs")][0]["module"]
    known = modules()
    for pattern in strict:
        prefix = pattern.removesuffix(".*")
        assert prefix in known, f"{pattern}: no such module (strict mode applies to nothing)"


def test_doctests_of_an_absent_engine_are_skipped(tmp_path: Path) -> None:
    """Doctests that import pandas or pyarrow skip, saying so, where they aren't installed."""
    (tmp_path / "blocker.py").write_text(textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("pandas", "pyarrow"):
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, Block())
    """))
    targets = ["src/recprep/write/tables.py", "src/recprep/write/inputs.py"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "blocker", "-p", "no:cacheprovider", "-q",
         "-rs", "--doctest-modules", *targets], capture_output=True, text=True, cwd=ROOT,
        env=env, timeout=300)
    assert "failed" not in done.stdout and "error" not in done.stdout.lower(), done.stdout
    assert re.search(r"SKIPPED .*needs pandas|SKIPPED .*needs pyarrow", done.stdout), done.stdout


def test_the_prepare_command_offers_every_registered_executor() -> None:
    import argparse

    from recprep.cli import prepare as command
    from recprep.executors import available_executors

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    [action] = [a for a in parser._actions if a.dest == "executor"]
    assert list(action.choices) == available_executors()


# -- a house a maintainer can find their way in (issue 23, targets) ---------------------------

#: the most lines a module may have, and lines of code (no docstring, comment or blank
#: line) a function may have
MODULE_LINES, FUNCTION_CODE_LINES, PUBLIC_PARAMETERS = 500, 60, 8
#: the command contract (recprep.cli): every command module defines these
PROTOCOL = frozenset({"HELP", "DESCRIPTION", "EXAMPLES", "add_arguments", "run",
                      "__getattr__"})


def code_lines(node: ast.AST, source: list[str]) -> int:
    """Lines of ``node`` that hold code: not blank, not only a comment, not a docstring."""
    skip: set[int] = set()
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(
                body[0].value.value, str):
            skip.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = range(node.lineno, node.end_lineno + 1)  # type: ignore[attr-defined]
    return sum(1 for n in lines if n not in skip and source[n - 1].strip()
               and not source[n - 1].strip().startswith("#"))


def too_big(root: Path = PACKAGE) -> list[str]:
    found = []
    for name, path in modules(root).items():
        text = path.read_text(encoding="utf-8")
        source = text.splitlines()
        if len(source) > MODULE_LINES:
            found.append(f"{name}: {len(source)} lines (at most {MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = code_lines(node, source)
                if lines > FUNCTION_CODE_LINES:
                    found.append(f"{name}.{node.name} (line {node.lineno}): {lines} lines "
                                 f"of code (at most {FUNCTION_CODE_LINES})")
    return found


def test_no_module_or_function_is_too_big() -> None:
    found = too_big()
    assert not found, "split these:\n" + "\n".join(found)


def top_level_names(root: Path = PACKAGE) -> dict[str, list[str]]:
    defined: dict[str, list[str]] = {}
    for name, path in modules(root).items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                names = []
            for defined_name in names:
                if defined_name not in PROTOCOL and not (
                        defined_name.startswith("__") and defined_name.endswith("__")):
                    defined.setdefault(defined_name, []).append(name)
    return defined


def defined_twice(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Top-level names defined in more than one module (a type variable ``T`` or a logger
    ``log`` aside)."""
    return {n: m for n, m in top_level_names(root).items()
            if len(m) > 1 and n not in ("T", "log")}


def test_every_top_level_name_is_defined_once() -> None:
    """A name leads to one definition."""
    twice = defined_twice()
    assert not twice, "\n".join(f"{n}: {', '.join(m)}" for n, m in sorted(twice.items()))


def too_many_parameters(root: Path = PACKAGE) -> list[str]:
    """Public calls with more than :data:`PUBLIC_PARAMETERS` positional-or-keyword
    parameters."""
    found = []
    for name, path in modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    not node.name.startswith("_") or node.name == "__init__"):
                params = [a.arg for a in node.args.posonlyargs + node.args.args
                          if a.arg not in ("self", "cls")]
                if len(params) > PUBLIC_PARAMETERS:
                    found.append(f"{name}.{node.name} (line {node.lineno}): {len(params)}")
    return found


def test_no_public_call_takes_more_than_eight_positional_or_keyword_parameters() -> None:
    """A public call with more options than that takes them by keyword, or as one options
    value."""
    found = too_many_parameters()
    assert not found, "\n".join(found)


def test_the_size_and_name_checks_see_what_they_should(tmp_path: Path) -> None:
    """A planted long module, long function, name defined twice and public call of nine
    parameters are each found; keyword-only parameters, docstrings and comments don't
    count."""
    pkg = tmp_path / "recprep"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_CODE_LINES + 1))
    (pkg / "long.py").write_text(
        f"def long():\n    \"\"\"Doc.\"\"\"\n{body}\n" + "# a comment\n" * MODULE_LINES)
    (pkg / "short.py").write_text(
        "def short():\n    \"\"\"Doc.\n\n" + "    more doc\n" * 80 + "    \"\"\"\n"
        + "    # comment\n" * 80 + "    return 1\n")
    (pkg / "twice_a.py").write_text("class Run:\n    pass\n")
    (pkg / "twice_b.py").write_text("Run = 1\n")
    (pkg / "calls.py").write_text(
        "def nine(a, b, c, d, e, f, g, h, i):\n    pass\n"
        "def keywords(a, b, c, d, e, f, g, h, *, i):\n    pass\n"
        "def _private(a, b, c, d, e, f, g, h, i):\n    pass\n")
    big = too_big(pkg)
    assert any(p.startswith("recprep.long:") for p in big)
    assert any(p.startswith("recprep.long.long (line 1)") for p in big)
    assert not any("short" in p for p in big)
    assert defined_twice(pkg) == {"Run": ["recprep.twice_a", "recprep.twice_b"]}
    assert too_many_parameters(pkg) == ["recprep.calls.nine (line 1): 9"]


if __name__ == "__main__":  # print the violations
    print("\n".join(violations(edges())) or "no violations")
    pytest.main([__file__, "-q"])
