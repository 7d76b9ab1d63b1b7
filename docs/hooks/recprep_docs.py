"""MkDocs hooks for recprep's site: content that lives elsewhere, filled in at build time.

Directives are HTML comments, so a page reads fine on GitHub too:

* ``<!-- include: README.md -->`` — a file of the repository, whole; links to ``docs/X``
  become links to ``X`` (the README links into ``docs/`` from the repository root);
* ``<!-- include: benchmarks/RESULTS.md | A: MNIST-like -->`` — the body of the first
  section whose heading starts with that text, down to the next heading of the same or a
  higher level (the page writes its own heading);
* ``<!-- cli-help -->`` — the real ``--help`` of ``recprep`` and of each registered
  command, from :func:`recprep.cli.build_parser`, wrapped to :data:`CODE_COLUMNS`.

Links to files of the repository outside ``docs/`` (``[results](../benchmarks/RESULTS.md)``)
can't be links on the site, which holds only ``docs/``: they become the file's path in code
(``benchmarks/RESULTS.md``), when the file exists; a link to a file that doesn't exist is
left alone, for MkDocs to report.

A picture alone in its paragraph (``![Throughput](img/bench-core.png)``, the benchmark plots)
becomes a link to itself, so a click opens it full size (``docs/stylesheets/recprep.css``
makes it fill the content column and shows a zoom cursor).

A directive that can't be filled (a missing file or section) is a warning, so
``mkdocs build --strict`` fails. Nothing here touches the network.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.recprep_docs")

_INCLUDE = re.compile(r"^<!--\s*include:\s*(?P<path>[^|]+?)\s*(?:\|\s*(?P<section>.+?)\s*)?-->$",
                      re.MULTILINE)
_CLI_HELP = re.compile(r"^<!--\s*cli-help\s*-->$", re.MULTILINE)
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_DOCS_LINK = re.compile(r"\]\(docs/")
_LINK = re.compile(r"(?<!!)\[(?P<label>[^\]\n]+)\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")

_FIGURE = re.compile(r'<p>(?P<img><img\b[^>]*?\bsrc="(?P<src>[^"]+)"[^>]*>)</p>')

_root = Path.cwd()

#: the characters of a code line that fit a code block of the content column at 1280 px
#: (Material, its sidebars shown; 656 px for 0.6 em-wide monospace characters, measured in
#: Chromium): the longest line of a page's code blocks, and the width of the --help texts
CODE_COLUMNS = 80


def on_config(config):
    global _root
    _root = Path(config.config_file_path).parent
    return config


def _section(text: str, wanted: str) -> str | None:
    lines = text.splitlines()
    in_fence = False
    start = level = None
    for number, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            continue
        if start is None:
            if match.group(2).strip().startswith(wanted):
                start, level = number + 1, len(match.group(1))
        elif len(match.group(1)) <= level:
            return "\n".join(lines[start:number]).strip("\n")
    if start is None:
        return None
    return "\n".join(lines[start:]).strip("\n")


def _include(match: re.Match[str], page: str) -> str:
    path, section = match.group("path"), match.group("section")
    source = _root / path
    if not source.is_file():
        log.warning("recprep_docs: %s includes %s, which does not exist", page, path)
        return match.group(0)
    text = source.read_text(encoding="utf-8")
    if section is not None:
        body = _section(text, section)
        if body is None:
            log.warning("recprep_docs: %s includes section %r of %s, which has no such "
                        "heading", page, section, path)
            return match.group(0)
        text = body
    return _DOCS_LINK.sub("](", text)


def _help_texts() -> str:
    os.environ["COLUMNS"] = str(CODE_COLUMNS + 2)  # argparse wraps help at COLUMNS - 2
    from recprep.cli import build_parser

    parser = build_parser()
    blocks = [("recprep --help", parser.format_help())]
    for action in parser._subparsers._group_actions:  # the registered commands, in order
        for name, command in action.choices.items():
            blocks.append((f"recprep {name} --help", command.format_help()))
    return "\n".join(f"### `{title}`\n\n```text\n{text.rstrip()}\n```\n" for title, text in blocks)


def _outside_docs(match: re.Match[str], page_dir: Path, docs: Path) -> str:
    target = match.group("target")
    if "://" in target or target.startswith(("/", "mailto:")):
        return match.group(0)
    resolved = (page_dir / target).resolve()
    if resolved.is_relative_to(docs) or not resolved.is_relative_to(_root):
        return match.group(0)
    if not resolved.exists():
        return match.group(0)  # MkDocs reports the broken link
    path = resolved.relative_to(_root).as_posix()
    label = match.group("label").strip("`")
    if label in (path, resolved.name, target):
        return f"`{path}`"
    return f"{match.group('label')} (`{path}` in the repository)"


def on_page_markdown(markdown, page, config, files):
    name = page.file.src_uri
    markdown = _INCLUDE.sub(lambda m: _include(m, name), markdown)
    docs = Path(config.docs_dir).resolve()
    page_dir = (docs / name).parent
    markdown = _LINK.sub(lambda m: _outside_docs(m, page_dir, docs), markdown)
    if _CLI_HELP.search(markdown):
        markdown = _CLI_HELP.sub(lambda m: _help_texts(), markdown)
    return markdown


def link_figures(html: str) -> str:
    """Each picture alone in its paragraph, wrapped in a link to itself (full size on click).

    >>> link_figures('<p><img src="a.png"></p>')
    '<p><a class="recprep-figure" href="a.png" title="Open full size"><img src="a.png"></a></p>'
    """
    return _FIGURE.sub(lambda m: f'<p><a class="recprep-figure" href="{m.group("src")}" '
                                 f'title="Open full size">{m.group("img")}</a></p>', html)


def on_page_content(html, page, config, files):
    return link_figures(html)
