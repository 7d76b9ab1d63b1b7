"""Peak RSS of a pass over one large shard on S3, against the fetcher's byte budget.

The rss part of ``benchmarks/bench_storage.py`` (``--network --part rss``; issue 24's
target: a pass's peak RSS within the documented byte budget plus 64 MB, whatever the
shard size). moto's S3 server (``tests.support.motoranges``: a range GET reads only its
range) runs in its own process; one shard of ``--size-mb`` MB (default 1024) of 1 MiB
random instances (raw codec, no compression) is written to it with ``convert``. Then each
contender reads the whole shard once in a fresh interpreter, the set named by its path
(no listing), with the default :class:`~recprep.FetchOptions`:

* ``read()``: instance by instance, each dropped once counted;
* ``batches(8)``: eight instances a batch.

Each child reports its ``VmHWM`` (peak RSS) before the pass (imports, client, reader
built) and after it, the fetcher's ``peak_bytes`` (bytes in flight plus fetched and not
yet read) and the pass's seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
INSTANCE_BYTES = 1 << 20
CONTENDERS = ("read()", "batches(8)")


def _instances(count: int) -> Any:
    """``count`` instances of 1 MiB, made as they are written (never held together)."""
    rng = np.random.default_rng(1)
    for _ in range(count):
        yield rng.bytes(INSTANCE_BYTES)


def _vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child_main(name: str, endpoint: str, url: str) -> None:
    """One contender's pass, in this (fresh) process: its figures as a JSON line."""
    from recprep import FetchOptions, RecordIO

    reader = RecordIO(url, storage_options={"endpoint_url": endpoint})
    before = _vm_hwm_mb()
    started, seen = time.perf_counter(), 0
    if name == "read()":
        for instance in reader():
            seen += len(instance)
    else:
        for batch in reader.batches(8):
            seen += sum(len(x) for x in batch)
    seconds = time.perf_counter() - started
    stats = reader.stats()
    print(json.dumps({"before_mb": before, "peak_mb": _vm_hwm_mb(), "seconds": seconds,
                      "bytes": seen, "peak_held_mb": stats.peak_bytes / 2**20,
                      "budget_mb": FetchOptions().budget_bytes / 2**20}))


def run_rss(size_mb: int, reps: int) -> str:
    """Write the shard, run the contenders (reps interleaved), and the report."""
    sys.path.insert(0, str(HERE))
    from bench_storage import log, start_moto

    from recprep import convert

    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)  # moto's: the children inherit them
    moto, endpoint = start_moto()
    try:
        import s3fs

        s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True).mkdir("bench")
        count = size_mb * 10**6 // INSTANCE_BYTES
        log(f"writing one shard of {count} MiB to moto")
        result = convert("s3://bench/big", _instances(count), 1, "p", codec="raw",
                         compressor="none", storage_options={"endpoint_url": endpoint})
        runs: dict[str, list[dict]] = {name: [] for name in CONTENDERS}
        for rep in range(reps):
            for name in CONTENDERS:
                log(f"rep {rep + 1}: {name}")
                proc = subprocess.run(
                    [sys.executable, str(HERE / "bench_storage.py"), "--rss-child", name,
                     "--endpoint", endpoint, "--source", "s3://bench/big/p"],
                    cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
                if proc.returncode != 0:
                    raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")
                runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    finally:
        moto.kill()
    return _report(runs, result.total_bytes, reps)


def _report(runs: dict[str, list[dict]], size: int, reps: int) -> str:
    import platform

    load = os.getloadavg()[0]
    lines = [f"One shard of {size / 1e6:.0f} MB (1 MiB instances, raw codec, no "
             f"compression) on moto, read whole by a fresh process with the default fetch "
             f"options; {reps} rep(s), the highest peak of them; Python "
             f"{platform.python_version()}; load average {load:.1f} at the end.", "",
             "| contender | RSS before the pass MB | peak RSS MB | budget MiB | budget + 64 MB "
             "| fetcher's peak held MiB | seconds | within? |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, found in runs.items():
        worst = max(found, key=lambda r: r["peak_mb"])
        if any(r["bytes"] != worst["bytes"] for r in found):
            raise AssertionError(f"{name}: the reps read different byte counts")
        bound = worst["budget_mb"] * 2**20 / 1e6 + 64
        lines.append(
            f"| {name} | {worst['before_mb']:.0f} | {worst['peak_mb']:.0f} | "
            f"{worst['budget_mb']:.0f} | {bound:.0f} | {worst['peak_held_mb']:.0f} | "
            f"{min(r['seconds'] for r in found):.2f} | "
            f"{'yes' if worst['peak_mb'] <= bound else 'no'} |")
    return "\n".join(lines)
