"""A shuffled pass's plan, and a reader's count checks, cost little per shard (issue 26
items 4 and 7) and change nothing a user sees.

A shuffled pass permutes each block of its order by the block's own seeded stream. The
plan keeps a few ints per block and makes a block's permutation when the pass reaches
it: the order, and every state saved along the way, are the ones made up front before
(pinned here as ``main`` gave them, whole, resumed and resumed on another number of
workers). A reader checks its local files' manifest counts against their sizes with a
``stat`` each and one comparison for all, not a filesystem call per shard; a file that
fails still fails as before.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import json
import os
import pickle
import tracemalloc
from pathlib import Path

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.errors import CorruptDataError
from recprep.read.blocks import flatten, interleave
from recprep.read.passes import BUFFER_STREAM, Picks, Share, layout, shuffled
from recprep.read.shuffling import permutation
from recprep.storage.manifest import ShardInfo

# what main's reader gave (before plans were lazy), for 61 instances (i, float(i)) in 7
# shards, shuffle=True, seed=11, shuffle_buffer=4, epoch 1, 2 workers
WHOLE = [
    [60, 53, 46, 39, 32, 22, 1, 15, 8, 38, 45, 31, 52, 43, 50, 36, 29, 30, 37, 51, 44, 57,
     58, 59, 7, 0, 14, 21, 28, 42, 35],
    [49, 3, 24, 10, 17, 41, 48, 34, 55, 11, 4, 25, 18, 26, 19, 5, 12, 54, 33, 47, 40, 2,
     9, 16, 23, 20, 27, 6, 13, 56],
]
#: main's state of worker 0 after 7 instances
STATE = {"recprep_state": 1, "shuffle": True, "seed": 11, "epoch": 1, "epoch_set": True,
         "records": 61, "files": 7, "block": 4, "permuted": True, "base": [], "rank": 0,
         "world_size": 1, "worker": 0, "num_workers": 2, "yielded": 7, "done": False}
#: main's combined state of the 2 workers after 5 and 11 instances ...
COMBINED = {"recprep_state": 1, "shuffle": True, "seed": 11, "epoch": 1,
            "epoch_set": True, "records": 61, "files": 7, "block": 4, "permuted": True,
            "base": [[0, 5], [31, 42]]}
#: ... and what each of 3 workers resumed from it read
ELASTIC = [
    [22, 1, 15, 8, 38, 45, 31, 52, 43, 50, 36, 29, 30, 37, 51],
    [44, 57, 58, 59, 7, 0, 14, 21, 28, 42, 35, 25, 18, 26, 19],
    [5, 12, 54, 33, 47, 40, 2, 9, 16, 23, 20, 27, 6, 13, 56],
]


@pytest.fixture
def pinned_set(tmp_path: Path) -> str:
    convert(str(tmp_path), [(i, float(i)) for i in range(61)], 7, "s", progress=False)
    return str(tmp_path / "s")


def _reader(path: str, worker: int, workers: int) -> RecordIO:
    reader = RecordIO(path, shuffle=True, seed=11, shuffle_buffer=4).for_worker(
        worker, workers)
    reader.set_epoch(1)
    return reader


def test_a_shuffled_pass_reads_in_mains_order(pinned_set: str) -> None:
    assert [[int(i) for i, _ in _reader(pinned_set, w, 2)()] for w in range(2)] == WHOLE
    worker = _reader(pinned_set, 0, 2)
    head = [int(i) for i, _ in itertools.islice(worker(), 7)]
    assert head == WHOLE[0][:7] and worker.state_dict() == STATE


def test_states_saved_by_main_resume_as_main_resumed_them(pinned_set: str) -> None:
    worker = RecordIO(pinned_set, shuffle=True, seed=11, shuffle_buffer=4).for_worker(0, 2)
    worker.load_state_dict(json.loads(json.dumps(STATE)))
    assert [int(i) for i, _ in worker()] == WHOLE[0][7:]
    elastic = []
    for w in range(3):  # another number of workers: blocks read in part
        resumed = RecordIO(pinned_set, shuffle=True, seed=11, shuffle_buffer=4
                           ).for_worker(w, 3)
        resumed.load_state_dict(COMBINED)
        elastic.append([int(i) for i, _ in resumed()])
    assert elastic == ELASTIC


def test_a_plan_holds_no_permutation_per_block() -> None:
    counts = [8] * 20_000  # 20,000 blocks of 8 records
    share = Share(shuffle=True, seed=3, shuffle_buffer=8, worker=1, num_workers=3)
    blocks = layout(counts, share)
    plan = shuffled(blocks, share, epoch=2, skip=5)
    assert isinstance(plan.picks, Picks) and len(plan.picks) == len(plan.pieces)
    first, second = plan.picks[0], plan.picks[1]
    assert first is not None and second is not None
    piece = plan.pieces[0]  # the rest of a block the slot starts in: picked up front
    assert piece.end is not None and len(set(first.tolist())) == len(first)
    assert 0 <= first.min() and first.max() < piece.end - piece.start
    # a block read whole (one a file here): its permutation, made as it is asked for
    assert plan.pieces[1].whole
    assert second.tolist() == permutation(8, 3, 2, BUFFER_STREAM, plan.pieces[1].file
                                          ).tolist()
    gc.collect()
    tracemalloc.start()
    plan = shuffled(blocks, share, epoch=2, skip=5)
    with_picks = tracemalloc.get_traced_memory()[0]
    plan.picks = None
    gc.collect()
    without = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    per_block = (with_picks - without) / len(plan.pieces)
    assert per_block <= 48, per_block  # two int64s each, and room to grow (an array
    # per block, as made up front before: ~180 B)


def test_local_counts_are_checked_without_a_filesystem_call_per_shard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    convert(str(tmp_path), [(i, float(i)) for i in range(400)], 200, "s", progress=False)
    asked: list[str] = []
    size = fsspec.implementations.local.LocalFileSystem.size

    def counted(self: object, path: str) -> int:
        asked.append(path)
        return size(self, path)  # type: ignore[arg-type]

    monkeypatch.setattr(fsspec.implementations.local.LocalFileSystem, "size", counted)
    reader = RecordIO(str(tmp_path / "s"), shuffle=True, seed=1)
    assert len(reader) == 400 and asked == []
    assert sorted(int(i) for i, _ in reader()) == list(range(400)) and asked == []


def test_a_shard_cut_short_fails_before_any_of_its_records(tmp_path: Path) -> None:
    convert(str(tmp_path), [bytes([k]) * 200 for k in range(40)], 4, "s", codec="raw",
            compressor="none", progress=False)
    cut = tmp_path / "s-00002-of-00003"
    held = set(RecordIO(str(cut), codec="raw"))
    cut.write_bytes(cut.read_bytes()[:30])  # 10 records of 200 bytes can't fit in 30
    # counts of more than a block's records are checked up front, each against its size
    reader = RecordIO(str(tmp_path / "s"), codec="raw", shuffle=True, seed=1,
                      shuffle_buffer=4)
    with pytest.raises(CorruptDataError, match=r"holds 10 records, but its 30 bytes can "
                                               r"hold at most 7") as info:
        len(reader)
    assert info.value.path.endswith("s-00002-of-00003")
    # a count of one block lays the file out alike whatever it says: checked as the
    # shard is opened (against the size its manifest lists), before any record of it
    reader = RecordIO(str(tmp_path / "s"), codec="raw", shuffle=True, seed=1)
    assert len(reader) == 40
    seen: list[bytes] = []
    with pytest.raises(CorruptDataError, match="manifest says 2[0-9]+ bytes, the file has "
                                               "30 .cut off.") as info:
        seen.extend(reader())
    assert info.value.path.endswith("s-00002-of-00003")
    assert not held & set(seen) and len(held) == 10
    cut.unlink()  # a shard missing: the error says so, up front or as it is opened
    with pytest.raises(Exception, match="missing"):
        len(RecordIO(str(tmp_path / "s"), codec="raw", shuffle=True, seed=1,
                     shuffle_buffer=4))
    with pytest.raises(Exception, match="missing"):
        list(RecordIO(str(tmp_path / "s"), codec="raw", shuffle=True, seed=1)())


def test_one_block_files_are_not_stat_ed_before_the_pass_opens_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    convert(str(tmp_path), [(i, float(i)) for i in range(80)], 20, "s", progress=False)
    stats: list[str] = []
    stat = os.stat

    def counted(path: object, *args: object, **kw: object) -> os.stat_result:
        if "s-000" in str(path):
            stats.append(str(path))
        return stat(path, *args, **kw)  # type: ignore[arg-type]

    reader = RecordIO(str(tmp_path / "s"), shuffle=True, seed=1)
    monkeypatch.setattr(os, "stat", counted)
    assert len(reader) == 80 and stats == []  # 4 records a file: one block each
    many = RecordIO(str(tmp_path / "s"), shuffle=True, seed=1, shuffle_buffer=2)
    assert len(many) == 80 and len(stats) == 20  # blocks of 2 records: each checked now


def test_manifest_entries_unpickle_without_looking_their_fields_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    entries = [ShardInfo(f"s-{k}", k, 4 * k, k, None if k % 2 else "e") for k in range(50)]
    blob = pickle.dumps(entries)
    looked = []
    fields = dataclasses.fields
    monkeypatch.setattr(dataclasses, "fields", lambda x: looked.append(x) or fields(x))
    assert pickle.loads(blob) == entries
    assert looked == []  # a frozen dataclass's __setstate__ calls fields() per entry


# -- shards read round-robin -----------------------------------------------------------


def _stream(blocks: list[list[int]], fail: bool, log: list[str], name: str):
    try:
        yield from blocks
        if fail:
            raise CorruptDataError(f"{name} holds more than counted", path=name)
    finally:
        log.append(f"{name} closed")


def _woven(streams: list[tuple[list[list[int]], bool]], sizes: list[int | None] | None
           ) -> tuple[list[int], str | None]:
    log: list[str] = []
    made = [_stream(blocks, fail, log, f"s{k}") for k, (blocks, fail) in enumerate(streams)]
    got: list[int] = []
    try:
        for run in interleave(made, sizes):
            got.extend(flatten(run))
    except CorruptDataError as err:
        return got, str(err)
    return got, None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.lists(st.integers(0, 99), min_size=1, max_size=3),
                                   max_size=3), st.booleans()), min_size=2, max_size=4),
       st.data())
def test_streams_finished_early_give_what_they_gave_where_they_gave_it(streams, data):
    sizes = [data.draw(st.sampled_from([None, sum(map(len, b)), max(0, sum(map(len, b)) - 1),
                                        sum(map(len, b)) + 1])) for b, _ in streams]
    assert _woven(streams, sizes) == _woven(streams, None)


def test_a_stream_that_gave_its_places_is_closed_before_its_last_block_is_read():
    log: list[str] = []
    streams = [_stream([[1, 2], [3]], False, log, "a"), _stream([[10], [20, 30]], False,
                                                              log, "b")]
    runs = interleave(streams, [3, 3])
    assert flatten(next(runs)) == [1, 10] and log == []
    assert flatten(next(runs)) == [2, 20] and log == ["b closed"]  # [20, 30]: b's last
    assert flatten(next(runs)) == [3, 30] and log == ["b closed", "a closed"]


def test_shards_read_round_robin_close_once_read_and_keep_their_order(tmp_path: Path
                                                                      ) -> None:
    convert(str(tmp_path), [(i, float(i)) for i in range(2000)], 1000, "s", progress=False)
    reader = RecordIO(str(tmp_path / "s"))
    pass_ = reader()
    assert int(next(pass_)[0]) == 0
    # every shard gave its only chunk in the first round: each one's file is closed and
    # its stack let go, not held open (or in the file pool) until its turn comes again
    assert reader._sources.files_open.num_open == 0
    assert [int(i) for i, _ in pass_] == list(range(1, 2000))  # the order convert saw
