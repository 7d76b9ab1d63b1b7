"""``recprep head PATH [-n 5]``: the first instances, pretty-printed."""

from __future__ import annotations

import argparse
import sys

HELP = "print the first instances of a shard set (arrays by dtype, shape and a preview)"
DESCRIPTION = """\
Print the first N instances that RecordIO(PATH) yields, in order: numpy arrays
by dtype, shape and their first items, other values by type and a short repr.
Pickled values are refused unless --allow-pickle: unpickling runs code chosen by
whoever wrote the file."""
EXAMPLES = """\
examples:
  recprep head out/train                  the first 5 instances of out/train
  recprep head 'out/train-*-of-*' -n 20
  recprep head s3://bucket/data/train -n 1 --allow-pickle
  recprep head legacy.recordio --codec raw      records as bytes, undecoded
  recprep head damaged-00000-of-00001 --on-corrupt skip
                                          read around damage (warns)
  recprep head data.bin --format tfrecord  a file whose format isn't detected
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._common import decoding_options

    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a glob, a directory, dir/prefix, or files (read in order)")
    parser.add_argument("-n", "--num", type=int, default=5, metavar="N",
                        help="how many instances (default 5)")
    decoding_options(parser)
    parser.add_argument("--max-chunk-bytes", type=int, default=None, metavar="BYTES",
                        help="largest chunk accepted (default 256 MiB)")


def run(args: argparse.Namespace) -> int:
    import warnings

    from ..errors import InvalidArgumentError, RecprepWarning
    from ..tools import describe, head

    if args.num < 0:
        raise InvalidArgumentError(f"-n must be 0 or more, got {args.num}")
    options = {} if args.max_chunk_bytes is None else {"max_chunk_bytes": args.max_chunk_bytes}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecprepWarning)
        instances = head(
            args.paths, args.num, codec=args.codec, allow_pickle=args.allow_pickle,
            format=args.format, on_corrupt=args.on_corrupt,
            storage_options=args.storage_options, **options,
        )
    for warning in caught:
        if issubclass(warning.category, RecprepWarning):
            print(f"recprep: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename,
                                 warning.lineno)
    for index, instance in enumerate(instances):
        if isinstance(instance, tuple):
            print(f"#{index}")
            for field, value in enumerate(instance):
                print(f"  [{field}] {describe(value)}")
        else:
            print(f"#{index}  {describe(instance)}")
    return 0
