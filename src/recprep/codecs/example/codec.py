"""The ``"example"`` codec's class: :class:`ExampleCodec`, records in and out.

An instance's values become lists (:mod:`~recprep.codecs.example.encode`), framed as an
Example (:mod:`~recprep.codecs.example.wire`); a record is parsed under protobuf's merge
rules (:mod:`~recprep.codecs.example.parse`) and its lists become arrays
(:mod:`~recprep.codecs.example.decode`). Chunks and blocks of rows go through columns
(:mod:`~recprep.codecs.example.columns`, :mod:`~recprep.codecs.example.encode_columns`).
The package's docstring describes the encoding.

>>> codec = ExampleCodec()
>>> codec.decode(codec.encode({"id": 7}))
{'id': array([7])}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..._core.batching import Columns
from ...errors import REMEDY, DecodeError, EncodeError, InvalidArgumentError
from ..base import Codec
from ..features import Feature, SchemaMismatchError, as_features, check_instance
from ..guess import codec_remedy, first_byte
from .arrow import example_decode_arrow
from .columns import example_decode_columns
from .decode import KIND_OF_DTYPE, declared_array, undeclared_arrays
from .encode import FLOAT64_REFUSED, inferred_array, list_pieces, not_utf8_error
from .encode_columns import ExampleBuilder, example_encode_columns
from .parse import READ, Found, parse
from .wire import WireError, example

__all__ = ["ExampleCodec"]


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
                raise EncodeError(
                    f"feature {f.name!r} is declared {f.dtype.name}: {FLOAT64_REFUSED}")
            if f.dtype.kind not in KIND_OF_DTYPE:
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
                        err.feature, err.expected, err.found, f"{err.reason}; {FLOAT64_REFUSED}"
                    )
                    hinted.found_dtype = found
                    raise hinted from None
                raise
        elif isinstance(instance, Mapping):
            values = {k: inferred_array(k, v) for k, v in instance.items()}
        else:
            raise EncodeError(
                f"codec='example' takes a dict of feature values (or a tuple, once features "
                f"are declared), a tf.train.Example or its bytes; got {type(instance).__name__}"
            )
        try:
            items = [(k.encode(), *list_pieces(k, v)) for k, v in values.items()]
        except UnicodeEncodeError:
            raise not_utf8_error(values) from None
        return example(items)

    def encode_columns(self, columns: Mapping[Any, Any], n: int) -> list[bytes] | None:
        """The records of ``n`` rows given as columns, a column at a time: exactly
        ``encode`` of each row's dict, or ``None`` (with declared features, or a column
        ``encode`` would refuse or that isn't numbers/str/bytes: see
        :mod:`~recprep.codecs.example.encode_columns`)."""
        if self.features:
            return None
        builder = self.__dict__.setdefault("_builder", ExampleBuilder())
        return example_encode_columns(builder, columns, n)

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
        ``None`` otherwise (see :mod:`~recprep.codecs.example.columns`)."""
        return example_decode_columns(records, self.features)

    def decode_arrow_columns(self, records: list[bytes | memoryview]) -> Columns | None:
        """The same chunks as :meth:`decode_columns`, as one ``pyarrow.RecordBatch``
        built from the parsed buffers (no Python object per value; see
        :mod:`~recprep.codecs.example.arrow`); ``None`` where that doesn't map simply."""
        return example_decode_arrow(records, self.features)

    def _decode_parsed(self, found: dict[str, Found]) -> dict[str, np.ndarray]:
        if not self.features:
            return undeclared_arrays(found)
        out = {}
        for f in self.features:
            if f.name not in found:
                raise DecodeError(
                    f"the record has no feature {f.name!r} (it has {sorted(found)}); is "
                    "this the schema it was written with?"
                )
            kind, data, start, stop = found[f.name]
            values = READ[kind](data, start, stop) if kind else None
            out[f.name] = declared_array(f, kind, values)
        return out

    # -- schema

    def schema(self) -> dict[str, Any]:
        """``{"features": [{"name", "dtype", "shape"}, ...]}``, or ``{}`` without features."""
        return {"features": [f.to_json() for f in self.features]} if self.features else {}

    def with_features(self, features: Iterable[Any]) -> ExampleCodec:
        """A codec for ``features`` (the declared ones replaced).

        >>> ExampleCodec().with_features([("x", "int64", (2,))]).schema()
        {'features': [{'name': 'x', 'dtype': 'int64', 'shape': [2]}]}
        """
        return ExampleCodec(features)

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
