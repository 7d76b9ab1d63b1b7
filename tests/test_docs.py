"""Every documented sample runs, so the docs can't drift from the code.

What runs, per page (README.md and every docs/**/*.md), in page order:

* each ```python block, all blocks of a page in one fresh namespace (``__name__`` is
  ``"__main__"``), in a fresh temporary working directory that holds a copy of
  ``examples/``;
* in each ```sh block, every command line whose first word is ``recprep`` or ``python``
  (``pip``, ``make``, ``export``, ``docker``... lines are not run); in a ```console
  block, every ``$ `` line. Commands run with ``bash -c`` in the page's directory, with
  this interpreter's ``recprep`` and ``python`` first on ``PATH``, and must exit 0.
  Their output is not compared;
* other blocks (```text, ```json, ```dockerfile...) are not run.

Markers, an HTML comment on the line before a block's fence (blank lines allowed):

* ``<!-- not-run: REASON -->``: the block is not run. Only for what CI can't do: a
  cluster, S3 with real credentials, Docker (the image's ENTRYPOINT is checked by
  ``tests/test_prepare.py`` instead);
* ``<!-- file: NAME -->``: the block is written to ``NAME`` in the page's directory
  instead of being run (a model file a later command uses).

A page whose samples use ``executor="spark"`` or ``executor="ray"`` gets the session's
local SparkSession / Ray instance (``tests/conftest.py``), which recprep then joins; a page
whose samples use the name ``spark`` (``spark.read...``, ``rs.read(spark, ...)``) gets that
SparkSession as ``spark``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

#: pages written elsewhere whose samples don't run yet (or aren't marked yet): reported as
#: xfail, not as a failure. Remove a page from here as soon as its samples run.
PENDING: dict[str, str] = {}

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_MARKER = re.compile(r"^<!--\s*(?P<kind>not-run|file)\s*:\s*(?P<value>.*?)\s*-->$")
_RUN_SH = ("recprep", "python")
_ENGINES = {
    "spark_session": re.compile(r"""executor\s*=\s*["']spark["']"""),
    "ray_local": re.compile(r"""executor\s*=\s*["']ray["']"""),
}
_USES_SPARK = re.compile(r"\bspark\s*[.,)]")


@dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str | None = None  # "not-run" or "file"
    value: str = ""  # the marker's reason or file name

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.lang})"


def parse_blocks(text: str, page: str) -> list[Block]:
    """The fenced code blocks of a Markdown page, with their markers."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        fence, lang = match.group("fence"), match.group("info").strip().split(" ")[0]
        start, body = index, []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index][len(match.group("indent")):])
            index += 1
        index += 1  # the closing fence
        block = Block(page, start + 1, lang.lower(), "\n".join(body) + "\n")
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = _MARKER.match(lines[before].strip()) if before >= 0 else None
        if marker is not None:
            block.marker, block.value = marker.group("kind"), marker.group("value")
        blocks.append(block)
    return blocks


def shell_commands(block: Block) -> list[str]:
    """The commands of a sh/console block that the docs test runs."""
    text = block.code.replace("\\\n", " ")  # continuation lines
    commands = []
    for line in text.splitlines():
        line = line.strip()
        if block.lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:].strip()
        if line.split(" ", 1)[0] in _RUN_SH:
            commands.append(line)
    return commands


def _page_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _params():
    for path in PAGES:
        page = _page_id(path)
        marks = [pytest.mark.xfail(reason=PENDING[page], strict=False)] if page in PENDING else []
        yield pytest.param(path, id=page, marks=marks)


@pytest.mark.parametrize("path", list(_params()))
def test_page_samples_run(path: Path, tmp_path, monkeypatch, request):
    page = _page_id(path)
    blocks = parse_blocks(path.read_text(encoding="utf-8"), page)
    runnable = [b for b in blocks if b.marker != "not-run"]
    code = "".join(b.code for b in runnable if b.lang == "python")
    if not any(b.lang in ("python", "sh", "console") for b in runnable):
        pytest.skip("no runnable sample")
    namespace: dict = {"__name__": "__main__"}
    for fixture, pattern in _ENGINES.items():
        if pattern.search(code):
            request.getfixturevalue(fixture)
    if _USES_SPARK.search(code):
        namespace["spark"] = request.getfixturevalue("spark_session")
    shutil.copytree(ROOT / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    ran = 0
    for block in blocks:
        if block.marker == "not-run":
            assert block.value, f"{block}: say why the block is not run"
            continue
        if block.marker == "file":
            target = tmp_path / block.value
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code, encoding="utf-8")
            continue
        if block.lang == "python":
            source = "\n" * (block.line) + block.code  # tracebacks show the page's line numbers
            try:
                exec(compile(source, page, "exec"), namespace)
            except Exception as err:
                raise AssertionError(f"the python block at {block} failed: {err!r}") from err
            ran += 1
        elif block.lang in ("sh", "console"):
            for command in shell_commands(block):
                done = subprocess.run(
                    ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True,
                    text=True, timeout=300,
                )
                assert done.returncode == 0, (
                    f"{block}: `{command}` exited {done.returncode}\n"
                    f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
                )
                ran += 1
    if ran == 0:
        pytest.skip("every sample is marked not-run or is a file")


# -- the machinery itself ---------------------------------------------------------------------


def test_parse_blocks_markers_and_commands():
    text = "\n".join([
        "Intro.",
        "<!-- not-run: needs a Spark cluster -->",
        "",
        "```python",
        "convert(x, executor='spark')",
        "```",
        "<!-- file: model.py -->",
        "```python",
        "feature_columns = []",
        "```",
        "```sh",
        "pip install recprep",
        "recprep ls out/ \\",
        "    --json   # a comment",
        "docker run recprep",
        "python examples/demo.py out",
        "```",
        "```console",
        "$ recprep head out -n 1",
        "#0",
        "```",
    ])
    blocks = parse_blocks(text, "page.md")
    assert [(b.lang, b.marker, b.value) for b in blocks] == [
        ("python", "not-run", "needs a Spark cluster"),
        ("python", "file", "model.py"),
        ("sh", None, ""),
        ("console", None, ""),
    ]
    assert blocks[0].line == 4
    assert shell_commands(blocks[2]) == [
        "recprep ls out/      --json   # a comment",
        "python examples/demo.py out",
    ]
    assert shell_commands(blocks[3]) == ["recprep head out -n 1"]


def test_not_run_markers_are_few_and_explained():
    """The marker is for clusters, S3 with credentials and Docker: most samples run."""
    total = marked = 0
    for path in PAGES:
        for block in parse_blocks(path.read_text(encoding="utf-8"), _page_id(path)):
            if block.lang not in ("python", "sh", "console"):
                continue
            total += 1
            if block.marker == "not-run":
                marked += 1
                assert len(block.value) > 5, f"{block}: say why the block is not run"
    assert total > 0 and marked / total < 0.4, (marked, total)


def _hooks():
    path = DOCS / "hooks" / "recprep_docs.py"
    spec = importlib.util.spec_from_file_location("recprep_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._root = ROOT
    return module


def test_every_include_directive_resolves():
    """What the site build fills in (README, CHANGELOG, benchmark sections) exists, so a
    renamed benchmark heading fails here as well as in `make docs`."""
    hooks = _hooks()
    found = 0
    for path in DOCS.rglob("*.md"):
        for match in hooks._INCLUDE.finditer(path.read_text(encoding="utf-8")):
            found += 1
            source = ROOT / match.group("path")
            assert source.is_file(), f"{path.name} includes {source}, which does not exist"
            section = match.group("section")
            if section is not None:
                body = hooks._section(source.read_text(encoding="utf-8"), section)
                assert body, f"{path.name}: no section {section!r} in {source.name}"
    assert found >= 3


def test_cli_help_texts_for_the_site():
    text = _hooks()._help_texts()
    for command in ("recprep --help", "recprep prepare --help", "recprep cp --help",
                    "recprep ls --help", "recprep head --help", "recprep verify --help"):
        assert f"### `{command}`" in text
    assert "usage: recprep" in text
