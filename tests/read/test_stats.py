"""The stall report (issue 26, item 5): ``reader.stats()`` counts what a pass read and
where its time went, ``DataStallWarning`` says when the consumer starved, and a
``RecordIODataset`` gathers its DataLoader workers' figures.

Times are checked against what the test itself did (the seconds it slept in the consumer
or in a codec) and against the wall time around the loop, never against a speed.
"""

from __future__ import annotations

import time
import warnings

import pytest

from recprep import (
    DataStallWarning,
    FetchStats,
    InvalidArgumentError,
    ReadStats,
    RecordIO,
    convert,
)
from recprep.codecs.raw import RawCodec
from recprep.read import readstats
from recprep.read.readstats import Setup, stall_hint

N = 300
RECORDS = [bytes([i % 251]) * (1 + i % 37) for i in range(N)]


class SlowCodec(RawCodec):
    """The raw codec, sleeping ``pause`` seconds per chunk it decodes."""

    def __init__(self, pause: float) -> None:
        self.pause = pause
        self.chunks = 0

    def decode_many(self, records, *, allow_pickle=False):
        time.sleep(self.pause)
        self.chunks += 1
        return super().decode_many(records, allow_pickle=allow_pickle)


@pytest.fixture
def raw_set(tmp_path):
    """``RECORDS`` as 3 shards of raw records, in chunks of about 400 bytes."""
    convert(tmp_path, RECORDS, 3, "s", codec="raw", chunk_bytes=400)
    return str(tmp_path / "s")


def _chunks(reader: RecordIO) -> int:
    return sum(1 for _ in _reader_chunks(reader))


def _reader_chunks(reader):
    from recprep.containers import get_format

    fmt = get_format("recordio")
    for path in reader.paths:
        with reader.fs.open(path, "rb") as f:
            yield from fmt.read_chunks(f, path=path)


# -- what a pass read -------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [0, 2])
def test_a_pass_counts_instances_bytes_and_chunks_exactly(raw_set, threads):
    reader = RecordIO(raw_set, num_threads=threads)
    assert list(reader()) == RECORDS
    stats = reader.stats()
    assert isinstance(stats, ReadStats) and isinstance(stats, FetchStats)
    assert (stats.instances, stats.record_bytes, stats.passes) == (
        N, sum(map(len, RECORDS)), 1)
    assert stats.chunks == _chunks(reader) > 3
    assert stats.requests == 0 and stats == FetchStats()  # local: nothing fetched
    assert min(stats.fetching, stats.decoding, stats.waiting_for_data,
               stats.waiting_for_consumer) >= 0
    batches = [len(b) for b in reader.batches(64)]
    again = reader.stats()
    assert (again.instances, again.passes) == (2 * N, 2) and sum(batches) == N
    assert again.record_bytes == 2 * stats.record_bytes


def test_instances_count_as_they_are_taken_also_mid_block(raw_set):
    reader = RecordIO(raw_set)
    stream = reader()
    taken = [next(stream) for _ in range(5)]
    assert taken == RECORDS[:5] and reader.stats().instances == 5
    stream.close()  # stopped early: what was taken stays counted
    assert reader.stats().instances == 5
    copy = reader.for_worker(0, 2)  # copies in this process count into the same figures
    assert sum(1 for _ in copy()) == len(copy)
    assert reader.stats().instances == 5 + len(copy)


@pytest.mark.parametrize("batch_size", [None, 20])
def test_a_consumer_that_sleeps_is_waited_for(raw_set, batch_size):
    reader = RecordIO(raw_set)
    stream = reader() if batch_size is None else reader.batches(batch_size)
    slept = 0.0
    began = time.perf_counter()
    for k, _ in enumerate(stream):
        if k % 10 == 0:
            time.sleep(0.01)
            slept += 0.01
    wall = time.perf_counter() - began
    stats = reader.stats()
    assert stats.waiting_for_consumer >= slept
    assert stats.waiting_for_consumer + stats.waiting_for_data <= wall
    assert stats.elapsed == stats.waiting_for_consumer + stats.waiting_for_data


def test_a_slow_codec_shows_in_decoding(raw_set):
    codec = SlowCodec(0.005)
    reader = RecordIO(raw_set, codec=codec)
    began = time.perf_counter()
    assert list(reader()) == RECORDS
    wall = time.perf_counter() - began
    stats = reader.stats()
    assert stats.chunks == codec.chunks > 3
    assert stats.decoding >= codec.chunks * codec.pause
    # no threads: fetching and decoding happen while the consumer waits for data
    assert stats.fetching + stats.decoding <= stats.waiting_for_data <= wall
    assert stats.decoding > stats.waiting_for_consumer


def test_stats_compare_and_add_as_fetch_stats_did():
    a = ReadStats(requests=2, peak_bytes=5, instances=3, decoding=1.0)
    b = ReadStats(requests=1, peak_bytes=9, instances=4, waiting_for_consumer=2.0)
    both = a + b
    assert (both.requests, both.peak_bytes, both.instances, both.decoding) == (3, 9, 7, 1.0)
    assert a == FetchStats(requests=2, peak_bytes=5) and a != b
    assert hash(a) == hash(FetchStats(requests=2, peak_bytes=5))
    assert both.as_dict()["stalled"] == 0.0 and ReadStats().stalled == 0.0


# -- DataStallWarning -------------------------------------------------------------------------


def _read_all(reader, consumer_pause=0.0):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for k, _ in enumerate(reader()):
            if consumer_pause and k % 10 == 0:
                time.sleep(consumer_pause)
    return [w for w in seen if issubclass(w.category, DataStallWarning)]


def test_a_starved_consumer_is_warned_with_a_hint(raw_set):
    codec = SlowCodec(0.08)  # 15 chunks: more than MIN_STALL_SECONDS in all
    reader = RecordIO(raw_set, codec=codec, stall_warning=0.5)
    [warning] = _read_all(reader)
    stall = warning.message
    assert stall.waited / stall.elapsed > 0.5 and stall.elapsed >= readstats.MIN_STALL_SECONDS
    text = str(stall)
    assert "the consumer waited for data" in text and "of the pass" in text
    assert "decoding takes" in text and "more DataLoader workers" in text  # decode-bound
    assert stall.hint in text and raw_set in stall.where
    assert warning.filename == __file__  # the user's line, not recprep's


def test_a_slow_consumer_is_not_warned_nor_a_reader_not_asked(raw_set):
    slow_consumer = RecordIO(raw_set, stall_warning=0.5)
    assert _read_all(slow_consumer, consumer_pause=0.04) == []
    assert slow_consumer.stats().waiting_for_consumer >= 30 * 0.04
    starved_unasked = RecordIO(raw_set, codec=SlowCodec(0.08))
    assert _read_all(starved_unasked) == []


def test_a_long_pass_is_judged_while_it_runs(raw_set, monkeypatch):
    monkeypatch.setattr(readstats, "STALL_WINDOW_SECONDS", 0.2)
    reader = RecordIO(raw_set, codec=SlowCodec(0.03), stall_warning=0.5)
    stream = reader()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = [next(stream) for _ in range(N - 1)]  # the pass is not over
        assert [w.category for w in seen] == [DataStallWarning]
        assert "of the last" in str(seen[0].message)
        got += list(stream)  # once per pass
        assert len(seen) == 1 and got == RECORDS


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, True, "half"])
def test_stall_warning_must_be_a_share(raw_set, value):
    with pytest.raises(InvalidArgumentError, match="stall_warning must be"):
        RecordIO(raw_set, stall_warning=value)


@pytest.mark.parametrize(("figures", "setup", "rule"), [
    ({}, {}, "nothing"),
    ({"chunks": 400, "record_bytes": 400 << 10, "fetching": 2, "decoding": 1}, {}, "chunks"),
    ({"chunks": 400, "record_bytes": 400 << 10, "fetching": 2, "decoding": 1},
     {"files": 400}, "prefetch"),  # a set of small files: not the chunks' fault
    ({"chunks": 40, "record_bytes": 40 << 20, "fetching": 1, "decoding": 2}, {}, "workers"),
    ({"chunks": 40, "record_bytes": 40 << 20, "fetching": 2, "decoding": 1}, {}, "prefetch"),
    ({"chunks": 40, "record_bytes": 40 << 20, "fetching": 2, "decoding": 1},
     {"num_threads": 4, "remote": True}, "cache"),
    ({"chunks": 40, "record_bytes": 40 << 20, "fetching": 2, "decoding": 1},
     {"num_threads": 4, "remote": True, "cached": True}, "workers"),
])
def test_hint_rules(figures, setup, rule):
    made = Setup(**{"where": "x", "num_threads": 0, "remote": False, "cached": False,
                    "files": 4, **setup})
    hint = stall_hint(ReadStats(passes=1, **figures), made)
    assert hint.rule == rule and hint.text


# -- DataLoader workers -----------------------------------------------------------------------


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_each_dataloader_workers_figures_reach_the_dataset(raw_set, context):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from recprep.torch import RecordIODataset

    ds = RecordIODataset(raw_set, codec="raw", batch_size=25)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=context)
    assert sum(len(b) for b in loader) == N
    shares = [len(ds.reader.for_worker(w, 2, batch_size=25)) for w in (0, 1)]
    workers = ds.worker_stats()
    assert sorted(workers) == [0, 1]
    assert [workers[w].instances for w in (0, 1)] == shares and sum(shares) == N
    assert sum(workers[w].record_bytes for w in (0, 1)) == sum(map(len, RECORDS))
    assert all(workers[w].passes == 1 and workers[w].decoding > 0 for w in (0, 1))
    assert ds.stats().instances == N and ds.reader.stats().instances == 0
    if context == "spawn":  # slow to start: once is enough for the board's way there
        return
    assert sum(len(b) for b in loader) == N  # new worker processes add to their ids'
    assert [s.instances for s in ds.worker_stats().values()] == [2 * n for n in shares]
    assert ds.stats().passes == 4
