"""recprep storage benchmark: ``cp`` to S3 against ``s3fs.put``, and reading from S3.

Run ``python benchmarks/bench_storage.py`` for the full run (a 500 MB shard set),
``--quick`` for a 50 MB smoke run, ``--out benchmarks/RESULTS-storage.md`` to also write
the report to a file. The report is markdown on stdout; progress goes to stderr.

The S3 server is moto's (``python -m tests.support.motoranges``: ``moto.server`` made
to read only the bytes a range GET asks for, as a real store does), in its own process
on 127.0.0.1, so the server doesn't compete with the client for one interpreter's GIL. It keeps
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
import dataclasses
import datetime as dt
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import median_high as _median  # the middle rep (of an even count: the upper)

import numpy as np

import recprep
from recprep import RecordIO, convert
from recprep.tools import copy

HERE = Path(__file__).resolve().parent
PREFIX = "bench"
RECORD_BYTES = 1 << 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    """moto's S3 server in a child process on 127.0.0.1; returns it and its endpoint.

    It is ``tests.support.motoranges``: moto answering a range GET by reading only the
    range, as a real store does (moto itself copies the whole object for each one)."""
    sys.path.insert(0, str(ROOT))
    from tests.support.motoranges import serve

    return serve()


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


# -- the network run (--network): a link emulator in front of moto, recprep and its peers ---

ROOT = HERE.parent
INSTANCE_BYTES = 100_000
#: (label, one-way delay s, bytes/s per connection, bytes/s of the link)
LINKS = [("25 ms, 10 MB/s per connection, 80 MB/s link", 0.025, 10e6, 80e6),
         ("50 ms, 5 MB/s per connection, 40 MB/s link", 0.050, 5e6, 40e6)]
#: contender -> (module it needs, epochs it runs, what epoch 2 reads)
CONTENDERS = {
    "recprep read()": ("recprep", 1, ""),
    "recprep batches(256)": ("recprep", 1, ""),
    "recprep read(), cache_dir": ("recprep", 2, "its cache_dir"),
    "litdata StreamingDataset": ("litdata", 2, "its cache"),
    "mosaic StreamingDataset": ("streaming", 2, "its local copy"),
}


def instance(index: int) -> bytes:
    """Instance ``index`` of the network set: 100 kB of random bytes (the same in every
    copy: recprep's, litdata's, mosaic's)."""
    return np.random.default_rng(index).bytes(INSTANCE_BYTES)


def _litdata_item(index: int) -> dict:
    return {"data": instance(index)}


def start_proxy(upstream: str, delay: float, conn_rate: float, link_rate: float
                ) -> tuple[subprocess.Popen, str]:
    """The link emulator (tests/support/linkproxy.py) in its own process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.linkproxy", "--upstream", upstream,
         "--delay", str(delay), "--conn-rate", str(conn_rate), "--link-rate", str(link_rate)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def proxy_control(endpoint: str, action: str = "stats") -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.support.linkproxy import control

    return control(endpoint, action)


def write_copies(endpoint: str, count: int, shards: int, tmp: Path) -> dict[str, int]:
    """The set three times into the bucket, straight to moto: recprep's (``bench/set``),
    litdata's ``optimize`` (``bench/litdata``) and mosaic's ``MDSWriter`` (``bench/mds``),
    each in about ``shards`` pieces. Returns the bytes of each copy."""
    import s3fs

    options = {"endpoint_url": endpoint}
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    fs.mkdir("bench")
    sizes = {}
    result = convert("s3://bench/set", (instance(i) for i in range(count)), shards, PREFIX,
                     codec="raw", compressor="none", storage_options=options)
    sizes["recprep"] = result.total_bytes
    piece = count * INSTANCE_BYTES // shards + 2 * INSTANCE_BYTES
    if _installed("litdata"):
        import litdata

        litdata.optimize(fn=_litdata_item, inputs=list(range(count)),
                         output_dir=str(tmp / "litdata"), chunk_bytes=piece, num_workers=1,
                         verbose=False)
        fs.put(str(tmp / "litdata") + "/", "bench/litdata/", recursive=True)
        sizes["litdata"] = sum(fs.du("bench/litdata", total=False).values())
    if _installed("streaming"):
        from streaming import MDSWriter

        with MDSWriter(out=str(tmp / "mds"), columns={"data": "bytes"},
                       size_limit=piece) as writer:
            for i in range(count):
                writer.write({"data": instance(i)})
        fs.put(str(tmp / "mds") + "/", "bench/mds/", recursive=True)
        sizes["mds"] = sum(fs.du("bench/mds", total=False).values())
    return sizes


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def calibrate(endpoint: str, files: list[tuple[str, int]], reps: int = 3) -> float:
    """What the link delivers here: every shard in two halves, all GETs at once (boto3, a
    thread each), median MB/s of ``reps``."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3

    ranges = [(key, start, end) for key, size in files
              for start, end in ((0, size // 2), (size // 2, size))]
    clients = [boto3.client("s3", endpoint_url=endpoint) for _ in ranges]

    def get(k: int) -> int:
        key, start, end = ranges[k]
        body = clients[k].get_object(Bucket="bench", Key=key, Range=f"bytes={start}-{end - 1}")
        return len(body["Body"].read())

    rates = []
    for _ in range(reps):
        started = time.perf_counter()
        with ThreadPoolExecutor(len(ranges)) as pool:
            total = sum(pool.map(get, range(len(ranges))))
        rates.append(total / 1e6 / (time.perf_counter() - started))
    return sorted(rates)[len(rates) // 2]


# -- one contender, in a fresh process (--contender) -------------------------------------


def _passes(name: str, endpoint: str, cache: Path) -> Callable[[], Iterator[int]]:
    """A function giving one epoch's instance sizes, for contender ``name``."""
    options = {"endpoint_url": endpoint}
    if name.startswith("recprep"):
        kwargs = {"cache_dir": str(cache)} if "cache_dir" in name else {}
        reader = RecordIO("s3://bench/set", storage_options=options, **kwargs)
        _passes.reader = reader  # type: ignore[attr-defined]
        if "batches" in name:
            return lambda: (len(x) for batch in reader.batches(256) for x in batch)
        return lambda: (len(x) for x in reader())
    if name.startswith("litdata"):
        from litdata.streaming import downloader

        # obstore refuses http:// unless its client options allow it
        downloader._OBSTORE_CLIENT_OPTIONS = {**downloader._OBSTORE_CLIENT_OPTIONS,
                                              "allow_http": True}
        import litdata

        dataset = litdata.StreamingDataset("s3://bench/litdata", cache_dir=str(cache),
                                           storage_options=options)
        return lambda: (len(x["data"]) for x in dataset)
    os.environ["S3_ENDPOINT_URL"] = endpoint  # mosaic's way to name an endpoint
    from streaming import StreamingDataset

    mosaic = StreamingDataset(remote="s3://bench/mds", local=str(cache), shuffle=False,
                              batch_size=1)
    return lambda: (len(x["data"]) for x in mosaic)


def contender(name: str, endpoint: str, epochs: int, count: int) -> dict:
    """Run ``epochs`` epochs of contender ``name`` through the proxy at ``endpoint``:
    per epoch seconds, first-instance seconds (from construction), proxy counters."""
    cache = Path(tempfile.mkdtemp(prefix="recprep-bench-cache-"))
    out: dict = {"epochs": []}
    try:
        proxy_control(endpoint, "reset")
        started = time.perf_counter()
        passes = _passes(name, endpoint, cache)
        for _ in range(epochs):
            first, seen, size = None, 0, 0
            began = time.perf_counter()  # the pass itself, after construction
            for length in passes():
                if first is None:
                    first = time.perf_counter()
                seen += 1
                size += length
            ended = time.perf_counter()
            if (seen, size) != (count, count * INSTANCE_BYTES):
                raise AssertionError(f"{name}: {seen} instances of {size} bytes, expected "
                                     f"{count} of {count * INSTANCE_BYTES}")
            out["epochs"].append({"seconds": ended - started, "first": first - started,
                                  "pass_seconds": ended - began, "pass_first": first - began,
                                  "proxy": proxy_control(endpoint, "reset")})
            started = time.perf_counter()
        stats = getattr(getattr(_passes, "reader", None), "stats", None)
        out["reader_stats"] = dataclasses.asdict(stats()) if callable(stats) else None
        out["rss_mb"] = peak_rss_mb()
        out["cache_mb"] = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()) / 1e6
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return out


def peak_rss_mb() -> float:
    """This process's peak RSS (``VmHWM``: unlike ``ru_maxrss``, not inherited across
    fork + exec from the parent's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_contender(name: str, endpoint: str, count: int) -> dict:
    """``contender`` in a fresh interpreter (its own RSS, no warm state)."""
    epochs = CONTENDERS[name][1]
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--contender", name, "--endpoint",
         endpoint, "--epochs", str(epochs), "--count", str(count)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the network run: orchestration and report ------------------------------------------


def _requests(proxy: dict) -> str:
    counts = proxy["requests"]
    parts = [f"{counts['GET']} GET ({proxy['range_gets']} ranged)"]
    parts += [f"{counts[k]} {k}" for k in ("HEAD", "LIST", "PUT", "POST", "DELETE")
              if counts[k]]
    return ", ".join(parts)


def network_table(runs: dict[str, list[dict]], megabytes: float, nominal: float,
                  calibrated: float) -> list[str]:
    """One markdown table: a row per contender, medians over its reps."""
    lines = ["| contender | epoch 1 s | epoch 1 MB/s | x nominal | x calibrated | "
             "pass s | pass x nominal | first instance s | from the pass s | "
             "epoch 1 requests | epoch 2 s | epoch 2 MB/s | "
             "epoch 2 requests | peak RSS MB | cache MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|"]
    for name, reps in runs.items():
        first = _median([r["epochs"][0]["seconds"] for r in reps])
        rate = megabytes / first
        alone = _median([r["epochs"][0]["pass_seconds"] for r in reps])
        row = [name, f"{first:.2f}", f"{rate:.1f}", f"{rate / nominal:.2f}",
               f"{rate / calibrated:.2f}", f"{alone:.2f}",
               f"{megabytes / alone / nominal:.2f}",
               f"{_median([r['epochs'][0]['first'] for r in reps]):.2f}",
               f"{_median([r['epochs'][0]['pass_first'] for r in reps]):.2f}",
               _requests(reps[-1]["epochs"][0]["proxy"])]
        if len(reps[0]["epochs"]) > 1:
            second = _median([r["epochs"][1]["seconds"] for r in reps])
            row += [f"{second:.2f}", f"{megabytes / second:.1f}",
                    _requests(reps[-1]["epochs"][1]["proxy"]) + f" ({CONTENDERS[name][2]})"]
        else:
            row += ["–", "–", "–"]
        row += [f"{max(r['rss_mb'] for r in reps):.0f}",
                f"{max(r['cache_mb'] for r in reps):.0f}"]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def run_network(size_mb: int, shards: int, reps: int) -> str:
    """The --network run: the set and its peers' copies in moto, then per link setting a
    proxy process, its calibration and every contender's reps, interleaved."""
    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    count = -(-size_mb * 10**6 // INSTANCE_BYTES)
    megabytes = count * INSTANCE_BYTES / 1e6
    names = [n for n, (module, _, _) in CONTENDERS.items() if _installed(module)]
    skipped = [f"{n} ({CONTENDERS[n][0]} is not installed)" for n in CONTENDERS
               if n not in names]
    moto, upstream = start_moto()
    tmp = Path(tempfile.mkdtemp(prefix="recprep-bench-network-"))
    sections, loads, results = [], [], {}
    try:
        log(f"writing {count} instances of 100 kB ({megabytes:.0f} MB) three ways")
        sizes = write_copies(upstream, count, shards, tmp)
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True, endpoint_url=upstream)
        files = [(e["name"].removeprefix("bench/"), e["size"]) for e in
                 fs.ls("bench/set", detail=True) if f"/{PREFIX}-" in e["name"]]
        for label, delay, conn_rate, link_rate in LINKS:
            proxy, endpoint = start_proxy(upstream, delay, conn_rate, link_rate)
            try:
                loads.append(os.getloadavg()[0])
                calibrated = calibrate(endpoint, files)
                log(f"{label}: calibrated {calibrated:.1f} MB/s")
                runs: dict[str, list[dict]] = {n: [] for n in names}
                for rep in range(reps):
                    for name in names:
                        log(f"{label}: {name}, rep {rep + 1}")
                        runs[name].append(run_contender(name, endpoint, count))
                loads.append(os.getloadavg()[0])
            finally:
                proxy.terminate()
                proxy.wait(timeout=30)
            results[label] = runs
            sections += [f"### Network: {label}", "",
                         f"Link allows {link_rate / 1e6:.0f} MB/s; calibrated here "
                         f"{calibrated:.1f} MB/s ({len(files) * 2} ranged GETs at once, "
                         f"boto3, a thread each; median of 3).", "",
                         *network_table(runs, megabytes, link_rate / 1e6, calibrated), ""]
    finally:
        moto.terminate()
        moto.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    return network_report(sections, results, sizes, megabytes, reps, loads, skipped)


def network_report(sections: list[str], results: dict, sizes: dict[str, int],
                   megabytes: float, reps: int, loads: list[float],
                   skipped: list[str]) -> str:
    versions = ", ".join(f"{m} {_version(m)}" for m in
                         ("moto", "s3fs", "boto3", "litdata", "streaming-community")
                         if _dist_installed(m))
    lines = [
        "## Reading from S3 through an emulated network link", "",
        f"{dt.date.today()}, recprep {recprep.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPU(s); {versions}. moto in its "
        f"own process; the link emulator (tests/support/linkproxy.py) in its own process "
        f"in front of it; each contender in a fresh process (peak RSS is its VmHWM). "
        f"{megabytes:.0f} MB of 100 kB instances (random bytes): recprep's copy "
        f"{sizes['recprep'] / 1e6:.0f} MB (raw codec, no compression), "
        + ", ".join(f"{k}'s {v / 1e6:.0f} MB" for k, v in sizes.items() if k != "recprep")
        + f". Median of {reps} interleaved reps; load average "
        + " / ".join(f"{x:.1f}" for x in loads) + " (before / after each setting).", "",
        "MB/s are instance bytes per second; *x nominal* against the link's rate, *x "
        "calibrated* against what raw parallel range GETs got through the same proxy in "
        "this run. *Epoch 1 s* and *first instance s* count from the reader's (dataset's) "
        "construction in a fresh process (importing s3fs/botocore, making a client, "
        "listing, reading the manifest: a fixed cost); *pass s* and *from the pass s* "
        "from the pass's start (the reader called, the dataset iterated). "
        "Requests per epoch are the proxy's counts (the last rep's). Peers read in the "
        "process (no DataLoader workers).", "",
    ]
    if skipped:
        lines += ["Skipped: " + "; ".join(skipped) + ".", ""]
    lines += sections
    stats = [(label, name, r[-1]["reader_stats"]) for label, runs in results.items()
             for name, r in runs.items() if r and r[-1].get("reader_stats")]
    if stats:
        lines += ["`reader.stats()` after the last rep:", "",
                  "| link | contender | requests | MB | retries | throttled | most in flight "
                  "| reads waited s | peak MB held |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {label.split(' per')[0]} | {name} | {s['requests']} "
                  f"| {s['bytes'] / 1e6:.0f} "
                  f"| {s['retries']} | {s['throttled']} | {s['most_in_flight']} "
                  f"| {s['waited']:.2f} | {s['peak_bytes'] / 1e6:.0f} |"
                  for label, name, s in stats]
        lines += [""]
    return "\n".join(lines)


def _dist_installed(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(name)
    except PackageNotFoundError:
        return False
    return True


def _cp_part(args: argparse.Namespace) -> str | None:
    """``--network --part cp`` (benchmarks/cp_network.py): the report; None in a child."""
    sys.path.insert(0, str(HERE))
    from cp_network import child_main, run_cp

    if args.cp_child:
        child_main(args.cp_child, args.endpoint, args.source, args.dest, args.count)
        return None
    size = 40 if args.quick else (args.size_mb or 240)
    pairs = None if args.pairs is None else [n.strip() for n in args.pairs.split(",")]
    return run_cp(size, args.shards or 8, 1 if args.quick else (args.reps or 3), args.timeline,
                  args.baseline, pairs)


def _rss_part(args: argparse.Namespace) -> str | None:
    """``--network --part rss`` (benchmarks/rss_shard.py): the report; None in a child."""
    sys.path.insert(0, str(HERE))
    from rss_shard import child_main, run_rss

    if args.rss_child:
        child_main(args.rss_child, args.endpoint, args.source)
        return None
    return run_rss(100 if args.quick else (args.size_mb or 1024), args.reps or 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=None,
                        help="default: 500 (cp/read), 160 (--network)")
    parser.add_argument("--shards", type=int, default=None, help="default: 10, 8 (--network)")
    parser.add_argument("--reps", type=int, default=None, help="default: 1, 3 (--network)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="50 MB (40 MB, 1 rep with "
                        "--network), for a smoke run")
    parser.add_argument("--network", action="store_true",
                        help="read through the link emulator, with litdata and mosaic")
    parser.add_argument("--part", choices=("read", "cp", "rss"), default="read",
                        help="with --network: reading (default), cp/convert against s3fs "
                        "put/get (240 MB, 8 shards, 3 reps), or the peak RSS of a pass "
                        "over one shard (1024 MB, 1 rep)")
    parser.add_argument("--timeline", type=Path, default=None,
                        help="with --part cp: write each contender's request timeline here")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="with --part cp: also run recprep from this src directory (an "
                        "older checkout's), interleaved: before and after in one run")
    parser.add_argument("--pairs", default=None,
                        help="with --part cp: only these recprep contenders (comma-separated: "
                        "'recprep cp up', 'recprep cp down', 'recprep convert', ...)")
    parser.add_argument("--plot", type=Path, default=None,
                        help="with --network: also draw the MB/s figure into this PNG")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    parser.add_argument("--contender", help=argparse.SUPPRESS)  # one contender, in a child
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--cp-child", help=argparse.SUPPRESS)  # one cp contender, in a child
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)  # one rss contender, in a child
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--dest", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cp_child or (args.network and args.part == "cp"):
        report = _cp_part(args)
        if report is None:
            return
    elif args.rss_child or (args.network and args.part == "rss"):
        report = _rss_part(args)
        if report is None:
            return
    elif args.contender:
        print(json.dumps(contender(args.contender, args.endpoint, args.epochs, args.count)))
        return
    elif args.network:
        size = 40 if args.quick else (args.size_mb or 160)
        reps = 1 if args.quick else (args.reps or 3)
        report = run_network(size, args.shards or 8, reps)
    else:
        size = 50 if args.quick else (args.size_mb or 500)
        report = run(size, args.shards or 10, args.reps or 1, args.workers)
    print(report)
    if args.out is not None:
        args.out.write_text(report)
        log(f"wrote {args.out}")
    if args.plot is not None and args.network:
        sys.path.insert(0, str(HERE))
        from plots import draw_network

        draw_network(report, args.plot)
        log(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
