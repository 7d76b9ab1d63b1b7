"""Issue 15 item 3: columnar input for ``convert``, a block of rows encoded at once.

The contract: a table (DataFrame, Arrow table or dataset, dict of columns) written
through the block path gives exactly the bytes of its rows fed one by one, on every codec,
format and compressor, or the same error at the same instance; every executor splits it
by row ranges and writes the same bytes.
"""

from __future__ import annotations

import hashlib
import pickle
import threading
import uuid

import fsspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.codecs import get_codec
from recprep.containers import get_format
from recprep.errors import (
    ColumnsError,
    EncodeError,
    InputError,
    InvalidArgumentError,
    TaskFailedError,
)
from recprep.write import tables
from recprep.write.inputs import ROWS_PER_PART, as_input, split_sized
from recprep.write.tables import TableReader

from ..support import builtin_formats

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
ds = pytest.importorskip("pyarrow.dataset")

FORMS = [(name, compressor) for name in builtin_formats()
         for compressor in get_format(name).compressors]
CODECS = ("recprep", "example")

# ----------------------------------------------------------------------------- frames

_ints = st.integers(-(2**63), 2**63 - 1)
_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([-0.0, 0.0])
_texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=6)  # surrogates
_cells = {
    "i64": lambda n: st.lists(_ints, min_size=n, max_size=n).map(
        lambda v: np.array(v, np.int64)),
    "f64": lambda n: st.lists(_floats, min_size=n, max_size=n).map(
        lambda v: np.array(v, np.float64)),
    "f32": lambda n: st.lists(st.floats(width=32), min_size=n, max_size=n).map(
        lambda v: np.array(v, np.float32)),
    "str": lambda n: st.lists(_texts, min_size=n, max_size=n).map(_objects),
    "ascii": lambda n: st.lists(st.text("abcé", max_size=4), min_size=n, max_size=n).map(
        _objects),
    "bytes": lambda n: st.lists(st.binary(max_size=5), min_size=n, max_size=n).map(
        _objects),
    "bool": lambda n: st.lists(st.booleans(), min_size=n, max_size=n).map(
        lambda v: np.array(v, bool)),
    "vec": lambda n: st.integers(0, 3).flatmap(lambda k: st.lists(
        st.lists(st.floats(width=32), min_size=k, max_size=k), min_size=n, max_size=n).map(
        lambda rows: _objects([np.array(r, np.float32) for r in rows]))),
    "Int64": lambda n: st.lists(st.none() | st.integers(-5, 5), min_size=n, max_size=n).map(
        lambda v: pd.array(v, dtype="Int64")),
    "nullstr": lambda n: st.lists(st.none() | _texts, min_size=n, max_size=n).map(_objects),
    "mixed": lambda n: st.lists(
        st.none() | _ints | _floats | _texts | st.binary(max_size=3) | st.booleans(),
        min_size=n, max_size=n).map(_objects),
}


def _objects(values: list) -> pd.Series:
    """An object column holding ``values`` as they are (no str dtype inferred)."""
    out = np.empty(len(values), object)
    out[:] = values
    return pd.Series(out, dtype=object)


@st.composite
def frames(draw, kinds=tuple(_cells), max_rows=24):
    n = draw(st.integers(0, max_rows))
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=5, unique=True))
    return pd.DataFrame({kind: draw(_cells[kind](n)) for kind in chosen})


def outcome(fn) -> tuple:
    """What running ``fn`` gave: its value, or the encode error and where."""
    try:
        return ("ok", fn())
    except TaskFailedError as err:
        err = err.original
        assert isinstance(err, EncodeError)
        return ("EncodeError", err.instance_index)
    except EncodeError as err:
        return ("EncodeError", err.instance_index)


def block_records(codec, table) -> list:
    """Each block's records made at once (None where the codec said it can't)."""
    return [codec.encode_columns(b.columns, b.n)
            for b in TableReader(table)().column_blocks()]


def row_records(codec, table) -> list[bytes]:
    records = []
    for index, row in enumerate(TableReader(table)()):
        try:
            records.append(codec.encode(row))
        except EncodeError as err:
            err.instance_index = index
            raise
    return records


def digests(url: str) -> dict[str, str]:
    fs, _, (path,) = fsspec.get_fs_token_paths(url)
    return {p.rsplit("/", 1)[1]: hashlib.sha256(fs.cat_file(p)).hexdigest()
            for p in sorted(fs.ls(path, detail=False)) if "-of-" in p}


def written(table, where: str | None = None, **options) -> dict[str, str]:
    url = where or f"memory://columnar-{uuid.uuid4().hex}"
    convert(url, table, 3, "t", **options)
    return digests(url)


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(tables, "ROW_BLOCK", 7)  # several blocks in a small frame


# ------------------------------------------------------------ block == rows, byte for byte


@pytest.mark.parametrize("codec_name", CODECS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(df=frames())
def test_block_records_are_the_row_records(codec_name, df, small_blocks):
    codec = get_codec(codec_name)
    rows = outcome(lambda: row_records(codec, df))
    blocks = block_records(codec, df)
    if rows[0] == "EncodeError":  # the block that holds the bad row can't be made at once
        bad_block = rows[1] // tables.ROW_BLOCK
        assert blocks[bad_block] is None
        return
    at = 0
    for got in blocks:
        if got is not None:
            assert got == rows[1][at : at + len(got)]
        at += tables.ROW_BLOCK


@pytest.mark.filterwarnings("ignore:.*shards are empty")
@pytest.mark.parametrize("codec_name", CODECS)
@pytest.mark.parametrize(("fmt", "compressor"), FORMS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(df=frames(max_rows=40))
def test_convert_writes_the_bytes_of_the_rows_one_by_one(codec_name, fmt, compressor, df,
                                                         small_blocks):
    options = {"codec": codec_name, "format": fmt, "compressor": compressor}
    as_rows = list(TableReader(df)())
    assert outcome(lambda: written(df, **options)) == outcome(
        lambda: written(as_rows, **options))


def test_the_block_path_is_taken_for_plain_columns():
    n = 5000
    df = pd.DataFrame({
        "id": np.arange(n), "score": np.linspace(-1, 1, n),
        "word": pd.Series([f"w{i % 97}" * (i % 3) for i in range(n)], dtype=object),
        "maybe": pd.Series([None if i % 5 == 0 else "é" * (i % 4) for i in range(n)],
                           dtype=object),
        "vec": pd.Series(list(np.ones((n, 16), np.float32)), dtype=object),
    })
    codec = get_codec("recprep")
    blocks = block_records(codec, df)
    assert None not in blocks and len(blocks) == 2
    assert [r for b in blocks for r in b] == row_records(codec, df)
    mixed = pd.DataFrame({"k": np.arange(6), "m": _objects([1, "a", None, 2.5, b"x", True]),
                          "v": _objects([np.ones((2, 2), ">i2")] * 6)})
    assert block_records(codec, mixed) == [row_records(codec, mixed)]
    packed = pd.DataFrame({"i": _objects([1, 2]), "s": _objects(["é", ""]),
                           "b": _objects([b"", b"\x00"]), "f": _objects([0.5, -0.0]),
                           "t": _objects([True, False])})
    assert block_records(codec, packed) == [row_records(codec, packed)]
    assert row_records(codec, packed)[0][1] == 0x0F  # a packed dict, as encode writes it
    example = get_codec("example")
    ex = pd.DataFrame({"id": np.arange(n), "f": np.ones(n, np.float32),
                       "w": pd.Series(["ab"] * n, dtype=object),
                       "v": pd.Series(list(np.ones((n, 4), np.float32)), dtype=object)})
    ex_blocks = block_records(example, ex)
    assert None not in ex_blocks
    assert [r for b in ex_blocks for r in b] == row_records(example, ex)


@pytest.mark.filterwarnings("ignore:.*shards are empty")
@settings(max_examples=30, deadline=None)
@given(df=frames(kinds=("i64", "f64", "str", "bytes", "bool", "vec", "Int64", "nullstr",
                        "mixed")))
def test_convert_then_read_gives_the_rows_back(df):
    url = f"memory://columnar-{uuid.uuid4().hex}"
    convert(url, df, 2, "r")
    codec = get_codec("recprep")  # exact: equal records are equal values, types and all
    back = list(RecordIO(f"{url}/r")())
    assert [codec.encode(r) for r in back] == row_records(codec, df)


# ------------------------------------------------------------------------ input kinds


def test_a_dict_of_arrays_is_a_table():
    n = 10
    columns = {"x": np.arange(n, dtype=">i4"), "v": np.arange(n * 6.0).reshape(n, 2, 3),
               "s": [f"s{i}" for i in range(n)], "b": tuple(bytes([i]) for i in range(n)),
               "p": pd.Series(np.arange(n) * 0.5), "a": pa.array(list(range(n)))}
    rows = list(as_input(columns)())
    assert rows[3]["x"] == 3 and type(rows[3]["x"]) is np.int32
    np.testing.assert_array_equal(rows[3]["v"], np.arange(18.0, 24.0).reshape(2, 3))
    assert rows[3]["s"] == "s3" and rows[3]["b"] == b"\x03" and rows[3]["p"] == 1.5
    assert type(rows[3]["a"]) is np.int64
    codec = get_codec("recprep")
    assert block_records(codec, columns) == [row_records(codec, columns)]
    assert written(columns) == written(rows)
    url = f"memory://columnar-{uuid.uuid4().hex}"
    convert(url, columns, 2, "d")
    back = list(RecordIO(f"{url}/d")())
    assert [codec.encode(r) for r in back] == row_records(codec, columns)


@pytest.mark.parametrize(("value", "match"), [
    ({"a": [1, 2], "b": [1]}, r"one length.*'a': 2, 'b': 1"),
    ({"a": np.arange(3), "b": np.float64(1.0)}, "value for 'b' is a float64, not a column"),
    ({"a": "abc"}, "iterable only by accident"),
    ({}, "no columns"),
    ({"a": np.float32(1)}, "not a column"),
])
def test_a_dict_that_is_not_columns_is_refused(mem_url, value, match):
    with pytest.raises(ColumnsError, match=match) as info:
        convert(mem_url, value, 2, "x")
    assert isinstance(info.value, InputError) and isinstance(info.value, InvalidArgumentError)


def parquet_dataset(tmp_path, rows: int):
    table = pa.table({"k": np.arange(rows), "w": [f"w{i % 7}" for i in range(rows)],
                      "part": [i * 3 // rows for i in range(rows)]})
    ds.write_dataset(table, tmp_path / "pq", format="parquet", partitioning=["part"],
                     partitioning_flavor="hive")
    return ds.dataset(tmp_path / "pq", format="parquet", partitioning="hive")


def test_a_pyarrow_dataset_is_read_fragment_by_fragment(tmp_path):
    dataset = parquet_dataset(tmp_path, 30)
    rows = list(as_input(dataset)())
    assert rows == list(as_input(dataset.to_table())())
    assert {r["part"] for r in rows} == {0, 1, 2}  # partition columns come back
    assert written(dataset) == written(rows)
    in_memory = ds.dataset(pa.table({"x": [1, 2, 3]}))
    assert list(as_input(in_memory)()) == [{"x": 1}, {"x": 2}, {"x": 3}]


def test_row_ranges_ship_only_their_rows(tmp_path):
    n = 5 * ROWS_PER_PART
    for table in (pd.DataFrame({"x": np.arange(n)}), pa.table({"x": np.arange(n)}),
                  {"x": np.arange(n)}, parquet_dataset(tmp_path, n)):
        reader = as_input(table)
        parts = split_sized(reader, 256)
        assert parts is not None and len(parts) == 5
        whole = len(pickle.dumps(reader))
        for part in parts:
            shipped = pickle.loads(pickle.dumps(part))
            assert list(shipped()) == list(part())
            if not isinstance(table, ds.Dataset):
                assert len(pickle.dumps(part)) < whole / 3
        assert [r for p in parts for r in p()] == list(reader())


@pytest.mark.parametrize("make", ["frame", "dict", "dataset"])
def test_processes_split_row_ranges_and_write_the_serial_bytes(tmp_path, make):
    n = 2 * ROWS_PER_PART + 1_000  # three row ranges
    if make == "dataset":
        table = parquet_dataset(tmp_path, n)
    else:
        columns = {"k": np.arange(n), "v": np.arange(n * 2, dtype=np.float32).reshape(n, 2),
                   "s": [f"s{i % 13}" for i in range(n)]}
        table = pd.DataFrame({**columns, "v": list(columns["v"])}) if make == "frame" else (
            columns)
    serial = written(table, str(tmp_path / "serial"))
    assert written(table, str(tmp_path / "proc"), executor="processes",
                   num_workers=2) == serial


# ------------------------------------------------------------------------------ errors


def test_a_column_the_codec_cant_encode_names_the_instance_and_the_column(mem_url):
    df = pd.DataFrame({"k": np.arange(10, dtype=np.int64), "f": np.linspace(0, 1, 10)})
    with pytest.raises(TaskFailedError) as info:
        convert(mem_url, df, 2, "e", codec="example")
    err = info.value.original
    assert isinstance(err, EncodeError) and err.instance_index == 0 and err.column == "f"
    assert "instance 0, column 'f'" in str(err) and "float64" in str(err)
    values = pd.Series([1] * 10, dtype=object)
    values[6] = threading.Lock()  # neither recprep nor pickle can write it
    with pytest.raises(TaskFailedError) as info:
        convert(mem_url, pd.DataFrame({"k": np.arange(10), "o": values}), 2, "p")
    err = info.value.original
    assert isinstance(err, EncodeError) and err.instance_index == 6 and err.column == "o"
    assert "instance 6, column 'o'" in str(err) and "lock" in str(err)
