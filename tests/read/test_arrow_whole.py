"""``to_arrow()``'s shortcut: a pass held whole, its shards' round-robin woven once at its
end (one Arrow ``take``) instead of a run at a time — taken where every chunk decodes to
a record batch of one layout, and equal to the careful path (``read()``, the batches of
a run at a time) on every reader option, damaged sets included."""

from __future__ import annotations

import math
import random
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.errors import ArrowMappingError, CorruptDataError, CorruptDataWarning
from recprep.read import blocks

from ..support import flip_byte
from .test_arrow_columns import instance_sets
from .test_arrow_out import assert_rows, equal

pa = pytest.importorskip("pyarrow")


def _spied(monkeypatch) -> dict[str, int]:
    """Counts of the per-run weave (``_woven``) and of the whole pass's (``_solid`` of
    it) as ``to_arrow()`` runs."""
    calls = {"run": 0, "whole": 0}
    run, whole = blocks._woven, blocks._woven_whole

    def counted_run(parts):
        calls["run"] += 1
        return run(parts)

    def counted_whole(rounds):
        calls["whole"] += 1
        return whole(rounds)

    monkeypatch.setattr(blocks, "_woven", counted_run)
    monkeypatch.setattr(blocks, "_woven_whole", counted_whole)
    return calls


def test_to_arrow_weaves_the_shards_once(mem_url, monkeypatch):
    data = [(i, i / 4, f"w{i}") for i in range(500)]
    convert(mem_url, data, 3, "t", chunk_bytes=400, progress=False)
    calls = _spied(monkeypatch)
    table = RecordIO(f"{mem_url}/t-*").to_arrow()
    assert calls == {"run": 0, "whole": 1}
    assert_rows(table, list(RecordIO(f"{mem_url}/t-*")()))
    # the careful path: a run at a time, for batches
    got = pa.Table.from_batches(list(RecordIO(f"{mem_url}/t-*").batches(64, format="arrow")))
    assert calls["run"] > 1 and got.equals(table)


def test_chunks_of_several_layouts_are_woven_a_run_at_a_time(mem_url, monkeypatch):
    data = [(i, None if i % 7 == 0 else f"w{i}") for i in range(300)]  # two layouts
    convert(mem_url, data, 3, "t", chunk_bytes=100, progress=False)
    calls = _spied(monkeypatch)
    table = RecordIO(f"{mem_url}/t-*").to_arrow()
    assert calls["whole"] == 1 and calls["run"] > 1  # held, then woven as before
    assert_rows(table, list(RecordIO(f"{mem_url}/t-*")()))


def test_an_error_of_any_shard_is_the_one_read_raises(tmp_path):
    """The streams are still read round by round: the error raised is the one that a
    pass instance by instance meets first (here in the second shard, whose damage comes
    earlier in its file than the first shard's)."""
    data = [(i, f"w{i}") for i in range(600)]
    convert(str(tmp_path), data, 2, "d", chunk_bytes=300, progress=False)
    first, second = sorted(tmp_path.glob("d-*-of-*"))
    flip_byte(first, 0.9)
    flip_byte(second, 0.2)
    with pytest.raises(CorruptDataError) as read_error:
        list(RecordIO(str(tmp_path / "d-*"))())
    with pytest.raises(CorruptDataError) as arrow_error:
        RecordIO(str(tmp_path / "d-*")).to_arrow()
    assert str(arrow_error.value) == str(read_error.value)
    assert second.name in str(arrow_error.value)


def _flat(count: int, seed: int, odd: list[int]) -> list[tuple]:
    """``count`` instances of numbers and strings (non-ASCII ones too), those at ``odd``
    of another layout: the shortcut's case, in sets of several chunks a shard."""
    rng = random.Random(seed)
    rows = [(rng.randrange(-9, 2**40), "".join(rng.choice("ab\u00e9\u20ac\U0001f600")
                                              for _ in range(rng.randrange(9))),
             rng.choice([rng.random(), math.nan, -0.0])) for _ in range(count)]
    return [(i, None) if i in odd else row for i, row in enumerate(rows)]


_FLAT = st.builds(_flat, st.integers(0, 400), st.integers(0, 2**32),
                  st.lists(st.integers(0, 400), max_size=2))


@pytest.mark.filterwarnings("ignore:.*shards are empty")
@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    instances=st.one_of(_FLAT, instance_sets()),
    chunk_bytes=st.sampled_from([200, 900, 4000]),
    shards=st.integers(1, 4),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
    world=st.integers(1, 3).flatmap(lambda w: st.tuples(st.integers(0, w - 1), st.just(w))),
    threads=st.integers(0, 2),
    damage=st.sampled_from([None, 0.3, 0.7]),
)
def test_to_arrow_equals_read_and_the_batches(instances, chunk_bytes, shards, shuffle, seed,
                                              world, threads, damage):
    root = Path(tempfile.mkdtemp(prefix="recprep-test-whole-"))
    try:
        convert(str(root), instances, shards, "p", chunk_bytes=chunk_bytes, progress=False)
        if damage is not None:
            files = [f for f in sorted(root.glob("p-*-of-*")) if f.stat().st_size]
            if files:
                flip_byte(files[len(files) // 2], damage)
        rank, world_size = world

        def reader():
            read = RecordIO(str(root / "p-*"), shuffle=shuffle, seed=seed, shuffle_buffer=9,
                            rank=rank, world_size=world_size, num_threads=threads,
                            on_corrupt="skip")
            read.set_epoch(1)
            return read

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CorruptDataWarning)
            expected = list(reader()())
            try:
                table = reader().to_arrow()
            except ArrowMappingError:
                return  # as the careful path raises it: test_arrow_columns
            schema = table.schema if table.num_columns else None
            careful = list(reader().batches(64, format="arrow", schema=schema))
        assert_rows(table, expected)
        rows = [r for b in careful for r in b.to_pylist()]
        assert equal(table.to_pylist(), rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)
