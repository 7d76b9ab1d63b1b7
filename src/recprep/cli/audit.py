"""``recprep audit PATH --world 4 --stop 0.37 --resume-world 3``: is resume exactly-once?"""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "read a set through stops, resumes and world-size changes; check exactly-once"
DESCRIPTION = """\
Read the set PATH with your reader options twice: uninterrupted (--world ranks,
--epochs epochs), then stopped at each --stop (a fraction of all the instances),
every rank's state taken (through JSON, as a checkpoint), and resumed with
--resume-world ranks (the states combined when the world size changes) to the
end. Compare the two by instance (a digest of each decoded value, per epoch: a
multiset) and by order, and print the verdict: which instances are missing or
duplicated and where, and the first place the order differs. Exit status: 0
when every instance came exactly as often and in the same order, 1 when not, 2
when the check itself failed (e.g. a state the reader refuses). The set is read
twice per epoch: audit a sample of a large set."""
EXAMPLES = """\
examples:
  recprep audit out/train --world 4 --stop 0.37 --resume-world 3 \\
      --shuffle --seed 7
  recprep audit out/train --world 2 --stop 0.2 --stop 0.7 --epochs 2
  recprep audit 'out/train-*-of-*' --world 8 --stop 0.5 --resume-world 2 \\
      --shuffle --seed 1 --shuffle-buffer 1000 --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._common import decoding_options

    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a glob, a directory, dir/prefix, or files (read in order)")
    plan = parser.add_argument_group("the plan")
    plan.add_argument("--world", type=int, default=1, metavar="N",
                      help="ranks reading from the start (default 1)")
    plan.add_argument("--stop", type=float, action="append", default=None, metavar="F",
                      help="stop after this fraction of all the instances (repeat for "
                      "several stops; default 0.5)")
    plan.add_argument("--resume-world", type=int, action="append", default=None,
                      metavar="N", help="ranks after a stop: once for every stop, or "
                      "once per stop (default: --world)")
    plan.add_argument("--epochs", type=int, default=1, metavar="N",
                      help="epochs read (default 1)")
    plan.add_argument("--order", default="auto", choices=["auto", "rank", "global", "none"],
                      help="how order is compared: each rank's stream (same world), the "
                      "ranks concatenated (world changes), or not (default auto)")
    plan.add_argument("--limit", type=int, default=20, metavar="N",
                      help="most missing/duplicated instances listed (default 20)")
    plan.add_argument("--json", action="store_true", help="machine-readable report")
    reading = parser.add_argument_group("reader options (as RecordIO takes them)")
    reading.add_argument("--shuffle", action="store_true", help="shuffle each pass")
    reading.add_argument("--seed", type=int, default=None,
                         help="the shuffle's seed (default: drawn once, printed)")
    reading.add_argument("--shuffle-buffer", type=int, default=None, metavar="N",
                         help="records permuted together")
    reading.add_argument("--split", default="auto", choices=["auto", "shard", "range"],
                         help="how unshuffled passes split across ranks")
    reading.add_argument("--num-threads", type=int, default=0, metavar="N",
                         help="background reading threads (default 0)")
    decoding_options(reading)


def reader_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``RecordIO`` keywords the command's reader options say (the seed fixed once,
    so that every rank of every phase shares it)."""
    from ..read.shuffling import fresh_seed

    options: dict[str, Any] = {
        "shuffle": args.shuffle, "seed": fresh_seed() if args.seed is None else args.seed,
        "split": args.split, "num_threads": args.num_threads, "codec": args.codec,
        "format": args.format, "allow_pickle": args.allow_pickle,
        "on_corrupt": args.on_corrupt, "storage_options": args.storage_options}
    if args.shuffle_buffer is not None:
        options["shuffle_buffer"] = args.shuffle_buffer
    return options


def run(args: argparse.Namespace) -> int:
    from ..read.reader import RecordIO
    from ..tools.audit import Plan, check_exactly_once
    from ._common import dumps

    resume = args.resume_world
    plan = Plan(world=args.world, stops=args.stop or [0.5],
                resume_world=resume[0] if resume and len(resume) == 1 else resume,
                epochs=args.epochs)
    options = reader_options(args)
    paths = args.paths[0] if len(args.paths) == 1 else args.paths

    def make_reader(rank: int, world: int) -> RecordIO:
        return RecordIO(paths, rank=rank, world_size=world, **options)

    report = check_exactly_once(make_reader, plan, order=args.order, limit=args.limit)
    if args.json:
        print(dumps({**report.to_dict(), "seed": options["seed"]}))
    else:
        print(report)
        if args.shuffle:
            print(f"  seed: {options['seed']} (--seed {options['seed']} repeats this check)")
    sys.stdout.flush()
    return 0 if report.ok else 1
