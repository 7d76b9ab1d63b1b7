"""Issue 25 item 4: a DataFrame's blocks laid out straight into the shards' chunk payloads.

Where the codec lays a block's records out (``"recprep"``) and the format frames records
back to back (RecordIO), the write loop places each block's records into one buffer,
shard by shard with their framing, and each shard's writer takes its run whole: no
record is a ``bytes`` of its own. The contract: the files, the chunk index and the
manifest are byte for byte those of the same records handed over as ``bytes`` (the path
other codecs and formats take) and of the rows written one by one — on frames of every
dtype, nulls, strings, empty frames, chunk and task cuts falling inside blocks, tiny
chunks — with the same error at the same instance; and the laid-out path is the one
taken."""

from __future__ import annotations

import io
import uuid
from collections import Counter
from contextlib import ExitStack
from decimal import Decimal
from unittest import mock

import fsspec
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.codecs import get_codec
from recprep.codecs.blocks import RecordList, TypedValues
from recprep.codecs.recprep.segments import Segments
from recprep.containers import get_format
from recprep.containers.recordio import LegacyRecordIOFormat, RecordIOFormat
from recprep.write import inputs, loop, tables
from recprep.write.columnvalues import numpy_values
from recprep.write.options import check_options
from recprep.write.tables import TableReader

from .test_columnar_input import frames, outcome

pd = pytest.importorskip("pandas")

MEMORY = fsspec.filesystem("memory")
RECORDIO = [(name, compressor) for name in ("recordio", "recordio-legacy")
            for compressor in get_format(name).compressors]
WRITER = type(get_format("recordio").writer(io.BytesIO(), "none", 1))
pytestmark = pytest.mark.filterwarnings("ignore:.*shards are empty",
                                        "ignore:.*stored as pickles")


def files(table, shards: int, **options) -> dict[str, bytes]:
    """Every file ``convert`` leaves: shards, the chunk index, the manifest."""
    root = f"/laid-{uuid.uuid4().hex}"
    try:
        convert(f"memory://{root}", table, shards, "t", progress=False, **options)
        return {p.rsplit("/", 1)[1]: MEMORY.cat_file(p) for p in sorted(MEMORY.find(root))}
    finally:
        if MEMORY.exists(root):
            MEMORY.rm(root, recursive=True)


def as_bytes():
    """Records handed to the writers as ``bytes`` (the path before issue 25 item 4)."""
    stack = ExitStack()
    for fmt in (RecordIOFormat, LegacyRecordIOFormat):
        stack.enter_context(mock.patch.object(fmt, "record_framing", None))
    return stack


def counting(counts: Counter, cls: type, name: str):
    """``cls.name`` counted into ``counts[name]`` each call."""
    original = getattr(cls, name)

    def counted(self, *args, **kwargs):
        counts[name] += 1
        return original(self, *args, **kwargs)

    return mock.patch.object(cls, name, counted)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=frames(max_rows=60), shards=st.integers(1, 5), form=st.sampled_from(RECORDIO),
       chunk_bytes=st.sampled_from([1, 9, 64, 333, 1 << 20]),
       block=st.sampled_from([3, 7, 16, 4096]), part=st.sampled_from([5, 13, 32768]))
def test_laid_out_blocks_write_the_bytes_of_records_handed_one_by_one(
        df, shards, form, chunk_bytes, block, part):
    options = {"format": form[0], "compressor": form[1], "chunk_bytes": chunk_bytes}
    with mock.patch.object(tables, "ROW_BLOCK", block), \
            mock.patch.object(inputs, "ROWS_PER_PART", part):  # task cuts inside blocks
        laid = outcome(lambda: files(df, shards, **options))
        with as_bytes():
            handed = outcome(lambda: files(df, shards, **options))
        one_by_one = outcome(lambda: files(list(TableReader(df)()), shards, **options))
    assert laid == handed
    assert laid == one_by_one


def test_a_frame_of_plain_columns_is_laid_out_with_no_bytes_per_record():
    n = 10_000
    df = pd.DataFrame({
        "id": np.arange(n), "score": np.linspace(-1, 1, n),
        "word": pd.Series([f"w{i % 97}" * (i % 3) for i in range(n)], dtype=object),
        "vec": pd.Series(list(np.arange(n * 4, dtype=np.float32).reshape(n, 4)),
                         dtype=object),
    })
    counts: Counter = Counter()
    with counting(counts, Segments, "records"), counting(counts, WRITER, "write_framed"), \
            counting(counts, WRITER, "write_many"), counting(counts, WRITER, "write"):
        laid = files(df, 3, chunk_bytes=64 << 10)
    # 3 blocks of 4096 rows; each block's records handed to each of the 3 writers once
    assert counts == {"write_framed": 9}
    with as_bytes():
        assert files(df, 3, chunk_bytes=64 << 10) == laid
    with mock.patch.object(tables, "ROW_BLOCK", 10**6):  # no block holds what it shouldn't
        back = list(RecordIO(_written(df))())
    codec = get_codec("recprep")
    assert [codec.encode(r) for r in back] == [codec.encode(r) for r in TableReader(df)()]


def _written(df) -> str:
    url = f"memory://laid-{uuid.uuid4().hex}"
    convert(url, df, 3, "t", progress=False)
    return f"{url}/t"


def test_blocks_that_dont_fit_take_the_bytes_or_the_rows(recwarn):
    from fractions import Fraction

    values = pd.Series([1.5] * 12, dtype=object)
    values[9] = Fraction(1, 3)  # the codec pickles it: its block goes row by row
    df = pd.DataFrame({"k": np.arange(12), "v": values})
    counts: Counter = Counter()
    with mock.patch.object(tables, "ROW_BLOCK", 4), \
            counting(counts, Segments, "records"), counting(counts, WRITER, "write_framed"), \
            counting(counts, WRITER, "write"):
        mixed = files(df, 2, chunk_bytes=1 << 20)
        assert counts == {"write_framed": 4, "write": 4}  # blocks 0, 1 laid out; 2 by row
        counts.clear()
        as_tfrecord = files(df, 2, format="tfrecord")
        assert counts == {"records": 2}  # no framing to lay out: each record a bytes
    assert mixed == files(list(TableReader(df)()), 2, chunk_bytes=1 << 20)
    assert as_tfrecord == files(list(TableReader(df)()), 2, format="tfrecord")


def test_a_record_too_large_in_a_laid_out_block_is_located(monkeypatch):
    from recprep.containers import recordio

    monkeypatch.setattr(recordio, "MAX_PAYLOAD", 256)  # records up to 252 bytes
    words = pd.Series(["w"] * 20, dtype=object)
    words[13] = "x" * 300
    df = pd.DataFrame({"k": np.arange(20), "w": words})
    options = {"chunk_bytes": 64, "executor": "serial"}
    with mock.patch.object(tables, "ROW_BLOCK", 8):
        laid = outcome(lambda: files(df, 3, **options))
        one_by_one = outcome(lambda: files(list(TableReader(df)()), 3, **options))
    assert laid == one_by_one == ("EncodeError", 13)


def test_progress_hears_of_a_laid_out_block_as_of_its_records():
    df = pd.DataFrame({"k": np.arange(5000), "s": pd.Series(["ab"] * 5000, dtype=object)})
    heard = {}
    for how, context in (("laid", ExitStack()), ("bytes", as_bytes())):
        ticks: list[int] = []
        target = loop.LoopTarget(MEMORY, [f"/laid-progress-{how}-{k}" for k in range(3)],
                                 check_options("recordio", None, "recprep", 3, None),
                                 cuts=[1000, 4500])
        with context:
            facts = loop.write_round_robin(TableReader(df)(), target, tick=ticks.append)
        heard[how] = (ticks, [(f.records, f.bytes, f.crc32c, f.chunks) for f in facts])
        MEMORY.rm([f"/laid-progress-{how}-{k}" for k in range(3)])
    assert heard["laid"] == heard["bytes"]
    assert sum(heard["laid"][0]) == 5000


def test_a_record_list_places_its_records_where_asked():
    block = RecordList([b"abc", b"", b"de"])
    buffer = np.full(9, 0xEE, np.uint8)
    block.place(buffer, np.array([6, 0, 1]))
    assert buffer.tobytes() == b"\xeede\xee\xee\xeeabc"


_objects_drawn = st.lists(
    st.none() | st.text(max_size=3) | st.binary(max_size=3) | st.integers() | st.booleans()
    | st.floats() | st.sampled_from([float("nan"), np.float64("nan"), np.float32(1.5),
                                     pd.NA, pd.NaT, np.datetime64("NaT"),
                                     Decimal("NaN"), Decimal(1), np.zeros(2)]),
    max_size=12)


@settings(max_examples=300, deadline=None)
@given(values=_objects_drawn)
@example(values=["a", float("nan"), 1])
@example(values=[np.zeros(2), pd.NA, b""])
def test_an_object_columns_values_are_pandas_nulls_as_none_with_their_types(values):
    """The values of an object column skip ``pd.isna`` when no value's type can be null:
    the same list as asking it always, and the types found are the values' types."""
    array = np.empty(len(values), object)
    array[:] = values
    careful = [None if null else value
               for value, null in zip(array.tolist(), pd.isna(array), strict=True)]
    got = numpy_values(array)
    assert isinstance(got, TypedValues) and got.types == set(map(type, got))
    assert len(got) == len(careful) and all(
        a is b or (type(a) is type(b) and a == b) for a, b in zip(got, careful, strict=True))


def test_a_column_of_strings_and_arrays_is_not_asked_for_nulls():
    array = np.empty(4, object)
    array[:] = ["a", b"b", 3, np.zeros(2)]
    with mock.patch("pandas.isna", side_effect=AssertionError("asked")):
        got = numpy_values(array)
    assert got.types == {str, bytes, int, np.ndarray}
    array[2] = float("nan")
    assert numpy_values(array)[2] is None


def test_a_codec_overriding_encode_columns_alone_keeps_its_records():
    from recprep.codecs.recprep import RecprepCodec

    class Tagged(RecprepCodec):
        def encode_columns(self, columns, n):
            records = super().encode_columns(columns, n)
            return None if records is None else [b"T" + r for r in records]

    df = pd.DataFrame({"k": np.arange(5)})
    block = Tagged().encode_block({"k": np.arange(5)}, 5)
    assert isinstance(block, RecordList) and all(r[:1] == b"T" for r in block.records())
    url = f"memory://laid-{uuid.uuid4().hex}"
    convert(url, df, 2, "t", codec=Tagged(), progress=False)
    fmt = get_format("recordio")
    with MEMORY.open(f"{url}/t-00000-of-00001".removeprefix("memory://"), "rb") as f:
        first = [r for c in fmt.read_chunks(f, path="t") for r in c.records]
    rows = list(TableReader(df)())[::2]  # shard 0's
    assert [bytes(r) for r in first] == [b"T" + get_codec("recprep").encode(r) for r in rows]
