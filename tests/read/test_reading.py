"""Reading for training: rank/worker splits, shuffling, tasks, read_range, prefetch, decorators."""

from __future__ import annotations

import collections
import pickle
import threading
import time
import uuid

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import CorruptDataError, InvalidArgumentError, RecordIO, RecprepError, convert
from recprep.codecs import get_codec
from recprep.codecs.base import Codec
from recprep.containers.recordio import RecordIOFormat, scan_index
from recprep.decorators import batch, shuffle
from recprep.errors import RecordRangeError
from recprep.read.cpugate import CpuGate, storage_waits, usable_cores
from recprep.read.prefetch import Prefetcher, prefetched
from recprep.read.ranks import SPLIT_MODES, Piece, split
from recprep.read.shuffling import buffered_shuffle, rng

from ..support import DATA, builtin_formats, vector_records  # noqa: E402

MEM = fsspec.filesystem("memory")


def write_set(url: str, n: int, num_shards: int, chunk_bytes: int | None = None, prefix="p"):
    convert(url, list(range(n)), num_shards, prefix, chunk_bytes=chunk_bytes, progress=False)
    return f"{url}/{prefix}-*-of-*"


@pytest.fixture
def many_chunks(tmp_path):
    """600 ints in 3 shards of many small chunks (about 3 records each), on local disk."""
    return write_set(str(tmp_path), 600, 3, chunk_bytes=24)


def read_all(world_size: int, num_workers: int, pattern: str, **options) -> list[list]:
    """What each rank reads, its workers' outputs concatenated; checks len() per rank."""
    ranks = []
    for rank in range(world_size):
        reader = RecordIO(pattern, rank=rank, world_size=world_size, **options)
        got: list = []
        for worker in range(num_workers):
            got += list(reader.for_worker(worker, num_workers)())
        assert len(reader) == len(got)
        ranks.append(got)
    return ranks


def assert_exactly_once(shares: list[list], n: int) -> None:
    every = [x for share in shares for x in share]
    counts = collections.Counter(every)
    assert sorted(every) == list(range(n)), [k for k, c in counts.items() if c > 1]


# -- splitting: exactly once across ranks x workers -----------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(0, 30), min_size=1, max_size=8),
    world_size=st.integers(1, 6),
    num_workers=st.integers(1, 5),
    mode=st.sampled_from(SPLIT_MODES),
)
def test_split_partitions_every_record(counts, world_size, num_workers, mode):
    count = counts.__getitem__
    files = [Piece(f) for f in range(len(counts))]
    seen = collections.Counter()
    for rank in range(world_size):
        share = split(files, rank, world_size, count, mode)
        in_rank = sum(p.size(count) for p in share)
        parts = [split(share, w, num_workers, count, mode) for w in range(num_workers)]
        assert sum(p.size(count) for part in parts for p in part) == in_rank
        for part in parts:
            for p in part:
                end = count(p.file) if p.end is None else p.end
                assert 0 <= p.start <= end <= count(p.file)
                seen.update((p.file, r) for r in range(p.start, end))
    assert seen == collections.Counter((f, r) for f, c in enumerate(counts) for r in range(c))
    assert set(seen.values()) <= {1}


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(0, 40),
    num_shards=st.integers(1, 5),
    chunk_bytes=st.sampled_from([1, 24, 1 << 20]),
    shuffle_=st.booleans(),
    mode=st.sampled_from(SPLIT_MODES),
)
def test_ranks_and_workers_read_every_instance_once(n, num_shards, chunk_bytes, shuffle_, mode):
    url = f"memory://reading-{uuid.uuid4().hex}"
    try:
        pattern = write_set(url, n, num_shards, chunk_bytes)
        for world_size in (1, 2, 3, 7):
            for num_workers in (1, 2, 4):  # 7 x 4 slots: more than shards, often than records
                shares = read_all(world_size, num_workers, pattern, shuffle=shuffle_, seed=3,
                                  shuffle_buffer=5, split=mode)
                assert_exactly_once(shares, n)
    finally:
        MEM.rm(url.removeprefix("memory:/"), recursive=True)


def test_more_workers_than_shards_split_by_record_range(mem_url):
    pattern = write_set(mem_url, 100, 1, chunk_bytes=40)
    shares = read_all(3, 4, pattern)  # 12 readers, one shard
    assert_exactly_once(shares, 100)
    assert [len(s) for s in shares] == [33, 33, 34]
    worker = RecordIO(pattern, rank=1, world_size=3).for_worker(2, 4)
    assert list(worker()) == list(range(33 + 16, 33 + 24)) and len(worker) == 8


def test_enough_shards_are_dealt_out_whole(mem_url):
    pattern = write_set(mem_url, 40, 4)
    rank0 = RecordIO(pattern, rank=0, world_size=2)
    assert list(rank0()) == list(range(0, 40, 2))  # shards 0 and 2, round-robin
    assert list(rank0.for_worker(1, 2)()) == list(range(2, 40, 4))  # shard 2 alone


def test_range_split_balances_ranks_to_one_instance(mem_url):
    convert(mem_url, list(range(10)), 3, "p", progress=False)  # shards of 4, 3, 3
    pattern = f"{mem_url}/p-*"
    assert [len(RecordIO(pattern, rank=r, world_size=2)) for r in (0, 1)] == [7, 3]
    ranged = [RecordIO(pattern, rank=r, world_size=2, split="range") for r in (0, 1)]
    assert [len(r) for r in ranged] == [5, 5]
    assert_exactly_once([list(r()) for r in ranged], 10)


def test_a_ranks_share_is_the_same_size_every_epoch(mem_url):
    # shuffled: a rank reads a contiguous slice of the epoch order (issue 16), so its
    # share changes from epoch to epoch but not its size; unshuffled it is the same
    pattern = write_set(mem_url, 50, 5)
    reader = RecordIO(pattern, rank=1, world_size=2, shuffle=True, seed=0)
    shares = []
    for epoch in range(4):
        reader.set_epoch(epoch)
        shares.append(list(reader()))
        assert len(reader) == len(shares[-1]) == 25
    assert len({tuple(s) for s in shares}) == 4
    plain = RecordIO(pattern, rank=1, world_size=2)
    assert list(plain()) == list(plain())


def test_rank_and_worker_arguments_are_checked(mem_url):
    pattern = write_set(mem_url, 5, 1)
    for kwargs in ({"rank": 2, "world_size": 2}, {"rank": -1, "world_size": 2},
                   {"rank": 0, "world_size": 0}, {"rank": 1.0, "world_size": 2},
                   {"num_threads": -1}, {"shuffle_buffer": -2}, {"seed": -1},
                   {"split": "files"}):
        with pytest.raises(InvalidArgumentError):
            RecordIO(pattern, **kwargs)
    with pytest.raises(InvalidArgumentError, match="num_workers"):
        RecordIO(pattern).for_worker(0, 0)
    with pytest.raises(InvalidArgumentError, match="epoch"):
        RecordIO(pattern).set_epoch(-1)


# -- shuffling ------------------------------------------------------------------------------


def test_shuffle_is_deterministic_per_seed_and_epoch(mem_url):
    pattern = write_set(mem_url, 300, 4, chunk_bytes=64)

    def order(seed, epoch):
        reader = RecordIO(pattern, shuffle=True, seed=seed, shuffle_buffer=50)
        reader.set_epoch(epoch)
        return list(reader())

    first = order(7, 0)
    assert sorted(first) == list(range(300)) and first != list(range(300))
    assert order(7, 0) == first  # a new reader, same seed and epoch
    assert order(7, 1) != first and sorted(order(7, 1)) == list(range(300))
    assert order(8, 0) != first


def test_passes_advance_the_epoch_until_set_epoch(mem_url):
    pattern = write_set(mem_url, 100, 2)
    reader = RecordIO(pattern, shuffle=True, seed=1)
    assert reader.epoch == 0
    a, b = list(reader()), list(reader())
    assert a != b and reader.epoch == 2
    reader.set_epoch(0)
    assert list(reader()) == a and list(reader()) == a and reader.epoch == 0
    unseeded = RecordIO(pattern, shuffle=True)
    assert isinstance(unseeded.seed, int)
    assert pickle.loads(pickle.dumps(unseeded)).seed == unseeded.seed


def test_without_shuffle_the_order_is_the_original_one(mem_url):
    pattern = write_set(mem_url, 57, 4, chunk_bytes=30)
    assert list(RecordIO(pattern)()) == list(range(57))
    assert list(RecordIO(pattern, num_threads=3)()) == list(range(57))


def test_shuffle_buffer_holds_at_most_its_size():
    pulled = 0

    def source():
        nonlocal pulled
        for i in range(1000):
            pulled += 1
            yield i

    out, held = [], []
    for x in buffered_shuffle(source(), 32, rng(1, 2)):
        out.append(x)
        held.append(pulled - len(out))
    assert sorted(out) == list(range(1000)) and out != list(range(1000))
    assert max(held) <= 32
    assert out[:10] != list(range(10))
    assert list(buffered_shuffle(range(5), 1, rng(0))) == [0, 1, 2, 3, 4]
    assert sorted(buffered_shuffle(range(5), 100, rng(0))) == [0, 1, 2, 3, 4]


def test_shuffle_buffer_zero_keeps_file_order_within_files(mem_url):
    pattern = write_set(mem_url, 40, 4)
    got = list(RecordIO(pattern, shuffle=True, seed=2, shuffle_buffer=0)())
    runs = [got[i : i + 10] for i in range(0, 40, 10)]
    assert sorted(r[0] for r in runs) == [0, 1, 2, 3]
    assert all(r == list(range(r[0], 40, 4)) for r in runs)


# -- tasks and read_range -------------------------------------------------------------------


def test_tasks_cover_every_record_once_over_many_chunks(many_chunks):
    reader = RecordIO(many_chunks)
    assert all(reader._sources.index(n).num_chunks > 50 for n in range(3))
    tasks = reader.tasks(records_per_task=7)
    assert all(0 <= t.start < t.end <= t.start + 7 for t in tasks)
    got = [x for t in tasks for x in reader.read_range(*t)]
    assert sorted(got) == list(range(600))
    per_file = {p: list(RecordIO(p)()) for p in reader.paths}
    for t in tasks:
        assert list(reader.read_range(t.path, t.start, t.end)) == per_file[t.path][t.start:t.end]
    shuffled = RecordIO(many_chunks, shuffle=True, seed=4).tasks(7)
    assert sorted(shuffled) == sorted(tasks) and shuffled != tasks
    with pytest.raises(InvalidArgumentError, match="records_per_task"):
        reader.tasks(0)


def test_read_range_at_chunk_boundaries(many_chunks):
    reader = RecordIO(many_chunks)
    path = reader.paths[1]
    whole = list(RecordIO(path)())
    index = reader._sources.index(1)
    firsts = index.firsts.tolist()
    assert len(firsts) > 50
    for b in firsts[:6] + firsts[-3:]:
        for start in (b - 1, b, b + 1):
            for end in (start, start + 1, b + 2, b + 5, len(whole)):
                if 0 <= start <= end <= len(whole):
                    assert list(reader.read_range(path, start, end)) == whole[start:end]


def test_read_range_never_reads_earlier_chunks(tmp_path):
    pattern = write_set(str(tmp_path), 300, 1, chunk_bytes=24)
    path = str(tmp_path / "p-00000-of-00000")
    reader = RecordIO(path)
    index = reader._sources.index(0)
    data = bytearray(open(path, "rb").read())
    data[index.offsets[1] + 22] ^= 0xFF  # damage chunk 1's payload
    open(path, "wb").write(bytes(data))
    with pytest.raises(CorruptDataError):
        list(RecordIO(pattern)())
    start = int(index.firsts[2])
    assert list(RecordIO(path).read_range(path, start, 300)) == list(range(start, 300))
    skipping = RecordIO(path, on_corrupt="skip")
    got = list(skipping.read_range(path, 0, 300))
    assert got == [x for x in range(300) if not index.firsts[1] <= x < index.firsts[2]]


@pytest.mark.parametrize("name", ["go-recordio/none.recordio", "go-recordio/snappy.recordio",
                                  "go-recordio/gzip.recordio", "pyrecordio-0.0.4/snappy.recordio"])
def test_the_header_index_of_both_variants(name):
    path = str(DATA / name)
    reader = RecordIO(path, codec="raw")
    index = reader._sources.index(0)
    with open(path, "rb") as f:
        infos = scan_index(f, path=path)  # the careful walk of the container
    assert index.offsets.tolist() == [i.offset for i in infos]
    assert index.num_records == 44 == sum(i.num_records for i in infos)
    assert list(reader.read_range(reader.paths[0], 40, 44)) == vector_records()[40:]


def test_a_damaged_header_falls_back_to_the_careful_walk(tmp_path, caplog):
    write_set(str(tmp_path), 200, 1, chunk_bytes=24)
    (tmp_path / ".p.chunks").unlink()  # the index from the headers (test_chunk_index.py)
    path = str(tmp_path / "p-00000-of-00000")
    offsets = RecordIO(path)._sources.index(0).offsets.tolist()
    data = bytearray(open(path, "rb").read())
    data[offsets[5]] ^= 0xFF  # chunk 5's magic
    open(path, "wb").write(bytes(data))
    with pytest.raises(CorruptDataError) as info:
        list(RecordIO(path).read_range(path, 150, 160))  # the manifest has no offsets
    assert info.value.offset == offsets[5]
    with caplog.at_level("WARNING", logger="recprep"):
        skipping = RecordIO(path, on_corrupt="skip")
        index = skipping._sources.index(0)
    assert index.offsets.tolist() == offsets[:5] + offsets[6:]
    got = [x for t in skipping.tasks(7) for x in skipping.read_range(*t)]
    # the manifest's count tells how many the damaged chunk held: every other record
    # keeps its number (issue 22.2)
    assert index.num_records == 200 and len(got) == 198
    assert got == [x for x in range(200) if not 10 <= x < 12]


def test_read_range_empty_and_out_of_range(many_chunks, tmp_path):
    reader = RecordIO(many_chunks)
    path = reader.paths[0]
    assert list(reader.read_range(path, 0, 0)) == []
    assert list(reader.read_range(path, 200, 200)) == []
    assert list(reader.read_range(path, 0, 200)) == list(range(0, 600, 3))
    for start, end in ((-1, 3), (5, 4), (0, 201), (201, 201), (0.0, 3), (True, 2)):
        with pytest.raises(RecordRangeError) as info:
            reader.read_range(path, start, end)  # raised by the call, before iterating
        err = info.value
        assert isinstance(err, RecprepError) and isinstance(err, ValueError)
        assert isinstance(err, IndexError) and err.num_records == 200 and path in str(err)
    with pytest.raises(InvalidArgumentError, match="not one of this reader's files"):
        reader.read_range(str(tmp_path / "elsewhere"), 0, 1)
    convert(str(tmp_path / "e"), [1], 2, "e", progress=False)
    empty = RecordIO(str(tmp_path / "e" / "e-*"))
    assert [t.path for t in empty.tasks(5)] == [empty.paths[0]]
    assert list(empty.read_range(empty.paths[1], 0, 0)) == []


def test_ranges_and_counts_without_a_header_index(many_chunks, monkeypatch):
    """Formats without chunk headers (TFRecord) are counted and read by scanning."""
    monkeypatch.setattr(RecordIOFormat, "scan_chunks", lambda self, file, **kw: None)
    fs, path = fsspec.core.url_to_fs(many_chunks)
    for manifest in fs.glob(path.rsplit("/", 1)[0] + "/*.manifest.json"):
        fs.rm(manifest)  # counts must come from the scan
    reader = RecordIO(many_chunks)
    assert not reader._sources.index(0).seekable and len(reader) == 600
    got = [x for t in reader.tasks(11) for x in reader.read_range(*t)]
    assert sorted(got) == list(range(600))
    assert_exactly_once(read_all(2, 3, many_chunks), 600)
    assert list(reader.read_range(reader.paths[2], 5, 9)) == [17, 20, 23, 26]


@pytest.mark.parametrize(  # the outside format (tests/support/outside_format.py) has its
    # own suite, tests/test_format_contract.py, which registers it while it runs
    "fmt", builtin_formats())
def test_every_format_splits_and_reads_ranges(tmp_path, fmt):
    """The contract, run against every registered container format."""
    convert(str(tmp_path), list(range(300)), 2, "f", format=fmt, chunk_bytes=30,
            progress=False)
    pattern = str(tmp_path / "f-*")
    reader = RecordIO(pattern)
    assert list(reader()) == list(range(300)) and len(reader) == 300
    got = [x for t in reader.tasks(13) for x in reader.read_range(*t)]
    assert sorted(got) == list(range(300))
    assert list(reader.read_range(reader.paths[1], 140, 150)) == list(range(281, 300, 2))
    for world_size, num_workers in ((3, 2), (2, 5)):
        assert_exactly_once(read_all(world_size, num_workers, pattern, shuffle=True, seed=1,
                                     num_threads=2), 300)


# -- len() without decoding, threads ---------------------------------------------------------


class CountingCodec(Codec):
    name = "recprep"

    def __init__(self):
        self.inner = get_codec("recprep")
        self.calls = 0

    def encode(self, instance):
        return self.inner.encode(instance)

    def decode(self, record, *, allow_pickle=False):
        self.calls += 1
        return self.inner.decode(record, allow_pickle=allow_pickle)


def test_len_decodes_nothing(many_chunks, tmp_path):
    codec = CountingCodec()
    assert len(RecordIO(many_chunks, codec=codec)) == 600
    for world_size, expected in ((2, [400, 200]), (4, [150] * 4)):
        got = [len(RecordIO(many_chunks, rank=r, world_size=world_size, codec=codec))
               for r in range(world_size)]
        assert got == expected
    bare = tmp_path / "bare"
    bare.mkdir()
    for p in RecordIO(many_chunks).paths:  # no manifest: counts from chunk headers
        (bare / p.rsplit("/", 1)[1]).write_bytes(open(p, "rb").read())
    assert len(RecordIO(str(bare / "p-*"), codec=codec, rank=1, world_size=5)) == 120
    assert codec.calls == 0


@pytest.mark.parametrize("shuffle_", [False, True])
def test_threads_do_not_change_the_order(tmp_path, shuffle_):
    write_set(str(tmp_path), 500, 3, chunk_bytes=50, prefix="a")
    write_set(str(tmp_path), 77, 2, chunk_bytes=1, prefix="b")
    pattern = [str(tmp_path / "a-*"), str(tmp_path / "b-*")]
    options = {"shuffle": shuffle_, "seed": 5, "shuffle_buffer": 64}
    for world_size in (1, 3):
        want = read_all(world_size, 2, pattern, **options)
        for threads in (1, 2, 4):
            assert read_all(world_size, 2, pattern, num_threads=threads, **options) == want
    reader = RecordIO(pattern, num_threads=2)
    path = reader.paths[1]
    assert list(reader.read_range(path, 3, 150)) == list(RecordIO(path)())[3:150]


def test_threads_raise_damage_at_the_same_place(tmp_path):
    write_set(str(tmp_path), 400, 2, chunk_bytes=256)
    shard = tmp_path / "p-00001-of-00001"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    outcomes = []
    for threads in (0, 3):
        got = []
        with pytest.raises(CorruptDataError) as info:
            for x in RecordIO(str(tmp_path / "p-*"), num_threads=threads)():
                got.append(x)
        outcomes.append((got, info.value.offset))
    assert outcomes[0] == outcomes[1] and len(outcomes[0][0]) > 100


def test_stopping_early_stops_the_threads(many_chunks):
    before = threading.active_count()
    reader = RecordIO(many_chunks, num_threads=4)
    passes = [reader() for _ in range(3)]
    assert [next(p) for p in passes] == [0, 0, 0]
    for p in passes:
        p.close()
    assert threading.active_count() == before


def test_prefetch_keeps_at_most_max_ahead_batches():
    produced = [0]
    lock = threading.Lock()

    def source(k):
        for i in range(40):
            with lock:
                produced[0] += 1
            yield [k, i]

    sources = [source(k) for k in range(3)]
    consumed, worst = 0, 0
    with prefetched(sources, [0, 0, 0], num_threads=4, max_ahead=5) as streams:
        iterators = [iter(s) for s in streams]
        for _ in range(40):
            for it in iterators:
                assert next(it)[0] is not None
                consumed += 1
                time.sleep(0.0005)
                with lock:
                    worst = max(worst, produced[0] - consumed)
    assert consumed == 120 and worst <= 5 + 1


def test_prefetch_hands_errors_over_in_order():
    def failing():
        yield [1]
        yield [2]
        raise KeyError("boom")

    prefetcher = Prefetcher([failing(), iter([[9]])], [0, 1], num_threads=2)
    try:
        stream = prefetcher.stream(0)
        assert next(stream) == [1] and next(stream) == [2]
        with pytest.raises(KeyError, match="boom"):
            next(stream)
        assert list(prefetcher.stream(1)) == [[9]]
    finally:
        prefetcher.close()


def test_the_cpu_gate_is_given_back_while_a_read_waits():
    gate = CpuGate(1)
    reading, release = threading.Event(), threading.Event()

    class SlowRead:
        def read(self, size=-1):
            reading.set()
            release.wait(5)
            return b"x"

    def reader_thread():
        with gate:
            assert gate.wrap(SlowRead()).read() == b"x"

    thread = threading.Thread(target=reader_thread)
    thread.start()
    assert reading.wait(5)
    with gate:  # free while the other thread waits on its read
        release.set()
    thread.join(5)
    assert not thread.is_alive()
    assert not storage_waits(fsspec.filesystem("file"))
    assert not storage_waits(fsspec.filesystem("memory"))
    assert usable_cores() >= 1


def test_a_reader_pickles_with_its_split(many_chunks):
    reader = RecordIO(many_chunks, rank=1, world_size=2, shuffle=True, seed=9).for_worker(1, 2)
    copy = pickle.loads(pickle.dumps(reader))
    assert list(copy()) == list(reader()) and len(copy) == len(reader)


# -- decorators -----------------------------------------------------------------------------


def test_batch_decorator(many_chunks):
    read = RecordIO(many_chunks)
    batches = list(batch(read, 64)())
    assert [len(b) for b in batches] == [64] * 9 + [24]
    assert [x for b in batches for x in b] == list(range(600))
    assert [len(b) for b in batch(read, 64, drop_last=True)()] == [64] * 9
    for bad in (0, -1, 2.0, True):
        with pytest.raises(InvalidArgumentError, match="batch_size"):
            batch(read, bad)
    with pytest.raises(InvalidArgumentError, match="reader"):
        batch([1, 2], 2)


def test_shuffle_decorator_shuffles_blocks_reproducibly():
    def reader():
        return iter(range(100))

    seeded = shuffle(reader, buf_size=30, seed=3)
    first, second = list(seeded()), list(seeded())
    assert first != second  # each pass its own order...
    again = shuffle(reader, buf_size=30, seed=3)
    assert list(again()) == first and list(again()) == second  # ... the same in every run
    for k in range(0, 100, 30):  # blocks of buf_size, as PaddlePaddle's
        assert sorted(first[k : k + 30]) == list(range(k, min(k + 30, 100)))
    assert first != list(range(100))
    unseeded = shuffle(reader, 100)
    assert sorted(unseeded()) == list(range(100))
    with pytest.raises(InvalidArgumentError, match="buf_size"):
        shuffle(reader, 0)
    with pytest.raises(InvalidArgumentError, match="seed"):
        shuffle(reader, 5, seed=-3)


def test_decorators_compose_over_a_reader(many_chunks):
    train = batch(shuffle(RecordIO(many_chunks), buf_size=100, seed=0), batch_size=128)
    epochs = [[x for b in train() for x in b] for _ in range(2)]
    assert all(sorted(e) == list(range(600)) for e in epochs) and epochs[0] != epochs[1]
