"""Random access: ``RecordIO(...).dataset()`` gives the global order by index."""

from __future__ import annotations

import pickle
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import CorruptDataError, CorruptDataWarning, InvalidArgumentError, RecordIO, convert
from recprep.errors import DecodeError
from recprep.read.dataset import CacheInfo, InstanceIndexError, MapDataset, RecordsLostError

from ..support import builtin_formats

pytestmark = pytest.mark.filterwarnings("ignore:.*shards are empty")


def write(n: int, num_shards: int, fmt: str = "recordio", chunk_bytes: int = 40,
          prefix: str = "d") -> str:
    root = f"memory://dataset-{uuid.uuid4().hex}"
    data = [(i, f"v{i}") for i in range(n)]
    convert(root, data, num_shards, prefix, format=fmt, chunk_bytes=chunk_bytes,
            progress=False)
    return f"{root}/{prefix}-*"


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    n=st.integers(0, 120),
    num_shards=st.integers(1, 7),
    fmt=st.sampled_from(builtin_formats()),
    chunk_bytes=st.sampled_from([1, 40, 1 << 20]),
    cache=st.sampled_from([0, 1, 64]),
    data=st.data(),
)
def test_indexes_slices_and_arrays_give_the_unshuffled_read_order(
    n, num_shards, fmt, chunk_bytes, cache, data
):
    reader = RecordIO(write(n, num_shards, fmt, chunk_bytes))
    expected = list(reader())
    ds = reader.dataset(cache_chunks=cache)
    assert len(ds) == n == len(expected)
    if n:
        i = data.draw(st.integers(-n, n - 1))
        assert ds[i] == expected[i] and ds[np.int64(i)] == expected[i]
    a, b = data.draw(st.integers(-n - 2, n + 2)), data.draw(st.integers(-n - 2, n + 2))
    step = data.draw(st.sampled_from([None, 1, 2, -1, -3]))
    assert ds[a:b:step] == expected[a:b:step]
    picks = data.draw(st.lists(st.integers(-n, n - 1), max_size=30)) if n else []
    assert ds[picks] == [expected[p] for p in picks]
    assert ds[np.array(picks, dtype=np.int32)] == [expected[p] for p in picks]
    assert ds.__getitems__(picks) == [expected[p] for p in picks]
    for p in picks:  # one at a time, their chunks cached now (the lookup without numpy)
        assert ds[p] == expected[p]
    assert list(ds) == expected


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(sizes=st.lists(st.tuples(st.integers(0, 30), st.integers(1, 4)), min_size=1,
                      max_size=3))
def test_several_sets_and_lone_files_follow_reader_order(sizes):
    patterns = [write(n, k, prefix=f"s{j}") for j, (n, k) in enumerate(sizes)]
    lone = patterns[0].replace("-*", "-00000-of-" + f"{sizes[0][1] - 1:05d}")
    reader = RecordIO([*patterns, lone])
    expected = list(reader())
    ds = reader.dataset()
    assert len(ds) == len(expected) and ds[:] == expected
    assert ds[::-1] == expected[::-1]


def test_unbalanced_shards_are_read_round_robin(tmp_path):
    """Shards of unequal counts (not convert's): the order of an unshuffled read."""
    for k, n in enumerate((5, 1, 3, 0, 4)):
        convert(str(tmp_path / f"part{k}"), [(k, j) for j in range(n)], 1, "u",
                progress=False)
    reader = RecordIO([str(tmp_path / f"part{k}" / "u-*") for k in range(5)])
    assert reader.dataset()[:] == list(reader())
    from recprep.read.dataset import _RoundRobin

    shard, position = _RoundRobin(np.array([5, 1, 3, 0, 4])).locate(np.arange(13))
    assert shard.tolist() == [0, 1, 2, 4, 0, 2, 4, 0, 2, 4, 0, 4, 0]
    assert position.tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4]


def test_bad_indexes_raise_index_errors():
    ds = RecordIO(write(10, 3)).dataset()
    for bad in (10, -11, [0, 12], np.array([3, -20])):
        with pytest.raises(InstanceIndexError, match=r"holds 10 instances, so ask for "
                           r"-10 <= index < 10") as err:
            ds[bad]
        assert isinstance(err.value, IndexError) and "d-*" in str(err.value)
    assert err.value.index == -20
    for bad in (1.5, "a", [True, False], [[1, 2]]):
        with pytest.raises(InstanceIndexError, match="an index must be an int"):
            ds[bad]
    with pytest.raises(InvalidArgumentError, match="cache_chunks must be an int >= 0"):
        RecordIO(write(3, 1)).dataset(cache_chunks=-1)
    assert ds[5:2] == [] and ds[[]] == []


class CountingCodec:
    """Counts the chunks (and records) decoded, around the recprep codec."""

    def __init__(self, ds: MapDataset) -> None:
        self.inner = ds.reader.codec_for(0)
        self.chunks = self.records = 0
        ds.reader._codecs._made = {0: self}  # type: ignore[dict-item]

    def decode_many(self, records, *, allow_pickle=False):
        self.chunks += 1
        self.records += len(records)
        return self.inner.decode_many(records, allow_pickle=allow_pickle)

    def decode(self, record, *, allow_pickle=False):
        return self.inner.decode(record, allow_pickle=allow_pickle)


def test_a_cached_chunk_is_not_read_or_decoded_again():
    reader = RecordIO(write(200, 2, chunk_bytes=100))
    ds = reader.dataset(cache_chunks=4)
    counter = CountingCodec(ds)
    per_chunk = int(reader._sources.index(0).firsts[1])
    assert 1 < per_chunk < 100  # several chunks per file
    assert ds[0] == (0, "v0") and (counter.chunks, counter.records) == (1, 1)
    assert ds.cache_info().misses == 1
    # the same chunk again: nothing read; only records not decoded yet are decoded
    assert ds[0] == (0, "v0") and (counter.chunks, counter.records) == (1, 1)
    assert ds[[4, 0, 2, 4]] == [(4, "v4"), (0, "v0"), (2, "v2"), (4, "v4")]
    assert (counter.chunks, counter.records) == (2, 3) and ds[[2, 0, 4]][0] == (2, "v2")
    assert (counter.chunks, counter.records) == (2, 3)
    assert ds.cache_info() == CacheInfo(hits=3, misses=1, size=1, max_size=4)
    # one batch needing two more chunks reads each once, whatever the order asked, and
    # decodes what it needs of both in one call
    far = [2 * per_chunk * 3 + 1, 2 * per_chunk + 1, 2 * per_chunk * 3 + 3]
    assert ds[far] == [(i, f"v{i}") for i in far] and ds.cache_info().misses == 3
    assert counter.chunks == 3 and counter.records == 6
    # an LRU bounded by count: 6 more chunks push the first one out
    ds[[2 * per_chunk * k for k in range(4, 10)]]
    misses = ds.cache_info().misses
    assert ds[0] == (0, "v0") and ds.cache_info().misses == misses + 1
    assert ds.cache_info().size == 4
    uncached = reader.dataset(cache_chunks=0)
    counter = CountingCodec(uncached)
    assert uncached[0] == uncached[0] and counter.records == 2
    assert uncached.cache_info().misses == 2


def test_a_record_that_fails_to_decode_is_located(tmp_path):
    convert(str(tmp_path), [b"a", b"b", b"c"], 1, "x", codec="raw", progress=False)
    ds = RecordIO(str(tmp_path / "x-*"), codec="recprep").dataset()
    with pytest.raises(DecodeError, match=r"x-00000-of-00000 at byte \d+ record 2 "
                       r"of the chunk: ") as err:
        ds[[2]]
    assert err.value.record_index == 2


def test_pickles_without_its_cache():
    ds = RecordIO(write(50, 2)).dataset()
    assert ds[[1, 2, 40]] == [(1, "v1"), (2, "v2"), (40, "v40")]
    again = pickle.loads(pickle.dumps(ds))
    assert again.cache_info().size == 0 and len(again) == 50
    assert again[[40, 1]] == [(40, "v40"), (1, "v1")]


def test_damage_raises_even_with_skip(tmp_path):
    convert(str(tmp_path), [(i, "x" * 20) for i in range(60)], 1, "c", chunk_bytes=100,
            progress=False)
    path = next(tmp_path.glob("c-*-of-*"))
    (tmp_path / ".c.chunks").unlink()  # the index comes from the damaged file's headers
    reader = RecordIO(str(tmp_path / "c-*"), on_corrupt="skip")
    ds = reader.dataset()
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2])
    with pytest.warns(CorruptDataWarning), pytest.raises(
        RecordsLostError,
        match=r"record 59 of the file was lost to damage \(skipped with on_corrupt='skip'\): "
        r"it can't be read \(the file is damaged: copy it again from its source; `recprep "
        r"verify` lists all damage\)$"
    ) as err:
        ds[59]
    assert isinstance(err.value, CorruptDataError) and err.value.remedy is None


def test_torch_dataloader_random_sampler_two_workers():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, RandomSampler

    ds = RecordIO(write(101, 3)).dataset(cache_chunks=8)
    loader = DataLoader(ds, batch_size=8, num_workers=2,
                        sampler=RandomSampler(ds, generator=torch.Generator().manual_seed(0)),
                        collate_fn=lambda batch: batch)
    seen = [x for batch in loader for x in batch]
    assert sorted(seen) == [(i, f"v{i}") for i in range(101)]
    assert [x[0] for x in seen] != list(range(101))


def test_grain_random_access_source():
    grain = pytest.importorskip("grain.python")
    ds = RecordIO(write(30, 3)).dataset()
    assert isinstance(ds, grain.RandomAccessDataSource)  # a protocol, checked at runtime
    sampler = grain.IndexSampler(len(ds), shard_options=grain.NoSharding(), shuffle=True,
                                 num_epochs=1, seed=3)
    loader = grain.DataLoader(data_source=ds, sampler=sampler, worker_count=0)
    assert sorted(loader) == [(i, f"v{i}") for i in range(30)]


def test_threads_sharing_a_dataset_get_every_instance_right():
    """Threads asking one dataset for the same records at once (each may decode a record
    another is decoding): every answer is the instance, none a placeholder."""
    import threading
    import time

    reader = RecordIO(write(3000, 3, chunk_bytes=2000))
    expected = list(reader())
    ds = reader.dataset(cache_chunks=1000)

    class SlowCodec(CountingCodec):  # decoding lets the other threads in, as real work does
        def decode_many(self, records, *, allow_pickle=False):
            time.sleep(0.001)
            return super().decode_many(records, allow_pickle=allow_pickle)

    SlowCodec(ds)
    wrong: list[tuple[int, object]] = []

    def ask(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(100):
            picks = rng.integers(0, len(expected), 8).tolist()
            got = [ds[p] for p in picks] + ds[picks]
            wrong.extend((p, g) for p, g in zip(picks * 2, got, strict=True) if g != expected[p])

    threads = [threading.Thread(target=ask, args=(7,)) for _ in range(6)]  # the same picks
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
