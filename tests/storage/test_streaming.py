"""Streaming reads from an object store (issue 24 items 1, 3 and 4): range requests in
flight across shards and within one, bounded memory, ranks that fetch only their share,
and a store that never answers failing within the deadline — on moto's S3 server.

Each test asserts on what arrived (the set's instances, exactly) and on the fetcher's
counts (requests, bytes, peak bytes held, requests in flight at once).
"""

from __future__ import annotations

import math
import socket
import threading

import numpy as np
import pytest

from recprep import FetchOptions, FetchStats, RecordIO, StoreUnavailableError, convert
from recprep.errors import InvalidArgumentError
from recprep.storage.fetch import Fetcher

from ..support import random_records

KiB = 1 << 10


def _shard_bytes(reader: RecordIO) -> list[int]:
    manifest = reader.manifests[0]
    assert manifest is not None
    return [s.bytes for s in manifest.shards]


def test_a_pass_streams_every_shard_in_ranges_with_requests_in_flight(remote_set):
    url, records, options = remote_set
    fetch = FetchOptions(range_bytes=64 * KiB, initial_requests=4)
    reader = RecordIO(url, storage_options=options, fetch=fetch)
    assert list(reader()) == [records[k] for k in _round_robin(len(records), 4)]
    stats = reader.stats()
    expected = sum(math.ceil(b / (64 * KiB)) for b in _shard_bytes(reader))
    assert stats.requests == expected  # one GET per range, the grid of each shard
    assert stats.bytes == sum(_shard_bytes(reader))
    assert stats.retries == stats.throttled == stats.failed == 0
    assert stats.most_in_flight > 1


def _round_robin(n: int, shards: int) -> list[int]:
    """The order a reader yields ``n`` records written to ``shards`` shards."""
    return sorted(range(n), key=lambda k: (k // shards, k % shards))


def test_a_single_shard_is_read_with_several_ranges_in_flight(s3, s3_url):
    records = random_records(300, 4000, seed=1)
    convert(f"{s3_url}/one", records, 1, "s", codec="raw", storage_options=s3.storage_options)
    reader = RecordIO(f"{s3_url}/one/s", storage_options=s3.storage_options,
                      fetch=FetchOptions(range_bytes=64 * KiB, initial_requests=6))
    assert list(reader()) == records
    assert reader.stats().most_in_flight >= 4


def test_memory_stays_within_the_byte_budget_and_the_first_instance_comes_early(remote_set):
    url, records, options = remote_set
    fetch = FetchOptions(range_bytes=32 * KiB, budget_bytes=160 * KiB, initial_requests=8)
    reader = RecordIO(url, storage_options=options, fetch=fetch)
    stream = reader()
    first = next(stream)
    at_first = reader.stats().bytes
    rest = list(stream)
    assert [first, *rest] == [records[k] for k in _round_robin(len(records), 4)]
    total = sum(_shard_bytes(reader))
    assert at_first <= 160 * KiB + 4 * 32 * KiB < total  # not the whole set first
    # the budget, plus at most one range per shard a waiting read started beyond it
    assert reader.stats().peak_bytes <= 160 * KiB + 4 * 32 * KiB


def test_batches_and_instances_agree_when_streamed(remote_set):
    url, records, options = remote_set
    reader = RecordIO(url, storage_options=options, codec="raw",
                      fetch=FetchOptions(range_bytes=48 * KiB))
    batched = [x for batch in reader.batches(64) for x in batch]
    assert batched == list(reader())


@pytest.mark.parametrize("world_size", [2, 4])
def test_each_rank_fetches_only_its_share(s3, s3_url, world_size):
    records = random_records(800, 2000, seed=2)
    convert(f"{s3_url}/r", records, 1, "q", codec="raw", chunk_bytes=16 * KiB,
            storage_options=s3.storage_options)
    fetch = FetchOptions(range_bytes=64 * KiB)
    readers = [RecordIO(f"{s3_url}/r/q", storage_options=s3.storage_options, rank=r,
                        world_size=world_size, split="range", fetch=fetch)
               for r in range(world_size)]
    got = [list(reader()) for reader in readers]
    assert [x for part in got for x in part] == records
    size = _shard_bytes(readers[0])[0]
    fetched = [reader.stats().bytes for reader in readers]
    for part in fetched:  # its share, plus chunk rounding at both ends
        assert part <= size / world_size + 2 * 16 * KiB + 64
    assert size <= sum(fetched) <= size + world_size * 2 * 16 * KiB


def test_local_sets_are_read_directly_and_count_nothing(tmp_path):
    convert(tmp_path, list(range(10)), 2, "l")
    reader = RecordIO(tmp_path / "l")
    assert list(reader()) == list(range(10))
    assert reader.stats() == FetchStats()


@pytest.mark.parametrize(("field", "value", "said"), [
    ("range_bytes", 0, "range_bytes must be a positive int"),
    ("deadline", -1, "deadline must be a positive number of seconds"),
    ("initial_requests", 100, "initial_requests (100) is more than max_requests (64)"),
    ("budget_bytes", 1024, "must hold at least one range"),
])
def test_fetch_options_are_checked(field, value, said):
    with pytest.raises(InvalidArgumentError, match=said.replace("(", r"\(").replace(")", r"\)")):
        FetchOptions(**{field: value})


def test_a_reader_refuses_fetch_that_is_not_fetch_options(tmp_path):
    convert(tmp_path, [1], 1, "f")
    with pytest.raises(InvalidArgumentError, match="fetch must be a FetchOptions or None"):
        RecordIO(tmp_path / "f", fetch={"range_bytes": 1})  # type: ignore[arg-type]


@pytest.fixture
def silent_store():
    """A TCP server on loopback that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_store_that_never_answers_fails_within_the_deadline(s3, silent_store):
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=silent_store, skip_instance_cache=True)
    fetcher = Fetcher(fs, FetchOptions(deadline=1.5, backoff=0.05))
    file = fetcher.open("bucket/p-00000-of-00001", size=1000, span=(0, 1000))
    with pytest.raises(StoreUnavailableError) as caught:
        file.read(10)
    err = caught.value
    assert (err.path, err.start, err.end) == ("s3://bucket/p-00000-of-00001", 0, 1000)
    assert err.seconds < 5 and err.attempts >= 1
    assert "no answer" in err.status
    assert "bytes 0-999 could not be fetched" in str(err)
    assert fetcher.stats().failed == 1
    fetcher.close()


def test_each_worker_of_each_rank_fetches_only_its_part(s3, s3_url):
    records = random_records(800, 2000, seed=3)
    convert(f"{s3_url}/w", records, 1, "q", codec="raw", chunk_bytes=16 * KiB,
            storage_options=s3.storage_options)
    fetch = FetchOptions(range_bytes=64 * KiB)
    parts = []
    for rank in range(2):
        for worker in range(2):  # a fresh reader each: a DataLoader worker's own process
            reader = RecordIO(f"{s3_url}/w/q", storage_options=s3.storage_options, rank=rank,
                              world_size=2, split="range", fetch=fetch)
            reader = reader.for_worker(worker, 2)
            parts.append((list(reader()), reader.stats().bytes))
    assert [x for got, _ in parts for x in got] == records
    size = _shard_bytes(reader)[0]
    for _, fetched in parts:
        assert fetched <= size / 4 + 2 * 16 * KiB + 64


def test_the_range_client_is_made_from_the_filesystems_botocore_session(remote_set):
    """The ranges' own client (no retries of its own, a larger pool) reuses the session
    that read the manifest: its service model and credentials are not loaded again
    before the first range goes out (a few hundred ms of a fresh process)."""
    url, records, options = remote_set
    reader = RecordIO(url, storage_options=options)
    assert sorted(reader()) == sorted(records)
    fetcher = reader._sources.fetcher
    getter = fetcher._getter
    assert getter.fs is not fetcher.fs  # a client of its own ...
    assert getter.fs.session is fetcher.fs.session is not None  # ... from the same session
    assert getter.fs.retries == 1


def test_a_range_hands_out_its_bytes_across_the_pieces_they_arrived_in():
    from recprep.storage.fetchrange import FetchRange

    r = FetchRange(None, 100, 110, demand=False)  # type: ignore[arg-type]
    for piece in (b"012", b"3456", b"789"):
        r.add(piece)
    assert r.filled == 10
    assert r.slice(0, 10) == b"0123456789"
    assert r.slice(2, 8) == b"234567" and r.slice(4, 6) == b"45"
    whole = r.slice(3, 7)
    assert whole == b"3456" and whole is r.pieces[1]  # a whole piece: not copied


def test_a_range_copies_its_bytes_across_pieces_into_a_buffer():
    from recprep.storage.fetchrange import FetchRange

    r = FetchRange(None, 100, 110, demand=False)  # type: ignore[arg-type]
    for piece in (b"012", b"3456", b"789"):
        r.add(piece)
    out = bytearray(b"." * 8)
    assert r.copy_into(2, memoryview(out)) == 8 and out == b"23456789"
    out = bytearray(b"." * 4)
    assert r.copy_into(8, memoryview(out)) == 2 and out == b"89.."  # as much as arrived


def test_readinto_gives_what_read_gives_across_ranges_and_at_the_end():
    import fsspec

    fs = fsspec.filesystem("memory")
    data = np.random.default_rng(7).integers(0, 256, 700_000, dtype=np.uint8).tobytes()
    fs.pipe("/readinto/f", data)
    fetcher = Fetcher(fs, FetchOptions(range_bytes=256 << 10))
    try:
        with fetcher.open("/readinto/f", size=len(data), span=(0, len(data))) as f:
            got, pos = [], 0
            for size in (10, 300_000, 1, 262_134, 200_000):  # over range edges; past the end
                buffer = bytearray(size)
                n = f.readinto(memoryview(buffer))
                assert n == min(size, len(data) - pos) and f.tell() == pos + n
                got.append(bytes(buffer[:n]))
                pos += n
            assert f.readinto(memoryview(bytearray(5))) == 0
        assert b"".join(got) == data
    finally:
        fetcher.close()


def test_a_pass_first_ranges_go_alone_until_bytes_arrive():
    # when a pass begins, each file gets its first range and no more until the first
    # bytes arrive: the first chunks don't share the link with second ranges; then the
    # fetcher fills its requests in flight. (A held getter: the schedule, not a store.)
    import asyncio

    import fsspec

    from recprep.storage.rangeget import RangeGetter

    class Held(RangeGetter):
        def __init__(self, loop):
            self.loop, self.gate, self.asked = loop, asyncio.Event(), []

        async def _get(self, path, start, end):
            self.asked.append((path, start))
            await self.gate.wait()
            yield bytes(end - start)

        def get(self, path, start, end, etag=None):
            return self._get(path, start, end)

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    fetcher = Fetcher(fsspec.filesystem("memory"),
                      FetchOptions(range_bytes=256 << 10, initial_requests=8))
    fetcher._getter = held = Held(loop)
    size = 1 << 20  # 4 ranges each
    paths = [f"/f{i}" for i in range(3)]
    try:
        fetcher.expect([(p, size, None, (0, size)) for p in paths])
        assert fetcher._in_flight == 3 and fetcher.stats().most_in_flight == 3
        loop.call_soon_threadsafe(held.gate.set)
        with fetcher.open(paths[0], size=size, span=(0, size)) as f:
            assert f.read() == bytes(size)
        assert sorted(held.asked[:3]) == [(p, 0) for p in paths]  # the first ranges first
        assert fetcher.stats().most_in_flight == 8
    finally:
        fetcher.close()

        async def drain():
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(drain(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
