"""``ExampleCodec.decode_columns``: a chunk parsed at once equals ``collate(decode_many)``.

Property tests over random Examples: one feature set or several within a chunk, int64 /
float / bytes lists, fixed and varying value counts, declared features of every numeric
dtype and shape, and damaged records (the columns are then ``None`` — the per-record path
raises — or exactly the per-record values).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep.batching import collate
from recprep.codecs.example import ExampleCodec, parse_chunk
from recprep.codecs.example.columns import CHUNK_PARSE_MIN_RECORDS as MIN_RECORDS
from recprep.codecs.features import Feature
from recprep.errors import DecodeError

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
NAMES = st.text(alphabet="ab\u00e9_", min_size=1, max_size=3)
KINDS = ("int64", "float32", "bytes")


def assert_same(got, want, where="batch"):
    """Equal in type, dtype, shape and value, all the way down."""
    assert type(got) is type(want), f"{where}: {type(got)} vs {type(want)}"
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype, f"{where}: {got.dtype} vs {want.dtype}"
        assert got.shape == want.shape, f"{where}: {got.shape} vs {want.shape}"
        if want.dtype.kind == "O":
            assert got.tolist() == want.tolist(), where
        else:
            assert np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"), where
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} vs {list(want)}"
        for key in want:
            assert_same(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def _values(draw, kind, count):
    if kind == "int64":
        return np.array(draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=count,
                                      max_size=count)), np.int64)
    if kind == "float32":
        return np.array(draw(st.lists(st.floats(width=32, allow_nan=False), min_size=count,
                                      max_size=count)), np.float32)
    return np.array(draw(st.lists(st.binary(max_size=6), min_size=count, max_size=count)),
                    dtype=object)


@st.composite
def layouts(draw):
    """A feature set: ``{name: (kind, count or None for varying)}``."""
    names = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    return {n: (draw(st.sampled_from(KINDS)), draw(st.one_of(st.none(), st.integers(0, 5))))
            for n in names}


@st.composite
def chunks(draw, mixed=False):
    """Records of one layout (or, ``mixed``, of two), each encoded by ExampleCodec."""
    layout = draw(layouts())
    other = draw(layouts()) if mixed else layout
    n = draw(st.integers(1, 12))
    records = []
    for _ in range(n):
        chosen = draw(st.sampled_from([layout, other]))
        instance = {name: _values(draw, kind, count if count is not None else
                                  draw(st.integers(0, 4)))
                    for name, (kind, count) in chosen.items()}
        records.append(ExampleCodec().encode(instance))
    return records


def check(codec, records):
    """decode_columns is None or equals collate(decode_many); returns the columns."""
    cols = codec.decode_columns(records)
    if cols is not None:
        assert cols.n == len(records)
        assert_same(cols.tree, collate(codec.decode_many(records)))
    return cols


@SETTINGS
@given(chunks())
def test_one_layout_decodes_whole_and_equals_collate(records):
    cols = check(ExampleCodec(), records)
    assert (cols is None) == (len(records) < MIN_RECORDS)  # one layout: always at once


@SETTINGS
@given(chunks(mixed=True))
def test_mixed_layouts_give_none_or_the_same_columns(records):
    check(ExampleCodec(), records)


@SETTINGS
@given(chunks(), st.data())
def test_damaged_records_give_none_or_the_per_record_values(records, data):
    victim = data.draw(st.integers(0, len(records) - 1))
    record = bytearray(records[victim])
    how = data.draw(st.sampled_from(["flip", "cut", "extend"]))
    if how == "flip":
        at = data.draw(st.integers(0, len(record) - 1))
        record[at] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del record[data.draw(st.integers(0, len(record) - 1)):]
    else:
        record += data.draw(st.binary(min_size=1, max_size=4))
    records[victim] = bytes(record)
    codec = ExampleCodec()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            codec.decode_many(records)
        except DecodeError:
            assert codec.decode_columns(records) is None  # the per-record path raises
            return
    if caught:  # protobuf's merge rules at work: only the per-record path warns
        assert codec.decode_columns(records) is None
    else:
        check(codec, records)


DECLARED = [("int64", 2**62), ("int8", 100), ("uint8", 200), ("bool", 1), ("uint64", 2**62),
            ("float32", None), ("float16", None), ("int16", 30000)]
SHAPES = [(), (3,), (None,), (None, 2), (2, 2)]


@st.composite
def declared(draw):
    chosen = draw(st.lists(st.tuples(st.sampled_from(DECLARED), st.sampled_from(SHAPES)),
                           min_size=1, max_size=3))
    features = [Feature(f"f{i}", dtype, shape) for i, ((dtype, _), shape) in enumerate(chosen)]
    n = draw(st.integers(MIN_RECORDS, 10))
    codec = ExampleCodec(features)
    records = []
    for _ in range(n):
        values = {}
        for f, ((_, top), _) in zip(features, chosen, strict=True):
            shape = tuple(draw(st.integers(0, 3)) if d is None else d for d in f.shape)
            size = int(np.prod(shape))
            if top is None:
                flat = draw(st.lists(st.floats(-1e4, 1e4, width=16), min_size=size,
                                     max_size=size))
            else:
                flat = draw(st.lists(st.integers(0, top), min_size=size, max_size=size))
            values[f.name] = np.array(flat, f.dtype).reshape(shape)
        records.append(codec.encode(values))
    return codec, records


@SETTINGS
@given(declared())
def test_declared_features_equal_collate(case):
    codec, records = case
    assert check(codec, records) is not None


def test_declared_values_out_of_range_give_none_and_the_per_record_error():
    wide = ExampleCodec([Feature("x", "int64")])
    records = [wide.encode({"x": v}) for v in (1, 2, 300, 4)]
    narrow = ExampleCodec([Feature("x", "uint8")])
    assert narrow.decode_columns(records) is None
    with pytest.raises(DecodeError, match="outside"):
        narrow.decode_many(records)
    assert narrow.decode_columns(records[:2] * 2).tree["x"][0].shape == ()  # 0-d: a list


def test_fixed_floats_are_strided_not_per_record():
    codec = ExampleCodec()
    rng = np.random.default_rng(0)
    records = [codec.encode({"image": rng.random(784).astype(np.float32), "label": i % 10})
               for i in range(64)]
    cols = check(codec, records)
    assert cols.tree["image"].shape == (64, 784) and cols.tree["label"].shape == (64, 1)
    assert cols.signature == ExampleCodec().decode_columns(records[:8]).signature


def test_parse_chunk_reads_only_wanted_features_and_counts_values():
    codec = ExampleCodec()
    records = [codec.encode({"w": np.array([b"x" * i] * (i % 3), dtype=object),
                          "n": np.arange(i)}) for i in range(6)]
    found = parse_chunk(records, wanted=["w"])
    assert list(found) == ["w"]
    assert found["w"].counts.tolist() == [0, 1, 2, 0, 1, 2]
    assert found["w"].strings() == [b"x", b"xx", b"xx", b"xxxx", b"xxxxx", b"xxxxx"]
    assert parse_chunk(records)["n"].counts.tolist() == list(range(6))


def test_a_protobuf_form_the_walk_doesnt_take_falls_back():
    # "x" as two map entries: protobuf keeps the last; the per-record path warns
    entry = bytes.fromhex("0a0b0a0178120612040a020102")
    record = bytes([0x0A, 2 * len(entry)]) + entry + entry
    assert ExampleCodec().decode_columns([record] * 4) is None


class Spans(list):
    """Records as spans of one payload (what a container hands over), padded apart."""

    def __init__(self, records):
        super().__init__(records)
        self.payload = b"".join(b"\0" * 3 + r for r in records)
        sizes = np.array([len(r) for r in records])
        self.ends = np.cumsum(sizes + 3)
        self.starts = self.ends - sizes


@SETTINGS
@given(chunks())
def test_spans_of_a_payload_parse_as_the_records(records):
    codec = ExampleCodec()
    cols = codec.decode_columns(Spans(records))
    assert (cols is None) == (len(records) < MIN_RECORDS)
    if cols is not None:
        assert_same(cols.tree, codec.decode_columns(records).tree)
