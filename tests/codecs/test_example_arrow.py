"""Example chunks decoded straight to Arrow (recprep.codecs.example.arrow): the record
batch equals what the documented mapping makes of the instances the codec decodes, built
from the parsed buffers; the golden TensorFlow vectors included; Example sets (RecordIO
and TFRecord files) read as Arrow equal read() on every reader option, resumed and
damaged."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep._core.arrowcols import record_batch
from recprep.batching import collate
from recprep.codecs.example import ExampleCodec
from recprep.codecs.features import Feature

from ..read.test_arrow_out import (
    assert_resumed_as_read,
    assert_rows,
    assert_skipped_as_read,
    equal,
)
from ..support import DATA
from .test_example_codec import tfrecord_records

pa = pytest.importorskip("pyarrow")

GOLDEN = [Feature("image", "float32", (None,)), Feature("label", "int64", (None,)),
          Feature("name", object, (None,))]


def mapped(codec, records):
    """What the mapping makes of the records' instances, decoded one by one."""
    return record_batch(collate(codec.decode_many(records)))


@pytest.mark.parametrize("features", [None, GOLDEN], ids=["undeclared", "declared"])
def test_golden_tensorflow_examples_decode_to_the_arrow_of_their_instances(features):
    codec = ExampleCodec(features)
    records = tfrecord_records((DATA / "example" / "examples.tfrecord").read_bytes())
    got = codec.decode_arrow_columns(records)
    assert got is not None and got.n == 25
    batch = got.tree
    want = mapped(codec, records)
    assert batch.equals(want) and batch.schema.equals(want.schema, check_metadata=True)
    assert {f.name: str(f.type) for f in batch.schema} == {
        "image": "list<item: double>", "label": "list<item: int64>",
        "name": "list<item: binary>"}
    # the byte strings are one buffer of their bytes (no object per value)
    names = batch.column("name").values
    joined = b"".join(b for row in want.column("name").to_pylist() for b in row)
    assert names.offset == 0 and names.buffers()[2].to_pybytes()[: len(joined)] == joined


def test_stacked_numbers_stay_numpy_columns_and_byte_strings_are_arrow():
    codec = ExampleCodec()
    records = [codec.encode({"v": np.full(3, i, np.float32), "id": i}) for i in range(6)]
    numbers = codec.decode_arrow_columns(records)
    assert isinstance(numbers.tree, dict) and numbers.tree["v"].shape == (6, 3)
    assert numbers.signature == codec.decode_columns(records).signature
    records = [codec.encode({"v": np.full(3, i, np.float32),
                             "w": np.array([b"ab"] * (i % 2), object)}) for i in range(6)]
    batch = codec.decode_arrow_columns(records).tree
    assert [str(t) for t in batch.schema.types] == [
        "fixed_size_list<item: float>[3]", "list<item: binary>"]
    assert batch.column("w").to_pylist() == [[], [b"ab"], [], [b"ab"], [], [b"ab"]]


@pytest.mark.parametrize(("dtype", "values", "arrow_type"), [
    ("uint8", [0, 7, 255, 3, 9], "int64"), ("int16", [-300, 2, 5, 0, 1], "int64"),
    ("float16", [0.1, 2.5, -1.0, 3.0, 1e-3], "double"), ("bool", [1, 0, 1, 1, 0], "bool"),
    ("float32", [0.5, 1.5, 2.5, -3.5, 0.0], "double"),
])
def test_declared_scalar_numbers_are_a_column_of_their_values(dtype, values, arrow_type):
    codec = ExampleCodec([Feature("x", dtype, ())])
    records = [codec.encode({"x": np.array(v, dtype)}) for v in values]
    batch = codec.decode_arrow_columns(records).tree
    want = mapped(codec, records)
    assert batch.equals(want) and str(batch.schema.field("x").type) == arrow_type


def test_declared_scalars_out_of_range_fall_back():
    records = [ExampleCodec([Feature("x", "int64", ())]).encode({"x": v})
               for v in [1, 2, 300, 4]]
    assert ExampleCodec([Feature("x", "uint8", ())]).decode_arrow_columns(records) is None


def test_declared_scalar_byte_strings_are_a_binary_column():
    codec = ExampleCodec([Feature("w", object, ()), Feature("n", "int64", (2,))])
    records = [codec.encode({"w": np.array(b"x" * i, object), "n": np.array([i, -i])})
               for i in range(5)]
    batch = codec.decode_arrow_columns(records).tree
    assert batch.equals(mapped(codec, records))
    assert str(batch.schema.field("w").type) == "binary"


@pytest.mark.parametrize("make", [
    lambda i: {"w": np.array([], object), "n": i},  # no byte string in the whole chunk
    lambda i: {"v": np.zeros(i % 2, np.float32).astype(np.float16)},  # declared float16
])
def test_what_doesnt_map_simply_falls_back(make):
    features = [Feature("v", "float16", (None,))] if "v" in make(0) else None
    codec = ExampleCodec(features)
    records = [codec.encode(make(i)) for i in range(6)]
    assert codec.decode_arrow_columns(records) is None


_FEATURES = {
    "fixed_f": lambda rng, i: rng.standard_normal(3).astype(np.float32),
    "ragged_f": lambda rng, i: rng.standard_normal(i % 4).astype(np.float32),
    "fixed_i": lambda rng, i: rng.integers(-(2**40), 2**40, 2),
    "ragged_i": lambda rng, i: rng.integers(-9, 9, (i * 7) % 3 + 1),
    "bytes": lambda rng, i: np.array([bytes(rng.integers(0, 256, i % 5, np.uint8))] * (i % 3),
                                     object),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.sets(st.sampled_from(sorted(_FEATURES)), min_size=1),
       n=st.integers(4, 40), seed=st.integers(0, 2**31))
def test_chunks_of_examples_decode_to_the_arrow_of_their_instances(kinds, n, seed):
    rng = np.random.default_rng(seed)
    codec = ExampleCodec()
    rows = [{k: _FEATURES[k](rng, i) for k in sorted(kinds)} for i in range(n)]
    records = [codec.encode(row) for row in rows]
    got = codec.decode_arrow_columns(records)
    want = mapped(codec, records)
    if got is None:  # only a feature with no value in the whole chunk
        assert any(not sum(len(row[k]) for row in rows) for k in kinds)
        return
    batch = got.tree if isinstance(got.tree, pa.RecordBatch) else record_batch(got.tree)
    assert batch.equals(want) and batch.schema.equals(want.schema, check_metadata=True)


@pytest.mark.parametrize("shuffle", [False, True])
def test_example_sets_read_as_arrow_equal_read(mem_url, shuffle):
    # convert deals instances to shards in turn: counts vary within each shard
    data = [{"i": i, "f": np.arange(i // 3 % 4, dtype=np.float32),
             "b": np.array([b"ab"] * (i // 3 % 3), object)} for i in range(300)]
    convert(mem_url, data, 3, "e", codec="example", chunk_bytes=1000, progress=False)
    read = RecordIO(f"{mem_url}/e-*", shuffle=shuffle, seed=4)
    read.set_epoch(0)
    expected = list(read())
    got = list(read.batches(32, format="arrow"))
    assert_rows(pa.Table.from_batches(got), expected)
    assert equal([r for b in got for r in b.to_pylist()],
                 [r for b in map(record_batch, read.batches(32)) for r in b.to_pylist()])


def test_the_golden_tfrecord_file_read_as_arrow(tmp_path):
    shutil.copy(DATA / "example" / "examples.tfrecord", tmp_path / "golden.tfrecord")
    read = RecordIO(str(tmp_path / "golden.tfrecord"), codec="example")
    table = read.to_arrow()
    assert_rows(table, list(read()))
    want = mapped(ExampleCodec(), tfrecord_records(
        (DATA / "example" / "examples.tfrecord").read_bytes()))
    assert table.combine_chunks().equals(pa.Table.from_batches([want]))


def _example_rows(n: int) -> list[dict]:
    return [{"i": i, "f": np.arange(i // 3 % 4, dtype=np.float32),
             "b": np.array([b"ab" * (i % 4)] * (i // 3 % 3), object),
             "v": np.full(2, i, np.float32)} for i in range(n)]


@pytest.mark.parametrize("container", ["recordio", "tfrecord"])
@pytest.mark.parametrize("options", [
    {},
    {"shuffle": True, "seed": 5, "shuffle_buffer": 37},
    {"rank": 1, "world_size": 3},
    {"rank": 0, "world_size": 2, "shuffle": True, "seed": 1, "num_threads": 2},
    {"split": "range", "rank": 1, "world_size": 2},
])
def test_example_sets_as_arrow_on_every_reader_option(mem_url, container, options):
    convert(mem_url, _example_rows(400), 3, "e", codec="example", format=container,
            chunk_bytes=1500, progress=False)
    read = RecordIO(f"{mem_url}/e-*", **options)
    read.set_epoch(2)
    expected = list(read())
    assert_rows(read.to_arrow(), expected)
    batches = list(read.batches(50, format="arrow"))
    assert_rows(pa.Table.from_batches(batches), expected)
    assert equal([r for b in batches for r in b.to_pylist()],
                 [r for b in map(record_batch, read.batches(50)) for r in b.to_pylist()])


def test_an_example_set_resumed_and_damaged_as_arrow(tmp_path):
    convert(str(tmp_path), _example_rows(400), 2, "d", codec="example", chunk_bytes=1500,
            progress=False)
    assert_resumed_as_read(str(tmp_path / "d-*"))
    assert_skipped_as_read(tmp_path, 400)
