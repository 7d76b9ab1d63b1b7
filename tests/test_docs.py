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
  ``tests/write/test_prepare.py`` instead);
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


@pytest.fixture
def registries_restored():
    """Names a page's samples register (a codec, a format...) are removed afterwards, so
    the registries other tests see don't depend on which page ran first."""
    from recprep.registry import registries

    before = {group: set(reg.names()) for group, reg in registries().items()}
    yield
    for group, reg in registries().items():
        if group not in before:  # made by a module imported meanwhile: its built-ins
            continue
        for name in set(reg.names()) - before[group]:
            reg.pop(name)


@pytest.mark.parametrize("path", list(_params()))
@pytest.mark.usefixtures("registries_restored")
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


# -- the site as users see it: API reference, links from disk, plots ---------------------------

_RAW_ROLE = re.compile(r":(?:py:)?[a-z]+:`")
#: the same on a built page, where Markdown has made the backquotes <code>
_RAW_ROLE_HTML = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|exc|data|obj|const):(?:`|<code)")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _roles():
    return _load(DOCS / "hooks" / "recprep_griffe.py", "recprep_griffe")


def _src_docstrings():
    import ast

    for path in sorted((ROOT / "src" / "recprep").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                docstring = ast.get_docstring(node, clean=False)
                if docstring:
                    yield f"{path.relative_to(ROOT)}:{getattr(node, 'name', '<module>')}", docstring


def test_sphinx_roles_become_code_linked_where_documented():
    roles = _roles()
    documented = {"recprep.RecordIO", "recprep.read.reader.RecordIO.set_epoch",
                  "recprep.spark.write"}

    def resolve(target, role):
        full = {"RecordIO": "recprep.RecordIO",
                "set_epoch": "recprep.read.reader.RecordIO.set_epoch"}
        path = full.get(target, target)
        return path if path in documented else None

    text = ("Read with :class:`~recprep.RecordIO` (:class:`RecordIO`), call :meth:`set_epoch`, "
            "write with :func:`recprep.spark.write`; see :mod:`recprep.read.fileindex`, "
            ":py:func:`helper`, :class:`!RecordIO` and :attr:`the seed <seed>`.")
    assert roles.convert_roles(text, resolve) == (
        'Read with <code><autoref identifier="recprep.RecordIO" optional>RecordIO</autoref></code>'
        ' (<code><autoref identifier="recprep.RecordIO" optional>RecordIO</autoref></code>), call '
        '<code><autoref identifier="recprep.read.reader.RecordIO.set_epoch" optional>set_epoch()'
        '</autoref></code>, write with <code><autoref identifier="recprep.spark.write" optional>'
        "recprep.spark.write()</autoref></code>; see `recprep.read.fileindex`, `helper()`, "
        "`RecordIO` and `the seed`."
    )
    assert roles.parse_role("class", "~a.b.C") == ("C", "a.b.C")
    assert roles.parse_role("meth", "C.m") == ("C.m()", "C.m")


def test_private_bases_give_way_to_their_public_bases():
    """A class whose bases include a private class (``X(_Located, ValueError)``) shows
    "Bases: RecprepError, ValueError"."""

    class Cls:  # what the extension reads of a griffe Class
        def __init__(self, name, bases, resolved=()):
            self.name, self.bases, self.resolved_bases = name, bases, list(resolved)

    located = Cls("_Located", ["RecprepError"])
    deeper = Cls("_Deeper", ["_Located", "OSError"], [located])
    public_bases = _roles()._public_bases
    assert public_bases(Cls("CorruptDataError", ["_Located", "ValueError"], [located])) == [
        "RecprepError", "ValueError"]
    assert public_bases(Cls("PickleRefusedError", ["_Located"], [located])) == ["RecprepError"]
    assert public_bases(Cls("X", ["_Deeper", "RecprepError"], [deeper])) == [
        "RecprepError", "OSError"]


def test_every_role_and_doctest_in_the_source_shows_on_the_site():
    """The docstrings use roles the API pages convert (none shows raw), and every doctest is
    in an Examples section or fenced (none shows as nested quotes)."""
    roles = _roles()
    converted = 0
    for where, docstring in _src_docstrings():
        text = roles.convert_roles(roles.fix_sections(docstring), lambda target, role: None)
        assert not _RAW_ROLE.search(text), f"{where}: a role the site would show raw: {text!r}"
        converted += docstring != text
        section, fenced = None, False
        lines = text.splitlines()
        for index, line in enumerate(lines):
            if line.strip().startswith("```"):
                fenced = not fenced
            if (line.strip() and index + 1 < len(lines)
                    and re.fullmatch(r"\s*-{3,}\s*", lines[index + 1])):
                section = line.strip()
            if line.lstrip().startswith(">>>"):
                assert fenced or section == "Examples", f"{where}: doctest shown as quotes"
    assert converted > 50


def test_mkdocs_config_for_reading_from_disk():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["use_directory_urls"] is False  # page.html links: the site works from disk
    assert config["strict"] is True
    plugins = [next(iter(p)) if isinstance(p, dict) else p for p in config["plugins"]]
    assert "offline" not in plugins  # it loads a script from unpkg.com on every page
    python = next(p for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    options = python["mkdocstrings"]["handlers"]["python"]["options"]
    for extension in options["extensions"]:
        assert (ROOT / extension.split(":")[0]).is_file(), extension
    for css in config["extra_css"]:
        assert (DOCS / css).is_file(), css


def test_plots_open_full_size_on_click():
    hooks = _hooks()
    html = '<p>Text</p>\n<p><img alt="Core" src="img/bench-core.png" /></p>'
    assert hooks.link_figures(html) == (
        '<p>Text</p>\n<p><a class="recprep-figure" href="img/bench-core.png" '
        'title="Open full size"><img alt="Core" src="img/bench-core.png" /></a></p>'
    )
    inline = '<p>See <img src="a.png"> here</p>'
    assert hooks.link_figures(inline) == inline


def test_plots_are_legible_at_the_width_of_the_page():
    """Every PNG is drawn for the content column: its smallest text renders >= 11 px there
    (Chromium at 1280 px: the column is 688 px; 12.5 px measured)."""
    import struct

    plots = _load(ROOT / "benchmarks" / "plots.py", "recprep_plots")
    px_per_point = plots.COLUMN_PX / plots.WIDTH_IN / 72
    assert plots.MIN_FONT_PT * px_per_point >= 11
    sizes = [v for k, v in plots.STYLE.items() if k.endswith("size") and k != "figure.dpi"]
    assert min(sizes) >= plots.MIN_FONT_PT
    assert set(plots.FIGURES) == {p.name for p in (DOCS / "img").glob("bench-*.png")}
    for name in plots.FIGURES:
        head = (DOCS / "img" / name).read_bytes()[:24]
        width, _height = struct.unpack(">II", head[16:24])  # the PNG's IHDR
        assert width == round(plots.WIDTH_IN * plots.DPI), f"{name}: {width} px wide; make plots"


def test_built_site_has_no_raw_roles_and_links_to_files():
    """If `make docs` has built site/: no Sphinx role on the API pages, and every relative
    link of every page names a file (page.html, not page/), so the site works from disk."""
    from urllib.parse import unquote, urlsplit

    site = ROOT / "site"
    if not (site / "api").is_dir():
        pytest.skip("no site/ built (make docs)")
    stale = "site/ may be stale: rebuild it with make docs"
    for page in (site / "api").glob("*.html"):
        text = re.sub(r"<pre.*?</pre>", "", page.read_text(encoding="utf-8"), flags=re.S)
        raw = _RAW_ROLE_HTML.search(text)
        assert raw is None, f"{page.name}: a raw role, {raw}; {stale}"
        for bases in re.findall(r"Bases: (.*?)</p>", text, flags=re.S):
            assert not re.search(r">_[A-Za-z]", bases), f"{page.name}: private base in {bases}"
    for page in site.rglob("*.html"):
        if page.name == "404.html":  # served by a web server for any path: absolute links
            continue
        for url in re.findall(r'(?:href|src)="([^"]*)"', page.read_text(encoding="utf-8")):
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or not parts.path:
                continue
            target = page.parent / unquote(parts.path)
            assert target.is_file(), f"{page.relative_to(site)} links to {url}; {stale}"
