"""A set as Arrow (recprep.read.arrowout): the mapping from instances to columns, one
schema per stream, every reader option, and pyarrow, polars and DuckDB reading a reader
through the Arrow C stream."""

from __future__ import annotations

import math
import warnings
from collections import namedtuple
from fractions import Fraction

import numpy as np
import pytest

from recprep import RecordIO, convert
from recprep.errors import ArrowMappingError, CorruptDataWarning, InvalidArgumentError

from ..support import flip_byte

pa = pytest.importorskip("pyarrow")

Point = namedtuple("Point", "x y")


def arrow_value(value):
    """What the documented mapping makes of one value, as ``to_pylist`` gives it back."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        names = getattr(value, "_fields", None) or [f"f{i}" for i in range(len(value))]
        return {n: arrow_value(v) for n, v in zip(names, value, strict=True)}
    if isinstance(value, dict):
        return {k: arrow_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [arrow_value(v) for v in value]
    return value


def arrow_row(instance):
    """The row (column -> value) of one instance."""
    if isinstance(instance, (tuple, dict)):
        return arrow_value(instance)
    return {"value": arrow_value(instance)}


def equal(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(equal, a, b))
    return type(a) is type(b) and a == b


def rows_of(table) -> list:
    return table.to_pylist()


def assert_rows(table, instances) -> None:
    got = rows_of(table)
    assert len(got) == len(instances)
    for k, (row, instance) in enumerate(zip(got, instances, strict=True)):
        assert equal(row, arrow_row(instance)), (k, row, instance)


MIXED = [{"id": i, "x": i / 4, "ok": i % 2 == 0, "s": f"w{i}", "b": bytes([i % 256]) * (i % 3),
          "f32": np.float32(i), "a": np.full((2, 3), i % 256, np.uint8), "l": list(range(i % 4)),
          "n": None if i % 3 else i, "t": (i, {"k": f"{i}"})} for i in range(300)]


def test_dicts_become_columns_of_the_documented_types(mem_url):
    convert(mem_url, MIXED, 3, "m", chunk_bytes=2000, progress=False)
    read = RecordIO(f"{mem_url}/m-*")
    table = read.to_arrow()
    types = {f.name: str(f.type) for f in table.schema}
    assert types == {
        "id": "int64", "x": "double", "ok": "bool", "s": "string", "b": "binary",
        "f32": "float", "a": "fixed_size_list<item: fixed_size_list<item: uint8>[3]>[2]",
        "l": "list<item: int64>", "n": "int64",
        "t": "struct<f0: int64, f1: struct<k: string>>",
    }
    assert table.schema.metadata == {b"recprep.instance": b"dict"}
    assert_rows(table, list(read()))
    # the arrays are one buffer of values, not a list per row
    values = table.column("a").combine_chunks().flatten().flatten()
    assert values.type == pa.uint8() and len(values) == 300 * 6


def test_tuples_named_tuples_and_bare_values(mem_url):
    for prefix, data, names in (
            ("t", [(i, f"s{i}", b"x") for i in range(50)], ["f0", "f1", "f2"]),
            ("p", [Point(i, -i) for i in range(50)], ["x", "y"]),
            ("v", [np.arange(3) * i for i in range(50)], ["value"]),
            ("s", [f"only {i}" for i in range(50)], ["value"])):
        convert(f"{mem_url}/{prefix}", data, 2, prefix, progress=False)
        read = RecordIO(f"{mem_url}/{prefix}/{prefix}-*")
        table = read.to_arrow()
        assert table.column_names == names
        assert_rows(table, list(read()))


def test_dicts_of_several_key_sets_give_the_union_of_their_keys(mem_url):
    data = [{"a": i} if i % 2 else {"a": i, "b": str(i)} for i in range(20)]
    convert(mem_url, data, 1, "u", progress=False)
    table = RecordIO(f"{mem_url}/u-*").to_arrow()
    assert table.column_names == ["a", "b"]
    assert table.column("b").to_pylist() == [None if i % 2 else str(i) for i in range(20)]


def test_batches_of_arrow_and_pandas(mem_url):
    convert(mem_url, [(i, f"w{i}") for i in range(10)], 2, "b", progress=False)
    read = RecordIO(f"{mem_url}/b-*")
    got = list(read.batches(4, format="arrow"))
    assert [b.num_rows for b in got] == [4, 4, 2]
    assert all(isinstance(b, pa.RecordBatch) and b.schema == got[0].schema for b in got)
    assert [x for b in got for x in b.column("f1").to_pylist()] == [f"w{i}" for i in range(10)]
    frames = list(read.batches(4, format="pandas", drop_last=True))
    assert [list(f.columns) for f in frames] == [["f0", "f1"]] * 2
    assert frames[1]["f0"].tolist() == [4, 5, 6, 7]
    frame = read.to_pandas()
    assert frame["f1"].tolist() == [f"w{i}" for i in range(10)] and len(frame) == 10
    with pytest.raises(InvalidArgumentError, match="format"):
        read.batches(4, format="polars")
    with pytest.raises(InvalidArgumentError, match="schema"):
        read.batches(4, schema=pa.schema([("f0", pa.int64())]))
    with pytest.raises(InvalidArgumentError, match="pyarrow.Schema"):
        next(read.batches(4, format="arrow", schema={"f0": "int64"}))


@pytest.mark.parametrize(("values", "column", "index", "detail"), [
    ([{"v": 1}, {"v": 2}, {"v": "3"}, {"v": 4}], "v", 2, "int and then str"),
    ([(1, 1.5), (2, 2)], "f1", 1, "float and then int"),
    ([{"v": True}, {"v": 1}], "v", 1, "bool and then int"),
    ([{"v": 2**70}, {"v": 1}], "v", 0, "int"),
    ([{"v": 1 + 2j}, {"v": 1j}], "v", 0, "complex"),
    ([{"v": Fraction(1, 3)}, {"v": Fraction(1, 2)}], "v", 0, "Fraction"),
])
def test_what_doesnt_map_names_the_column_and_instance(mem_url, values, column, index,
                                                       detail):
    convert(mem_url, values, 1, "x", progress=False)
    with pytest.raises(ArrowMappingError, match=detail) as caught:
        RecordIO(f"{mem_url}/x-*", allow_pickle=True).to_arrow()
    assert (caught.value.column, caught.value.index) == (column, index)
    assert f"column {column!r}" in str(caught.value) and f"instance {index}" in str(
        caught.value)


def test_the_index_counts_across_batches(mem_url):
    values = [{"v": i} for i in range(30)] + [{"v": "x"}] + [{"v": 1}] * 3
    convert(mem_url, values, 1, "x", progress=False)
    for size in (8, 64):
        with pytest.raises(ArrowMappingError, match="int and then str") as caught:
            list(RecordIO(f"{mem_url}/x-*").batches(size, format="arrow"))
        assert (caught.value.column, caught.value.index) == ("v", 30)
    later = [{"v": i} for i in range(16)] + [{"v": "x"}] * 8
    convert(f"{mem_url}/later", later, 1, "x", progress=False)
    with pytest.raises(ArrowMappingError, match="type is int64, this batch's is string"
                       ) as caught:
        list(RecordIO(f"{mem_url}/later/x-*").batches(8, format="arrow"))
    assert (caught.value.column, caught.value.index) == ("v", 16)  # the batch's first


def test_one_schema_per_stream(mem_url):
    values = [{"id": i, "tag": None if i < 10 else f"t{i}"} for i in range(20)]
    convert(mem_url, values, 1, "n", progress=False)
    read = RecordIO(f"{mem_url}/n-*")
    with pytest.raises(ArrowMappingError, match="all None") as caught:
        list(read.batches(10, format="arrow"))
    assert (caught.value.column, caught.value.index) == ("tag", 10)
    schema = pa.schema([("id", pa.int32()), ("tag", pa.string())])
    got = list(read.batches(10, format="arrow", schema=schema))
    assert [b.schema for b in got] == [schema, schema]
    assert [x for b in got for x in b.column("tag").to_pylist()] == [v["tag"] for v in values]
    table = read.to_arrow()  # holds every batch: the column takes the others' type
    assert table.schema.field("tag").type == pa.string()
    assert table.column("tag").to_pylist() == [v["tag"] for v in values]
    later_none = [{"id": i, "tag": f"t{i}" if i < 10 else None} for i in range(20)]
    convert(f"{mem_url}/later", later_none, 1, "n", progress=False)
    got = list(RecordIO(f"{mem_url}/later/n-*").batches(10, format="arrow"))
    assert got[1].schema.field("tag").type == pa.string()  # nulls take the stream's type
    with pytest.raises(ArrowMappingError, match="can't cast"):
        list(read.batches(10, format="arrow", schema=pa.schema([("id", pa.int8()),
                                                                ("tag", pa.int64())])))


def test_an_empty_share_is_an_empty_table(mem_url):
    convert(mem_url, [{"a": 1}], 1, "e", progress=False)
    read = next(r for r in (RecordIO(f"{mem_url}/e-*", rank=k, world_size=2) for k in (0, 1))
                if len(r) == 0)
    assert read.to_arrow().num_rows == 0 and read.to_pandas().shape == (0, 0)
    assert pa.RecordBatchReader.from_stream(read).read_all().num_rows == 0


@pytest.mark.parametrize("options", [
    {"shuffle": True, "seed": 5, "shuffle_buffer": 37},
    {"rank": 1, "world_size": 3},
    {"rank": 0, "world_size": 2, "shuffle": True, "seed": 1, "num_threads": 2},
    {"split": "range", "rank": 1, "world_size": 2},
])
def test_every_reader_option_holds(mem_url, options):
    convert(mem_url, MIXED, 3, "m", chunk_bytes=2000, progress=False)
    read = RecordIO(f"{mem_url}/m-*", **options)
    read.set_epoch(2)
    expected = list(read())
    assert_rows(read.to_arrow(), expected)
    stream = pa.RecordBatchReader.from_stream(read)
    assert_rows(stream.read_all(), expected)


def test_a_loaded_state_continues_the_pass(mem_url):
    convert(mem_url, MIXED, 3, "m", chunk_bytes=2000, progress=False)
    assert_resumed_as_read(f"{mem_url}/m-*")


def assert_resumed_as_read(pattern: str) -> None:
    """A pass of ``pattern`` (shuffled, epoch 0) stopped after two Arrow batches of 64:
    those batches hold its first 128 instances, and a reader that loads its state gives
    the rest as ``to_arrow()``."""
    read = RecordIO(pattern, shuffle=True, seed=4)
    read.set_epoch(0)
    expected = list(read())
    batches = read.batches(64, format="arrow")
    first = [next(batches), next(batches)]
    state = read.state_dict()
    batches.close()
    again = RecordIO(pattern, shuffle=True)
    again.load_state_dict(state)
    rest = again.to_arrow()
    assert_rows(pa.Table.from_batches(first), expected[:128])
    assert_rows(rest, expected[128:])


def test_damaged_chunks_are_skipped_as_read_skips_them(tmp_path):
    data = [{"i": i, "s": f"s{i}"} for i in range(400)]
    convert(str(tmp_path), data, 2, "d", chunk_bytes=300, progress=False)
    assert_skipped_as_read(tmp_path, 400)


def assert_skipped_as_read(directory, total: int) -> None:
    """Damage the first shard of the set ``d-*`` in ``directory`` (``total`` instances):
    ``to_arrow()`` with ``on_corrupt="skip"`` holds what ``read()`` keeps, and some but
    not all of the instances are kept."""
    flip_byte(sorted(directory.glob("d-*-of-*"))[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptDataWarning)
        kept = list(RecordIO(str(directory / "d-*"), on_corrupt="skip")())
        table = RecordIO(str(directory / "d-*"), on_corrupt="skip").to_arrow()
    assert 0 < len(kept) < total
    assert_rows(table, kept)


def test_convert_of_to_arrow_writes_the_same_instances(mem_url):
    data = [{"id": i, "x": i / 3, "s": f"w{i}", "b": b"\x00" * (i % 4),
             "n": None if i % 2 else i} for i in range(100)]
    convert(f"{mem_url}/a", data, 2, "a", progress=False)
    table = RecordIO(f"{mem_url}/a/a-*").to_arrow()
    convert(f"{mem_url}/b", table, 2, "b", progress=False)
    back = list(RecordIO(f"{mem_url}/b/b-*")())
    assert back == data  # numbers come back as numpy scalars, which compare equal
    assert rows_of(RecordIO(f"{mem_url}/b/b-*").to_arrow()) == rows_of(table)


def _same(a, b) -> bool:
    """Equal values of equal kinds: tuples as tuples, arrays as arrays of one dtype."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and a.dtype == b.dtype and a.shape == b.shape and (a == b).all())
    if isinstance(a, (tuple, dict)) or isinstance(b, (tuple, dict)):
        if type(a) is not type(b) or len(a) != len(b):
            return False
        pairs = zip(*((a.values(), b.values()) if isinstance(a, dict) else (a, b)),
                    strict=True)
        return (not isinstance(a, dict) or list(a) == list(b)) and all(
            _same(x, y) for x, y in pairs)
    return a == b


@pytest.mark.parametrize("make", [
    lambda i: (i, i / 3, f"w{i}", b"b" * (i % 3), None if i % 2 else i),
    lambda i: (np.full((2, 3), i, np.float32), np.arange(i % 5 + 4, dtype=np.int64)[:4]),
    lambda i: {"img": np.full((2, 2, 3), i, np.uint8), "label": i % 10, "s": str(i)},
    lambda i: f"value {i}",
    lambda i: np.arange(6, dtype=np.int16).reshape(3, 2) + i,
], ids=["tuples", "tuples-of-arrays", "dicts-of-arrays", "bare-strings", "bare-arrays"])
def test_to_arrow_round_trips_tuples_bare_values_and_arrays(mem_url, make):
    """convert(out, reader.to_arrow()) writes the instances the set held: tuples as
    tuples, bare values as bare values, arrays of one shape as arrays of that dtype."""
    data = [make(i) for i in range(50)]
    convert(f"{mem_url}/a", data, 3, "a", progress=False)
    table = RecordIO(f"{mem_url}/a/a-*").to_arrow()
    convert(f"{mem_url}/b", table, 2, "b", progress=False)
    back = list(RecordIO(f"{mem_url}/b/b-*")())
    assert len(back) == len(data)
    bad = [(i, d, b) for i, (d, b) in enumerate(zip(data, back, strict=True))
           if not _same(d, b)]
    assert not bad, bad[:2]


def test_a_table_that_no_longer_says_what_its_rows_were_gives_dicts(mem_url):
    """Rows come back as tuples only while the table is the one to_arrow made: renamed
    or reordered columns, and a namedtuple's columns, give dicts; a column of arrays with
    a null gives lists."""
    convert(f"{mem_url}/a", [(i, str(i)) for i in range(4)], 1, "a", progress=False)
    table = RecordIO(f"{mem_url}/a/a-*").to_arrow()
    for changed, expected in ((table.rename_columns(["id", "s"]), {"id": 0, "s": "0"}),
                              (table.select(["f1", "f0"]), {"f1": "0", "f0": 0})):
        path = f"{mem_url}/c{changed.column_names[0]}"
        convert(path, changed, 1, "c", progress=False)
        assert next(iter(RecordIO(f"{path}/c-*")())) == expected
    convert(f"{mem_url}/p", [Point(i, -i) for i in range(3)], 1, "p", progress=False)
    convert(f"{mem_url}/q", RecordIO(f"{mem_url}/p/p-*").to_arrow(), 1, "q",
            progress=False)
    assert list(RecordIO(f"{mem_url}/q/q-*")()) == [{"x": i, "y": -i} for i in range(3)]
    holed = pa.table({"v": pa.array([[1, 2], None], pa.list_(pa.int64(), 2))})
    convert(f"{mem_url}/h", holed, 1, "h", progress=False)
    assert list(RecordIO(f"{mem_url}/h/h-*")()) == [{"v": [1, 2]}, {"v": None}]


def test_the_stream_is_read_by_pyarrow_polars_and_duckdb(mem_url):
    data = [{"id": i, "x": float(i), "s": f"w{i % 7}", "a": np.full(4, i, np.float32)}
            for i in range(20_000)]
    convert(mem_url, data, 4, "q", progress=False)
    reader = RecordIO(f"{mem_url}/q-*", shuffle=True, seed=2)
    reader.set_epoch(3)  # every pass the same order
    expected = reader.to_arrow()
    assert pa.RecordBatchReader.from_stream(reader).read_all().equals(expected)
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame(reader)
    assert frame.columns == ["id", "x", "s", "a"] and frame.shape == (20_000, 4)
    assert frame["id"].to_list() == expected.column("id").to_pylist()
    assert str(frame.schema["a"]) == "Array(Float32, shape=(4,))"
    duckdb = pytest.importorskip("duckdb")
    got = duckdb.sql("SELECT count(*), avg(x), count(DISTINCT s) FROM reader").fetchall()
    assert got == [(20_000, sum(range(20_000)) / 20_000, 7)]
    wanted = duckdb.sql("SELECT id FROM reader WHERE id % 5000 = 0 ORDER BY id").fetchall()
    assert wanted == [(0,), (5000,), (10000,), (15000,)]


def test_a_stream_starts_its_pass_when_read(mem_url):
    convert(mem_url, [{"id": i, "s": f"w{i}"} for i in range(100)], 2, "l", progress=False)
    reader = RecordIO(f"{mem_url}/l-*", shuffle=True, seed=1)
    stream = pa.RecordBatchReader.from_stream(reader)  # the schema: no pass yet
    assert stream.schema.names == ["id", "s"] and reader.epoch == 0
    assert stream.read_all().num_rows == 100 and reader.epoch == 1
    duckdb = pytest.importorskip("duckdb")
    assert duckdb.sql("SELECT count(*) FROM reader").fetchall() == [(100,)]
    assert reader.epoch == 2  # one pass, however many streams DuckDB asked for


def test_a_stream_whose_first_values_are_none(mem_url):
    values = [{"id": i, "tag": None if i < 9000 else "t"} for i in range(10_000)]
    convert(mem_url, values, 1, "n", progress=False)
    reader = RecordIO(f"{mem_url}/n-*")
    with pytest.raises(pa.ArrowInvalid, match="column 'tag' can't be made Arrow at "
                       "instance 8192 of the pass: the stream's type is null .all None"):
        pa.RecordBatchReader.from_stream(reader).read_all()  # through C: Arrow's error
    schema = pa.schema([("id", pa.int32()), ("tag", pa.string())])
    table = pa.RecordBatchReader.from_stream(reader, schema=schema).read_all()
    assert table.schema == schema and table.column("tag").to_pylist() == [
        v["tag"] for v in values]
    later = [{"id": i, "tag": "t" if i < 9000 else None} for i in range(10_000)]
    convert(f"{mem_url}/later", later, 1, "n", progress=False)
    table = pa.RecordBatchReader.from_stream(RecordIO(f"{mem_url}/later/n-*")).read_all()
    assert table.column("tag").to_pylist() == [v["tag"] for v in later]


def test_the_stream_holds_a_few_chunks_not_the_set(tmp_path):
    import tracemalloc

    def peak(n: int) -> tuple[int, int]:
        directory = tmp_path / str(n)
        convert(str(directory), [(i, "x" * 50 + str(i)) for i in range(n)], 2, "s",
                progress=False)
        reader = RecordIO(str(directory / "s-*"))
        tracemalloc.start()
        held, rows = 0, 0
        try:
            base = pa.total_allocated_bytes()
            for batch in pa.RecordBatchReader.from_stream(reader):
                rows += batch.num_rows
                held = max(held, pa.total_allocated_bytes() - base)
                del batch
            return held + tracemalloc.get_traced_memory()[1], rows
        finally:
            tracemalloc.stop()

    small, rows = peak(40_000)
    big, more = peak(160_000)
    assert (rows, more) == (40_000, 160_000)
    assert big < 1.5 * small  # four times the rows, about the same memory
