"""``recprep prepare``: the data-preparation job (a model file and a raw directory in,
shards out)."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "run the data-preparation job: MODEL_FILE + RAW_DIR -> shards in OUTPUT_DIR"

DESCRIPTION = """\
Run the data-preparation job. MODEL_FILE is the Python file you train with; it
defines `feature_columns` (what each instance holds) and
`prepare_data_for_a_single_file(filename)` (one raw file -> an instance, an
iterator of instances, or None to skip it). RAW_DIR is traversed recursively
(hidden files skipped, sorted order); each file is one task. The instances are
checked against feature_columns and written as tf.train.Example records (--codec
example, the default with feature columns) into RecordIO shards named
NAME_PREFIX-00000-of-NNNNN in OUTPUT_DIR, with NAME_PREFIX.manifest.json written
last.

local mode runs N worker processes on this machine; cluster mode runs on Spark
(default) or Ray (--executor ray) at --master / --address, with --conf key=value
passed to the engine."""

EXAMPLES = """\
examples:
  recprep prepare model.py raw/ out/
      this machine, one worker per CPU, 4 shards per worker
  recprep prepare model.py raw/ out/ local --num-workers 8 --num-shards 64 \\
      --include '*.png'
  recprep prepare model.py raw/ out/ --on-error skip
      skip files that fail or don't match feature_columns; report in
      out/data.skipped.json
  recprep prepare model.py s3://bucket/raw s3://bucket/train cluster \\
      --master spark://10.0.0.1:7077 --conf spark.executor.memory=4g
  recprep prepare model.py raw/ out/ cluster --executor ray --address auto
"""


def _conf_item(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key, value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def _coerce(value: str) -> Any:
    """Ray options are typed (num_cpus=4); Spark's conf are strings and stay strings."""
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(value.lower(), value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..containers import available_formats
    from ..executors import available_executors

    parser.add_argument("model_file", metavar="MODEL_FILE",
                        help="the model file (feature_columns, prepare_data_for_a_single_file)")
    parser.add_argument("raw_dir", metavar="RAW_DIR", help="the raw data directory (or URL)")
    parser.add_argument("output_dir", metavar="OUTPUT_DIR", help="where the shards go")
    parser.add_argument("mode", metavar="MODE", nargs="?", default="local",
                        choices=["local", "cluster"],
                        help="local (this machine, default) or cluster (Spark or Ray)")
    parser.add_argument("--num-workers", type=_positive_int, metavar="N",
                        help="parallel workers (default: this machine's CPU count)")
    parser.add_argument("--num-shards", type=_positive_int, metavar="M",
                        help="shards to write (default: 4 x num-workers)")
    parser.add_argument("--name-prefix", default="data",
                        help="shard name prefix (default: data)")
    parser.add_argument("--executor", choices=available_executors(),
                        help="default: processes in local mode, spark in cluster mode")
    parser.add_argument("--master", help="Spark master URL, e.g. spark://10.0.0.1:7077")
    parser.add_argument("--address", help="Ray address, e.g. auto or 10.0.0.1:6379")
    parser.add_argument("--connect-timeout", type=_seconds, default=60.0, metavar="SECONDS",
                        help="how long to wait for the --master or --address to answer "
                        "(default 60)")
    parser.add_argument("--conf", type=_conf_item, action="append", default=[],
                        metavar="KEY=VALUE",
                        help="engine setting (Spark conf / ray.init option); repeatable")
    parser.add_argument("--codec", choices=["example", "recprep"],
                        help="record encoding (default: example with feature_columns, "
                        "else recprep)")
    parser.add_argument("--format", choices=available_formats(), default="recordio",
                        help="container (default: recordio, what ElasticDL reads)")
    parser.add_argument("--compressor", choices=_compressors(),
                        help="compression (default: snappy for recordio, none for tfrecord; "
                        "zlib is tfrecord only)")
    parser.add_argument("--include", action="append", metavar="GLOB",
                        help="only files whose relative path or name matches; repeatable")
    parser.add_argument("--on-error", choices=["fail", "skip"], default="fail",
                        help="fail (default): stop at the first bad file; skip: skip bad "
                        "files and write a report")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing shard set with this prefix")
    parser.add_argument("--resume", action="store_true",
                        help="complete a run that was killed, reusing what it finished")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _compressors() -> list[str]:
    """Every compressor a registered format has (a format's own is checked by prepare)."""
    from ..containers import available_formats, get_format

    return sorted({c for name in available_formats() for c in get_format(name).compressors})


def run(args: argparse.Namespace) -> int:
    from ..write.prepare import prepare

    conf: dict[str, Any] = dict(args.conf)
    if args.executor == "ray" or (args.mode == "cluster" and args.address):
        conf = {k: _coerce(v) for k, v in conf.items()}
    result = prepare(
        args.model_file,
        args.raw_dir,
        args.output_dir,
        args.mode,
        num_workers=args.num_workers,
        num_shards=args.num_shards,
        name_prefix=args.name_prefix,
        executor=args.executor,
        master=args.master,
        address=args.address,
        conf=conf or None,
        codec=args.codec,
        format=args.format,
        compressor=args.compressor,
        include=args.include,
        on_error=args.on_error,
        overwrite=args.overwrite,
        storage_options=args.storage_options,
        progress=False if args.no_progress else None,
        resume=args.resume,
        connect_timeout=args.connect_timeout,
    )
    print(result.summary())
    for skipped in result.skipped:
        print(f"  skipped {skipped['file']}: {skipped['reason']}")
    return 0
