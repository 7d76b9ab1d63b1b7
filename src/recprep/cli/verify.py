"""``recprep verify PATH...``: every chunk read, every checksum and manifest fact checked."""

from __future__ import annotations

import argparse
from typing import Any

HELP = "check every chunk, checksum and manifest count; exit status 1 if anything is wrong"
DESCRIPTION = """\
Read every chunk of every shard (checksums, decompression, record framing) and
compare each file's size, record count and CRC-32C with its manifest; report
shards missing from a set and shards its manifest doesn't list. Prints a
per-shard table and each problem with its file and byte offset. Exit status: 0
when everything is intact, 1 when a problem was found, 2 when verify itself
failed (e.g. nothing at PATH)."""
EXAMPLES = """\
examples:
  recprep verify out/                         every shard set in out/
  recprep verify out/train                    the set out/train
  recprep verify 'out/train-0000[0-4]-of-*'   some shards only
  recprep verify s3://bucket/data/ --json     a machine-readable report
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a directory, dir/prefix, a glob, a manifest or a file")
    parser.add_argument("--json", action="store_true", help="machine-readable report")
    parser.add_argument("-j", "--workers", type=int, default=4, metavar="N",
                        help="files checked at the same time (default 4)")
    parser.add_argument("--max-chunk-bytes", type=int, default=None, metavar="BYTES",
                        help="largest chunk accepted (default 256 MiB)")


def _render(report: Any) -> str:
    from ._common import table

    lines = []
    for checked in report.sets:
        where = f" (manifest {checked.manifest})" if checked.manifest else " (no manifest)"
        lines.append(f"{checked.path}{where if checked.prefix else ''}")
        rows = []
        for s in checked.shards:
            records = "-" if s.status == "missing" else str(s.records)
            if s.expected_records is not None and s.status != "ok":
                records += f"/{s.expected_records}"
            rows.append([
                s.name, s.status, "-" if s.status == "missing" else str(s.chunks), records,
                "-" if s.bytes is None else str(s.bytes), s.crc32c or "-",
            ])
        headers = ["SHARD", "STATUS", "CHUNKS", "RECORDS", "BYTES", "CRC32C"]
        lines.extend("  " + line for line in table(rows, headers, right={2, 3, 4}).splitlines())
        lines.extend(f"  note: {note}" for note in checked.notes)
    problems = report.problems
    if problems:
        lines.append("problems:")
        lines.extend(f"  {p}" for p in problems)
    shards = [s for c in report.sets for s in c.shards]
    counts = {k: sum(s.status == k for s in shards) for k in ("ok", "damaged", "missing")}
    verdict = "OK" if report.ok else f"FAILED ({len(problems)} problem(s))"
    lines.append(
        f"verify: {len(shards)} shard(s) in {len(report.sets)} set(s): {counts['ok']} ok, "
        f"{counts['damaged']} damaged, {counts['missing']} missing: {verdict}"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ..containers import DEFAULT_MAX_CHUNK_BYTES
    from ..tools import verify
    from ._common import dumps

    report = verify(
        args.paths,
        storage_options=args.storage_options,
        max_chunk_bytes=args.max_chunk_bytes or DEFAULT_MAX_CHUNK_BYTES,
        num_workers=args.workers,
    )
    print(dumps(report.to_dict()) if args.json else _render(report))
    return 0 if report.ok else 1
