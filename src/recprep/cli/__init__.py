"""The ``recprep`` command: subcommands found through a small registry.

A subcommand is a module with

* ``HELP``: a one-line summary, shown by ``recprep --help``;
* ``EXAMPLES``: examples, shown at the end of ``recprep NAME --help``;
* ``add_arguments(parser)``: adds its arguments to an ``argparse`` parser that already
  has the common options (``--storage-options``, ``--debug``, ``--verbose``);
* ``run(args) -> int``: does the work and returns the exit status.

It is made known with :func:`register_command`, or by another distribution through an
entry point in the group ``recprep.commands`` (``name = "package.module"``); modules are
imported when the parser is built, so keep their top-level imports light.

Exit status: 0 success; 1 ``verify`` or ``audit`` found problems; 2 an error (a one-line
``recprep: error: ...`` on stderr; ``--debug`` adds the traceback); 130 interrupted.

An error's remedy (:class:`~recprep.errors.Remedy`, e.g. ``on_corrupt='skip'``) is said as
the command's option whose ``dest`` is that Python keyword (``--on-corrupt skip``), and
left out when the command has no such option: name options after the Python keywords.

Example
-------
>>> {"cp", "ls", "head", "verify"} <= set(available_commands())
True
>>> main(["--version"])  # doctest: +ELLIPSIS
recprep ...
0
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from .._core.registry import Registry
from .._version import __version__
from ..errors import InvalidArgumentError, RecprepError
from ._common import common_options, say_as_option

__all__ = ["available_commands", "build_parser", "main", "register_command"]

EXIT_OK, EXIT_PROBLEMS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

_EPILOG = """\
examples:
  recprep ls out/                             the shard sets in a directory
  recprep head out/train -n 3                 the first 3 instances of a set
  recprep verify s3://bucket/data/ --json     check every chunk and checksum
  recprep cp 'out/train-*' s3://bucket/data/  copy a shard set and its manifest
  recprep profile out/train --num-threads 4   how fast it reads, where time goes
  recprep audit out/train --shuffle --world 4 --stop 0.37 --resume-world 3
                                              resume checked: each instance once

remote storage: any fsspec URL (s3://, gs://, hdfs://, memory://...); pass
options with --storage-options '{"endpoint_url": "http://127.0.0.1:9000"}' or
the usual environment variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).

exit status: 0 success, 1 verify or audit found problems, 2 error,
130 interrupted.
Run 'recprep COMMAND --help' for a command's options and examples.
"""


def _check_command_module(name: str, module: ModuleType) -> None:
    missing = [a for a in ("HELP", "add_arguments", "run") if not hasattr(module, a)]
    if missing:
        raise InvalidArgumentError(
            f"command {name!r} ({getattr(module, '__name__', module)}) lacks {missing}; a "
            "command module defines HELP, add_arguments(parser) and run(args)"
        )


_COMMANDS: Registry[ModuleType] = Registry("command", group="recprep.commands",
                                            check=_check_command_module)


def register_command(name: str, module: str, *, replace: bool = False) -> None:
    """Make ``recprep NAME`` run the subcommand defined by ``module`` (an import path).

    Examples
    --------
    >>> register_command("ls", "recprep.cli.ls")
    Traceback (most recent call last):
    ...
    recprep.errors.InvalidArgumentError: a command named 'ls' is already registered \
(recprep.cli.ls); pass replace=True to replace it
    """
    _COMMANDS.register(name, module, replace=replace)


def available_commands() -> list[str]:
    """The registered command names, in registration order (plug-ins last)."""
    return _COMMANDS.names()


def build_parser() -> argparse.ArgumentParser:
    """The ``recprep`` argument parser, with every registered command."""
    parser = argparse.ArgumentParser(
        prog="recprep",
        description="recprep: training data in sharded RecordIO files; tools to copy,\n"
        "list, inspect and verify shard sets on any filesystem.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"recprep {__version__}")
    parser.add_argument("--debug", action="store_true", help="log everything; tracebacks")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    parser.set_defaults(debug=False, verbose=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    common = common_options()
    for name, module in _COMMANDS.items():  # a broken plug-in: left out, with a warning
        command = sub.add_parser(
            name,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            epilog=getattr(module, "EXAMPLES", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[common],
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run, command_parser=command)
    return parser


def _configure_logging(debug: bool, verbose: bool) -> logging.Handler:
    """Log to stderr for one run of :func:`main` (it removes the handler when done)."""
    logger = logging.getLogger("recprep")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING)
    return handler


def _one_line(err: BaseException, parser: argparse.ArgumentParser | None = None) -> str:
    if isinstance(err, RecprepError) and parser is not None:
        message = err.message(say_as_option(parser))
    else:
        message = str(err)
    lines = message.strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(err, RecprepError):
        return text or type(err).__name__
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``recprep`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, usage errors
        return stop.code if isinstance(stop.code, int) else EXIT_ERROR
    if getattr(args, "run", None) is None:
        parser.print_usage(sys.stderr)
        print("recprep: error: a command is required (see recprep --help)", file=sys.stderr)
        return EXIT_ERROR
    logger = logging.getLogger("recprep")
    level = logger.level
    handler = _configure_logging(args.debug, args.verbose)
    try:
        return _run_command(args)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _run_command(args: argparse.Namespace) -> int:
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("recprep: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `recprep ls | head -1`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        hint = "" if isinstance(err, RecprepError) or args.debug else " (--debug shows more)"
        print(f"recprep: error: {_one_line(err, args.command_parser)}{hint}", file=sys.stderr)
        return EXIT_ERROR


for _name in ("prepare", "cp", "ls", "head", "verify", "audit", "profile"):
    register_command(_name, f"recprep.cli.{_name}")
