"""Codecs: exact round trips, determinism, the recprep wire format, and every way to fail."""

from __future__ import annotations

import collections
import enum
import math
import pickle
import struct
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from recprep.codecs import Codec, available_codecs, get_codec, register_codec
from recprep.codecs.pickle import PickleCodec
from recprep.codecs.raw import RawCodec
from recprep.codecs.recprep import FORMAT_TAG, MAX_DEPTH, RecprepCodec
from recprep.errors import DecodeError, EncodeError, InvalidArgumentError, PickleRefusedError

CODEC = RecprepCodec()
SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Color(enum.IntEnum):
    RED = 1


class MyArray(np.ndarray):
    pass


class SubSet(set):
    pass


# ---------------------------------------------------------------------------- helpers


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _expected_layout(a: np.ndarray) -> tuple[bool, bool]:
    """(C, F) contiguity a decoded copy of ``a`` must have."""
    if a.flags.c_contiguous:
        return True, a.flags.f_contiguous
    if a.flags.f_contiguous:
        return False, True
    return True, np.ndarray(a.shape, a.dtype).flags.f_contiguous


def assert_identical(a, b, path: str = "value") -> None:
    """Assert ``b`` is ``a``'s exact copy: same types all the way down, floats bit for bit."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if type(a) is float:
        assert _bits(a) == _bits(b), f"{path}: {a!r} != {b!r} (bits)"
    elif type(a) is complex:
        assert _bits(a.real) + _bits(a.imag) == _bits(b.real) + _bits(b.imag), path
    elif type(a) in (list, tuple):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{path}[{i}]")
    elif type(a) is dict:
        assert len(a) == len(b), f"{path}: {len(a)} keys != {len(b)}"
        for i, ((ka, va), (kb, vb)) in enumerate(zip(a.items(), b.items(), strict=True)):
            assert_identical(ka, kb, f"{path}.key{i}")
            assert_identical(va, vb, f"{path}[{ka!r}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.dtype.str == b.dtype.str, f"{path}: {a.dtype} {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert (b.flags.c_contiguous, b.flags.f_contiguous) == _expected_layout(a), path
        if a.dtype.kind in "fcmM":
            assert np.array_equal(a, b, equal_nan=True), path
        else:
            assert np.array_equal(a, b), path
        if a.dtype.char not in "gG":  # long double has padding bytes
            assert np.ascontiguousarray(a).tobytes() == b.tobytes(), f"{path}: bytes differ"
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype, f"{path}: {a.dtype} != {b.dtype}"
        if a.dtype.char in "gG":
            assert a == b or (np.isnan(a) and np.isnan(b)), path
        else:
            assert a.tobytes() == b.tobytes(), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def roundtrip(value, **kw):
    record = CODEC.encode(value)
    assert record[0] == FORMAT_TAG
    assert CODEC.encode(value) == record, "encoding is not deterministic"
    decoded = CODEC.decode(record, **kw)
    assert_identical(value, decoded)
    assert CODEC.encode(decoded) == record, "re-encoding the decoded value differs"
    return decoded


# ---------------------------------------------------------------------------- strategies

any_float = st.floats() | st.integers(0, 2**64 - 1).map(
    lambda i: struct.unpack("<d", struct.pack("<Q", i))[0]  # every bit pattern: NaN payloads
) | st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan])
any_int = (st.integers(-(2**63), 2**63 - 1) | st.integers(-(2**300), 2**300)
           | st.sampled_from([2**63, -(2**63) - 1, 2**64, -(2**64), 255, -256]))
any_text = st.text(st.characters(exclude_categories=()))  # lone surrogates included
hashable = st.none() | st.booleans() | any_int | any_float | any_text | st.binary()
keys = st.recursive(hashable, lambda c: st.lists(c, max_size=3).map(tuple), max_leaves=6)
scalars = (hashable | st.builds(complex, any_float, any_float)
           | st.binary().map(bytearray))
values = st.recursive(
    scalars,
    lambda c: (st.lists(c, max_size=6) | st.lists(c, max_size=6).map(tuple)
               | st.dictionaries(keys, c, max_size=5)),
    max_leaves=30,
)
packable_item = st.booleans() | any_int | any_float | any_text | st.binary()
packable = st.lists(packable_item, max_size=70)

endian = "?"
dtypes = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness=endian),
    hnp.unsigned_integer_dtypes(endianness=endian),
    hnp.floating_dtypes(endianness=endian, sizes=(16, 32, 64, 128)),
    hnp.complex_number_dtypes(endianness=endian, sizes=(64, 128, 256)),
    hnp.datetime64_dtypes(min_period="as", endianness=endian),
    hnp.timedelta64_dtypes(min_period="as", endianness=endian),
    hnp.unicode_string_dtypes(endianness=endian, min_len=1, max_len=5),
    hnp.byte_string_dtypes(min_len=1, max_len=5),
)


@st.composite
def arrays(draw):
    a = draw(hnp.arrays(draw(dtypes), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0,
                                                      max_side=4)))
    layout = draw(st.sampled_from(["C", "F", "T", "step", "slice"]))
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "T":
        a = a.T
    elif layout == "step" and a.ndim:
        a = a[::2]
    elif layout == "slice" and a.ndim >= 2:
        a = a[:, 1:]
    return a


# ---------------------------------------------------------------------------- round trips


@SETTINGS
@given(values)
def test_roundtrip_nested_values(value):
    roundtrip(value)


@SETTINGS
@given(packable, st.booleans())
def test_roundtrip_packable_sequences(items, as_tuple):
    value = tuple(items) if as_tuple else items
    roundtrip(value)
    roundtrip({"nested": value, "again": [value]})


@SETTINGS
@given(st.dictionaries(packable_item, packable_item, max_size=40))
def test_roundtrip_packable_dicts(value):
    roundtrip(value)
    roundtrip([value, (value,)])


@SETTINGS
@given(arrays())
def test_roundtrip_arrays(a):
    b = roundtrip(a)
    assert b.flags.writeable and b.flags.owndata
    roundtrip((a, 7, [a]))


@SETTINGS
@given(arrays().filter(lambda a: a.ndim == 0))
def test_roundtrip_numpy_scalars(a):
    scalar = a[()]
    decoded = roundtrip(scalar)
    assert type(decoded) is type(scalar)


@pytest.mark.parametrize("value", [
    None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**400, -(10**400),
    0.0, -0.0, math.inf, -math.inf, math.nan, struct.unpack("<d", bytes.fromhex("0100f87f" * 2))[0],
    1 + 2j, complex(-0.0, math.nan), "", "é\ud800x\udfff", b"", b"\x00\xff", bytearray(b"ab"),
    (), [], {}, ((),), [[]], {(): {}}, {1: "a", "1": 1, 1.5: None, None: [b""]},
    (1, 2**64, "x"), [True, 1, 1.0, "1", b"1"], (None, 1), [1.0] * 784, ["ab", "c"] * 100,
    np.float16(1.5), np.float32(-0.0), np.longdouble("1.1"), np.clongdouble(1 + 1j),
    np.int8(-1), np.uint64(2**64 - 1), np.bool_(True), np.datetime64("2020-01-01T12", "h"),
    np.datetime64("NaT"), np.timedelta64(5, "ns"), np.datetime64(3, "10s"),
    np.str_(""), np.str_("a\x00"), np.bytes_(b"b\x00"), np.complex64(1j),
    np.array(3.5), np.zeros((0, 3)), np.zeros((2, 0, 3), order="F"), np.arange(12).reshape(3, 4).T,
    np.arange(24, dtype=">i4").reshape(2, 3, 4)[:, ::2], np.array(["a", "bc"], dtype=">U2"),
    np.array([b"x"], "S3"), np.array(["2020", "NaT"], "M8[D]"), np.array(["NaT"], "M8"),
    np.array([1, 2], "m8[W]"),
    np.array([True, False]), np.ones((2, 2), np.longdouble), np.arange(6.0).reshape(1, 6),
], ids=repr)
def test_roundtrip_examples(value):
    roundtrip(value)


def test_numpy_longlong_comes_back_as_int64_like_numpy_pickles_it():
    assert type(CODEC.decode(CODEC.encode(np.longlong(3)))) is np.int64
    assert type(pickle.loads(pickle.dumps(np.longlong(3)))) is np.int64
    assert CODEC.decode(CODEC.encode(np.array([1], np.longlong))).dtype == np.int64


def test_exact_types_are_not_confused():
    decoded = CODEC.decode(CODEC.encode([1, True, 1.0, np.float64(1.0), np.int64(1), "1", b"1",
                                         bytearray(b"1"), np.str_("1"), np.bytes_(b"1")]))
    assert [type(v) for v in decoded] == [int, bool, float, np.float64, np.int64, str, bytes,
                                          bytearray, np.str_, np.bytes_]


def test_depth_limit_is_exactly_max_depth():
    for innermost in ([], (), {}, [1, 2], (1.5, "x"), {"k": None}):
        value = innermost
        for i in range(MAX_DEPTH - 1):
            value = [value] if i % 3 == 0 else (value, None) if i % 3 == 1 else {"k": value}
        record = CODEC.encode(value)  # MAX_DEPTH levels: fine
        assert CODEC.encode(CODEC.decode(record)) == record
        for wrap in (lambda v: [v], lambda v: (v, None), lambda v: {"k": v}):
            with pytest.raises(EncodeError, match="deeper than"):
                CODEC.encode(wrap(value))


def test_self_containing_value_is_an_encode_error():
    loop: list = [1]
    loop.append(loop)
    with pytest.raises(EncodeError):
        CODEC.encode(loop)


def test_decoded_arrays_are_writable_copies_of_the_record():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    buffer = bytearray(CODEC.encode([a, np.asfortranarray(a)]))
    for record in (bytes(buffer), memoryview(buffer), buffer):
        b, f = CODEC.decode(record)
        assert b.flags.writeable and b.flags.owndata and f.flags.f_contiguous
        assert not np.shares_memory(b, np.frombuffer(buffer, np.uint8))
        b[0, 0] = 42.0
    buffer[-4:] = b"\xff" * 4
    assert_identical(CODEC.decode(memoryview(CODEC.encode(a))), a)


def test_wire_format_is_pinned():
    assert CODEC.encode((1, "a")).hex(" ") == (
        "f1 0e 02 00 00 00 71 73 01 00 00 00 00 00 00 00 01 00 00 00 61")
    golden = [
        (None, "f100"), (True, "f102"), (False, "f101"), (1, "f1030100000000000000"),
        (2**64, "f10409000000" + "00" * 8 + "01"), (-0.0, "f1050000000000000080"),
        (1j, "f106" + "00" * 8 + "000000000000f03f"), ("é", "f10702000000c3a9"),
        (b"\x00", "f1080100000000"), ((), "f10b00000000"), ((None,), "f10b0100000000"),
        (np.float32(1), "f11103" + b"<f4".hex() + "0000803f"),
        ([True, 2.0], "f10d02000000" + b"?d".hex() + "01" + "000000000000" + "0040"),
        ({"a": 1}, "f10f01000000" + b"sq".hex() + "01000000" + "0100000000000000" + "61"),
        ({"a": None}, "f10c01000000" + "0701000000" + "61" + "00"),
    ]
    for value, expected in golden:
        assert CODEC.encode(value).hex() == expected, value
    assert CODEC.encode(bytearray(b"a")).hex() == "f1090100000061"
    assert CODEC.encode([[], {}]).hex() == "f10a020000000a000000000c00000000"
    assert CODEC.encode(np.arange(2, dtype="<i2")).hex() == (
        "f11003" + b"<i2".hex() + "0100" + "0200000000000000" + "0400000000000000" + "00000100")


# ---------------------------------------------------------------------------- pickle policy


@pytest.mark.parametrize("value", [
    collections.OrderedDict(a=1), Color.RED, np.arange(3).view(MyArray),
    np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]), np.array([None, "x"], dtype=object),
    np.zeros(2, "V3"), range(3), np.zeros(1)[0:1].view(MyArray),
    np.zeros(2, np.dtype("f8", metadata={"m": 1})), SubSet({1}),
], ids=lambda v: type(v).__name__)
def test_everything_else_is_pickled_and_needs_allow_pickle(value):
    for wrapped in (value, [1, {"k": value}]):
        CODEC.drain_pickled()
        record = CODEC.encode(wrapped)
        kind = type(value)
        assert CODEC.drain_pickled() == [f"{kind.__module__}.{kind.__qualname__}"]
        with pytest.raises(PickleRefusedError):
            CODEC.decode(record)
        decoded = CODEC.decode(record, allow_pickle=True)
        inner = decoded if wrapped is value else decoded[1]["k"]
        assert type(inner) is type(value)
        if isinstance(value, np.ndarray):
            assert inner.dtype == value.dtype and inner.shape == value.shape
            if value.dtype.hasobject:
                assert inner.tolist() == value.tolist()
            else:
                assert inner.tobytes() == value.tobytes()
        else:
            assert inner == value


def test_unpicklable_value_is_an_encode_error():
    with pytest.raises(EncodeError, match="lock"):
        CODEC.encode((1, threading.Lock()))


def test_bad_pickle_payload_is_a_decode_error():
    record = bytes([FORMAT_TAG, 0x14]) + struct.pack("<I", 3) + b"\x80\x05X"
    with pytest.raises(PickleRefusedError):
        CODEC.decode(record)
    with pytest.raises(DecodeError, match="unpickling failed"):
        CODEC.decode(record, allow_pickle=True)


# ---------------------------------------------------------------------------- malformed records

VALID = [
    CODEC.encode(v) for v in [
        (1, 2.5, "item-1"), [1, None, (2**70, "x"), {"k": b"v", 3: bytearray(b"w")}],
        {"x": np.arange(6, dtype=">f4").reshape(2, 3).T, "y": np.datetime64(1, "D")},
        [np.str_("ab"), np.bytes_(b"c"), 1j, -(2**80), True, False],
        ("a" * 30, b"b" * 3, 7) * 3, [1.0] * 100, {"user": 1, "score": 0.5, "name": "x"},
        [*range(50), *"abcdefghijklmnopqrstuvwxyz", b"b"], {str(i): i for i in range(40)},
    ]
]


def test_empty_record():
    with pytest.raises(DecodeError, match="empty"):
        CODEC.decode(b"")


@pytest.mark.parametrize("record, hint", [
    (pickle.dumps((1, 2), protocol=4), "looks like a pickle"),
    (b"\x0a\x05hello", "codec='raw'"),
    (b"\xf2\x00", "codec='raw'"),  # no pickle starts with 0xf2
])
def test_wrong_format_tag(record, hint):
    with pytest.raises(DecodeError, match="not recprep-encoded") as err:
        CODEC.decode(record)
    assert hint in str(err.value)


@pytest.mark.parametrize("record", VALID, ids=range(len(VALID)))
def test_every_truncation_is_a_decode_error(record):
    assert CODEC.decode(record) is not None
    for end in range(len(record)):
        with pytest.raises(DecodeError):
            CODEC.decode(record[:end])


@pytest.mark.parametrize("record", VALID, ids=range(len(VALID)))
def test_trailing_bytes_are_a_decode_error(record):
    with pytest.raises(DecodeError, match="trailing"):
        CODEC.decode(record + b"\x00")


def _array_record(dtype: bytes, shape: tuple[int, ...], nbytes: int, data: bytes = b"",
                  order: int = 0) -> bytes:
    head = bytes([FORMAT_TAG, 0x10, len(dtype)]) + dtype + bytes([len(shape), order])
    return head + struct.pack(f"<{len(shape)}QQ", *shape, nbytes) + data


@pytest.mark.parametrize("record, message", [
    (bytes([FORMAT_TAG, 0x7F]), "unknown type tag 0x7f"),
    (bytes([FORMAT_TAG, 0x0A, 1, 0, 0, 0, 0xEE]), "unknown type tag 0xee"),
    (_array_record(b"<f3", (1,), 3, b"abc"), "invalid dtype"),
    (_array_record(b"xyz", (1,), 3, b"abc"), "invalid dtype"),
    (_array_record(b"float64", (1,), 8, b"a" * 8), "invalid dtype"),
    (_array_record(b"|O8", (1,), 8, b"a" * 8), "invalid dtype"),
    (_array_record(b"|O", (1,), 8, b"a" * 8), "invalid dtype"),
    (_array_record(b"<i4,|O8", (1,), 12, b"a" * 12), "invalid dtype"),
    (_array_record(b"[('a', 'O')]", (1,), 8, b"a" * 8), "invalid dtype"),
    (_array_record(b"|V8", (1,), 8, b"a" * 8), "invalid dtype"),
    (_array_record(b"<U0", (2**30,), 0), "invalid dtype"),
    (_array_record(b"<f8", (2**63, 2**63), 0), "isn't 0 bytes"),
    (_array_record(b"<f8", (2**32, 2**32), 0), "isn't 0 bytes"),
    (_array_record(b"<f8", (0, 2**64 - 1), 0), "malformed"),
    (_array_record(b"<f8", (2,), 16, b"a" * 8), "needs 16 bytes"),
    (_array_record(b"<f8", (1,), 8, b"a" * 8, order=2), "order flag"),
    (bytes([FORMAT_TAG, 0x11, 2]) + b"|O" + b"\x00" * 8, "invalid dtype"),
    (bytes([FORMAT_TAG, 0x11, 3]) + b"<U1" + b"\x00" * 4, "not allowed"),
    (bytes([FORMAT_TAG, 0x0E, 2, 0, 0, 0]) + b"qz" + b"\x00" * 16, "item codes"),
    (bytes([FORMAT_TAG, 0x0E, 0, 0, 0, 0]), "0 items|item codes"),
    (bytes([FORMAT_TAG, 0x07, 2, 0, 0, 0, 0xFF, 0xFF]), "malformed"),
    (bytes([FORMAT_TAG, 0x0C, 1, 0, 0, 0, 0x0A, 0, 0, 0, 0, 0x00]), "unhashable"),
    (bytes([FORMAT_TAG, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x00]), "claims"),
])
def test_malformed_records(record, message):
    with pytest.raises(DecodeError, match=message) as err:
        CODEC.decode(record, allow_pickle=True)
    assert "of the record" in str(err.value)


@pytest.mark.parametrize("header", [b"\x0a\x01\x00\x00\x00", b"\x0b\x01\x00\x00\x00",
                                    b"\x0c\x01\x00\x00\x00\x00"])
def test_a_million_nesting_levels_is_a_decode_error_not_a_crash(header):
    record = bytes([FORMAT_TAG]) + header * 1_000_000 + b"\x00"
    with pytest.raises(DecodeError, match="deeper than"):
        CODEC.decode(record)


def test_decoding_max_depth_works_and_one_more_does_not():
    record = bytes([FORMAT_TAG]) + b"\x0a\x01\x00\x00\x00" * (MAX_DEPTH - 1) + b"\x0a\0\0\0\0"
    assert CODEC.encode(CODEC.decode(record)) == record
    record = bytes([FORMAT_TAG]) + b"\x0a\x01\x00\x00\x00" * MAX_DEPTH + b"\x0e\1\0\0\0q" + bytes(8)
    with pytest.raises(DecodeError, match="deeper than"):
        CODEC.decode(record)


@SETTINGS
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_fail_cleanly(tail):
    for record in (bytes([FORMAT_TAG]) + tail, bytes([FORMAT_TAG, tail[0] % 0x16]) + tail[1:]
                   if tail else b""):
        try:
            CODEC.decode(record)
        except (DecodeError, PickleRefusedError):
            pass


@SETTINGS
@given(st.sampled_from(VALID), st.data())
def test_corrupted_records_decode_or_fail_cleanly(record, data):
    i = data.draw(st.integers(1, len(record) - 1))
    byte = data.draw(st.integers(0, 255))
    try:
        CODEC.decode(record[:i] + bytes([byte]) + record[i + 1 :])
    except (DecodeError, PickleRefusedError):
        pass


def test_encode_error_for_too_long_values(monkeypatch):
    import recprep.codecs.recprep.encode as module

    def too_long(tag, n):
        if n > 3:
            raise struct.error("'I' format requires 0 <= number <= 4294967295")
        return struct.pack("<BI", tag, n)

    monkeypatch.setattr(module, "_pack_tag_u32", too_long)
    with pytest.raises(EncodeError, match="too long"):
        CODEC.encode({"k": "abcdef", "n": None})


# ---------------------------------------------------------------------------- pickle codec


def test_pickle_codec_writes_what_paddle_v2_reads():
    codec = PickleCodec()
    record = codec.encode((np.arange(3), 1, "a"))
    assert record[:2] == b"\x80\x04"
    value = pickle.loads(record)
    assert value[1:] == (1, "a") and value[0].tolist() == [0, 1, 2]
    assert codec.encode((1, "a")) == pickle.dumps((1, "a"), protocol=4)


def test_pickle_codec_falls_back_to_cloudpickle():
    def make():
        class Local:
            def __init__(self):
                self.v = 3

        return Local()

    codec = PickleCodec()
    assert codec.decode(codec.encode(lambda x: x + 1), allow_pickle=True)(1) == 2
    assert codec.decode(codec.encode(make()), allow_pickle=True).v == 3
    with pytest.raises(EncodeError, match="lock"):
        codec.encode(threading.Lock())


def test_pickle_codec_policy_and_errors():
    codec = PickleCodec()
    record = codec.encode({"a": 1})
    with pytest.raises(PickleRefusedError, match="allow_pickle=True"):
        codec.decode(record)
    assert codec.decode(memoryview(record), allow_pickle=True) == {"a": 1}
    with pytest.raises(DecodeError, match="not a valid pickle"):
        codec.decode(record[:-3], allow_pickle=True)
    with pytest.raises(DecodeError):
        codec.decode(b"", allow_pickle=True)


# ---------------------------------------------------------------------------- raw codec


@pytest.mark.parametrize("value", [b"", b"abc", bytearray(b"\x00x"), memoryview(b"mv")])
def test_raw_codec_roundtrip(value):
    codec = RawCodec()
    record = codec.encode(value)
    assert type(record) is bytes and record == bytes(value)
    decoded = codec.decode(memoryview(record))
    assert type(decoded) is bytes and decoded == bytes(value)


@pytest.mark.parametrize("value", [(b"a",), "text", 3, np.frombuffer(b"ab", np.uint8), None])
def test_raw_codec_refuses_other_instances(value):
    with pytest.raises(EncodeError, match="codec='raw' takes bytes-like") as err:
        RawCodec().encode(value)
    assert type(value).__name__ in str(err.value) and "codec='recprep'" in str(err.value)


# ---------------------------------------------------------------------------- registry


def test_builtin_codecs_are_registered():
    assert {"recprep", "pickle", "raw"} <= set(available_codecs())
    assert type(get_codec("recprep")) is RecprepCodec
    assert type(get_codec("pickle")) is PickleCodec
    assert type(get_codec("raw")) is RawCodec


#: values each codec must round-trip; bytes for the codecs that take anything bytes-like
CONTRACT_SAMPLES = {
    "example": [{"x": np.arange(3, dtype=np.int64)}, {"s": np.array([b"ab"], dtype=object)}],
}


def same_value(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("name", [*available_codecs()])
def test_codec_contract(name):
    """Every registered codec: exact round trip, deterministic, picklable, named."""
    codec = get_codec(name)
    assert codec.name == name
    samples = CONTRACT_SAMPLES.get(name, [b"", b"abc\x00"])
    for value in samples:
        record = codec.encode(value)
        assert isinstance(record, bytes) and record == codec.encode(value)
        assert same_value(value, codec.decode(record, allow_pickle=True))
    clone = pickle.loads(pickle.dumps(codec))
    assert type(clone) is type(codec) and clone.encode(samples[0]) == codec.encode(samples[0])
    assert repr(codec).startswith(f"{type(codec).__name__}(")


@pytest.mark.parametrize("bad", ["nope", None, 3])
def test_unknown_codec_lists_the_valid_ones(bad):
    with pytest.raises(InvalidArgumentError, match="valid codecs are") as err:
        get_codec(bad)
    for name in ("recprep", "pickle", "raw"):
        assert repr(name) in str(err.value)


def test_register_a_custom_codec():
    class Upper(Codec):
        name = "test-upper"

        def encode(self, instance):
            return instance.upper().encode()

        def decode(self, record, *, allow_pickle=False):
            return bytes(record).decode()

    register_codec(Upper.name, Upper, replace=True)
    try:
        assert "test-upper" in available_codecs()
        assert get_codec("test-upper").encode("ab") == b"AB"
        with pytest.raises(InvalidArgumentError, match="already registered"):
            register_codec("test-upper", Upper)
        codec = Upper()
        assert get_codec(codec) is codec
    finally:
        import recprep.codecs as registry

        registry._CODECS.pop("test-upper", None)


def test_import_after_packages_that_extend_numpy():
    """TensorFlow (via ml_dtypes) adds scalar types to numpy's tables that dtype.str can't
    rebuild; ElasticDL model files import TensorFlow first, so that must work."""
    import subprocess
    import sys

    pytest.importorskip("ml_dtypes")
    script = (
        "import ml_dtypes, numpy as np\n"
        "from recprep.codecs import get_codec\n"
        "c = get_codec('recprep')\n"
        "x = np.array(1.5, dtype=ml_dtypes.bfloat16)[()]\n"
        "y = c.decode(c.encode(x), allow_pickle=True)\n"
        "assert type(y) is type(x) and float(y) == 1.5\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.parametrize("name", ["recprep", "pickle", "raw"])
def test_decode_many_matches_decode(name):
    codec = get_codec(name)
    values = [(1, 2.0, "a"), (3, 4.0, "b"), [1, 2], (5, 6.0, "c"), {"k": (1, "x")}, (7, 8.0)]
    if name == "raw":
        values = [b"a", b"", b"xyz"]
    records = [codec.encode(v) for v in values]
    assert codec.decode_many(records, allow_pickle=True) == [
        codec.decode(r, allow_pickle=True) for r in records
    ]
    if name == "recprep":
        with pytest.raises(DecodeError):
            codec.decode_many([records[0], records[0][:-1]])


# ---------------------------------------------------------------- issue 23: codec packages


def test_the_pickle_note_belongs_to_the_codec_instance():
    """Each codec instance notes the types it pickled (no process global): another
    instance's drain gives nothing, a drain empties the note, each type comes once."""
    noting, other = RecprepCodec(), RecprepCodec()
    assert not noting.pickled_pending and noting.drain_pickled() == []
    record = noting.encode([range(2), {"k": range(3)}, {Color.RED, 2}])
    assert noting.pickled_pending and not other.pickled_pending
    assert other.drain_pickled() == []
    assert noting.drain_pickled() == ["builtins.range", f"{__name__}.Color"]
    assert not noting.pickled_pending and noting.drain_pickled() == []
    assert noting.decode(record, allow_pickle=True)[1] == {"k": range(3)}
    noting.encode((1, "a"))  # nothing pickled: nothing noted
    assert not noting.pickled_pending and noting.drain_pickled() == []
    for name in available_codecs():  # codecs without a fallback note nothing
        if name != "recprep":
            assert get_codec(name).drain_pickled() == []


def test_a_pickle_noted_in_a_set_keeps_the_bytes_of_the_set():
    """A set element pickled by the fallback: the note leaves the set's bytes (sorted by
    the elements' bytes) as they are."""
    codec = RecprepCodec()
    value = frozenset({Color.RED, 2, "b", range(1)})
    record = codec.encode(value)
    assert sorted(codec.drain_pickled()) == ["builtins.range", f"{__name__}.Color"]
    assert codec.encode(value) == record
    assert codec.decode(record, allow_pickle=True) == value


@pytest.mark.parametrize("name", ["recprep", "pickle", "raw", "example"])
def test_with_features_is_a_capability(name):
    """A codec that declares features answers with a codec checking them; the others with
    themselves (nothing outside the codecs asks which codec it is)."""
    codec = get_codec(name)
    shaped = codec.with_features([("x", "int64", (2,))])
    if name == "example":
        assert shaped.schema() == {"features": [{"name": "x", "dtype": "int64", "shape": [2]}]}
        assert shaped.decode(shaped.encode(([1, 2],)))["x"].tolist() == [1, 2]
    else:
        assert shaped is codec


def test_the_example_package_has_the_columnar_api_spark_uses():
    import recprep.codecs.example as example

    records = [example.ExampleCodec().encode({"id": i, "w": f"w{i}"}) for i in range(4)]
    parsed = example.parse_chunk(records)
    assert isinstance(parsed["id"], example.Values) and parsed["id"].kind == example.INTS
    assert parsed["w"].strings() == [b"w0", b"w1", b"w2", b"w3"]
    starts = np.array([0, 2, 4, 6, 8])
    payloads = [example.number_payload("id", np.arange(4)),
                example.bytes_payload("w", b"w0w1w2w3", starts)]
    assert example.ExampleBuilder().records(payloads) == records
    assert {"LIST_BODY", "Payload", "FLOATS", "BYTES"} <= set(example.__all__)


OLD_CODEC_PATHS = {
    "recprep.codecs.example_wire": "recprep.codecs.example.wire",
    "recprep.codecs._example_chunk": "recprep.codecs.example.chunk",
    "recprep.codecs._example_columns": "recprep.codecs.example.columns",
    "recprep.codecs._example_encode_columns": "recprep.codecs.example.encode_columns",
    "recprep.codecs._example_parse": "recprep.codecs.example.parse",
    "recprep.codecs._recprep_base": "recprep.codecs.recprep.wire",
    "recprep.codecs._recprep_columns": "recprep.codecs.recprep.columns",
    "recprep.codecs._recprep_decode": "recprep.codecs.recprep.decode",
    "recprep.codecs._recprep_encode_columns": "recprep.codecs.recprep.encode_columns",
    "recprep.codecs._recprep_numpy": "recprep.codecs.recprep.arrays",
    "recprep.codecs._recprep_packed": "recprep.codecs.recprep.packed",
    "recprep.codecs._recprep_types": "recprep.codecs.recprep.types",
    "recprep.codecs._segments": "recprep.codecs.recprep.segments",
}


@pytest.mark.parametrize("old", sorted(OLD_CODEC_PATHS))
def test_old_codec_module_paths_import_with_a_warning(old):
    import subprocess
    import sys

    script = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    module = importlib.import_module({old!r})\n"
        f"assert module is importlib.import_module({OLD_CODEC_PATHS[old]!r}), module\n"
        "assert any(type(w.message).__name__ == 'MovedModuleWarning' for w in seen), seen\n"
        "import recprep.codecs.recprep as r, recprep.codecs.example as e\n"
        "assert r.RecprepCodec and r.FORMAT_TAG == 0xF1 and r.MAX_DEPTH\n"
        "assert e.ExampleCodec and e.key_order and e.varint and e.ExampleMergeWarning\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.stdout.strip() == "ok", proc.stderr
