"""``recprep ls PATH...``: the shard sets in a directory and what they hold."""

from __future__ import annotations

import argparse

HELP = "list the shard sets (prefixes) in a directory: shards, records, size, format, codec"
DESCRIPTION = """\
List the shard sets in a directory (or those a glob or 'dir/prefix' names):
shard count, records, bytes, format, codec and compressor. The facts come from
each set's manifest; a set without one is described from its chunk headers (no
record is decoded), and its codec is shown as unknown. SHARDS reads 3/4 when a
shard is missing."""
EXAMPLES = """\
examples:
  recprep ls out/
  recprep ls 'out/train-*-of-*' out/test
  recprep ls s3://bucket/datasets/ --json
  recprep ls s3://bucket/datasets/ \\
      --storage-options '{"endpoint_url": "http://127.0.0.1:9000"}'
  AWS_ENDPOINT_URL=http://127.0.0.1:9000 recprep ls s3://bucket/datasets/
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a directory, a glob, or dir/prefix; local or any fsspec URL")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


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
            str(s.num_shards) if s.complete else f"{s.shards_present}/{s.num_shards}",
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
