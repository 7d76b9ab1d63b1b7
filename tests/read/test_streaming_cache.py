"""A shard cache that fills while a pass streams (issue 24 item 5), on moto's S3 server:
epoch 1 makes the requests it makes without a cache and leaves whole, checked shards;
processes sharing the cache fetch each byte once; a killed filler leaves nothing the
next reader doesn't clean up; the default bound follows the container's limits."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from recprep import FetchOptions, RecordIO, convert
from recprep.errors import SetChangedError
from recprep.read.cache import ShardCache
from recprep.read.cachefill import Partial
from recprep.storage.fs import checksum
from recprep.storage.manifest import ShardInfo

from ..support import random_records

KiB = 1 << 10
FETCH = FetchOptions(range_bytes=64 * KiB, initial_requests=4)


def _shards(reader: RecordIO) -> list:
    manifest = reader.manifests[0]
    assert manifest is not None
    return list(manifest.shards)


def _leftovers(directory) -> list[str]:
    """What in the cache directory is not a whole cached shard."""
    return sorted(p for p in os.listdir(directory) if not p.endswith(".shard"))


def _whole_and_checked(cache: ShardCache, shards: list) -> bool:
    """Whether every shard is in the cache with its manifest's size and CRC-32C."""
    found = set()
    for name in cache.entries():
        with open(os.path.join(cache.directory, name), "rb") as file:
            crc, size = checksum(file)
        found.add((size, crc))
    return found == {(s.bytes, s.crc32c) for s in shards}


def test_epoch_one_streams_and_fills_the_cache(remote_set, tmp_path):
    url, records, options = remote_set
    fetch = FetchOptions(range_bytes=32 * KiB, budget_bytes=160 * KiB, initial_requests=8)
    plain = RecordIO(url, storage_options=options, fetch=fetch)
    expected = list(plain())
    cached = RecordIO(url, storage_options=options, fetch=fetch, cache_dir=tmp_path / "c")
    stream = cached()
    first = next(stream)
    at_first = cached.stats().bytes
    assert [first, *stream] == expected
    shards = _shards(cached)
    # the budget and a range per shard a waiting read started, not a whole shard first
    assert 0 < at_first <= 160 * KiB + 4 * 32 * KiB < min(s.bytes for s in shards)
    epoch1 = cached.stats()
    assert epoch1.requests == plain.stats().requests  # the same range requests
    assert epoch1.bytes == sum(s.bytes for s in shards)
    assert _whole_and_checked(cached.cache, shards)
    assert _leftovers(tmp_path / "c") == []
    assert list(cached()) == expected
    assert cached.stats() == epoch1  # epoch 2: no request at all
    other = RecordIO(url, storage_options=options, fetch=fetch, cache_dir=tmp_path / "c",
                     shuffle=True, seed=5)
    assert sorted(other()) == sorted(records) and other.stats().requests == 0


def test_a_partial_pass_keeps_its_partial_for_the_next_to_complete(s3, s3_url, tmp_path):
    records = random_records(400, 2000, seed=2)
    convert(f"{s3_url}/one", records, 1, "s", codec="raw", chunk_bytes=16 * KiB,
            storage_options=s3.storage_options)
    options = {"storage_options": s3.storage_options, "fetch": FETCH, "split": "range",
               "world_size": 2, "cache_dir": tmp_path / "c"}
    first = RecordIO(f"{s3_url}/one/s", rank=0, **options)
    half = list(first())
    shard = _shards(first)[0]
    assert half == records[:len(half)] and 0 < len(half) < len(records)
    assert first.cache.entries() == []  # half a shard is not a cached shard
    assert [p.rsplit(".", 2)[-2:] for p in _leftovers(tmp_path / "c")] == [
        ["shard", "part"], ["part", "map"]]
    assert first.stats().bytes < shard.bytes
    second = RecordIO(f"{s3_url}/one/s", rank=1, **options)
    assert half + list(second()) == records
    assert _whole_and_checked(second.cache, [shard])  # the second rank completed it
    assert _leftovers(tmp_path / "c") == []
    again = RecordIO(f"{s3_url}/one/s", **{**options, "world_size": 1})
    assert list(again()) == records and again.stats().requests == 0


def _script(body: str, env_source) -> tuple[str, dict[str, str]]:
    env = env_source.env()
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath("src"), env.get("PYTHONPATH", "")])
    return textwrap.dedent(body), env


def test_two_processes_fetch_each_byte_once(remote_set, s3, tmp_path):
    url, records, _ = remote_set
    script, env = _script(f"""
        import json
        from recprep import FetchOptions, RecordIO
        read = RecordIO({url!r}, cache_dir={str(tmp_path / "c")!r},
                        fetch=FetchOptions(range_bytes=65536, initial_requests=4))
        got = [bytes(x).hex() for x in read()]
        print(json.dumps({{"records": got, "bytes": read.stats().bytes}}))
    """, s3)
    runs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    fetched = 0
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        result = json.loads(out)
        assert sorted(bytes.fromhex(x) for x in result["records"]) == sorted(records)
        fetched += result["bytes"]
    shards = _shards(RecordIO(url, storage_options=s3.storage_options))
    assert fetched == sum(s.bytes for s in shards)  # each byte once, on this node
    assert _whole_and_checked(ShardCache(tmp_path / "c"), shards)
    assert _leftovers(tmp_path / "c") == []


def test_a_killed_filler_leaves_nothing_after_the_next_reader(remote_set, s3, tmp_path):
    url, records, options = remote_set
    script, env = _script(f"""
        import time
        from recprep import FetchOptions, RecordIO
        read = RecordIO({url!r}, cache_dir={str(tmp_path / "c")!r},
                        fetch=FetchOptions(range_bytes=32768, budget_bytes=131072))
        stream = read()
        next(stream)
        print("reading", flush=True)
        time.sleep(600)  # killed here, mid-download
    """, s3)
    run = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout is not None and run.stdout.readline() == "reading\n", run.stderr
        held = _leftovers(tmp_path / "c")
        assert held and all(p.endswith(".part") for p in held)  # partials, mid-download
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL
    assert ShardCache(tmp_path / "c").entries() == []  # nothing half-done looks cached
    after = RecordIO(url, storage_options=options, fetch=FETCH, cache_dir=tmp_path / "c")
    assert sorted(after()) == sorted(records)  # no wait for the dead filler's lock
    assert _whole_and_checked(after.cache, _shards(after))
    assert _leftovers(tmp_path / "c") == []


def test_the_default_bound_follows_the_container(tmp_path, monkeypatch):
    from recprep.read import cachefill

    directory = tmp_path / "c"
    directory.mkdir()
    cgroup, v1, mounts = tmp_path / "memory.max", tmp_path / "v1", tmp_path / "mounts"
    monkeypatch.setattr(cachefill, "CGROUP_MEMORY_FILES", (str(cgroup), str(v1)))
    monkeypatch.setattr(cachefill, "MOUNTS_FILE", str(mounts))
    mounts.write_text(f"/dev/vda / ext4 rw 0 0\ntmpfs {tmp_path} tmpfs rw,size=1g 0 0\n")
    cgroup.write_text("4194304\n")  # 4 MiB
    assert ShardCache(directory).max_bytes == 2 << 20  # half the container's memory
    cgroup.write_text("max\n")  # no memory limit: the disk's rule
    free = ShardCache(directory).max_bytes / 0.8
    assert free == pytest.approx(cachefill.shutil.disk_usage(directory).free, rel=0.01)
    cgroup.unlink()
    v1.write_text("6291456\n")  # cgroup v1's file, 6 MiB
    assert ShardCache(directory).max_bytes == 3 << 20
    v1.write_text("9223372036854771712\n")  # v1's "no limit"
    assert ShardCache(directory).max_bytes > 3 << 20
    v1.write_text("6291456\n")
    mounts.write_text(f"/dev/vda / ext4 rw 0 0\n/dev/vdb {tmp_path} ext4 rw 0 0\n")
    assert ShardCache(directory).max_bytes > 3 << 20  # on a disk, memory doesn't bound it
    assert ShardCache(directory, 1000).max_bytes == 1000  # a bound given is kept


def test_ranks_fill_disjoint_parts_of_a_shard_at_once(s3, s3_url, tmp_path):
    records = random_records(400, 2000, seed=3)
    convert(f"{s3_url}/one", records, 1, "s", codec="raw", chunk_bytes=16 * KiB,
            storage_options=s3.storage_options)
    url = f"{s3_url}/one/s"
    script, env = _script(f"""
        import json, sys
        from recprep import FetchOptions, RecordIO
        read = RecordIO({url!r}, cache_dir={str(tmp_path / "c")!r}, split="range",
                        rank=0, world_size=2, fetch=FetchOptions(range_bytes=65536))
        stream = read()
        got = [next(stream)]
        print("reading", flush=True)
        sys.stdin.readline()  # rank 1 reads its part meanwhile
        got += list(stream)
        print(json.dumps({{"records": [x.hex() for x in got], "bytes": read.stats().bytes}}))
    """, s3)
    rank0 = subprocess.Popen([sys.executable, "-c", script], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert rank0.stdout is not None and rank0.stdout.readline() == "reading\n"
        rank1 = RecordIO(url, storage_options=s3.storage_options, split="range", rank=1,
                         world_size=2, fetch=FETCH, cache_dir=tmp_path / "c")
        rank1.cache.stall_seconds = 5  # a wait for rank 0 would end in an uncached read
        second = list(rank1())  # while rank 0 holds its part of the same partial
        assert rank1.cache.entries() == []
        out, err = rank0.communicate("go\n", timeout=120)
    finally:
        rank0.kill()
    assert rank0.returncode == 0, err
    result = json.loads(out)
    assert [bytes.fromhex(x) for x in result["records"]] + second == records
    shard = _shards(rank1)[0]
    assert result["bytes"] + rank1.stats().bytes == shard.bytes  # each byte once
    assert _whole_and_checked(rank1.cache, [shard])  # rank 0, last out, renamed it
    assert _leftovers(tmp_path / "c") == []



def test_a_pass_starts_every_shard_of_its_first_group_at_once(remote_set, link):
    # shards read round-robin are opened one after another; their first ranges are
    # requested together when the pass starts (one range per shard here)
    url, records, _ = remote_set
    reader = RecordIO(url, storage_options=link.storage_options,
                      fetch=FetchOptions(range_bytes=1 << 20, initial_requests=8))
    assert list(reader()) == list(RecordIO(url, storage_options=link.storage_options)())
    assert reader.stats().requests == 4
    assert reader.stats().most_in_flight == 4


def test_a_cached_pass_asks_about_the_manifest_without_waiting(remote_set, link, s3,
                                                              s3_url, tmp_path):
    # epoch 2 from the cache: the question "is the set unchanged?" (a HEAD of the manifest)
    # goes in the background; a held answer holds no instance back nor the pass's end,
    # and the next pass judges it: the set was replaced meanwhile, so it raises
    url, records, _ = remote_set
    options = link.storage_options
    reader = RecordIO(url, storage_options=options, cache_dir=tmp_path / "c")
    expected = list(reader())
    convert(f"{s3_url}/d", random_records(600, 2000, seed=9), 4, "p", codec="raw",
            chunk_bytes=16 << 10, storage_options=s3.storage_options, overwrite=True)
    link.reset_stats()
    link.faults.update(delay_one={"kinds": ["HEAD"], "seconds": 2.0})
    stream = reader()
    first = next(stream)
    (answer,) = reader._sources.commits._answers.values()
    assert not answer.done()  # the HEAD is held: the first instance didn't wait for it
    assert [first, *stream] == expected  # the set the reader was built for, from its copies
    assert not answer.done()  # nor did the pass's end
    with pytest.raises(SetChangedError, match="the set was replaced"):
        list(reader())  # the next pass judges the answer
    assert answer.done() and link.faults.counts["delay_one"] == 1


def test_a_cached_pass_claims_and_starts_its_first_group_at_once(remote_set, link, tmp_path):
    # with a cache_dir too, the first ranges of every shard of the first group are
    # requested together when the pass starts: each partial is claimed first
    url, records, _ = remote_set
    options = {"storage_options": link.storage_options, "cache_dir": tmp_path / "c",
               "fetch": FetchOptions(range_bytes=1 << 20, initial_requests=8)}
    expected = list(RecordIO(url, storage_options=link.storage_options)())
    link.reset_stats()
    reader = RecordIO(url, **options)
    assert list(reader()) == expected
    assert reader.stats().requests == 4
    assert reader.stats().most_in_flight == 4
    assert _whole_and_checked(reader.cache, _shards(reader))
    assert _leftovers(tmp_path / "c") == []
    assert list(RecordIO(url, **options)()) == expected  # from the cache


def test_claims_ahead_are_taken_by_the_open_or_let_go(tmp_path):
    # a shard claimed ahead is filled by this reader's open of it; claims no open took
    # are let go (kept for a later pass); a shard another filler holds is not claimed,
    # and a cached one needs nothing
    cache = ShardCache(tmp_path / "c")
    data = bytes(range(256)) * 8
    crc, size = checksum(io.BytesIO(data))
    shard = ShardInfo("s-00000-of-00001", 1, size, crc, etag='"e"')
    url = "s3://b/set/s-00000-of-00001"
    local = str(tmp_path / "c" / cache.name_for(url, shard))
    assert cache.claim_ahead(url, shard, None) == "claimed"
    assert Partial.claim(local, size) is None  # held by the claim
    cache.release_ahead()
    assert cache._ahead == {}
    other = Partial.claim(local, size)  # let go: another filler can take it
    assert other is not None
    assert cache.claim_ahead(url, shard, None) == "held"
    assert cache.claim_ahead(url, shard, (0, 1024)) == "held"  # bytes it holds
    other.write(0, data)
    assert other.finish(url, shard)  # whole and checked: renamed into the cache
    assert cache.claim_ahead(url, shard, None) == "cached"
    small = ShardCache(tmp_path / "d", max_bytes=size - 1)
    assert small.claim_ahead(url, shard, None) == "store"
