"""recprep storage benchmark: ``cp`` to S3 against ``s3fs.put``, and reading from S3.

Run ``python benchmarks/bench_storage.py`` for the full run (a 500 MB shard set),
``--quick`` for a 50 MB smoke run, ``--out benchmarks/RESULTS-storage.md`` to also write
the report to a file. The report is markdown on stdout; progress goes to stderr.

The S3 server is moto's (``python -m moto.server``), in its own process on 127.0.0.1,
so the server doesn't compete with the client for one interpreter's GIL. It keeps
objects in memory; loopback has no network cost, so the figures show what each client
does per byte, not what a real S3 link would allow.

What is measured (best of ``--reps``, ``time.perf_counter``):

* **recprep cp**: ``recprep.tools.copy(local_dir, "s3://bench/cp")``: parallel streams into
  hidden temporaries, each read back and checked (size, CRC-32C against the manifest),
  then moved to its final name (a server-side copy + delete on S3), manifest last;
* **s3fs.put**: ``S3FileSystem.put(files, "s3://bench/put/")`` of the same files: upload only;
* **read S3 / read local**: a full pass of ``RecordIO(glob)()`` over the set on S3 and
  on local disk (page cache warm), codec ``raw`` (1 MiB records of random bytes).

MB are 10**6 bytes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import recprep
from recprep import RecordIO, convert
from recprep.tools import copy

PREFIX = "bench"
RECORD_BYTES = 1 << 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    """moto's S3 server in a child process on 127.0.0.1; returns it and its endpoint."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto server did not start")


def make_set(directory: Path, size_mb: int, shards: int) -> int:
    """A shard set of ~size_mb MB: 1 MiB records of random bytes (raw codec, no compression)."""
    count = max(shards, -(-size_mb * 10**6 // RECORD_BYTES))

    def reader():
        rng = np.random.default_rng(0)
        for _ in range(count):
            yield rng.bytes(RECORD_BYTES)

    result = convert(str(directory), reader, shards, PREFIX, codec="raw", compressor="none")
    return result.total_bytes


def best(reps: int, setup: Callable[[], None], fn: Callable[[], object]) -> float:
    times = []
    for _ in range(reps):
        setup()
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def read_all(pattern: str, **kwargs) -> int:
    return sum(len(r) for r in RecordIO(pattern, **kwargs)())


def run(size_mb: int, shards: int, reps: int, workers: int) -> str:
    import s3fs

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    proc, endpoint = start_moto()
    tmp = Path(tempfile.mkdtemp(prefix="recprep-bench-storage-"))
    try:
        options = {"endpoint_url": endpoint}
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        fs.mkdir("bench")
        local = tmp / "set"
        log(f"writing a {size_mb} MB shard set into {local}")
        total = make_set(local, size_mb, shards)
        files = sorted(str(p) for p in local.iterdir())

        def clear(path: str) -> Callable[[], None]:
            def setup() -> None:
                if fs.exists(path):
                    fs.rm(path, recursive=True)
                fs.invalidate_cache()
            return setup

        log("recprep cp local -> s3")
        t_cp = best(reps, clear("bench/cp"), lambda: copy(
            str(local), "s3://bench/cp", storage_options=options, num_workers=workers,
            progress=False,
        ))
        log("s3fs.put local -> s3")
        t_put = best(reps, clear("bench/put"), lambda: fs.put(files, "bench/put/"))

        def sizes(path: str) -> list[tuple[str, int]]:
            listing = fs.ls(path, detail=True)
            return sorted((e["name"].rsplit("/", 1)[1], e["size"]) for e in listing)

        assert sizes("bench/put") == sizes("bench/cp"), "the copies differ"
        fs.rm("bench/put", recursive=True)
        log("RecordIO read from s3")
        t_s3 = best(reps, lambda: None, lambda: read_all(
            f"s3://bench/cp/{PREFIX}-*-of-*", storage_options=options))
        log("RecordIO read local")
        read_all(f"{local}/{PREFIX}-*-of-*")  # warm the page cache
        t_local = best(reps, lambda: None, lambda: read_all(f"{local}/{PREFIX}-*-of-*"))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    mb = total / 1e6
    rows = [
        ("`recprep cp` local -> S3 (checked)", t_cp, t_cp / t_put),
        ("`s3fs.put` local -> S3", t_put, 1.0),
        ("`RecordIO` read from S3", t_s3, t_s3 / t_local),
        ("`RecordIO` read local", t_local, 1.0),
    ]
    lines = [
        "# recprep storage benchmark",
        "",
        f"{dt.date.today()}, recprep {recprep.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPU(s); moto {_version('moto')} (own process, "
        f"127.0.0.1), s3fs {_version('s3fs')}; {shards} shards, {mb:.0f} MB "
        f"({total} bytes, 1 MiB records, raw codec, no compression); best of {reps}; "
        f"cp with {workers} workers.",
        "",
        "| operation | MB | seconds | MB/s | relative |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, seconds, relative in rows:
        lines.append(f"| {name} | {mb:.0f} | {seconds:.2f} | {mb / seconds:.0f} | "
                     f"{relative:.2f}x |")
    lines += [
        "",
        "`recprep cp` moves every byte three times where `s3fs.put` moves it once: up to "
        "a temporary, back down to check its size and CRC-32C, and a server-side copy to "
        "the final name (S3 has no rename). The relative column compares with `s3fs.put` "
        "for cp and with local reading for the S3 read.",
        "",
    ]
    return "\n".join(lines)


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--shards", type=int, default=10)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="50 MB, for a smoke run")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    size = 50 if args.quick else args.size_mb
    report = run(size, args.shards, args.reps, args.workers)
    print(report)
    if args.out is not None:
        args.out.write_text(report)
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
