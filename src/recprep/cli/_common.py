"""What every subcommand shares: common options, and plain-text output helpers.

Example
-------
>>> print(table([["p", "4", "1.5 KiB"]], ["PREFIX", "SHARDS", "SIZE"], right={1, 2}))
PREFIX  SHARDS     SIZE
p            4  1.5 KiB
>>> human_bytes(1536), human_bytes(12)
('1.5 KiB', '12 B')
>>> parse_storage_options('{"anon": true}')
{'anon': True}
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from ..errors import Remedy


def parse_storage_options(text: str) -> dict[str, Any]:
    """A JSON object, or ``@file.json`` holding one (an ``argparse`` type)."""
    source = text
    if text.startswith("@"):
        try:
            source = Path(text[1:]).read_text()
        except OSError as err:
            raise argparse.ArgumentTypeError(f"can't read {text[1:]}: {err}") from None
    try:
        value = json.loads(source)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(
            f"not valid JSON ({err}); e.g. '{{\"endpoint_url\": \"http://127.0.0.1:9000\"}}'"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {type(value).__name__}")
    return value


def common_options() -> argparse.ArgumentParser:
    """The options every subcommand takes (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("common options")
    group.add_argument(
        "--storage-options",
        metavar="JSON",
        type=parse_storage_options,
        default=None,
        help="fsspec storage options as a JSON object (or @file.json), e.g. "
        '\'{"endpoint_url": "http://127.0.0.1:9000"}\' for s3://; the usual environment '
        "variables (AWS_ENDPOINT_URL, AWS_PROFILE...) work too",
    )
    # SUPPRESS: given after the command, they override the top-level defaults
    group.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="log everything; show tracebacks")
    group.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="log what happens")
    return common


def decoding_options(parser: Any) -> None:
    """Add the options that say how records are read and decoded (``--codec``,
    ``--format``, ``--allow-pickle``, ``--on-corrupt``: the ``RecordIO`` keywords of the
    same names) to ``parser`` (a parser or an argument group)."""
    from ..containers import available_formats

    parser.add_argument("--codec", default=None,
                        help="decode with this codec (default: the manifest's, else recprep)")
    parser.add_argument("--format", default=None, choices=available_formats(),
                        help="container format (default: the manifest's, else detected)")
    parser.add_argument("--allow-pickle", action="store_true",
                        help="unpickle pickled values (only for data you trust)")
    parser.add_argument("--on-corrupt", default="raise", choices=["raise", "skip"],
                        help="raise (default): stop at damage; skip: read around it, with "
                        "a warning saying what was lost")


def say_as_option(parser: argparse.ArgumentParser) -> Callable[[Remedy], str | None]:
    """Say a :class:`~recprep.errors.Remedy` as ``parser``'s option whose ``dest`` is its
    Python keyword (None when ``parser`` has no such option, or not that value).

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--on-corrupt", choices=["raise", "skip"])
    >>> _ = parser.add_argument("--allow-pickle", action="store_true")
    >>> say = say_as_option(parser)
    >>> say(Remedy("on_corrupt", "skip")), say(Remedy("on_corrupt"))
    ('--on-corrupt skip', '--on-corrupt {raise,skip}')
    >>> say(Remedy("allow_pickle", True)), say(Remedy("format", "tfrecord"))
    ('--allow-pickle', None)
    """
    actions = {a.dest: a for a in parser._actions if a.option_strings}

    def say(remedy: Remedy) -> str | None:
        action = actions.get(remedy.option)
        if action is None:
            return None
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:  # --overwrite, --allow-pickle: says its value by being there
            return flag if all(v is None or v == action.const for v in remedy.values) else None
        if action.choices is not None:
            if any(v is not None and v not in action.choices for v in remedy.values):
                return None
            placeholder = "{" + ",".join(map(str, action.choices)) + "}"
        else:
            placeholder = action.metavar if isinstance(action.metavar, str) else (
                action.dest.upper()
            )
        return " or ".join(
            f"{flag} {placeholder if v is None else shlex.quote(str(v))}" for v in remedy.values
        )

    return say


def human_bytes(size: int | None) -> str:
    """``1.5 KiB`` style sizes (``-`` for None)."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def table(
    rows: Sequence[Sequence[str]], headers: Sequence[str], right: Collection[int] = ()
) -> str:
    """Rows under headers in aligned columns; columns in ``right`` are right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def dumps(value: Any) -> str:
    """JSON for ``--json`` output: indented, keys in the order given."""
    return json.dumps(value, indent=2)
