"""``recprep profile PATH [reader options] [--seconds N] [--json]``: how fast a set reads,
and where the time goes."""

from __future__ import annotations

import argparse
import json
import time
from itertools import islice
from typing import Any

HELP = "read a shard set for N seconds: the rate, where the time goes, and a hint"
DESCRIPTION = """\
Read PATH with RecordIO and the options given, pass after pass, for --seconds
(or until one pass yields nothing), doing nothing with the instances: the rate
printed is the most the reader delivers to a training loop on this machine. It
says where the reader's time went (fetching: opening, reading, checking and
decompressing chunks; decoding: the codec; other: the rest of the reader's own
work), from reader.stats(); with --num-threads, fetching and decoding run in
threads and are summed over them, so they may add up past 100%. The hint names
the first rule that holds (see the docs' page "Where the time goes"): chunks
smaller than 64 KiB -> bigger chunks; decoding the larger part -> more worker
processes; fetching the larger part -> prefetch threads, else a cache for an
object store, else more workers."""
EXAMPLES = """\
examples:
  recprep profile out/train                     10 s, instances one at a time
  recprep profile out/train --num-threads 4 --batch-size 256
  recprep profile s3://bucket/data/train --seconds 30 --cache-dir /tmp/c
  recprep profile out/train --json              the figures as one JSON object
"""

#: instances (or batches) read between looks at the clock
_STEP = 256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._common import decoding_options

    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a glob, a directory, dir/prefix, or files (read in order)")
    parser.add_argument("--seconds", type=float, default=10.0, metavar="N",
                        help="how long to read (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--num-threads", type=int, default=0, metavar="N",
                        help="prefetch threads (default 0)")
    parser.add_argument("--batch-size", type=int, default=None, metavar="N",
                        help="read batches of N (reader.batches) instead of instances")
    parser.add_argument("--shuffle", action="store_true", help="shuffled passes")
    parser.add_argument("--seed", type=int, default=None, help="the shuffle's seed")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="keep local copies of remote shards there")
    decoding_options(parser)
    parser.add_argument("--max-chunk-bytes", type=int, default=None, metavar="BYTES",
                        help="largest chunk accepted (default 256 MiB)")


def run(args: argparse.Namespace) -> int:
    from ..errors import InvalidArgumentError
    from ..read.reader import RecordIO

    if not args.seconds > 0:
        raise InvalidArgumentError(f"--seconds must be more than 0, got {args.seconds}")
    options: dict[str, Any] = {} if args.max_chunk_bytes is None else {
        "max_chunk_bytes": args.max_chunk_bytes}
    reader = RecordIO(
        args.paths, codec=args.codec, format=args.format, allow_pickle=args.allow_pickle,
        on_corrupt=args.on_corrupt, storage_options=args.storage_options,
        num_threads=args.num_threads, shuffle=args.shuffle, seed=args.seed,
        cache_dir=args.cache_dir, **options)
    elapsed, complete = read_for(reader, args.seconds, args.batch_size)
    report = profile_report(reader, elapsed, complete, " ".join(args.paths))
    report["batch_size"] = args.batch_size
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_as_text(report))
    return 0


def read_for(reader: Any, seconds: float, batch_size: int | None) -> tuple[float, int]:
    """Read passes of ``reader`` for ``seconds`` (or until a pass yields nothing): the
    seconds it took and the passes completed."""
    began = time.perf_counter()
    deadline, complete = began + seconds, 0
    while True:
        stream = reader() if batch_size is None else reader.batches(batch_size)
        got, over = 0, False
        try:
            while not over and time.perf_counter() < deadline:
                taken = sum(1 for _ in islice(stream, _STEP))
                got, over = got + taken, taken < _STEP
        finally:
            stream.close()
        complete += over
        if not over or got == 0 or time.perf_counter() >= deadline:
            return time.perf_counter() - began, complete


def profile_report(reader: Any, elapsed: float, complete: int, where: str) -> dict[str, Any]:
    """The figures ``recprep profile`` prints, from ``reader.stats()`` after reading
    for ``elapsed`` seconds."""
    from ..read.readstats import Setup, stall_hint

    stats = reader.stats()
    setup = Setup(where, reader.num_threads, stats.requests > 0, reader.cache is not None,
                  len(reader.paths))
    hint = stall_hint(stats, setup)
    other = max(0.0, elapsed - stats.fetching - stats.decoding)
    return {
        "path": where, "seconds": elapsed, "num_threads": reader.num_threads,
        "passes_started": stats.passes, "passes_complete": complete,
        "instances": stats.instances, "record_bytes": stats.record_bytes,
        "instances_per_second": stats.instances / elapsed,
        "mb_per_second": stats.record_bytes / elapsed / 1e6,
        "time": {"fetching": stats.fetching, "decoding": stats.decoding, "other": other},
        "hint": {"rule": hint.rule, "text": hint.text},
        "stats": stats.as_dict(),
    }


def _as_text(report: dict[str, Any]) -> str:
    seconds, spent, stats = report["seconds"], report["time"], report["stats"]
    shares = ", ".join(f"{name} {value / seconds:.0%} ({value:.2f} s)"
                       for name, value in spent.items())
    how = "instances one at a time" if report["batch_size"] is None else (
        f"batches of {report['batch_size']}")
    lines = [
        f"profile of {report['path']} (num_threads={report['num_threads']}, {how})",
        f"read   {report['instances']:,} instances, {report['record_bytes'] / 1e6:,.1f} MB "
        f"of records in {seconds:.2f} s ({report['passes_complete']} passes complete)",
        f"rate   {report['instances_per_second']:,.0f} instances/s, "
        f"{report['mb_per_second']:,.2f} MB/s",
        f"time   {shares}",
    ]
    if stats["requests"]:
        lines.append(f"store  {stats['requests']:,} requests, {stats['bytes'] / 1e6:,.1f} MB "
                     f"fetched, {stats['retries']} retries, {stats['throttled']} throttled")
    lines.append(f"hint   {report['hint']['rule']}: {report['hint']['text']}")
    return "\n".join(lines)
