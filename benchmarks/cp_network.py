"""``recprep cp`` (and ``convert``) to and from S3 through the link emulator, against s3fs.

The cp part of ``benchmarks/bench_storage.py`` (``--network --part cp``). moto's S3 server
(``tests.support.motoranges``) runs in its own process, the link emulator
(``tests/support/linkproxy.py``) in another in front of it, at 25 ms one-way, 10 MB/s per
connection, 80 MB/s for the link. A set of 8 shards of 100 kB instances (raw codec, no
compression) is written locally and, once, straight to moto (the download's source). Then,
reps interleaved, each contender in a fresh process, timed from just before its call (its
imports done, its filesystem made inside the timing):

* **cp up**: ``recprep.tools.copy(local/p, "s3://bench/up-N")`` against ``S3FileSystem.put``
  of the same files;
* **cp down**: ``copy("s3://bench/src/p", local)`` against ``S3FileSystem.get`` of the same
  objects;
* **convert**: ``convert("s3://bench/conv-N", instances, 8, ...)`` of the same instances
  (held in memory), for the commit path it shares with ``cp``; and the same as a plain
  TFRecord set (``format="tfrecord"``), whose commit scans its staged shards for their
  ``.tfindex`` record indexes.

Each child records its CPU seconds and a request timeline: every S3 API call's start and
end (``AioBaseClient._make_api_call``; a GET ends when its head arrives) with its
operation and key, relative to the call's start. The report gives per contender the median
seconds, the ratio to s3fs, the proxy's request counts, CPU seconds, and for the last rep
of each recprep contender the timeline cut in phases: the requests before the first data
request (set-up), during the data requests, after the last (commit), and the *rounds*: the
longest chain of requests each starting after the previous one ended.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median_high as _median  # the middle rep (of an even count: the upper)
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PREFIX = "p"
INSTANCE_BYTES = 100_000
LINK = ("25 ms, 10 MB/s per connection, 80 MB/s link", 0.025, 10e6, 80e6)
#: contender -> what it does (the child's dispatch) and what it is compared with
PAIRS = [("recprep cp up", "s3fs.put"), ("recprep cp down", "s3fs.get"),
         ("recprep convert", "s3fs.put"), ("recprep convert (tfrecord)", "s3fs.put")]
DATA_OPS = {"UploadPart", "PutObject", "GetObject"}


def instances(count: int) -> list[bytes]:
    """The set's instances: ``count`` of 100 kB of random bytes."""
    rng = np.random.default_rng(0)
    return [rng.bytes(INSTANCE_BYTES) for _ in range(count)]


def _timeline() -> list[tuple[float, float, str, str]]:
    """Record every S3 API call this process makes: (start, end, operation, key)."""
    from aiobotocore.client import AioBaseClient

    calls: list[tuple[float, float, str, str]] = []
    original = AioBaseClient._make_api_call

    async def timed(self: Any, operation: str, params: dict[str, Any]) -> Any:
        start = time.perf_counter()
        try:
            return await original(self, operation, params)
        finally:
            calls.append((start, time.perf_counter(), operation,
                          str(params.get("Key", params.get("Prefix", "")))))

    AioBaseClient._make_api_call = timed  # type: ignore[method-assign]
    return calls


def child(name: str, endpoint: str, source: str, dest: str, count: int) -> dict:
    """One contender's run, in this (fresh) process: seconds, CPU seconds, timeline."""
    import s3fs

    import recprep
    from recprep.tools import copy

    options = {"endpoint_url": endpoint}
    data = instances(count) if name.startswith("recprep convert") else []
    calls = _timeline()
    files = sorted(str(p) for p in Path(source).iterdir()) if name == "s3fs.put" else []
    usage = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    if name == "recprep cp up":
        copy(f"{source}/{PREFIX}", f"s3://{dest}", storage_options=options, progress=False)
    elif name == "recprep cp down":
        copy(f"s3://{source}/{PREFIX}", dest, storage_options=options, progress=False)
    elif name.startswith("recprep convert"):
        fmt = "tfrecord" if name.endswith("(tfrecord)") else "recordio"
        recprep.convert(f"s3://{dest}", data, 8, PREFIX, format=fmt, codec="raw",
                        compressor="none", storage_options=options, progress=False)
    elif name == "s3fs.put":
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        fs.put(files, f"{dest}/")
    elif name == "s3fs.get":
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        keys = sorted(k for k in fs.ls(source) if f"/{PREFIX}-" in k)
        fs.get(keys, f"{dest}/")
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    return {"seconds": seconds, "cpu": cpu,
            "calls": [(s - started, e - started, op, key) for s, e, op, key in calls]}


BASELINE = " (baseline)"


def _run_child(name: str, endpoint: str, source: str, dest: str, count: int,
               baseline: Path | None = None) -> dict:
    """``child`` in a fresh interpreter; a contender named ``... (baseline)`` imports
    recprep from ``baseline`` (another checkout's ``src``)."""
    env = dict(os.environ)
    if name.endswith(BASELINE):
        assert baseline is not None
        name = name.removesuffix(BASELINE)
        env["PYTHONPATH"] = os.pathsep.join([str(baseline), str(ROOT)])
    proc = subprocess.run(
        [sys.executable, str(HERE / "bench_storage.py"), "--cp-child", name, "--endpoint",
         endpoint, "--source", source, "--dest", dest, "--count", str(count)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rounds(calls: list[list[Any]]) -> int:
    """The longest chain of calls, each starting after the one before it ended."""
    ordered = sorted(calls)
    depth: list[int] = []
    for i, (start, _, _, _) in enumerate(ordered):
        depth.append(1 + max((depth[j] for j in range(i) if ordered[j][1] <= start),
                             default=0))
    return max(depth, default=0)


def phases(calls: list[list[Any]], seconds: float) -> dict[str, Any]:
    """The timeline in three phases: before the first request carrying a shard's bytes,
    while they move, after the last one ends."""
    data = [c for c in calls if c[2] in DATA_OPS and "-of-" in str(c[3])]  # a shard's
    first = min((c[0] for c in data), default=seconds)
    last = max((c[1] for c in data), default=seconds)
    before = [c for c in calls if c[1] <= first]
    after = [c for c in calls if c[0] >= last]
    return {"setup_s": first, "setup_requests": len(before), "setup_rounds": rounds(before),
            "data_s": last - first, "commit_s": seconds - last,
            "commit_requests": len(after), "commit_rounds": rounds(after),
            "requests": len(calls), "rounds": rounds(calls)}


def _counts(proxy: dict) -> str:
    counts = proxy["requests"]
    return ", ".join(f"{counts[k]} {k}" for k in ("GET", "HEAD", "LIST", "PUT", "POST",
                                                  "DELETE") if counts[k])


def run_cp(size_mb: int, shards: int, reps: int, timeline: Path | None = None,
           baseline: Path | None = None, only: list[str] | None = None) -> str:
    """The whole cp run; returns the markdown report (and writes each contender's last
    request timeline into ``timeline``, when given). With ``baseline`` (another
    checkout's ``src``), each recprep contender runs again with that recprep, interleaved:
    before and after in one run. ``only``: these recprep contenders (and what they are
    compared with), not all of :data:`PAIRS`."""
    pairs = [pair for pair in PAIRS if only is None or pair[0] in only]
    if not pairs:
        raise SystemExit(f"no cp contender of {only}: choose of {[p for p, _ in PAIRS]}")
    sys.path.insert(0, str(ROOT))
    from bench_storage import proxy_control, start_moto, start_proxy

    import recprep
    from recprep.tools import copy

    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    count = -(-size_mb * 10**6 // INSTANCE_BYTES)
    moto, upstream = start_moto()
    tmp = Path(tempfile.mkdtemp(prefix="recprep-bench-cp-"))
    label, delay, conn_rate, link_rate = LINK
    proxy, endpoint = start_proxy(upstream, delay, conn_rate, link_rate)
    runs: dict[str, list[dict]] = {}
    loads = [os.getloadavg()]
    try:
        import s3fs

        local = tmp / "src"
        result = recprep.convert(str(local), instances(count), shards, PREFIX, codec="raw",
                                 compressor="none", progress=False)
        total = result.total_bytes
        fs = s3fs.S3FileSystem(skip_instance_cache=True, endpoint_url=upstream)
        fs.mkdir("bench")
        copy(f"{local}/{PREFIX}", "s3://bench/src", storage_options={"endpoint_url": upstream},
             progress=False)
        names = list(dict.fromkeys(n for pair in pairs for n in pair))
        if baseline is not None:
            names += [n + BASELINE for n, _ in pairs]
        for rep in range(reps):
            for name in names:
                down = name.removesuffix(BASELINE) in ("recprep cp down", "s3fs.get")
                slug = "".join(c for c in name if c.isalnum())
                dest = str(tmp / f"down-{rep}-{slug}") if down else f"bench/{slug}-{rep}"
                source = "bench/src" if down else str(local)
                if down:
                    Path(dest).mkdir()
                proxy_control(endpoint, "reset")
                print(f"cp: {name}, rep {rep + 1}", file=sys.stderr, flush=True)
                out = _run_child(name, endpoint, source, dest, count, baseline)
                out["proxy"] = proxy_control(endpoint, "reset")
                runs.setdefault(name, []).append(out)
                if down:
                    shutil.rmtree(dest)
                else:
                    fs.rm(dest, recursive=True)
            loads.append(os.getloadavg())
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)
        moto.terminate()
        moto.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    if timeline is not None:
        timeline.write_text("\n".join(f"== {name}\n{timeline_text(r[-1]['calls'])}"
                                      for name, r in runs.items()) + "\n")
    return cp_report(runs, total, shards, reps, loads, label, baseline is not None, pairs)


def cp_report(runs: dict[str, list[dict]], total: int, shards: int, reps: int,
              loads: list[tuple[float, float, float]], label: str, baseline: bool,
              pairs: list[tuple[str, str]]) -> str:
    import datetime as dt
    import platform

    import recprep

    mb = total / 1e6
    lines = [
        "## `recprep cp` and `convert` through the emulated link", "",
        f"{dt.date.today()}, recprep {recprep.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPU(s). Link: {label}. {mb:.0f} MB "
        f"in {shards} shards (100 kB instances, raw codec, no compression). Each contender "
        f"in a fresh process, timed from its call (imports done); {reps} reps interleaved, "
        "median; load average (1 min) " + " / ".join(f"{x[0]:.1f}" for x in loads)
        + " (before, after each rep).", "",
        "| contender | s | reps s | MB/s | against | ratio | CPU s | requests (proxy) |",
        "|---|---:|---|---:|---|---:|---:|---|"]
    shown: list[tuple[str, str | None]] = []
    for name, other in pairs:
        shown += [(name, other), *([(name + BASELINE, other)] if baseline else []),
                  (other, None)]
    for who, against in dict(shown).items():
        seconds = _median([r["seconds"] for r in runs[who]])
        ratio = "" if against is None else \
            f"{_median([r['seconds'] for r in runs[against]]) / seconds:.2f}"
        cpu = _median([r["cpu"] for r in runs[who]])
        each = " / ".join(f"{r['seconds']:.2f}" for r in runs[who])
        lines.append(f"| {who} | {seconds:.2f} | {each} | {mb / seconds:.1f} | {against or ''} | "
                     f"{ratio} | {cpu:.2f} | {_counts(runs[who][-1]['proxy'])} |")
    lines += ["", "Ratio: s3fs's seconds over recprep's (>= 0.9 is the target). The "
              "timeline of each contender's last rep (client side, each API call):", "",
              "| contender | set-up s | set-up requests (rounds) | data s | after data s | "
              "after: requests (rounds) | all requests (rounds) |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for name in runs:
        last = runs[name][-1]
        p = phases(last["calls"], last["seconds"])
        lines.append(f"| {name} | {p['setup_s']:.2f} | {p['setup_requests']} "
                     f"({p['setup_rounds']}) | {p['data_s']:.2f} | {p['commit_s']:.2f} | "
                     f"{p['commit_requests']} ({p['commit_rounds']}) | {p['requests']} "
                     f"({p['rounds']}) |")
    lines.append("")
    return "\n".join(lines)


def timeline_text(calls: list[list[Any]]) -> str:
    """One line per request: start, end, operation, key (for a log)."""
    return "\n".join(f"{s:7.3f} {e:7.3f} {op:26s} {key}" for s, e, op, key in sorted(calls))


def child_main(name: str, endpoint: str, source: str, dest: str, count: int) -> None:
    print(json.dumps(child(name, endpoint, source, dest, count)))

