"""Issue 15, "Done means": batches and chunk decoding give exactly the per-record results,
on every codec, format and compressor the registries declare, with mixed layouts inside
one chunk and damaged chunks (``on_corrupt="skip"`` and ``"raise"``), and a batches pass
resumes from a state like a per-instance one. Public API only; the comparisons
(``exact``, ``same``) and strategies are in ``tests/support/columnar_strategies.py``.

The records of most strategies are big enough (a 40-float array, ~300-byte raw records)
that the reader decodes their chunks whole into columns when ``decode_columns`` can,
so both the columns path and the per-record path are exercised."""

from __future__ import annotations

import warnings

import fsspec
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.batching import collate, unbatch
from recprep.codecs import get_codec
from recprep.codecs.recprep.columns import recprep_decode_rows
from recprep.errors import CorruptDataWarning, RecprepError

from ..support.columnar_strategies import (
    CODECS,
    FORMS,
    LEAVES,
    codec_of,
    exact,
    example_rows,
    first_difference,
    memory_dir,
    recprep_rows,
    rows_for,
    same,
)

SETTINGS = {"deadline": None, "suppress_health_check": [
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]}
MEMORY = fsspec.filesystem("memory")
#: every codec; recprep (the one that decodes chunks as columns) half the time
CODEC = st.one_of(st.just("recprep"), st.sampled_from(CODECS))
pytestmark = pytest.mark.filterwarnings("ignore:.*shards are empty")


def write_sets(url: str, sets: list[list], codec: str, form: tuple[str, str], shards: int,
               chunk_bytes: int) -> list[str]:
    """One shard set per list of instances; the patterns that read them, in order."""
    patterns = []
    for k, rows in enumerate(sets):
        convert(url, rows, shards, f"s{k}", format=form[0], compressor=form[1],
                codec=codec_of(codec), chunk_bytes=chunk_bytes, progress=False)
        patterns.append(f"{url}/s{k}-*")
    return patterns


def check_batches(batches: list, expected: list, size: int, drop_last: bool) -> None:
    """Batches of a pass against the instances read() gave in the same configuration:
    the runs cut right, each batch ``collate`` of its run (types, dtypes, shapes), each
    unbatched instance the one read() gave."""
    kept = len(expected) - (len(expected) % size if drop_last else 0)
    runs = [expected[s:s + size] for s in range(0, kept, size)]
    assert len(batches) == len(runs), (len(batches), [len(r) for r in runs])
    for k, (batch, run) in enumerate(zip(batches, runs, strict=True)):
        assert exact(batch, collate(run)), (k, batch, collate(run))
        rows = unbatch(batch)
        assert len(rows) == len(run) and all(map(same, rows, run)), (
            k, first_difference(rows, run, same))


# --------------------------------------------------------------------------- 1-3: a pass


@settings(max_examples=300, **SETTINGS)
@given(
    setup=st.tuples(CODEC, st.sampled_from(FORMS)).flatmap(
        lambda s: st.tuples(st.just(s), st.lists(rows_for(s[0], max_size=40), min_size=1,
                                                 max_size=2))),
    shards=st.integers(1, 3),
    chunk_bytes=st.sampled_from([300, 2500, 8000]),
    batch_size=st.integers(1, 13),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
    buffer=st.sampled_from([0, 1, 5, 64]),
    epoch=st.integers(0, 3),
    world=st.integers(1, 3).flatmap(lambda w: st.tuples(st.integers(0, w - 1), st.just(w))),
    threads=st.sampled_from([0, 2]),
    split=st.sampled_from(["auto", "shard", "range"]),
)
def test_batches_are_collated_runs_of_what_read_gives(
    setup, shards, chunk_bytes, batch_size, drop_last, shuffle, seed, buffer, epoch, world,
    threads, split,
):
    """Properties 1-3: every codec/format/compressor, several shard sets read one after
    the other, shards round-robin, every reader option; mixed layouts come from the
    strategies (an odd instance inside a chunk of another layout)."""
    (codec, form), sets = setup
    with memory_dir("columnar-pass") as url:
        patterns = write_sets(url, sets, codec, form, shards, chunk_bytes)
        rank, world_size = world
        read = RecordIO(patterns, shuffle=shuffle, seed=seed, shuffle_buffer=buffer,
                        rank=rank, world_size=world_size, num_threads=threads, split=split,
                        allow_pickle=codec == "pickle")
        read.set_epoch(epoch)
        expected = list(read())
        if world_size == 1:
            assert len(expected) == sum(map(len, sets))
        check_batches(list(read.batches(batch_size, drop_last=drop_last)), expected,
                      batch_size, drop_last)


ODD = {  # one instance of another layout among (int, float, str, 40 floats) instances
    "None": (7, None, "w", np.zeros(40)),
    "shape": (7, 0.5, "w", np.zeros(41)),
    "dtype": (7, 0.5, "w", np.zeros(40, np.float32)),
    "numpy int": (np.int64(7), 0.5, "w", np.zeros(40)),
    "bytes": (7, 0.5, b"w", np.zeros(40)),
    "longer": (7, 0.5, "w", np.zeros(40), 1),
    "bigint": (2**64, 0.5, "w", np.zeros(40)),
}


@pytest.mark.parametrize("odd", list(ODD))
@pytest.mark.parametrize("at", [0, 5, 11])
def test_one_instance_of_another_layout_in_a_chunk(mem_url, odd, at):
    """Property 3, targeted: one chunk of 12 instances, one of them of another layout
    (first, middle or last), read in batches that cut through it or hold it whole."""
    rows = [(i, i / 2, f"w{i}", np.full(40, i, np.float64)) for i in range(12)]
    rows[at] = ODD[odd]
    convert(mem_url, rows, 1, "p", chunk_bytes=1 << 16, progress=False)
    read = RecordIO(f"{mem_url}/p-*")
    expected = list(read())
    assert all(map(exact, expected, rows))
    for size in (4, 5, 12):
        check_batches(list(read.batches(size)), expected, size, False)


def test_dicts_with_other_keys_in_a_chunk(mem_url):
    rows = [{"id": i, "x": np.full(40, i, np.float32), "w": str(i)} for i in range(10)]
    rows[3] = {"x": np.zeros(40, np.float32), "id": 3, "w": "3"}  # another key order
    rows[6] = {"id": 6, "x": np.zeros(40, np.float32)}  # a key missing
    convert(mem_url, rows, 1, "p", chunk_bytes=1 << 16, progress=False)
    read = RecordIO(f"{mem_url}/p-*")
    expected = list(read())
    assert list(expected[3]) == ["x", "id", "w"] and list(expected[6]) == ["id", "x"]
    for size in (2, 3, 10):
        check_batches(list(read.batches(size)), expected, size, False)
    assert type(next(read.batches(10))) is list  # dicts of other keys: a list column


def test_big_endian_arrays_are_stacked_in_native_order_with_their_values():
    """collate keeps the dtype in the machine's byte order, as np.stack does (torch
    refuses non-native arrays); the values are those of the instances."""
    rows = [np.arange(3, dtype=">i4") + i for i in range(2)]
    batch = collate(rows)
    assert batch.dtype == np.dtype("<i4") and batch.dtype.isnative
    for got, want in zip(unbatch(batch), rows, strict=True):
        assert got.tolist() == want.tolist() and got.dtype == want.dtype.newbyteorder("=")


def test_a_run_of_equal_arrays_cut_from_a_ragged_chunk_is_stacked(mem_url):
    rows = [{"image": np.zeros(n, np.float32), "label": np.array([0])}
            for n in (0, 0, 0, 0, 1)]
    convert(mem_url, rows, 1, "p", codec="example", progress=False)
    read = RecordIO(f"{mem_url}/p-*")
    first = next(read.batches(1))  # collate([rows[0]]): image a (1, 0) float32 array
    assert exact(first, collate(list(read())[:1])), first


@settings(max_examples=40, **SETTINGS)
@given(rows=example_rows(min_size=1, ragged=True), batch_size=st.integers(1, 9),
       form=st.sampled_from(FORMS))
@example(rows=[{"image": np.zeros(n, np.float32), "label": np.array([0]),
                "tags": np.array([b""], dtype=object)} for n in (0, 0, 0, 0, 1)],
         batch_size=1, form=("recordio", "none"))
def test_example_features_of_several_lengths_in_a_chunk(rows, batch_size, form):
    with memory_dir("columnar-ragged") as url:
        [pattern] = write_sets(url, [rows], "example", form, 1, 2500)
        read = RecordIO(pattern)
        check_batches(list(read.batches(batch_size)), list(read()), batch_size, False)


# --------------------------------------------------------------------------- 4: damage


def _flip(url: str, places: list[tuple[int, int, int]], cut: int | None) -> None:
    """Flip bytes (``(shard pick, offset pick, xor mask)``) in the shards of ``url``,
    and cut the last one short by ``cut`` bytes."""
    shards = sorted(p for p in MEMORY.ls(url.removeprefix("memory://"), detail=False)
                    if "-of-" in p)
    sized = [p for p in shards if MEMORY.size(p)]
    if not sized:
        return
    for pick, offset, mask in places:
        path = sized[pick % len(sized)]
        raw = bytearray(MEMORY.cat_file(path))
        raw[offset % len(raw)] ^= mask
        MEMORY.pipe_file(path, bytes(raw))
    if cut:
        raw = MEMORY.cat_file(sized[-1])
        MEMORY.pipe_file(sized[-1], raw[: max(0, len(raw) - cut)])


def _outcome(make, run):
    """``(instances, warnings, error, skipped)`` of a pass: what it gave before any error,
    the CorruptDataWarnings it raised, the error (or None) and the reader's ``skipped``."""
    got: list = []
    error = read = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            read = make()
            for item in run(read):
                got.append(item)
        except RecprepError as err:
            error = err
    corrupt = [w for w in caught if issubclass(w.category, CorruptDataWarning)]
    return got, len(corrupt), error, None if read is None else vars(read.skipped)


@settings(max_examples=250, **SETTINGS)
@given(
    setup=st.tuples(CODEC, st.sampled_from(FORMS)).flatmap(
        lambda s: st.tuples(st.just(s), rows_for(s[0], min_size=8, max_size=40))),
    shards=st.integers(1, 2),
    places=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 10**6),
                              st.integers(1, 255)), min_size=1, max_size=3),
    cut=st.one_of(st.none(), st.integers(1, 30)),
    batch_size=st.integers(1, 9),
    threads=st.sampled_from([0, 2]),
    shuffle=st.booleans(),
)
def test_damaged_chunks_batches_give_what_read_gives(setup, shards, places, cut, batch_size,
                                                     threads, shuffle):
    """Property 4: bytes flipped (and a shard cut short) at random: with
    ``on_corrupt="skip"`` the unbatched batches are read()'s instances, with as many
    CorruptDataWarnings and the same ``skipped`` counts; with ``"raise"`` both raise the
    same error, and the batches before it are read()'s instances before it."""
    (codec, form), rows = setup
    with memory_dir("columnar-damage") as url:
        [pattern] = write_sets(url, [rows], codec, form, shards, 2500)
        _flip(url, places, cut)
        for on_corrupt in ("skip", "raise"):
            def make(on_corrupt=on_corrupt):
                read = RecordIO(pattern, on_corrupt=on_corrupt, num_threads=threads,
                                shuffle=shuffle, seed=5, shuffle_buffer=6,
                                allow_pickle=codec == "pickle")
                read.set_epoch(1)
                return read

            expected, warned, error, skipped = _outcome(make, lambda r: r())
            batches, b_warned, b_error, b_skipped = _outcome(
                make, lambda r: r.batches(batch_size))
            assert type(b_error) is type(error), (error, b_error)
            assert str(b_error) == str(error)
            if error is None:
                check_batches(batches, expected, batch_size, False)
                assert (b_warned, b_skipped) == (warned, skipped)
            else:  # the batches before the error: whole runs of read()'s instances
                got = [x for b in batches for x in unbatch(b)]
                assert len(expected) - batch_size < len(got) <= len(expected) or (
                    len(got) == len(expected) == 0)
                check_batches(batches, expected[: len(got)], batch_size, False)
            if on_corrupt == "raise":
                assert warned == b_warned == 0


# --------------------------------------------------------------------------- 5: chunks


def _damage(record: bytes, how: int, where: int, mask: int) -> bytes:
    raw = bytearray(record)
    if how == 0 and raw:
        raw[where % len(raw)] ^= mask
    elif how == 1:
        del raw[where % (len(raw) + 1):]
    elif how == 2:
        raw[where % (len(raw) + 1):where % (len(raw) + 1)] = bytes([mask])
    return bytes(raw)


def _as_views(records: list[bytes]) -> list[memoryview]:
    """The records as a reader may hand them over: views into one chunk buffer."""
    buf = memoryview(b"".join(b"\x00" + r for r in records))
    views, at = [], 0
    for r in records:
        views.append(buf[at + 1:at + 1 + len(r)])
        at += 1 + len(r)
    return views


_DAMAGE = st.lists(st.tuples(st.integers(0, 99), st.integers(0, 3), st.integers(0, 10**6),
                            st.integers(1, 255)), max_size=3)


@pytest.mark.parametrize("codec_name", ["recprep", "example"])
@settings(max_examples=500, **SETTINGS)
@given(data=st.data(), damage=_DAMAGE, views=st.booleans())
def test_decode_columns_is_none_or_the_per_record_values(codec_name, data, damage, views):
    """Property 5: ``decode_columns`` of a chunk's records (bytes or memoryviews into one
    buffer), some damaged, is None or exactly ``collate`` of the records decoded one by
    one — never values where decoding one of them raises, and never a warning."""
    rows = (recprep_rows(max_size=24) if codec_name == "recprep"
            else example_rows(max_size=24, ragged=True))
    check_decode_columns(get_codec(codec_name), data.draw(rows), damage, views)


@example(values=[(i, "é" * i) for i in range(6)], damage=[(2, 0, 7, 0x40)], views=True)
@example(values=[(i, 1.5) for i in range(6)], damage=[(5, 1, 9, 1)], views=False)
@example(values=[(i, np.full(40, i / 7)) for i in range(6)], damage=[(3, 2, 30, 0)],
         views=True)
@settings(max_examples=1, **SETTINGS)
@given(values=st.just([]), damage=st.just([]), views=st.just(False))
def test_decode_columns_on_chosen_damage(values, damage, views):
    check_decode_columns(get_codec("recprep"), values, damage, views)


def check_decode_columns(codec, values, damage, views) -> None:
    records = [codec.encode(v) for v in values]
    for pick, how, where, mask in damage:
        if records:
            records[pick % len(records)] = _damage(records[pick % len(records)], how, where,
                                                   mask)
    given_records = _as_views(records) if views else list(records)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # decoding a chunk whole never warns
        cols = codec.decode_columns(given_records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # damaged Examples may be merged, with a warning
        try:
            one_by_one = [codec.decode(r) for r in records]
        except RecprepError:
            assert cols is None, "columns of records that don't decode"
            with pytest.raises(RecprepError):
                codec.decode_many(records)
            return
        assert all(map(exact, codec.decode_many(given_records), one_by_one))
        if codec.name == "recprep":  # the rows route, which decode_many takes for many
            rows = recprep_decode_rows(given_records, codec.decode)
            assert rows is None or all(map(exact, rows, one_by_one))
    if not damage and codec.name == "recprep":
        assert all(map(exact, one_by_one, values))
    if cols is None:
        return
    expected = collate(one_by_one)
    assert cols.n == len(records)
    assert exact(_fresh(cols.tree), expected), (cols.tree, expected)


def _fresh(tree):
    """The columns' leaves as plain arrays (they may be read-only views of the chunk)."""
    if isinstance(tree, np.ndarray):
        return np.array(tree)
    if isinstance(tree, tuple):
        return tuple(map(_fresh, tree))
    if isinstance(tree, dict):
        return {k: _fresh(v) for k, v in tree.items()}
    return tree


@settings(max_examples=200, **SETTINGS)
@given(kinds=st.lists(st.sampled_from(sorted(LEAVES)), min_size=1, max_size=5),
       data=st.data())
def test_a_uniform_chunk_of_supported_leaves_is_decoded_as_columns(kinds, data):
    """The fast path is taken where the module says it is: records of one layout of
    numbers, strings, bytes, numpy scalars and arrays decode as columns, equal to the
    collated per-record values (with None: a list column, still decoded)."""
    n = data.draw(st.integers(4, 12))
    values = [tuple(data.draw(LEAVES[k]) for k in kinds) for _ in range(n)]
    codec = get_codec("recprep")
    records = [codec.encode(v) for v in values]
    cols = codec.decode_columns(records)
    expected = collate([codec.decode(r) for r in records])
    if any(k == "bigint" and v[i] > 2**63 - 1 for v in values for i, k in enumerate(kinds)):
        return  # big ints are another tag: a layout of their own
    if any(k == "str" for k in kinds) and any(
            any(0xD800 <= ord(c) <= 0xDFFF for c in v[i]) for v in values
            for i, k in enumerate(kinds) if k == "str"):
        return  # lone surrogates: per record (see the module docstring)
    assert cols is not None, (values, [r.hex() for r in records[:2]])
    assert exact(_fresh(cols.tree), expected)


# --------------------------------------------------------------------------- 6: resume


@settings(max_examples=200, **SETTINGS)
@given(
    setup=st.tuples(st.sampled_from(["recprep", "raw"]), st.sampled_from(FORMS)).flatmap(
        lambda s: st.tuples(st.just(s), st.lists(rows_for(s[0], min_size=1, max_size=25),
                                                 min_size=1, max_size=2))),
    shards=st.integers(1, 3),
    batch_size=st.integers(1, 7),
    stop=st.integers(0, 8),
    shuffle=st.booleans(),
    world=st.integers(1, 2).flatmap(lambda w: st.tuples(st.integers(0, w - 1), st.just(w))),
    threads=st.sampled_from([0, 2]),
    resume_with=st.one_of(st.just(None), st.integers(1, 7)),
)
def test_a_batches_pass_resumes_from_its_state(setup, shards, batch_size, stop, shuffle,
                                               world, threads, resume_with):
    """Property 6: the state after ``stop`` batches counts ``stop * batch_size``
    instances; a fresh reader loaded with it completes the uninterrupted pass exactly,
    read per instance (``resume_with`` None) or in batches of another size."""
    (codec, form), sets = setup
    with memory_dir("columnar-resume") as url:
        patterns = write_sets(url, sets, codec, form, shards, 2500)
        rank, world_size = world

        def reader():
            return RecordIO(patterns, shuffle=shuffle, seed=11, shuffle_buffer=5,
                            rank=rank, world_size=world_size, num_threads=threads)

        full = list(reader()())
        read = reader()
        batches = read.batches(batch_size)
        head = []
        for _ in range(stop):
            batch = next(batches, None)
            if batch is None:
                break
            head += unbatch(batch)
        state = read.state_dict()
        batches.close()
        assert state["yielded"] == len(head)
        assert all(map(same, head, full[: len(head)]))
        want = full[len(head):]
        if state["done"]:  # the pass ended: a loaded reader goes on with the next epoch
            assert len(head) == len(full)
            following = reader()
            list(following())
            want = list(following())
        again = reader()
        again.load_state_dict(state)
        if resume_with is None:
            rest = list(again())
            assert len(rest) == len(want) and all(map(exact, rest, want))
        else:
            check_batches(list(again.batches(resume_with)), want, resume_with, False)


# --------------------------------------------------------------------------- 7: adapters


def test_torch_batches_are_the_reader_batches(mem_url):
    """Property 7 (torch): batches of instances decoded as columns, through
    ``RecordIODataset(batch_size=)``, are the reader's batches as tensors."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from recprep.torch import RecordIODataset

    rows = [(np.full(40, i, np.float32), i, i / 3) for i in range(37)]
    convert(mem_url, rows[:20], 2, "a", chunk_bytes=900, progress=False)
    convert(mem_url, rows[20:], 3, "b", chunk_bytes=900, progress=False)
    patterns = [f"{mem_url}/a-*", f"{mem_url}/b-*"]
    options = {"shuffle": True, "seed": 2, "shuffle_buffer": 6}
    ds = RecordIODataset(RecordIO(patterns, **options), batch_size=6)
    ds.set_epoch(3)
    got = list(DataLoader(ds, batch_size=None))
    read = RecordIO(patterns, **options)
    read.set_epoch(3)
    want = list(read.batches(6))
    assert len(got) == len(want) == 7
    for g, w in zip(got, want, strict=True):
        assert [t.dtype for t in g] == [torch.float32, torch.int64, torch.float64]
        assert all(np.array_equal(t.numpy(), a) for t, a in zip(g, w, strict=True))
    assert sorted(int(i) for b in got for i in b[1]) == list(range(37))
