"""The "example" codec (tf.train.Example without TensorFlow) and recprep.codecs.features."""

from __future__ import annotations

import io
import json
import pickle
import struct
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from recprep.codecs import get_codec
from recprep.codecs.example import ExampleCodec, ExampleMergeWarning, key_order
from recprep.codecs.example.wire import unvarints, varints
from recprep.codecs.features import Feature, SchemaMismatchError, as_features, check_instance
from recprep.containers import get_format
from recprep.errors import DecodeError, EncodeError, InvalidArgumentError, RecprepError

from ..support import DATA

EXAMPLE = DATA / "example"


@pytest.fixture(scope="module")
def tf():
    """TensorFlow, imported once for the module (after recprep)."""
    return pytest.importorskip("tensorflow")


def tfrecord_records(data: bytes) -> list[bytes]:
    """TFRecord framing, parsed the simple way (CRCs are the container tests' business)."""
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 12 : pos + 12 + n])
        pos += 16 + n
    return out


def expected_examples() -> list[dict]:
    return json.loads((EXAMPLE / "expected.json").read_text())


def check_golden(decoded: dict, expected: dict) -> None:
    assert set(decoded) == set(expected)
    for name, feature in expected.items():
        ((kind, values),) = feature.items()
        got = decoded[name]
        assert got.ndim == 1
        if kind == "float_list":
            assert got.dtype == np.float32 and got.tolist() == values
        elif kind == "int64_list":
            assert got.dtype == np.int64 and got.tolist() == values
        else:
            assert got.dtype == object and [b.hex() for b in got] == values


# -- golden files written by TensorFlow ---------------------------------------------------


def test_decodes_tensorflow_examples_from_tfrecord():
    records = tfrecord_records((EXAMPLE / "examples.tfrecord").read_bytes())
    expected = expected_examples()
    assert len(records) == len(expected) == 25
    codec = ExampleCodec()
    for record, want in zip(records, expected, strict=True):
        check_golden(codec.decode(record), want)


def test_decodes_tensorflow_examples_from_recordio_and_tfrecord_containers():
    expected = expected_examples()
    for fmt, name in (("recordio", "examples.recordio"), ("tfrecord", "examples.tfrecord")):
        data = (EXAMPLE / name).read_bytes()
        chunks = get_format(fmt).read_chunks(io.BytesIO(data), path=name)
        records = [r for c in chunks for r in c.records]
        decoded = [get_codec("example").decode(r) for r in records]
        for got, want in zip(decoded, expected, strict=True):
            check_golden(got, want)


def test_golden_examples_with_a_schema_and_reencoded():
    features = [Feature("image", "float32", (None,)), Feature("label", "int64", (None,)),
                Feature("name", object, (None,))]
    codec = ExampleCodec(features)
    for record, want in zip(
        tfrecord_records((EXAMPLE / "examples.tfrecord").read_bytes()),
        expected_examples(),
        strict=True,
    ):
        decoded = codec.decode(record)
        check_golden(decoded, want)
        again = codec.decode(codec.encode(decoded))  # sorted keys now, same values
        check_golden(again, want)
        assert codec.encode(record) == record  # bytes pass through, checked


# -- wire details ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 8, 9, 1000])
def test_varints_vectorised_and_small_paths_agree_with_the_spec(n):
    rng = np.random.default_rng(n)
    edges = [0, 1, 127, 128, 16383, 16384, -1, -(2**63), 2**63 - 1, 2**31, -(2**31)]
    values = np.array((edges + rng.integers(-(2**63), 2**63 - 1, n).tolist())[:n], np.int64)
    data = varints(values)
    spec = b""
    for v in values.tolist():
        v &= 2**64 - 1
        while True:
            spec += bytes([v & 0x7F | (0x80 if v > 0x7F else 0)])
            v >>= 7
            if not v:
                break
    assert data == spec
    assert unvarints(data).tolist() == values.tolist()


def test_bytes_equal_tensorflow_deterministic_serialization(tf):
    instance = {
        "z": np.arange(-3, 300, dtype=np.int32),
        "a": np.linspace(-1, 1, 50, dtype=np.float32).reshape(5, 10),
        "m": [b"", b"\x00\xff", "\u540d"],
        "b": np.array([True, False]),
        "u": np.array([2**64 - 1, 5], np.uint64),
    }
    ours = ExampleCodec().encode(instance)
    theirs = tf.train.Example(features=tf.train.Features(feature={
        "z": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(-3, 300)))),
        "a": tf.train.Feature(float_list=tf.train.FloatList(value=instance["a"].ravel())),
        "m": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[b"", b"\x00\xff", "\u540d".encode()])),
        "b": tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 0])),
        "u": tf.train.Feature(int64_list=tf.train.Int64List(value=[-1, 5])),
    }))
    assert ours == theirs.SerializeToString(deterministic=True)


def tf_example(tf, instance: dict) -> bytes:
    """``instance`` (name -> 1-D int64 / float32 / object-of-bytes array) as TensorFlow
    serializes it, deterministically."""
    features = {}
    for name, arr in instance.items():
        if arr.dtype.kind == "f":
            features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=arr))
        elif arr.dtype.kind == "i":
            features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=arr))
        else:
            features[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=list(arr)))
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example.SerializeToString(deterministic=True)


@pytest.mark.parametrize("names", [
    ["a", "ab"],
    ["ab", "a", "b", "abc", ""],
    ["", "x"],
    ["\u00e9", "e", "\U0001f600", "z", "ab\x00", "ab", "ab\x7f"],
    ["x" * 130, "x" * 129, "x" * 131, "x" * 128 + "y", "y"],
])
def test_key_order_is_tensorflows_when_a_name_is_a_prefix_of_another(tf, names):
    instance = {n: np.array([i], np.int64) for i, n in enumerate(names)}
    record = ExampleCodec().encode(instance)
    assert record == tf_example(tf, instance)
    assert list(ExampleCodec().decode(record)) == sorted(names, key=lambda n: key_order(
        n.encode()))
    assert list(ExampleCodec().decode(ExampleCodec().encode({"a": 1, "ab": 2}))) == ["ab", "a"]


_NAMES = st.one_of(
    st.text(alphabet="ab\u00e9", max_size=4),  # prefixes of one another, often
    st.text(max_size=6),  # any code point but surrogates, empty too
    st.text(alphabet="x", min_size=125, max_size=131),  # a length varint of 1 or 2 bytes
)
_LISTS = st.one_of(
    hnp.arrays(np.int64, st.integers(0, 5)),
    hnp.arrays(np.float32, st.integers(0, 5), elements=st.floats(width=32, allow_nan=False)),
    st.lists(st.binary(max_size=6), max_size=4).map(
        lambda v: np.array(v + [b""], object)[:-1]),  # never a 2-D bytes array
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_NAMES, _LISTS, max_size=8))  # st.text never draws surrogates
def test_bytes_equal_tensorflow_for_any_names_and_values(tf, instance):
    assert ExampleCodec().encode(instance) == tf_example(tf, instance)


def test_a_name_or_text_that_is_not_utf8_is_an_encode_error():
    with pytest.raises(EncodeError, match="feature name '\\\\ud800' can't be written as UTF-8"):
        ExampleCodec().encode({"\ud800": 1})
    with pytest.raises(EncodeError, match="feature 'w': value 'a\\\\udc80' can't be written"):
        ExampleCodec().encode({"v": 1, "w": ["ok", "a\udc80"]})
    with pytest.raises(EncodeError, match="feature 'w': value"):
        ExampleCodec([Feature("w", str, (1,))]).encode({"w": ["\udc80"]})


def test_parse_single_example_reads_what_we_write(tf):
    features = [Feature("image", "float32", (4, 3)), Feature("label", "int64"),
                Feature("name", object, (2,)), Feature("ids", "int32", (None,))]
    codec = ExampleCodec(features)
    rng = np.random.default_rng(1)
    spec = {
        "image": tf.io.FixedLenFeature((4, 3), tf.float32),
        "label": tf.io.FixedLenFeature((), tf.int64),
        "name": tf.io.FixedLenFeature((2,), tf.string),
        "ids": tf.io.VarLenFeature(tf.int64),
    }
    for i in range(5):
        image = rng.standard_normal((4, 3)).astype(np.float32)
        ids = rng.integers(-(2**31), 2**31 - 1, i * 7).astype(np.int32)
        record = codec.encode((image, i - 2, [b"x" * i, "\u00e9"], ids))
        parsed = tf.io.parse_single_example(record, spec)
        assert np.array_equal(parsed["image"].numpy(), image)
        assert parsed["label"].numpy() == i - 2
        assert parsed["name"].numpy().tolist() == [b"x" * i, "\u00e9".encode()]
        assert parsed["ids"].values.numpy().tolist() == ids.tolist()
        assert tf.train.Example.FromString(record).SerializeToString(deterministic=True) == record


def _pb_varint(v: int) -> bytes:
    v &= 2**64 - 1
    out = b""
    while v > 0x7F:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])


def _pb_len(field: int, body: bytes) -> bytes:
    return _pb_varint(field << 3 | 2) + _pb_varint(len(body)) + body


@st.composite
def hand_made_examples(draw):
    """Example bytes in shapes TF never writes: unpacked lists, mixed packing, unknown
    fields, split `features` messages, repeated keys (the last one wins), Features in
    pieces (several list fields, several values or keys in a map entry)."""
    entries = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from(["a", "b", "c", "\u00e9"])).encode()
        kind = draw(st.sampled_from(["f", "i", "b"]))
        body = b""
        for _ in range(draw(st.integers(0, 3))):
            if kind == "f":
                vals = draw(st.lists(st.floats(width=32, allow_nan=False), max_size=4))
                if draw(st.booleans()):
                    body += _pb_len(1, struct.pack(f"<{len(vals)}f", *vals))
                else:
                    body += b"".join(b"\x0d" + struct.pack("<f", v) for v in vals)
            elif kind == "i":
                vals = draw(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=12))
                if draw(st.booleans()):
                    body += _pb_len(1, b"".join(map(_pb_varint, vals)))
                else:
                    body += b"".join(b"\x08" + _pb_varint(v) for v in vals)
            else:
                body += _pb_len(1, draw(st.binary(max_size=5)))
            if draw(st.booleans()):
                body += b"\x78" + _pb_varint(draw(st.integers(0, 2**64 - 1)))  # field 15
        feature = _pb_len({"b": 1, "f": 2, "i": 3}[kind], body)
        if draw(st.booleans()):
            feature = b"\x25abcd" + feature  # unknown fixed32 field 4
        for _ in range(draw(st.integers(0, 2))):  # more list fields: protobuf merges
            other = draw(st.sampled_from([kind, kind, "f", "i", "b"]))
            feature += _pb_len({"b": 1, "f": 2, "i": 3}[other],
                               {"f": _pb_len(1, b"\x00\x00\x80\x3f"), "i": b"\x08\x07",
                                "b": _pb_len(1, b"z")}[other])
        values = [feature]
        if draw(st.integers(0, 4)) == 0:  # a second value field: merged with the first
            values.append(_pb_len(3, b"\x08\x09") if draw(st.booleans()) else b"")
        keys = [key] if draw(st.integers(0, 4)) else [b"x", key]  # the last key counts
        entries.append(_pb_len(1, b"".join(_pb_len(1, k) for k in keys)
                               + b"".join(_pb_len(2, v) for v in values)))
    split = draw(st.integers(0, len(entries)))
    parts = [_pb_len(1, b"".join(entries[:split])), _pb_len(1, b"".join(entries[split:]))]
    if draw(st.booleans()):
        parts.insert(1, b"\x11" + b"\x00" * 8 + _pb_len(7, b"junk"))  # unknown fields 2, 7
    if draw(st.booleans()):
        parts.insert(0, b"\x1b\x1b\x08\x01\x1c\x0a\x01x\x1c")  # nested groups, field 3
    return b"".join(parts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hand_made_examples())
def test_decoder_agrees_with_tensorflow_on_unpacked_and_unknown_fields(tf, record):
    theirs = tf.train.Example.FromString(record)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExampleMergeWarning)
        ours = ExampleCodec().decode(record)
    assert set(ours) == set(theirs.features.feature)
    for name, feature in theirs.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = list(getattr(feature, kind).value) if kind else []
        assert ours[name].tolist() == values


def _entry(key: bytes, *values: bytes) -> bytes:
    return _pb_len(1, _pb_len(1, key) + b"".join(_pb_len(2, v) for v in values))


def _ints(*values: int) -> bytes:
    return _pb_len(1, b"".join(map(_pb_varint, values)))


def _floats(*values: float) -> bytes:
    return _pb_len(1, struct.pack(f"<{len(values)}f", *values))


_I, _F, _B = (lambda body: _pb_len(3, body)), (lambda body: _pb_len(2, body)), (
    lambda body: _pb_len(1, body))

# (record's entries, what protobuf reads, what tf.io.parse_example does: the values it gives
# when they differ, "refuses" when it raises; None when it agrees)
MERGES = {
    "a list field twice": ([_entry(b"a", _I(_ints(1, 2)) + _I(_ints(3)))], [1, 2, 3], [1, 2]),
    "a value twice": ([_entry(b"a", _I(_ints(1, 2)), _I(_ints(3)))], [1, 2, 3], "refuses"),
    "a value twice, kinds differ": ([_entry(b"a", _I(_ints(1, 2)), _F(_floats(0.5)))], [0.5],
                                    "refuses"),
    "a value twice, the second empty": ([_entry(b"a", _I(_ints(1, 2)), b"")], [1, 2],
                                        "refuses"),
    "two kinds (a oneof)": ([_entry(b"a", _I(_ints(1, 2)) + _F(_floats(0.5)))], [0.5], [1, 2]),
    "kinds int, float, int": ([_entry(b"a", _I(_ints(1)) + _F(_floats(0.5)) + _I(_ints(7)))],
                              [7], [1]),
    "kinds bytes, int, bytes": ([_entry(b"a", _B(_pb_len(1, b"x")) + _I(_ints(1))
                                        + _B(_pb_len(1, b"y")))], [b"y"], [b"x"]),
    "bytes lists twice": ([_entry(b"a", _B(_pb_len(1, b"x")) + _B(_pb_len(1, b"y")
                                                                   + _pb_len(1, b"z")))],
                          [b"x", b"y", b"z"], [b"x"]),
    "float lists twice": ([_entry(b"a", _F(_floats(1.0)) + _F(_floats(2.0, 3.0)))],
                          [1.0, 2.0, 3.0], [1.0]),
    "a repeated key": ([_entry(b"a", _I(_ints(1, 2))), _entry(b"a", _I(_ints(3)))], [3], None),
    "a repeated key, kinds differ": ([_entry(b"a", _I(_ints(1))), _entry(b"a", _F(_floats(4)))],
                                     [4.0], None),
    "a repeated key, across features": ([_entry(b"a", _I(_ints(1))), _entry(b"a",
                                                                            _I(_ints(3)))],
                                        [3], None),
}


@pytest.mark.parametrize("case", list(MERGES))
def test_features_in_pieces_merge_as_protobuf_does(tf, case):
    entries, values, parse_example = MERGES[case]
    split = case.endswith("across features")
    record = (b"".join(_pb_len(1, e) for e in entries) if split
              else _pb_len(1, b"".join(entries)))
    theirs = tf.train.Example.FromString(record).features.feature["a"]
    assert list(getattr(theirs, theirs.WhichOneof("kind")).value) == values  # protobuf
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = ExampleCodec().decode(record)
    assert list(ours) == ["a"] and ours["a"].tolist() == values
    probe = parse_example if isinstance(parse_example, list) else values  # its first kind
    dtype = {float: tf.float32, int: tf.int64, bytes: tf.string}[type(probe[0])]
    try:
        parsed = tf.io.parse_example([record], {"a": tf.io.VarLenFeature(dtype)})
        tf_values: list | str = parsed["a"].values.numpy().tolist()
    except tf.errors.InvalidArgumentError:
        tf_values = "refuses"
    assert tf_values == (values if parse_example is None else parse_example)
    merge_warnings = [w.message for w in caught if w.category is ExampleMergeWarning]
    if parse_example is None:  # tf.io.parse_example reads what protobuf reads: no warning
        assert not merge_warnings
    else:
        (warning,) = merge_warnings
        assert warning.feature == "a"
        assert str(warning).startswith("feature 'a': its ")
        tail = ("refuses the record" if parse_example == "refuses"
                else "reads only the first list field")
        assert str(warning).endswith(f"(tf.train.Example.FromString), but tf.io.parse_example "
                                     f"{tail}")


def test_an_entry_with_two_keys_is_named_by_the_last(tf):
    record = _pb_len(1, _pb_len(1, _pb_len(1, b"a") + _pb_len(1, b"b")
                                + _pb_len(2, _I(_ints(5)))))
    assert list(tf.train.Example.FromString(record).features.feature) == ["b"]
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example([record], {"b": tf.io.VarLenFeature(tf.int64)})
    with pytest.warns(ExampleMergeWarning, match="feature 'b': its map entry holds 2 keys .*"
                                                 "tf.io.parse_example refuses the record"):
        assert ExampleCodec().decode(record)["b"].tolist() == [5]
    # with a schema too, and when bytes are passed through encode
    codec = ExampleCodec([Feature("b", "int8")])
    with pytest.warns(ExampleMergeWarning):
        assert codec.decode(record)["b"] == 5
    with pytest.warns(ExampleMergeWarning):
        assert codec.encode(record) == record


def test_an_entry_with_an_unknown_field_is_read_and_warned_about(tf):
    """TensorFlow's readers disagree here: upb moves the entry to the unknown fields (the
    feature vanishes), tf.io.parse_example refuses it, the pure-Python protobuf reads it."""
    record = _pb_len(1, _pb_len(1, _pb_len(1, b"b") + b"\x25abcd" + _pb_len(2, _I(_ints(5)))))
    assert dict(tf.train.Example.FromString(record).features.feature) == {}
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example([record], {"b": tf.io.VarLenFeature(tf.int64)})
    with pytest.warns(ExampleMergeWarning, match="feature 'b': its map entry holds an unknown "
                                                 "field; recprep reads the entry"):
        assert ExampleCodec().decode(record)["b"].tolist() == [5]


# -- round trips --------------------------------------------------------------------------

NUMERIC = ["float32", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16",
           "uint32", "uint64", "bool"]


@st.composite
def feature_values(draw):
    n = draw(st.integers(1, 4))
    features, values = [], []
    for i in range(n):
        kind = draw(st.sampled_from(NUMERIC + ["str", "bytes", "object"]))
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
        if kind in NUMERIC:
            value = draw(hnp.arrays(kind, shape))
        elif kind == "str":  # numpy drops trailing NULs of U and S items itself
            text = st.text(max_size=3).filter(lambda t: not t.endswith("\0"))
            value = draw(hnp.arrays("U3", shape, elements=text))
        elif kind == "bytes":
            data = st.binary(max_size=3).filter(lambda b: not b.endswith(b"\0"))
            value = draw(hnp.arrays("S3", shape, elements=data))
        else:
            items = draw(st.lists(st.binary(max_size=4), min_size=int(np.prod(shape)),
                                  max_size=int(np.prod(shape))))
            value = np.empty(len(items), object)
            value[:] = items
            value = value.reshape(shape)
        declared = list(shape)
        if shape and draw(st.booleans()):
            k = draw(st.integers(0, len(shape) - 1))
            if np.prod([d for j, d in enumerate(shape) if j != k]) > 0:
                declared[k] = None
        features.append(Feature(f"f{i}", {"str": str, "bytes": bytes}.get(kind, kind),
                                tuple(declared)))
        values.append(value)
    return features, values


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind == "f":
        return np.array_equal(a, b, equal_nan=True) and (
            np.signbit(a) == np.signbit(b)).all()
    return a.tolist() == b.tolist()


@settings(max_examples=150, deadline=None)
@given(feature_values())
def test_roundtrip_with_features(fv):
    features, values = fv
    codec = ExampleCodec(features)
    as_tuple = codec.encode(tuple(values))
    as_dict = codec.encode({f.name: v for f, v in zip(features, values, strict=True)})
    assert as_tuple == as_dict
    decoded = codec.decode(as_tuple)
    assert list(decoded) == [f.name for f in features]
    for f, v in zip(features, values, strict=True):
        got = decoded[f.name]
        assert got.shape == v.shape
        assert got.dtype == (object if f.dtype.kind == "O" else v.dtype) or f.dtype.kind in "US"
        assert same(got, v)
    again = ExampleCodec().with_schema(json.loads(json.dumps(codec.schema())))
    assert all(same(again.decode(as_tuple)[k], decoded[k]) for k in decoded)


@settings(max_examples=100, deadline=None)
@given(feature_values())
def test_roundtrip_without_features_gives_flat_base_arrays(fv):
    features, values = fv
    codec = ExampleCodec()
    decoded = codec.decode(codec.encode({f.name: v for f, v in zip(features, values,
                                                                     strict=True)}))
    for f, v in zip(features, values, strict=True):
        got, flat = decoded[f.name], v.reshape(-1)
        assert got.ndim == 1
        if v.dtype.kind == "f":
            assert got.dtype == np.float32 and same(got, flat.astype(np.float32))
        elif v.dtype.kind in "biu":
            assert got.dtype == np.int64 and got.tolist() == flat.astype(np.int64).tolist()
        else:
            want = [x.encode() if isinstance(x, str) else x for x in flat.tolist()]
            assert got.dtype == object and got.tolist() == want


def test_python_values_and_scalars():
    codec = ExampleCodec([Feature("x", "float32"), Feature("n", "int8", (1,)),
                          Feature("s", str, (None,)), Feature("ok", bool)])
    out = codec.decode(codec.encode({"x": 0.1, "n": -5, "s": ["a", "\u540d"], "ok": True}))
    assert out["x"] == np.float32(0.1) and out["x"].dtype == np.float32 and out["x"].shape == ()
    assert out["n"].tolist() == [-5] and out["n"].dtype == np.int8
    assert out["s"].tolist() == ["a", "\u540d"]
    assert out["ok"].dtype == bool and out["ok"]


def test_empty_dict_and_empty_lists():
    codec = ExampleCodec()
    assert codec.decode(codec.encode({})) == {}
    out = codec.decode(codec.encode({"e": np.zeros((0, 3), np.float32)}))
    assert out["e"].dtype == np.float32 and out["e"].shape == (0,)


def test_serialize_to_string_objects_and_bytes_pass_through():
    record = ExampleCodec().encode({"a": np.arange(3)})

    class Proto:
        def SerializeToString(self):  # noqa: N802 - protobuf's name
            return record

    assert ExampleCodec().encode(Proto()) == record
    assert ExampleCodec().encode(bytearray(record)) == record
    with pytest.raises(EncodeError, match="not valid"):
        ExampleCodec().encode(record[:-1])
    with pytest.raises(SchemaMismatchError) as info:
        ExampleCodec([Feature("b", "int64", (None,))]).encode(record)
    assert info.value.feature == "a"
    with pytest.raises(EncodeError, match="no feature 'b'"):
        ExampleCodec([Feature("a", "int64", (3,)), Feature("b", "int64")]).encode(record)
    with pytest.raises(EncodeError, match="holds 2"):
        ExampleCodec([Feature("a", "int64", (2,))]).encode(record)


def test_codec_pickles_and_reports_its_schema():
    codec = ExampleCodec([Feature("image", "float32", (28, 28)), Feature("label", "int64")])
    clone = pickle.loads(pickle.dumps(codec))
    assert clone.schema() == codec.schema() == {"features": [
        {"name": "image", "dtype": "float32", "shape": [28, 28]},
        {"name": "label", "dtype": "int64", "shape": []},
    ]}
    assert ExampleCodec().schema() == {}
    assert ExampleCodec().with_schema({}).features == ()
    assert get_codec("example").with_schema(codec.schema()).features == codec.features
    with pytest.raises(InvalidArgumentError):
        ExampleCodec().with_schema({"features": "image"})


# -- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: ExampleCodec().encode({"x": np.zeros(3)}),
    lambda: ExampleCodec().encode({"x": 1.5}),
    lambda: ExampleCodec().encode({"x": [1.5, 2]}),
    lambda: ExampleCodec().encode({"x": np.float64(1)}),
    lambda: ExampleCodec([Feature("x", "float64")]),
    lambda: ExampleCodec([Feature("x", "float32")]).encode((np.zeros(1),)),
])
def test_float64_is_refused_never_narrowed(make):
    with pytest.raises(EncodeError, match="Example floats are float32.*codec='recprep'"):
        make()


@pytest.mark.parametrize("instance, match", [
    ((1,), "tuple, once features"),
    ({1: 2}, "names are str"),
    ({"x": []}, "empty list"),
    ({"x": np.array([1j])}, "complex"),
    ({"x": np.array([None], object)}, "NoneType"),
])
def test_undeclared_instances_that_cant_be_examples(instance, match):
    with pytest.raises(EncodeError, match=match):
        ExampleCodec().encode(instance)


def test_features_an_example_cant_hold():
    with pytest.raises(EncodeError, match="at most one dimension"):
        ExampleCodec([Feature("x", "int64", (None, None))])
    with pytest.raises(EncodeError, match="complex"):
        ExampleCodec([Feature("x", "complex64")])


# -- schema mismatches -----------------------------------------------------------------------

FEATURES = [Feature("image", "float32", (2, None)), Feature("label", "int32")]
IMAGE = np.zeros((2, 3), np.float32)


@pytest.mark.parametrize("instance, feature, expected, found", [
    ({"image": IMAGE}, "label", "a value", "none in the instance dict"),
    ({"image": IMAGE, "label": 1, "extra": 2}, "extra", "no such feature", "a value"),
    ((IMAGE,), None, "a tuple of 2 values (image, label)", "a tuple of 1 value"),
    ((IMAGE, 1, 2), None, "a tuple of 2 values (image, label)", "a tuple of 3 values"),
    ((IMAGE, np.int64(1)), "label", "int32[]", "int64[]"),
    ((IMAGE.astype(np.float64), 1), "image", "float32[2, None]", "float64[2, 3]"),
    ((np.zeros((3, 3), np.float32), 1), "image", "float32[2, None]", "float32[3, 3]"),
    ((np.zeros(6, np.float32), 1), "image", "float32[2, None]", "float32[6]"),
    ((IMAGE, 2**40), "label", "int32[]", "int 1099511627776"),
    ((IMAGE, "1"), "label", "int32[]", "str[]"),
    (IMAGE, None, "a tuple of values in feature order or a dict by feature name", "ndarray"),
])
def test_schema_mismatch_errors_name_feature_expected_and_found(
    instance, feature, expected, found
):
    for check in (lambda: check_instance(FEATURES, instance),
                  lambda: ExampleCodec(FEATURES).encode(instance)):
        with pytest.raises(SchemaMismatchError) as info:
            check()
        err = info.value
        assert (err.feature, err.expected, err.found) == (feature, expected, found)
        assert isinstance(err, EncodeError) and isinstance(err, RecprepError)
        assert f"expected {expected}, found {found}" in str(err)
        if feature:
            assert repr(feature) in str(err)
        clone = pickle.loads(pickle.dumps(err))
        assert (clone.feature, clone.expected, str(clone)) == (feature, expected, str(err))


def test_safe_casts_and_python_values_are_accepted():
    features = [Feature("f", "float32", (None,)), Feature("i", "int64", (1,)),
                Feature("s", object, ()), Feature("u", "uint16")]
    out = check_instance(features, (np.arange(3, dtype=np.int16), np.int8(3), "x", True))
    assert out["f"].dtype == np.float32 and out["f"].tolist() == [0, 1, 2]
    assert out["i"].shape == (1,) and out["i"].dtype == np.int64
    assert out["s"].item() == "x"
    assert out["u"].dtype == np.uint16 and out["u"] == 1
    with pytest.raises(SchemaMismatchError, match="can't be cast safely"):
        check_instance(features, (np.arange(3, dtype=np.int32), 1, "x", 1))  # int32 > f4
    with pytest.raises(SchemaMismatchError, match="out of range"):
        check_instance(features, ([1.0], 1, b"x", -1))
    with pytest.raises(SchemaMismatchError, match="overflows"):
        check_instance([Feature("x", "float16")], (1e6,))


# -- feature declarations -----------------------------------------------------------------


def test_feature_normalises_and_describes():
    f = Feature("x", ">i2", [None, 3])
    assert f.dtype == np.dtype("int16") and f.dtype.isnative and f.shape == (None, 3)
    assert f.describe() == "int16[None, 3]"
    assert Feature("s", str).to_json() == {"name": "s", "dtype": "str", "shape": []}
    assert as_features([f.to_json()]) == [f]
    for bad in [dict(name="", dtype="f4"), dict(name="x", dtype="V8"),
                dict(name="x", dtype="f4", shape=(-1,)), dict(name="x", dtype="nope"),
                dict(name="x", dtype="f4", shape=(1.5,))]:
        with pytest.raises(InvalidArgumentError):
            Feature(**bad)
    with pytest.raises(InvalidArgumentError, match="unique"):
        as_features([Feature("x", "f4"), ("x", "i8")])
    with pytest.raises(InvalidArgumentError):
        as_features([object()])
    with pytest.raises(InvalidArgumentError):
        as_features([])


class FakeDType:
    """A tf.DType look-alike: only as_numpy_dtype matters."""

    as_numpy_dtype = np.float32


class FakeColumn:
    """What tf.feature_column.numeric_column returns, as far as recprep looks."""

    def __init__(self, key, shape, dtype):
        self.key, self.shape, self.dtype = key, shape, dtype


def test_feature_columns_by_duck_typing():
    features = as_features([FakeColumn("image", (28, 28), FakeDType()),
                            FakeColumn("label", (1,), "int64")])
    assert features == [Feature("image", "float32", (28, 28)), Feature("label", "int64", (1,))]
    codec = ExampleCodec(features)
    out = codec.decode(codec.encode((np.ones((28, 28), np.float32), 7)))
    assert out["image"].shape == (28, 28) and out["label"].tolist() == [7]


def test_real_tensorflow_numeric_columns(tf):
    fc = getattr(tf, "feature_column", None)
    if fc is None or not hasattr(fc, "numeric_column"):
        pytest.skip("tf.feature_column.numeric_column is gone from this TensorFlow")
    columns = [fc.numeric_column("image", shape=(4, 4), dtype=tf.float32),
               fc.numeric_column("label", dtype=tf.int64)]
    features = as_features(columns)
    assert features == [Feature("image", "float32", (4, 4)), Feature("label", "int64", (1,))]
    record = ExampleCodec(columns).encode((np.eye(4, dtype=np.float32), 3))
    parsed = tf.io.parse_single_example(record, tf.feature_column.make_parse_example_spec(
        columns))
    assert np.array_equal(parsed["image"].numpy(), np.eye(4)) and parsed["label"].numpy() == [3]


# -- malformed records ----------------------------------------------------------------------


def test_every_truncation_is_a_decode_error():
    record = ExampleCodec().encode({"a": np.arange(300), "b": np.ones(5, np.float32),
                                   "c": [b"xyz"]})
    for cut in range(1, len(record)):  # one top-level field, whose length covers the rest
        with pytest.raises(DecodeError):
            ExampleCodec().decode(record[:cut])


@pytest.mark.parametrize("record", [
    b"\x0a\xff\xff\xff\xff\x0f",  # features claims 4 GiB
    b"\x0a\x0a\x0a\x08\x12\xff\xff\xff\xff\xff\xff\xff\x7f\x00",  # a map value claims 2**63
    b"\x0a\x06\x0a\x04\x12\x02\x1a\x05",  # an int64 list claims more than is there
    b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # an 11-byte varint
    b"\x0b",  # a group that never ends
    b"\x0f",  # wire type 7
    b"\x00",  # field number 0
    b"\x0a\x0b\x0a\x09\x0a\x01a\x12\x04\x12\x02\x0a\x04",  # a float list without its bytes
    b"\x0a\x09\x0a\x07\x0a\x01\xff\x12\x02\x1a\x00",  # a key that isn't UTF-8
])
def test_malformed_records_are_decode_errors(record):
    with pytest.raises(DecodeError, match="not a valid tf.train.Example"):
        ExampleCodec().decode(record)


def test_declared_decoding_checks_kind_size_and_range():
    record = ExampleCodec().encode({"x": np.array([1, 300])})
    with pytest.raises(DecodeError, match="int64_list, but is declared float32"):
        ExampleCodec([Feature("x", "float32", (2,))]).decode(record)
    with pytest.raises(DecodeError, match="has 2 values, int64\\[3\\] holds 3"):
        ExampleCodec([Feature("x", "int64", (3,))]).decode(record)
    with pytest.raises(DecodeError, match="outside uint8"):
        ExampleCodec([Feature("x", "uint8", (2,))]).decode(record)
    with pytest.raises(DecodeError, match="don't fill"):
        ExampleCodec([Feature("x", "int64", (None, 3))]).decode(record)
    with pytest.raises(DecodeError, match="no feature 'y'"):
        ExampleCodec([Feature("y", "int64")]).decode(record)
    words = ExampleCodec().encode({"w": ["abcd", "\u00e9"]})
    assert ExampleCodec([Feature("w", "U4", (2,))]).decode(words)["w"].tolist() == [
        "abcd", "\u00e9"]
    with pytest.raises(DecodeError, match="longer than U3"):
        ExampleCodec([Feature("w", "U3", (2,))]).decode(words)
    with pytest.raises(DecodeError, match="not UTF-8"):
        ExampleCodec([Feature("w", str, (1,))]).decode(ExampleCodec().encode({"w": b"\xff"}))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_decode_or_fail_cleanly(data):
    try:
        out = ExampleCodec().decode(data)
    except DecodeError:
        return
    assert isinstance(out, dict)
