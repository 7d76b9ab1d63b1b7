"""``recprep head PATH [-n 5]``: the first instances, pretty-printed."""

from __future__ import annotations

import argparse

HELP = "print the first instances of a shard set (arrays by dtype, shape and a preview)"
DESCRIPTION = """\
Print the first N instances that RecordIO(PATH) yields, in order: numpy arrays by dtype,
shape and their first items, other values by type and a short repr. Pickled values are
refused unless --allow-pickle: unpickling runs code chosen by whoever wrote the file."""
EXAMPLES = """\
examples:
  recprep head out/train                  the first 5 instances of the set out/train
  recprep head 'out/train-*-of-*' -n 20
  recprep head s3://bucket/data/train -n 1 --allow-pickle
  recprep head legacy.recordio --codec raw      records as bytes, undecoded
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a glob, a directory, dir/prefix, or files (read in order)")
    parser.add_argument("-n", "--num", type=int, default=5, metavar="N",
                        help="how many instances (default 5)")
    parser.add_argument("--allow-pickle", action="store_true",
                        help="unpickle pickled values (only for data you trust)")
    parser.add_argument("--codec", default=None,
                        help="decode with this codec (default: the manifest's, else recprep)")


def _paths(fs_paths: list[str], storage_options: dict | None) -> list[str]:
    """``dir/prefix`` (no such file) means the set's shards: ``dir/prefix-*-of-*``."""
    from ..shards import has_magic
    from ..storage import resolve

    result = []
    for path in fs_paths:
        fs, resolved = resolve(path, storage_options)
        if not has_magic(resolved) and not fs.exists(resolved):
            path = path.rstrip("/") + "-*-of-*"
        result.append(path)
    return result


def run(args: argparse.Namespace) -> int:
    from ..errors import PickleRefusedError
    from ..tools.inspect import describe, head

    paths = _paths(args.paths, args.storage_options)
    try:
        instances = head(
            paths, args.num, allow_pickle=args.allow_pickle, codec=args.codec,
            storage_options=args.storage_options,
        )
    except PickleRefusedError as err:
        raise PickleRefusedError(
            "the record holds a pickled value, and unpickling can execute arbitrary code; "
            "rerun with --allow-pickle if you trust where this data came from",
            path=err.path, offset=err.offset, record_index=err.record_index,
        ) from None
    for index, instance in enumerate(instances):
        if isinstance(instance, tuple):
            print(f"#{index}")
            for field, value in enumerate(instance):
                print(f"  [{field}] {describe(value)}")
        else:
            print(f"#{index}  {describe(instance)}")
    return 0
