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
from recprep.codecs.example.wire import read_len, varint
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


# -- the entries' heads read at once (chunk._entries_at_once) ----------------------------------


def _field_by_field(records, wanted):
    """parse_chunk as it reads when no entry's head is taken at once."""
    from unittest import mock

    from recprep.codecs.example import chunk

    with mock.patch.object(chunk, "_entries_at_once", lambda *args: None):
        return parse_chunk(records, wanted)


def _same_values(got, want):
    if want is None:
        assert got is None
        return
    assert got is not None and list(got) == list(want)
    for name, values in want.items():
        mine = got[name]
        assert mine.kind == values.kind, name
        assert np.array_equal(mine.counts, values.counts), name
        assert np.array_equal(mine.flat(), values.flat()), name
        assert (mine.sizes is None) == (values.sizes is None), name
        if values.sizes is not None:
            assert np.array_equal(mine.sizes, values.sizes), name


def _field(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + varint(len(body)) + body


def _entries(record: bytes) -> list[tuple[bytes, bytes]]:
    """The ``(key, Feature message)`` of each map entry of an Example written by
    ExampleCodec (one field each)."""
    pos, end = read_len(record, 1, len(record))
    found = []
    while pos < end:
        start, stop = read_len(record, pos + 1, end)
        key_start, key_stop = read_len(record, start + 1, stop)
        value_start, value_stop = read_len(record, key_stop + 1, stop)
        found.append((record[key_start:key_stop], record[value_start:value_stop]))
        pos = stop
    return found


#: how one record's entry may differ from the layout the others follow: (key, Feature)
#: -> the entry's body
ODD = {
    "as written": lambda key, value: _field(0x0A, key) + _field(0x12, value),
    "renamed": lambda key, value: _field(0x0A, key[:-1] + b"~") + _field(0x12, value),
    "an entry field after": lambda key, value: (_field(0x0A, key) + _field(0x12, value)
                                               + b"\x1a\x00"),
    "value first": lambda key, value: _field(0x12, value) + _field(0x0A, key),
    "two lists": lambda key, value: _field(0x0A, key) + _field(0x12, value + value),
    "a list field after": lambda key, value: (_field(0x0A, key)
                                             + _field(0x12, value + b"\x22\x00")),
}


@st.composite
def long_or_short_chunks(draw):
    """Records of one layout whose lists are short (every length in an entry's head one
    byte) or long enough for two-byte lengths; maybe one record's entry laid out another
    way (ODD), or a byte of one record flipped; and the features to read."""
    layout = draw(layouts())
    long = draw(st.sampled_from(["never", "sometimes", "always"]))
    records = []
    for _ in range(draw(st.integers(1, 8))):
        instance = {}
        for name, (kind, count) in layout.items():
            if long == "always" or (long == "sometimes" and draw(st.booleans())):
                count = draw(st.integers(33, 70))  # over 127 bytes of floats or strings
            elif count is None:
                count = draw(st.integers(0, 4))
            instance[name] = _values(draw, kind, count)
        records.append(ExampleCodec().encode(instance))
    victim = draw(st.integers(0, len(records) - 1))
    how = draw(st.sampled_from(["flipped byte", *ODD]))
    if how == "flipped byte":
        record = records[victim]
        at = draw(st.integers(0, len(record) - 1))
        records[victim] = record[:at] + bytes((record[at] ^ draw(st.integers(1, 255)),)) + (
            record[at + 1:])
    else:
        entries = _entries(records[victim])
        odd = draw(st.integers(0, len(entries) - 1))
        body = b"".join(_field(0x0A, (ODD[how] if i == odd else ODD["as written"])(k, v))
                        for i, (k, v) in enumerate(entries))
        records[victim] = _field(0x0A, body)
    wanted = draw(st.one_of(st.none(), st.lists(st.sampled_from(sorted(layout)), unique=True)))
    return records, wanted


@settings(SETTINGS, max_examples=200)
@given(long_or_short_chunks())
def test_heads_read_at_once_give_what_the_field_by_field_walk_gives(case):
    records, wanted = case
    _same_values(parse_chunk(records, wanted), _field_by_field(records, wanted))


def test_short_heads_are_read_at_once_and_long_ones_field_by_field():
    from unittest import mock

    from recprep.codecs.example import chunk

    codec = ExampleCodec()
    records = [codec.encode({"id": i, "score": np.float32(i / 4), "word": b"w" * (i % 5)})
               for i in range(20)]
    with mock.patch.object(chunk, "_entry_fields", side_effect=AssertionError("field by field")):
        found = parse_chunk(records, ["score", "word"])
    assert found["score"].flat().tolist() == [i / 4 for i in range(20)]
    assert found["word"].strings() == [b"w" * (i % 5) for i in range(20)]
    records = [codec.encode({"emb": np.full(40, i, np.float32), "id": i}) for i in range(20)]
    with mock.patch.object(chunk, "_entry_fields", wraps=chunk._entry_fields) as walk:
        found = parse_chunk(records)
    assert walk.call_count == 1  # "emb": 160 bytes of floats, two-byte lengths
    assert found["emb"].values.tolist() == [[float(i)] * 40 for i in range(20)]
    assert found["id"].flat().tolist() == list(range(20))
