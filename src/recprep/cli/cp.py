"""``recprep cp SRC... DEST``: copy shard sets between filesystems, every file checked."""

from __future__ import annotations

import argparse

HELP = "copy shard sets between filesystems (local, s3://, ...), every copy checked"
DESCRIPTION = """\
Copy files and shard sets into the directory DEST, on any two filesystems. SRC
is a directory (every file in it), a glob (one set's files), dir/prefix (a
whole set), a manifest (its set) or a file. Copying every shard of a set copies
its manifest too, last; copying some shards leaves it out, with a warning: the
copy is then not a committed set. Files are copied in parallel into hidden
temporaries in DEST, each read back and checked (size and CRC-32C, against the
manifest when it lists the file) before any gets its final name: a failed copy
leaves no partial file under a final name. Existing files are not replaced
unless --overwrite."""
EXAMPLES = """\
examples:
  recprep cp out/train s3://bucket/data/           one set (shards, manifest)
  recprep cp out/train out/test s3://bucket/data/  two sets (a glob names one)
  recprep cp 'out/train-0000[0-4]-of-*' sample/    some shards, not a set
  recprep cp s3://bucket/data/ /mnt/ssd/data/      every file of a directory
  recprep cp out/train s3://bucket/data/ \\
      --storage-options '{"endpoint_url": "http://127.0.0.1:9000"}'
  recprep cp s3://a/x gs://b/y --src-storage-options '{"anon": true}' \\
      --dest-storage-options @gcs.json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._common import parse_storage_options

    parser.add_argument("sources", nargs="+", metavar="SRC",
                        help="directory, glob, dir/prefix, manifest or file")
    parser.add_argument("dest", metavar="DEST", help="destination directory (any fsspec URL)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace destination files of the same name")
    parser.add_argument("-j", "--workers", type=int, default=8, metavar="N",
                        help="parallel transfers (default 8)")
    parser.add_argument("--src-storage-options", type=parse_storage_options, metavar="JSON",
                        default=None, help="storage options for SRC (default --storage-options)")
    parser.add_argument("--dest-storage-options", type=parse_storage_options, metavar="JSON",
                        default=None, help="storage options for DEST (default --storage-options)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (shown on a terminal by default)")


def run(args: argparse.Namespace) -> int:
    import sys
    import warnings

    from ..errors import RecprepWarning
    from ..tools import copy

    common = args.storage_options
    src = args.src_storage_options if args.src_storage_options is not None else common
    dest = args.dest_storage_options if args.dest_storage_options is not None else common
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecprepWarning)
        result = copy(
            args.sources,
            args.dest,
            storage_options=src,
            dest_storage_options=dest or {},
            overwrite=args.overwrite,
            num_workers=args.workers,
            progress=False if args.no_progress else None,
        )
    for warning in caught:
        if issubclass(warning.category, RecprepWarning):
            print(f"recprep: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename,
                                 warning.lineno)
    print(f"copied {result}")
    return 0
