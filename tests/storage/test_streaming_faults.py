"""A flaky store (issue 24 items 3 and 8): through the link emulator
(:mod:`tests.support.linkproxy`), connections cut mid-body, a request held for seconds,
503 SlowDown and 429 answers, and a store that stops answering. A full epoch under each
fault yields exactly the set, with the retries counted; a dropped transfer goes on from
the byte where it stopped; a store that never answers fails within the deadline with
:class:`~recprep.StoreUnavailableError` naming the shard, the byte range and the status.
"""

from __future__ import annotations

import math
import warnings

import pytest

from recprep import FetchOptions, RecordIO, StoreUnavailableError, ThrottledWarning, convert

from ..support import random_records

KiB = 1 << 10
RANGE = 64 * KiB


@pytest.fixture
def flaky_set(s3, s3_url, link):
    """4 shards of 3 kB records (~1.2 MB) on S3, read through the link proxy."""
    records = random_records(400, 3000, seed=5)
    convert(f"{s3_url}/f", records, 4, "p", codec="raw", storage_options=s3.storage_options)
    order = sorted(range(len(records)), key=lambda k: (k // 4, k % 4))
    return f"{s3_url}/f/p", [records[k] for k in order], link


def _reader(url: str, link, **fetch: object) -> RecordIO:
    options = {"range_bytes": RANGE, "backoff": 0.01, "deadline": 20.0, **fetch}
    return RecordIO(url, storage_options=link.storage_options,
                    fetch=FetchOptions(**options))  # type: ignore[arg-type]


def _ranges(reader: RecordIO) -> int:
    manifest = reader.manifests[0]
    assert manifest is not None
    return sum(math.ceil(s.bytes / RANGE) for s in manifest.shards)


def test_bodies_cut_mid_transfer_resume_where_they_stopped(flaky_set):
    url, expected, link = flaky_set
    reader = _reader(url, link)
    link.faults.update(drop_mid_body={"ranged": True, "every": 3, "after": 20_000})
    assert list(reader()) == expected
    stats = reader.stats()
    cut = link.stats()["faults"]["drop_mid_body"]
    assert cut > 0
    assert stats.retries == stats.resumed == cut  # each cut: one retry, from its byte
    assert stats.requests == _ranges(reader) + cut
    assert stats.bytes == sum(s.bytes for s in reader.manifests[0].shards)  # nothing twice


def test_slowdown_is_retried_counted_and_warned_once(flaky_set):
    url, expected, link = flaky_set
    reader = _reader(url, link)
    link.faults.update(slowdown={"ranged": True, "p": 0.3, "seed": 3})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(reader()) == expected
    throttled = link.stats()["faults"]["slowdown"]
    assert throttled > 0
    stats = reader.stats()
    assert stats.throttled == throttled and stats.retries >= throttled
    said = [w.message for w in caught if isinstance(w.message, ThrottledWarning)]
    assert len(said) == 1
    assert said[0].throttled == throttled
    assert str(said[0]).startswith(f"{url}: the store throttled {throttled} requests")


def test_429_is_throttling_too(flaky_set):
    url, expected, link = flaky_set
    reader = _reader(url, link, initial_requests=8)
    link.faults.update(throttle_429={"ranged": True, "times": 4})
    with pytest.warns(ThrottledWarning):
        assert list(reader()) == expected
    assert reader.stats().throttled == 4
    assert reader.stats().concurrency < 8  # halved on pushback


def test_one_request_held_for_seconds_delays_but_loses_nothing(flaky_set):
    url, expected, link = flaky_set
    reader = _reader(url, link)
    link.faults.update(delay_one={"ranged": True, "seconds": 1.0})
    assert list(reader()) == expected
    assert link.stats()["faults"]["delay_one"] == 1
    assert reader.stats().retries == 0


def test_a_store_that_stops_answering_fails_within_the_deadline(flaky_set):
    url, _, link = flaky_set
    reader = _reader(url, link, deadline=1.5)
    link.faults.update(blackhole={"ranged": True})
    with pytest.raises(StoreUnavailableError) as caught:
        list(reader())
    err = caught.value
    assert err.path.startswith(url.rsplit("/", 1)[0] + "/p-0000")
    assert err.end > err.start >= 0 and err.end - err.start <= RANGE
    assert err.seconds < 6
    assert "no answer" in err.status
    assert f"bytes {err.start}-{err.end - 1} could not be fetched" in str(err)


def test_a_store_that_always_throttles_fails_naming_the_status(flaky_set):
    url, _, link = flaky_set
    reader = _reader(url, link, deadline=2.0)
    link.faults.update(slowdown={"ranged": True})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ThrottledWarning)  # the error says it, not a warning
        with pytest.raises(StoreUnavailableError) as caught:
            list(reader())
    assert "503 SlowDown" in caught.value.status
    assert caught.value.attempts >= 2


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers_stream_and_fetch_each_byte_once(s3, s3_url, link, context):
    """Workers forked or spawned from a reader that already streamed stream afresh, and
    together fetch the set once (the proxy counts bytes across processes)."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from recprep.torch import RecordIODataset

    records = random_records(400, 3000, seed=9)
    convert(f"{s3_url}/dl", records, 4, "p", codec="raw", storage_options=s3.storage_options)
    url = f"{s3_url}/dl/p"
    warm = RecordIO(url, storage_options=link.storage_options)  # the parent streams first
    assert len(list(warm())) == len(records)
    dataset = RecordIODataset(url, storage_options=link.storage_options,
                              fetch=FetchOptions(range_bytes=RANGE))
    link.reset_stats()
    loader = DataLoader(dataset, batch_size=None, num_workers=2,
                        multiprocessing_context=context)
    got = [bytes(x) for x in loader]
    assert sorted(got) == sorted(records)
    shard_bytes = sum(s.bytes for s in warm.manifests[0].shards)
    down = link.stats()["bytes_down"]
    assert shard_bytes <= down < shard_bytes * 1.1 + 200_000  # plus manifests and headers
    del torch
