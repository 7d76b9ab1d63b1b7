"""``recprep ls PATH...``: the shard sets in a directory and what they hold."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "list the shard sets (prefixes) in a directory: shards, records, size, format, codec"
DESCRIPTION = """\
List the shard sets in a directory (or the one a glob or 'dir/prefix' names):
shard count, records, bytes, format, codec and compressor. The facts come from
each set's manifest; a set without one is described from its chunk headers (no
record is decoded), and its codec is shown as unknown. SHARDS reads 3/4 when a
shard is missing. Shards named by path (one shard, a glob of a few) are
described by their own facts, and SHARDS reads '3 of 8'; paths that are the
files of one set (an unquoted glob) show that set once. A glob that matches
files of several sets is an error: name one, or list them."""
EXAMPLES = """\
examples:
  recprep ls out/
  recprep ls 'out/train-*-of-*' out/test
  recprep ls out/train-00003-of-00009         one shard: its facts (1 of 10)
  recprep ls s3://bucket/datasets/ --json
  recprep ls s3://bucket/datasets/ \\
      --storage-options '{"endpoint_url": "http://127.0.0.1:9000"}'
  AWS_ENDPOINT_URL=http://127.0.0.1:9000 recprep ls s3://bucket/datasets/
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a directory, a glob, or dir/prefix; local or any fsspec URL")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _shards(info: Any) -> str:
    """``8``; ``3/4`` when a shard is missing; ``3 of 8`` for shards named by path."""
    if info.set_shards is not None:
        return f"{info.shards_present} of {info.set_shards}"
    return str(info.num_shards) if info.complete else f"{info.shards_present}/{info.num_shards}"


def run(args: argparse.Namespace) -> int:
    from ..tools import list_datasets
    from ._common import dumps, human_bytes, table

    sets = list_datasets(args.paths, storage_options=args.storage_options)
    if args.json:
        print(dumps([s.to_dict() for s in sets]))
        return 0
    rows = [
        [
            s.path,
            _shards(s),
            "?" if s.records is None else str(s.records),
            human_bytes(s.bytes),
            s.format,
            s.codec,
            s.compressor,
            s.source,
        ]
        for s in sets
    ]
    headers = ["SET", "SHARDS", "RECORDS", "SIZE", "FORMAT", "CODEC", "COMPRESSOR", "FROM"]
    print(table(rows, headers, right={1, 2, 3}))
    for s in sets:
        for note in s.notes:
            print(f"note: {s.path}: {note}")
    return 0
