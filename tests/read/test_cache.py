"""RecordIO(cache_dir=...): local copies of remote shards, against a real S3 server (moto)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from recprep import RecordIO, convert
from recprep.errors import CorruptDataWarning, InvalidArgumentError, SetChangedError
from recprep.read.cache import ShardCache

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def data(n: int = 400, tag: str = "a") -> list[tuple[int, str]]:
    return [(i, f"{tag}{i:05d}" * 8) for i in range(n)]


@pytest.fixture
def fetched(monkeypatch):
    """Bytes read from S3 through s3fs file objects, counted per call to ``reset()``."""
    import s3fs.core

    counts = {"bytes": 0, "requests": 0}
    original = s3fs.core.S3File._fetch_range

    def counting(self, start, end):
        out = original(self, start, end)
        counts["bytes"] += len(out)
        counts["requests"] += 1
        return out

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", counting)
    return counts


def set_bytes(reader: RecordIO) -> int:
    """The bytes of the reader's set's shards, as its manifest lists them."""
    manifest = reader.manifests[0]
    assert manifest is not None
    return sum(s.bytes for s in manifest.shards)


def make_set(s3, url: str, items, shards: int = 4, **options) -> str:
    convert(url, items, shards, "c", codec="pickle", storage_options=s3.storage_options,
            **options)
    return f"{url}/c-*-of-*"


@pytest.mark.parametrize("threads", [0, 2])
def test_second_epoch_reads_nothing_from_s3(s3, s3_url, tmp_path, fetched, threads):
    items = data()
    pattern = make_set(s3, f"{s3_url}/set", items)
    read = RecordIO(pattern, storage_options=s3.storage_options, cache_dir=tmp_path / "c",
                    num_threads=threads, allow_pickle=True)
    assert list(read()) == items
    first = read.stats()
    assert first.bytes == set_bytes(read)  # streamed, each byte once
    assert len(read.cache.entries()) == 4
    fetched["bytes"] = fetched["requests"] = 0
    assert list(read()) == items
    tasks = read.tasks(records_per_task=70)
    assert sorted(x for t in tasks for x in read.read_range(t.path, t.start, t.end)) == items
    assert fetched == {"bytes": 0, "requests": 0} and read.stats() == first
    # another reader (a new process would do the same) uses the copies too
    other = RecordIO(pattern, storage_options=s3.storage_options, cache_dir=tmp_path / "c",
                     shuffle=True, seed=3, allow_pickle=True)
    assert sorted(other()) == items
    assert fetched == {"bytes": 0, "requests": 0} and other.stats().requests == 0


def test_eviction_keeps_the_bound(s3, s3_url, tmp_path, fetched):
    items = data()
    pattern = make_set(s3, f"{s3_url}/set", items)
    manifest = RecordIO(pattern, storage_options=s3.storage_options).manifests[0]
    sizes = sorted(s.bytes for s in manifest.shards)
    bound = sizes[-1] + sizes[-2] + sizes[0] // 2  # room for two shards, not three
    read = RecordIO(pattern, storage_options=s3.storage_options, cache_dir=tmp_path / "c",
                    cache_bytes=bound, split="shard", allow_pickle=True)
    for _ in range(2):
        assert list(read()) == items
        assert read.cache.size() <= bound
        assert len(read.cache.entries()) == 2
    # the most recently used shards are the ones kept: reading them again fetches nothing
    kept = RecordIO(pattern, storage_options=s3.storage_options, cache_dir=tmp_path / "c",
                    cache_bytes=bound, allow_pickle=True)
    names = {entry.split(".")[0] for entry in kept.cache.entries()}
    last = [t for t in kept.tasks(10_000) if t.path.rsplit("/", 1)[1] in names]
    assert len(names) == 2 and last
    fetched["bytes"] = 0
    for task in last:
        list(kept.read_range(*task))
    assert fetched["bytes"] == 0 and kept.stats().requests == 0
    # a shard larger than the whole bound is read from the store, not cached
    tiny = RecordIO(pattern, storage_options=s3.storage_options, cache_dir=tmp_path / "t",
                    cache_bytes=sizes[0] - 1, allow_pickle=True)
    assert list(tiny()) == items and tiny.cache.entries() == []


def test_tampered_copy_is_fetched_again(s3, s3_url, tmp_path):
    items = data()
    pattern = make_set(s3, f"{s3_url}/set", items)
    options = {"storage_options": s3.storage_options, "cache_dir": tmp_path / "c",
               "allow_pickle": True}
    assert list(RecordIO(pattern, **options)()) == items
    victim = tmp_path / "c" / ShardCache(tmp_path / "c").entries()[0]
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0x40  # same size, one bit flipped
    victim.write_bytes(bytes(raw))
    again = RecordIO(pattern, **options)
    with pytest.warns(CorruptDataWarning, match="damaged in the cache; downloading it again"):
        assert list(again()) == items
    assert again.stats().bytes == len(raw)  # that one shard, and only it, again
    assert victim.read_bytes() != bytes(raw)  # the copy is whole again


def test_replaced_set_is_not_served_from_cache(s3, s3_url, tmp_path):
    old, new = data(tag="a"), data(tag="b")  # the same sizes, other bytes
    pattern = make_set(s3, f"{s3_url}/set", old)
    options = {"storage_options": s3.storage_options, "cache_dir": tmp_path / "c",
               "allow_pickle": True}
    before = RecordIO(pattern, **options)
    assert list(before()) == old
    make_set(s3, f"{s3_url}/set", new, overwrite=True)
    with pytest.raises(SetChangedError, match="the set was replaced"):
        for _ in range(2):  # the reader built for the old set says so, cached or not (a
            list(before())  # pass shorter than the store's answer leaves it to the next)
    assert list(RecordIO(pattern, **options)()) == new
    assert len(ShardCache(tmp_path / "c").entries()) == 8  # both versions, apart


def test_two_processes_share_a_cache(s3, s3_url, tmp_path):
    items = data(3000)
    pattern = make_set(s3, f"{s3_url}/set", items, shards=3)
    script = textwrap.dedent(f"""
        import json
        from recprep import RecordIO
        read = RecordIO({pattern!r}, cache_dir={str(tmp_path / "c")!r}, allow_pickle=True,
                        num_threads=2)
        print(json.dumps([list(read()), list(read())]))
    """)
    env = s3.env()
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath("src"), env.get("PYTHONPATH", "")])
    runs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for run in runs:
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err
        first, second = json.loads(out)
        assert [tuple(x) for x in first] == items and [tuple(x) for x in second] == items
    assert len(ShardCache(tmp_path / "c").entries()) == 3
    assert not [p for p in os.listdir(tmp_path / "c") if p.endswith(".part")]


def test_what_is_not_cached(s3, s3_url, tmp_path):
    items = data(50)
    pattern = make_set(s3, f"{s3_url}/set", items, shards=1)
    fs = s3.filesystem()
    shard = fs.glob(pattern.removeprefix("s3://"))[0]
    fs.copy(shard, f"{s3_url}/loose/file.rec".removeprefix("s3://"))
    loose = RecordIO(f"{s3_url}/loose/file.rec", storage_options=s3.storage_options,
                     cache_dir=tmp_path / "c", codec="pickle", allow_pickle=True)
    assert list(loose()) == items  # no manifest entry: read from the store
    assert loose.cache.entries() == []
    local = convert(str(tmp_path / "local"), items, 1, "c", codec="pickle")
    here = RecordIO(local.paths[0], cache_dir=tmp_path / "c", allow_pickle=True)
    assert here.cache is None and list(here()) == items
    assert os.listdir(tmp_path / "c") == []
    with pytest.raises(InvalidArgumentError, match="pass cache_dir too"):
        RecordIO(local.paths[0], cache_bytes=10)
    with pytest.raises(InvalidArgumentError, match="cache_bytes must be a positive int"):
        RecordIO(pattern, storage_options=s3.storage_options, cache_dir=tmp_path, cache_bytes=0)
