"""Chunks decoded straight to Arrow (recprep.codecs.recprep.arrow): the Arrow batches of a
pass equal its numpy batches made Arrow, and read()'s instances, on every reader option —
shuffled, ranks, threads, a loaded state, damaged chunks skipped, mixed layouts."""

from __future__ import annotations

import collections
import uuid
import warnings

import fsspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep._core.arrowcols import numeric_batch, record_batch
from recprep.batching import Columns, collate
from recprep.codecs import get_codec
from recprep.containers import Records
from recprep.errors import ArrowMappingError, CorruptDataWarning

from ..support import flip_byte
from .test_arrow_out import arrow_row, assert_rows, equal

pa = pytest.importorskip("pyarrow")

_LEAVES = {
    "int": st.integers(-(2**63), 2**63 - 1), "float": st.floats(), "bool": st.booleans(),
    "str": st.text(max_size=6), "bytes": st.binary(max_size=6),
    "f32": st.builds(np.float32, st.floats(width=32)),
    "i2": st.builds(np.int16, st.integers(-9, 9)),
    "arr": st.builds(lambda i: np.full((2, 3), i, np.float64), st.integers(-9, 9)),
    "arrF": st.builds(lambda i: np.asfortranarray(np.arange(6, dtype=">i4").reshape(2, 3) * i),
                      st.integers(-9, 9)),
    "arrb": st.builds(lambda b: np.array([b, not b]), st.booleans()),
}


@st.composite
def instance_sets(draw):
    """Instances of one structure whose columns each have one Arrow type; a column may be
    None in some (those records then have another layout: mixed chunks)."""
    kinds = draw(st.lists(st.sampled_from(sorted(_LEAVES)), min_size=1, max_size=4))
    nullable = draw(st.sets(st.integers(0, len(kinds) - 1)))
    shape = draw(st.sampled_from(["tuple", "dict", "nested", "bare"]))
    leaves = st.tuples(*(st.one_of(st.none(), _LEAVES[k]) if i in nullable else _LEAVES[k]
                         for i, k in enumerate(kinds)))
    if shape == "dict":
        rows = leaves.map(lambda t: {f"k{i}": v for i, v in enumerate(t)})
    elif shape == "nested":
        rows = leaves.map(lambda t: (t[0], {"rest": t[1:] or (0,)}))
    elif shape == "bare":
        rows = leaves.map(lambda t: t[0])
    else:
        rows = leaves
    return draw(st.lists(rows, max_size=60))


def arrow_of_numpy(batch):
    """A numpy batch made Arrow by the mapping (what format="arrow" must equal)."""
    return record_batch(batch)


def rows(batches) -> list:
    return [row for b in batches for row in b.to_pylist()]


@pytest.mark.filterwarnings("ignore:.*shards are empty")
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    instances=instance_sets(),
    shards=st.integers(1, 3),
    batch_size=st.integers(1, 12),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**31),
    buffer=st.integers(0, 16),
    world=st.integers(1, 3).flatmap(lambda w: st.tuples(st.integers(0, w - 1), st.just(w))),
    threads=st.integers(0, 2),
    split=st.sampled_from(["auto", "range"]),
    resume_after=st.integers(0, 3),
)
def test_arrow_batches_equal_numpy_batches_and_read(
    instances, shards, batch_size, shuffle, seed, buffer, world, threads, split, resume_after,
):
    url = f"memory://recprep-test-arrow-{uuid.uuid4().hex}"
    try:
        convert(url, instances, shards, "p", chunk_bytes=200, progress=False)
        rank, world_size = world

        def reader(**more):
            read = RecordIO(f"{url}/p-*", shuffle=shuffle, seed=seed, shuffle_buffer=buffer,
                            rank=rank, world_size=world_size, num_threads=threads,
                            split=split, **more)
            read.set_epoch(1)
            return read

        read = reader()
        expected = list(read())
        numpy_batches = list(read.batches(batch_size))
        try:
            arrow_batches = list(read.batches(batch_size, format="arrow"))
        except ArrowMappingError as err:
            # only a column of None in the batch that fixed the stream's schema
            assert "all None" in str(err), err
            schema = read.to_arrow().schema
            arrow_batches = list(read.batches(batch_size, format="arrow", schema=schema))
            numpy_batches = [arrow_of_numpy(b).cast(schema) if schema.names else b
                             for b in map(arrow_of_numpy, numpy_batches)]
        else:
            numpy_batches = list(map(arrow_of_numpy, numpy_batches))
        assert [b.num_rows for b in arrow_batches] == [b.num_rows for b in numpy_batches]
        assert equal(rows(arrow_batches), rows(numpy_batches))
        assert len({b.schema for b in arrow_batches}) <= 1
        assert_rows(pa.Table.from_batches(arrow_batches) if arrow_batches else
                    pa.table({}), expected)
        if resume_after < len(arrow_batches):  # a loaded state: the rest of the pass
            state_of = reader()
            passing = state_of.batches(batch_size, format="arrow",
                                       schema=arrow_batches[0].schema)
            for _ in range(resume_after):
                next(passing)
            state = state_of.state_dict()
            passing.close()
            again = reader()
            again.load_state_dict(state)
            rest = list(again.batches(batch_size, format="arrow",
                                      schema=arrow_batches[0].schema))
            assert equal(rows(rest), rows(arrow_batches[resume_after:]))
    finally:
        fs = fsspec.filesystem("memory")
        path = url.removeprefix("memory://")
        if fs.exists(path):
            fs.rm(path, recursive=True)


def test_chunks_of_one_layout_are_decoded_to_arrow_buffers():
    codec = get_codec("recprep")
    values = [(i, i / 2, f"token-{i}", b"\x00" * (i % 3), np.full((2, 2), i, np.uint8))
              for i in range(50)]
    records = [codec.encode(v) for v in values]
    cols = codec.decode_arrow_columns(records)
    assert isinstance(cols, Columns) and cols.n == 50
    batch = cols.tree
    assert isinstance(batch, pa.RecordBatch)
    assert [str(t) for t in batch.schema.types] == [
        "int64", "double", "string", "binary",
        "fixed_size_list<item: fixed_size_list<item: uint8>[2]>[2]"]
    assert equal(batch.to_pylist(), [arrow_row(v) for v in values])
    # the strings are one buffer of their bytes and int32 offsets: no object per value
    offsets, data = batch.column(2).buffers()[1:]
    assert data.to_pybytes() == "".join(f"token-{i}" for i in range(50)).encode()
    assert np.frombuffer(offsets, np.int32)[:3].tolist() == [0, 7, 14]
    assert batch.equals(record_batch(codec.decode_columns(records).tree))


def test_chunks_that_dont_decode_whole_fall_back_record_by_record():
    codec = get_codec("recprep")
    mixed = [codec.encode(v) for v in [(1, "a")] * 4 + [(1, None)] * 4]
    assert codec.decode_arrow_columns(mixed) is None
    bad_utf8 = [codec.encode((1, "a"))[:-1] + b"\xff" for _ in range(4)]
    assert codec.decode_arrow_columns(bad_utf8) is None  # each record fails as it decodes
    complex_ = [codec.encode((1j, "a")) for _ in range(4)]
    assert codec.decode_columns(complex_) is not None  # numpy has complex128
    assert codec.decode_arrow_columns(complex_) is None  # Arrow hasn't: the error says it


def test_chunks_without_strings_stay_numpy_columns_until_their_batch():
    codec = get_codec("recprep")
    records = [codec.encode((np.full(4, i, np.float32), i)) for i in range(8)]
    cols = codec.decode_arrow_columns(records)
    assert type(cols.tree) is tuple and cols.signature == codec.decode_columns(
        records).signature  # a batch copies them once; Arrow takes that copy as it is


def test_complex_numbers_raise_as_the_batch_is_made(mem_url):
    convert(mem_url, [(i, 1j * i) for i in range(20)], 1, "c", progress=False)
    with pytest.raises(ArrowMappingError, match="complex128") as caught:
        list(RecordIO(f"{mem_url}/c-*").batches(8, format="arrow"))
    assert (caught.value.column, caught.value.index) == ("f1", 0)


def test_damaged_chunks_are_skipped_in_arrow_batches(tmp_path):
    data = [(i, f"w{i}", np.full(3, i, np.float32)) for i in range(500)]
    convert(str(tmp_path), data, 2, "d", chunk_bytes=400, progress=False)
    shard = sorted(tmp_path.glob("d-*-of-*"))[1]
    flip_byte(shard, 1 / 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptDataWarning)
        expected = list(RecordIO(str(tmp_path / "d-*"), on_corrupt="skip")())
        skipping = RecordIO(str(tmp_path / "d-*"), on_corrupt="skip", shuffle=True, seed=3)
        skipping.set_epoch(0)
        shuffled = list(skipping())
        got = list(RecordIO(str(tmp_path / "d-*"), on_corrupt="skip").batches(
            64, format="arrow"))
        got_shuffled = list(skipping.batches(64, format="arrow"))
    assert 0 < len(expected) < 500
    assert_rows(pa.Table.from_batches(got), expected)
    assert_rows(pa.Table.from_batches(got_shuffled), shuffled)


@pytest.mark.parametrize("shuffle", [False, True])
def test_example_chunks_as_arrow(mem_url, shuffle):
    data = [{"i": i, "f": np.array([1.5 * i, 2.0], np.float32), "b": b"ab" * (i % 3)}
            for i in range(300)]
    convert(mem_url, data, 3, "e", codec="example", chunk_bytes=1000, progress=False)
    read = RecordIO(f"{mem_url}/e-*", shuffle=shuffle, seed=9)
    read.set_epoch(0)
    expected = list(read())
    got = list(read.batches(32, format="arrow"))
    assert [str(t) for t in got[0].schema.types] == [
        "list<item: binary>", "fixed_size_list<item: float>[2]",
        "fixed_size_list<item: int64>[1]"]
    assert_rows(pa.Table.from_batches(got), expected)
    assert equal(rows(got), rows(map(arrow_of_numpy, read.batches(32))))


def _spans(records: list[bytes]) -> Records:
    """The records as a container gives them: spans of one payload, a length before each."""
    payload = b"".join(len(r).to_bytes(4, "little") + r for r in records)
    ends = np.cumsum([4 + len(r) for r in records])
    return Records(payload, ends - np.array([len(r) for r in records]), ends)


def test_strings_are_copied_out_of_the_payload_and_checked_as_utf8():
    codec = get_codec("recprep")
    words = ["", "é", "naïve", "日本", "a" * 40, "\U0001f600"]
    values = [{"i": i, "s": words[i % len(words)], "b": words[i % 3].encode()}
              for i in range(30)]
    records = _spans([codec.encode(v) for v in values])
    batch = codec.decode_arrow_columns(records).tree
    want = record_batch(collate(codec.decode_many(records)))
    assert batch.equals(want) and batch.schema.equals(want.schema, check_metadata=True)
    strings = batch.column("s")
    assert strings.offset == 0 and strings.buffers()[2].to_pybytes()[
        : len("".join(words).encode())] == "".join(words).encode()
    surrogate = [codec.encode({"i": i, "s": "\ud800"}) for i in range(4)]  # recprep
    assert codec.decode_arrow_columns(surrogate) is None  # keeps it, UTF-8 can't: per record


@pytest.mark.parametrize("make", [
    lambda i: (i, i / 3, f"w{i}"),
    lambda i: {"id": np.int16(i), "s": b"x" * i, "f": np.float32(i)},
])
def test_flat_chunks_are_the_record_batch_of_their_columns(make):
    codec = get_codec("recprep")
    records = [codec.encode(make(i)) for i in range(12)]
    for _ in range(2):  # the second chunk of a layout takes the schema it kept
        batch = codec.decode_arrow_columns(records).tree
        want = record_batch(codec.decode_columns(records).tree)
        assert batch.equals(want) and batch.schema.equals(want.schema, check_metadata=True)


@pytest.mark.parametrize(("width", "solid"), [(8, True), (400, False)])
def test_a_round_of_arrow_chunks_is_woven_at_once_only_when_its_rows_are_small(width, solid):
    from recprep.read.blocks import SMALL_ROW_BYTES, Mosaic, _row_bytes, _weave, assemble

    codec = get_codec("recprep")
    chunks = [codec.decode_arrow_columns([codec.encode((s * 100 + i, "x" * width))
                                          for i in range(20)]) for s in range(3)]
    assert all(isinstance(c.tree, pa.RecordBatch) for c in chunks)
    per_row = _row_bytes(chunks[0].tree)  # a chunk's buffers whole, by its rows
    assert per_row == chunks[0].tree.get_total_buffer_size() // 20
    assert (per_row < SMALL_ROW_BYTES) is solid
    woven = _weave([(c, 0, 20) for c in chunks])
    if solid:  # copied into a record batch of its own at once: a batch is its slice
        assert isinstance(woven, Columns) and isinstance(woven.tree, pa.RecordBatch)
    else:  # rows placed, copied once when a batch is assembled
        assert isinstance(woven, Mosaic)
    got = woven.tree if solid else assemble([woven])
    assert got.column(0).to_pylist() == [s * 100 + i for i in range(20) for s in range(3)]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(4, 30), min_size=2, max_size=5),
    data=st.data(),
)
def test_a_round_of_small_arrow_rows_is_the_take_of_its_mosaic(sizes, data):
    """A round of chunks' record batches (small rows) is woven by one take over their
    rows end to end: the record batch, and the instances, that weaving their Mosaic
    gives."""
    from recprep.read.blocks import _arrow_round, _solid, _weave, _woven_mosaic, part

    codec = get_codec("recprep")
    chunks = []
    for s, n in enumerate(sizes):
        records = [codec.encode((s * 100 + i, f"w{s}.{i}")) for i in range(n)]
        chunks.append(codec.decode_arrow_columns(records))
        chunks[-1].decode = lambda records=records: codec.decode_many(records)
    starts = [data.draw(st.integers(0, n - 1)) for n in sizes]
    m = data.draw(st.integers(1, min(n - s for n, s in zip(sizes, starts, strict=True))))
    parts = [(c, s, m) for c, s in zip(chunks, starts, strict=True)]
    fast = _arrow_round(parts)
    careful = _solid(_woven_mosaic([part(c, s, s + m) for c, s, _ in parts]))
    assert isinstance(fast, Columns) and fast.tree.equals(careful.tree)
    assert fast.tree.schema.equals(careful.tree.schema, check_metadata=True)
    assert fast.instances() == careful.instances() == [
        (s * 100 + starts[s] + r, f"w{s}.{starts[s] + r}") for r in range(m)
        for s in range(len(sizes))]
    assert _weave(parts).tree.equals(fast.tree)  # the round's weave takes it


def test_the_orders_of_rounds_of_alternating_sizes_are_kept():
    """Rounds alternate between a few sizes (chunks of 2,857 and 2,858 records: rounds of
    2,857 rows, then of one): each size's order is made once, not once a round."""
    from recprep.read.blocks import _ROUND_ORDER, _round_order

    _ROUND_ORDER.clear()  # what rounds before kept
    four = _round_order(3, 4)
    assert four.to_pylist() == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    assert _round_order(3, 2).to_pylist() == [0, 2, 4, 1, 3, 5]
    assert _round_order(3, 4) is four


def test_a_round_of_other_blocks_is_woven_as_before():
    from recprep.read.blocks import _arrow_round

    codec = get_codec("recprep")
    small = codec.decode_arrow_columns([codec.encode((i, "s")) for i in range(8)])
    wide = codec.decode_arrow_columns([codec.encode((i, "x" * 400)) for i in range(8)])
    other = codec.decode_arrow_columns([codec.encode((i, b"s")) for i in range(8)])
    assert _arrow_round([(small, 0, 4), (small, 4, 4)]) is not None
    assert _arrow_round([(wide, 0, 4), (wide, 4, 4)]) is None  # big rows: a Mosaic
    assert _arrow_round([(small, 0, 4), (other, 0, 4)]) is None  # two signatures
    assert _arrow_round([(small, 0, 4), (list(range(4)), 0, 4)]) is None  # a list


def _memory(array: np.ndarray) -> object:
    """What owns ``array``'s memory: a scratch buffer (a bytearray), or numpy (None)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return None if array.base is None else array.base.obj


@pytest.mark.parametrize(("dtype", "reused"), [
    (np.float64, True), (np.int16, True), (np.uint8, True), (np.dtype(">f8"), False),
    (np.bool_, False), (object, False), (np.complex128, False)])
def test_arrow_batches_arrays_reuse_memory_only_for_numbers_and_only_once_let_go(
        dtype, reused):
    from recprep._core import scratch as scratch_module
    from recprep.read.gather import arrow_empty

    scratch_module._local.held = []  # no free buffer of earlier tests to be taken first
    shape = (256, 400)  # past the size scratch buffers start at
    out = arrow_empty(shape, np.dtype(dtype))
    assert (out.shape, out.dtype, out.flags.writeable) == (shape, np.dtype(dtype), True)
    want = (np.arange(256 * 400).reshape(shape) % 7).astype(dtype)
    out[:] = want
    held = arrow_empty(shape, np.dtype(dtype))  # ``out`` is alive: not its memory
    assert not np.shares_memory(out, held)
    held[:] = 0
    assert out.tolist() == want.tolist()
    memory = _memory(out)
    assert (memory is not None) is reused
    assert memory is None or _memory(held) is not memory
    del out
    again = arrow_empty(shape, np.dtype(dtype))
    assert (_memory(again) is memory) if reused else _memory(again) is None


def test_arrow_batches_of_big_rows_keep_their_memory_while_held_and_hand_it_back(tmp_path):
    data = [(np.full((4, 50), i, np.float64), i) for i in range(600)]  # 1.6 kB rows: copied
    convert(str(tmp_path), data, 3, "m", progress=False)  # once, into a batch's arrays
    reader = RecordIO(str(tmp_path / "m-*"))
    batches = list(reader.batches(160, format="arrow"))  # all held while more are made
    assert [b.num_rows for b in batches] == [160, 160, 160, 120]
    table = pa.Table.from_batches(batches)
    assert table.column("f1").to_pylist() == list(range(600))
    values = table.column("f0").combine_chunks().flatten().flatten().to_numpy()
    assert np.array_equal(values, np.repeat(np.arange(600.0), 200))
    assert_rows(table, list(reader()))
    first = batches[0].column(0).flatten().flatten().buffers()[1].address
    del batches, table, values
    again = next(iter(reader.batches(160, format="arrow")))  # a dropped batch's memory
    assert again.column(0).flatten().flatten().buffers()[1].address == first
    assert again.column("f1").to_pylist() == list(range(160))


Point = collections.namedtuple("Point", "xy label")


@pytest.mark.parametrize("make", [
    lambda n: (np.arange(n * 12, dtype=np.float32).reshape(n, 3, 4), np.arange(n)),
    lambda n: {"img": np.arange(n * 6, dtype=np.uint8).reshape(n, 6), "y": np.ones(n)},
    lambda n: Point(np.arange(n * 4.0).reshape(n, 2, 2)[:, ::-1], np.arange(n, dtype="i2")),
])
def test_a_numeric_batch_of_a_known_layout_is_what_record_batch_makes(make):
    known: dict = {}
    first, schema = numeric_batch(make(3), known)
    assert first.equals(record_batch(make(3))) and schema.equals(first.schema)
    again, same = numeric_batch(make(5), known)  # wrapped under the layout's schema
    assert same is schema and again.schema.equals(schema, check_metadata=True)
    assert again.equals(record_batch(make(5)))
    assert again.to_pylist() == record_batch(make(5)).to_pylist()


def test_a_numeric_batch_of_another_layout_gets_its_own_schema():
    known: dict = {}
    _, schema = numeric_batch((np.zeros((2, 3)), np.arange(2)), known)
    wider, its = numeric_batch((np.zeros((2, 4)), np.arange(2)), known)
    assert its is not schema and str(its.field("f0").type) == "fixed_size_list<item: double>[4]"
    assert wider.equals(record_batch((np.zeros((2, 4)), np.arange(2))))
    with pytest.raises(ArrowMappingError, match="a column name must be a str, got int"):
        numeric_batch({1: np.arange(2)}, known)  # as record_batch says it


@pytest.mark.parametrize("batch", [
    (np.array([True, False]),), (np.arange(2) + 1j,), (np.arange(2, dtype=">i4"),),
    ([1, 2],), ((np.arange(2), np.arange(2)),), np.arange(2), (np.zeros((2, 0)),),
    ("ab",), {},
])
def test_other_batches_are_not_numeric_batches(batch):
    known: dict = {}
    assert numeric_batch(batch, known) is None
    assert numeric_batch(batch, known) is None  # and remembered as such


def test_numeric_batches_are_cast_to_a_given_schema(tmp_path):
    convert(str(tmp_path), [(np.full(3, i, np.float64), i) for i in range(600)], 2, "s")
    schema = pa.schema([("f0", pa.list_(pa.float32(), 3)), ("f1", pa.int32())])
    got = list(RecordIO(str(tmp_path / "s-*-of-*")).batches(256, format="arrow",
                                                            schema=schema))
    assert [b.num_rows for b in got] == [256, 256, 88]
    assert all(b.schema.equals(schema) for b in got)
    rows = sorted((r["f1"], r["f0"]) for b in got for r in b.to_pylist())
    assert rows == [(i, [float(i)] * 3) for i in range(600)]
