"""The site's code blocks as a reader sees them (issue 22 item 22).

* Every fenced block closes where Markdown closes it. A fence with text after it (```` ```
  `recprep --version` prints...````) is not a closing fence: the CLI page's block ran on
  and swallowed the paragraph and the next block. ``tests/test_docs.py`` runs the samples
  with a lenient reader that closed it anyway, so only this check sees it.
* No code line is longer than what a code block shows at 1280 px (the content column of
  Material with its two sidebars: :data:`CODE_COLUMNS` characters, measured in Chromium);
  longer lines hid behind a scroll bar. Pages are checked as the site builds them: with the
  files they include and the ``--help`` texts filled in.
* The API pages, whose docstring examples show what the code prints, wrap a long line.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

#: an opening fence (CommonMark): up to 3 spaces, 3+ backticks or tildes, an info string
#: (no backtick after backticks)
_OPENING = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def _hooks():
    spec = importlib.util.spec_from_file_location("recprep_docs_h4",
                                                  DOCS / "hooks" / "recprep_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module._root = ROOT
    return module


HOOKS = _hooks()
CODE_COLUMNS = getattr(HOOKS, "CODE_COLUMNS", 80)


@functools.cache
def _clean_help_texts() -> str:
    """The ``--help`` texts as the site's build makes them: in a fresh interpreter, whose
    registries hold only what recprep registers (this one's may hold formats that test
    modules register when they are imported)."""
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location("
            f"'h', {str(DOCS / 'hooks' / 'recprep_docs.py')!r}); m = importlib.util."
            "module_from_spec(spec); spec.loader.exec_module(m); "
            "sys.stdout.write(m._help_texts())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return done.stdout


HOOKS._help_texts = _clean_help_texts


def fenced_blocks(text: str) -> tuple[list[tuple[int, list[str]]], list[str]]:
    """The fenced code blocks of a Markdown text as CommonMark reads them: ``(line of the
    opening fence, the block's lines)`` each; and the problems: a line inside a block that
    starts with its fence but has text after it (no closing fence: the block goes on), a
    block never closed."""
    lines = text.splitlines()
    blocks: list[tuple[int, list[str]]] = []
    problems: list[str] = []
    index = 0
    while index < len(lines):
        opening = _OPENING.match(lines[index])
        if opening is None or (opening.group("fence")[0] == "`" and "`" in opening.group("info")):
            index += 1
            continue
        fence = opening.group("fence")
        start, body = index + 1, []
        index += 1
        while index < len(lines):
            line = lines[index]
            stripped = line.lstrip(" ")
            indent = len(line) - len(stripped)
            run = len(stripped) - len(stripped.lstrip(fence[0]))
            if indent <= 3 and run >= len(fence):
                if not stripped[run:].strip():
                    break  # the closing fence
                problems.append(
                    f"line {index + 1}: {line.strip()[:40]!r} starts like the fence of the "
                    f"block opened at line {start} but has text after it, so it doesn't "
                    "close the block: put the fence on a line of its own")
            body.append(line)
            index += 1
        else:
            problems.append(f"line {start}: the block opened here ({fence}) is never closed")
        blocks.append((start, body))
        index += 1
    return blocks, problems


def _as_built(path: Path) -> str:
    """The page's Markdown as the site's hooks hand it to MkDocs."""
    text = path.read_text(encoding="utf-8")
    if path.parent == ROOT:  # the README: the site's home page includes it
        return text
    page = SimpleNamespace(file=SimpleNamespace(src_uri=path.relative_to(DOCS).as_posix()))
    return HOOKS.on_page_markdown(text, page, SimpleNamespace(docs_dir=str(DOCS)), None)


def _page_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", PAGES, ids=_page_id)
def test_every_fence_closes_where_markdown_closes_it(path):
    _, problems = fenced_blocks(_as_built(path))
    assert not problems, f"{_page_id(path)}: " + "; ".join(problems)


@pytest.mark.parametrize("path", PAGES, ids=_page_id)
def test_code_lines_fit_the_page_at_1280_px(path):
    blocks, _ = fenced_blocks(_as_built(path))
    long = [f"block at line {start}: {len(line)} characters: {line.strip()[:50]!r}..."
            for start, body in blocks for line in body if len(line) > CODE_COLUMNS]
    assert not long, (f"{_page_id(path)}: code lines longer than the {CODE_COLUMNS} "
                      "characters a code block shows at 1280 px (wrap them, or shorten "
                      "them):\n" + "\n".join(long))


def test_the_checks_see_what_markdown_sees():
    broken = "```text\n$ recprep head pk\n``` `recprep --version` prints:\n\n```console\n" \
             "$ recprep --version\n```\n"
    blocks, problems = fenced_blocks(broken)
    assert len(blocks) == 1 and blocks[0][1][1].startswith("``` `recprep")  # swallowed
    assert [p.split(":")[0] for p in problems] == ["line 3", "line 5"]  # ```console too
    assert "doesn't close the block" in problems[0]
    _, problems = fenced_blocks("```python\nx = 1\n")
    assert problems == ["line 1: the block opened here (```) is never closed"]
    nested = "````markdown\n```python\nx = 1\n```\n````\n"  # a longer fence shows fences
    assert fenced_blocks(nested) == ([(1, ["```python", "x = 1", "```"])], [])
    assert fenced_blocks("``` `inline` code, not a fence\n") == ([], [])


def test_help_texts_fit_the_page():
    long = [line for line in HOOKS._help_texts().splitlines() if len(line) > CODE_COLUMNS]
    assert not long, long


def test_api_pages_wrap_long_docstring_lines():
    css = (DOCS / "stylesheets" / "recprep.css").read_text(encoding="utf-8")
    rule = re.search(r"\.md-typeset \.doc-contents pre > code \{(?P<body>[^}]*)\}", css)
    assert rule is not None and "white-space: pre-wrap" in rule.group("body")
