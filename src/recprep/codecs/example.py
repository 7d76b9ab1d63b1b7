"""The ``"example"`` codec: instances as ``tf.train.Example`` records, without TensorFlow.

A record is the protobuf wire encoding of an ``Example`` (``docs/format.md``)::

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }     // entry: key = 1, value = 2
    Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                             Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed = true]; }
    Int64List { repeated int64 value = 1 [packed = true]; }

Integers and booleans become ``int64_list`` (``uint64`` as two's complement), ``float16``
and ``float32`` become ``float_list``, ``str`` (UTF-8) and ``bytes`` become
``bytes_list``; arrays are flattened in C order. Example floats are float32, so a float64
value (a Python ``float`` included, unless its feature is declared float32) is refused,
never narrowed. Map entries are written in TensorFlow's key order (:func:`key_order`): the
same instance gives the same bytes, equal to ``SerializeToString(deterministic=True)``
under protobuf's default (upb) backend. Records are read with protobuf's merge rules;
where ``tf.io.parse_example`` would read them otherwise, an :class:`ExampleMergeWarning`
says so.

With ``features`` (a list of :class:`~recprep.codecs.features.Feature`) the instance may also be
a tuple in feature order, and is checked by :func:`~recprep.codecs.features.check_instance`;
their dtypes and shapes go into the manifest's ``schema``, and decoding gives arrays of
the declared shapes and dtypes back. Without them, records decode to dicts of 1-D arrays:
``float32``, ``int64``, or ``object`` arrays of ``bytes``.

Encoding and decoding let numpy do the bulk: floats are one ``tobytes``/``frombuffer``
and int64 varints are built and parsed with vectorised numpy operations. This module maps
values to and from lists; the wire bytes are :mod:`recprep.codecs.example_wire`'s (shared
with :mod:`recprep.spark.encode`) and reading them, merge rules included, is
``_example_parse``'s.

Examples
--------
>>> import numpy as np
>>> codec = ExampleCodec()
>>> record = codec.encode({"label": 3, "image": np.array([0.5, 1.0], np.float32)})
>>> record.hex(" ")
'0a 27 0a 15 0a 05 69 6d 61 67 65 12 0c 12 0a 0a 08 00 00 00 3f 00 00 80 3f 0a 0e 0a 05 6c \
61 62 65 6c 12 05 1a 03 0a 01 03'
>>> codec.decode(record)
{'image': array([0.5, 1. ], dtype=float32), 'label': array([3])}
>>> shaped = ExampleCodec([Feature("image", "float32", (2, 1)), Feature("label", "uint8")])
>>> shaped.decode(record)
{'image': array([[0.5],
       [1. ]], dtype=float32), 'label': array(3, dtype=uint8)}
>>> codec.encode({"x": 0.5})
Traceback (most recent call last):
...
recprep.errors.EncodeError: feature 'x': a Python float is float64, and Example floats are \
float32: declare the feature float32, or use codec='recprep' for exact float64
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._core.batching import Columns
from ..errors import (
    REMEDY,
    DecodeError,
    EncodeError,
    ExampleMergeWarning,
    InvalidArgumentError,
)
from ._example_columns import decode_columns as _decode_columns
from ._example_encode_columns import ExampleBuilder as _ExampleBuilder
from ._example_encode_columns import encode_columns as _encode_columns
from ._example_parse import READ, Found, parse, read_bytes
from .base import Codec
from .example_wire import (
    BYTES,
    FLOATS,
    INTS,
    KIND_NAME,
    WireError,
    example,
    field_head,
    key_order,
    varint,
    varints,
)
from .features import Feature, SchemaMismatchError, as_features, check_instance, fixed_size
from .guess import codec_remedy, first_byte

__all__ = ["ExampleCodec", "ExampleMergeWarning", "key_order", "varint"]

_FLOAT64 = (
    "Example floats are float32: declare the feature float32, or use codec='recprep' "
    "for exact float64"
)


# -------------------------------------------------------------------------- encoding


def _encode_list(name: str, arr: np.ndarray) -> tuple[int, list[bytes]]:
    """The Feature oneof field number and the pieces of its list message's body."""
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype.itemsize > 4:
            raise EncodeError(f"feature {name!r} is {arr.dtype.name}: {_FLOAT64}")
        data = arr.astype("<f4", copy=False).tobytes()
        return FLOATS, [field_head(len(data)), data] if data else []
    if kind in "biu":
        wide = np.uint64 if arr.dtype == np.uint64 else np.int64
        data = varints(arr.astype(wide, copy=False))
        return INTS, [field_head(len(data)), data] if data else []
    if kind in "USO":
        pieces: list[bytes] = []
        for v in arr.reshape(-1).tolist():
            if type(v) is str:
                v = v.encode("utf-8")
            elif not isinstance(v, bytes):
                raise EncodeError(
                    f"feature {name!r} holds a {type(v).__name__}; an object array must hold "
                    "str or bytes"
                )
            pieces += (field_head(len(v)), v)
        return BYTES, pieces
    raise EncodeError(
        f"feature {name!r} is {arr.dtype}: an Example holds int64, float32 and bytes lists"
    )


def _infer(name: Any, value: Any) -> np.ndarray:
    """The array of an undeclared feature's value (no features given)."""
    if not isinstance(name, str):
        raise EncodeError(f"feature names are str, got {name!r}")
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, (str, bytes)):
        return np.array([value], dtype=object)
    if isinstance(value, float):
        raise EncodeError(f"feature {name!r}: a Python float is float64, and {_FLOAT64}")
    if isinstance(value, (list, tuple)):
        if not value:
            raise EncodeError(
                f"feature {name!r} is an empty {type(value).__name__}, whose kind can't be "
                "told: give a typed numpy array, or declare the features"
            )
        if all(isinstance(v, (str, bytes)) for v in value):
            return np.array(value, dtype=object)
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as err:
        raise EncodeError(f"feature {name!r}: {err}") from None
    if arr.dtype.kind == "f":
        raise EncodeError(f"feature {name!r}: Python floats are float64, and {_FLOAT64}")
    return arr



def _not_utf8(values: Mapping[str, Any]) -> EncodeError:
    """The error for the first feature name or ``str`` value that UTF-8 can't hold (a lone
    surrogate), found once ``str.encode`` has failed."""
    for name, value in values.items():
        texts = [(f"feature name {name!r}", name)]
        if isinstance(value, np.ndarray) and value.dtype.kind in "UO":
            texts += [(f"feature {name!r}: value {v!r}", v) for v in value.reshape(-1).tolist()
                      if type(v) is str]
        for where, text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                return EncodeError(f"{where} can't be written as UTF-8 ({err.reason} at "
                                   f"position {err.start})")
    return EncodeError("a feature name or value can't be written as UTF-8")


# -------------------------------------------------------------------------- decoding


def _object_array(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), object)
    arr[:] = values
    return arr


_EMPTY: dict[int, Callable[[], np.ndarray]] = {
    0: lambda: np.empty(0, np.float32),
    FLOATS: lambda: np.empty(0, np.float32),
    INTS: lambda: np.empty(0, np.int64),
    BYTES: lambda: np.empty(0, object),
}
_KIND_OF_DTYPE = {"f": FLOATS, "b": INTS, "i": INTS, "u": INTS, "U": BYTES, "S": BYTES, "O": BYTES}


def _as_declared(feature: Feature, kind: int, values: Any) -> np.ndarray:
    """The values of a list as ``feature`` declares them; raises
    :class:`WireError` if they don't fit."""
    dt = feature.dtype
    if kind != _KIND_OF_DTYPE[dt.kind] and kind:
        raise WireError(f"feature {feature.name!r} is a {KIND_NAME[kind]}, but is declared "
                    f"{feature.describe()}")
    if not kind:
        values = [] if dt.kind in "USO" else _EMPTY[_KIND_OF_DTYPE[dt.kind]]()
    if dt.kind == "O":
        arr = _object_array(values)
    elif dt.kind in "US":
        try:
            texts = [v.decode("utf-8") for v in values] if dt.kind == "U" else values
        except UnicodeDecodeError:
            raise WireError(f"feature {feature.name!r} holds bytes that are not UTF-8") from None
        arr = np.array(texts, dtype=dt.kind)
        if dt.itemsize and not np.can_cast(arr.dtype, dt):
            raise WireError(f"feature {feature.name!r} holds strings longer than {dt.str[1:]}")
    elif dt.kind == "f" or dt == np.int64:
        arr = values.astype(dt, copy=False)
    elif dt == np.uint64:
        arr = values.view(np.uint64)
    else:
        info = np.iinfo(dt) if dt.kind != "b" else np.iinfo(np.uint8)
        top = 1 if dt.kind == "b" else info.max
        if values.size and (values.min() < info.min or values.max() > top):
            raise WireError(f"feature {feature.name!r} holds values outside {feature.describe()}")
        arr = values.astype(dt)
    return _reshape(feature, arr)


def _reshape(feature: Feature, arr: np.ndarray) -> np.ndarray:
    shape = feature.shape
    size = fixed_size(shape)
    if size is None:
        known = fixed_size(tuple(d for d in shape if d is not None)) or 0
        if (known and arr.size % known) or (not known and arr.size):
            raise WireError(f"feature {feature.name!r} has {arr.size} values, which don't fill "
                        f"{feature.describe()}")
        fill = arr.size // known if known else 0
        shape = tuple(fill if d is None else d for d in shape)
    elif arr.size != size:
        raise WireError(f"feature {feature.name!r} has {arr.size} values, {feature.describe()} "
                    f"holds {size}")
    return arr.reshape(shape)


class ExampleCodec(Codec):
    """``tf.train.Example`` records, optionally checked against declared features.

    Parameters
    ----------
    features
        :class:`~recprep.codecs.features.Feature` objects (or anything
        :func:`~recprep.codecs.features.as_features` takes). With them, instances are checked,
        tuples are accepted in feature order, and records decode to the declared shapes
        and dtypes. Example floats are float32: a float64 feature is an ``EncodeError``.

    Examples
    --------
    >>> codec = ExampleCodec([Feature("x", "int16", (None, 2))])
    >>> codec.schema()
    {'features': [{'name': 'x', 'dtype': 'int16', 'shape': [None, 2]}]}
    >>> codec.decode(codec.encode(([[1, 2], [3, 4]],)))
    {'x': array([[1, 2],
           [3, 4]], dtype=int16)}
    """

    name = "example"

    def __init__(self, features: Any = None) -> None:
        self.features: tuple[Feature, ...] = () if features is None else tuple(
            as_features(features)
        )
        for f in self.features:
            if f.dtype.kind == "f" and f.dtype.itemsize > 4:
                raise EncodeError(f"feature {f.name!r} is declared {f.dtype.name}: {_FLOAT64}")
            if f.dtype.kind not in _KIND_OF_DTYPE:
                raise EncodeError(
                    f"feature {f.name!r} is declared {f.dtype.name}: an Example holds int64, "
                    "float32 and bytes lists"
                )
            if f.shape.count(None) > 1:
                raise EncodeError(
                    f"feature {f.name!r} has shape {f.describe()}: an Example stores a flat "
                    "list, so at most one dimension can be variable"
                )

    # -- encoding

    def encode(self, instance: Any) -> bytes:
        """Return the serialized Example of ``instance`` (a dict, a tuple with features,
        an object with ``SerializeToString()``, or Example bytes, which are checked)."""
        if isinstance(instance, (bytes, bytearray, memoryview)):
            return self._checked(bytes(instance))
        if hasattr(instance, "SerializeToString") and not isinstance(instance, Mapping):
            return self._checked(instance.SerializeToString())
        if self.features:
            try:
                values = check_instance(self.features, instance)
            except SchemaMismatchError as err:
                found = err.found_dtype
                if found is not None and found.kind == "f" and found.itemsize > 4:
                    hinted = SchemaMismatchError(
                        err.feature, err.expected, err.found, f"{err.reason}; {_FLOAT64}"
                    )
                    hinted.found_dtype = found
                    raise hinted from None
                raise
        elif isinstance(instance, Mapping):
            values = {k: _infer(k, v) for k, v in instance.items()}
        else:
            raise EncodeError(
                f"codec='example' takes a dict of feature values (or a tuple, once features "
                f"are declared), a tf.train.Example or its bytes; got {type(instance).__name__}"
            )
        try:
            items = [(k.encode(), *_encode_list(k, v)) for k, v in values.items()]
        except UnicodeEncodeError:
            raise _not_utf8(values) from None
        return example(items)

    def encode_columns(self, columns: Mapping[Any, Any], n: int) -> list[bytes] | None:
        """The records of ``n`` rows given as columns, a column at a time: exactly
        ``encode`` of each row's dict, or ``None`` (with declared features, or a column
        ``encode`` would refuse or that isn't numbers/str/bytes: see
        ``_example_encode_columns``)."""
        if self.features:
            return None
        builder = self.__dict__.setdefault("_builder", _ExampleBuilder())
        return _encode_columns(builder, columns, n)

    def _checked(self, record: bytes) -> bytes:
        """Serialized Example bytes, checked: parsed, and matched against the features."""
        try:
            found = parse(record)
            if self.features:
                names = [f.name for f in self.features]
                extra = [k for k in found if k not in set(names)]
                if extra:
                    raise SchemaMismatchError(extra[0], "no such feature", "a value",
                                              f"the features are {names}")
                self._decode_parsed(found)
        except (WireError, DecodeError) as err:
            raise EncodeError(f"the serialized Example is not valid here: {err}") from None
        return record

    # -- decoding

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return ``{name: array}`` for the Example in ``record``."""
        buf = record if type(record) is bytes else bytes(record)
        try:
            return self._decode_parsed(parse(buf))
        except WireError as err:
            raise DecodeError(
                f"not a valid tf.train.Example record ({err}): {first_byte(buf)}{REMEDY}",
                remedy=codec_remedy(buf, besides=self.name),
            ) from None

    def decode_columns(self, records: list[bytes | memoryview]) -> Columns | None:
        """A chunk whose records hold the same features, each of one kind, as columns
        (numbers stacked where every record holds as many), parsed at once with numpy;
        ``None`` otherwise (see ``_example_columns``)."""
        return _decode_columns(records, self.features)

    def _decode_parsed(self, found: dict[str, Found]) -> dict[str, np.ndarray]:
        if not self.features:
            out = {}
            for name, (kind, data, start, stop) in found.items():
                if not kind:
                    out[name] = _EMPTY[0]()
                elif kind == BYTES:
                    out[name] = _object_array(read_bytes(data, start, stop))
                else:
                    out[name] = READ[kind](data, start, stop)
            return out
        out = {}
        for f in self.features:
            if f.name not in found:
                raise DecodeError(
                    f"the record has no feature {f.name!r} (it has {sorted(found)}); is "
                    "this the schema it was written with?"
                )
            kind, data, start, stop = found[f.name]
            values = READ[kind](data, start, stop) if kind else None
            out[f.name] = _as_declared(f, kind, values)
        return out

    # -- schema

    def schema(self) -> dict[str, Any]:
        """``{"features": [{"name", "dtype", "shape"}, ...]}``, or ``{}`` without features."""
        return {"features": [f.to_json() for f in self.features]} if self.features else {}

    def with_schema(self, schema: dict[str, Any]) -> ExampleCodec:
        """A codec for the features a manifest's ``schema`` records."""
        if not schema or not schema.get("features"):
            return ExampleCodec()
        if not isinstance(schema["features"], list):
            raise InvalidArgumentError(
                f"schema['features'] must be a list of features, got {schema['features']!r}"
            )
        return ExampleCodec(schema["features"])

    def __repr__(self) -> str:
        return f"ExampleCodec({list(self.features)!r})" if self.features else "ExampleCodec()"
