"""A whole chunk of ``"example"`` records decoded at once into batch columns.

:func:`~recprep.codecs.example.chunk.parse_chunk` parses the chunk (each feature's
values over all records, with numpy); :func:`example_decode_columns` makes of them what
:func:`~recprep.batching.collate` makes of the instances
:class:`~recprep.codecs.example.ExampleCodec` decodes one by one: features whose every
record holds as many numbers are stacked ``(n, k)`` arrays (a strided view of the chunk
when its records are evenly spaced), others lists of per-record arrays. Where the parse
gives ``None``, or the codec would raise for a record, so does :func:`example_decode_columns`:
the reader then decodes record by record.

>>> from recprep.codecs.example import ExampleCodec
>>> codec = ExampleCodec()
>>> records = [codec.encode({"v": np.array([i, -i], np.float32), "id": i}) for i in range(4)]
>>> cols = example_decode_columns(records)
>>> cols.tree["id"].tolist(), cols.tree["v"].dtype, cols.tree["v"].shape
([[0], [1], [2], [3]], dtype('float32'), (4, 2))
>>> example_decode_columns(records[:3] + [codec.encode({"v": np.zeros(2, np.float32)})]) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._core.batching import Columns
from ..features import Feature, fixed_size
from .chunk import Values, parse_chunk
from .wire import BYTES, FLOATS, INTS

__all__ = ["CHUNK_PARSE_MIN_RECORDS", "example_decode_columns", "parsed_chunk"]

CHUNK_PARSE_MIN_RECORDS = 4  # fewer: decoding them one by one costs less than walking them at once
_DECLARED_KIND = {"f": FLOATS, "b": INTS, "i": INTS, "u": INTS, "O": BYTES}


def _per_record_arrays(flat: np.ndarray, counts: np.ndarray, shapes: dict[int, Any] | None
                ) -> list[np.ndarray]:
    """Each record's values as its own (writable) array, reshaped to ``shapes[count]``."""
    if not flat.flags.writeable:
        flat = flat.copy()
    if shapes is None:
        return np.split(flat, np.cumsum(counts)[:-1])
    if list(shapes.values()) == [()]:
        return [flat[i, ...] for i in range(len(flat))]  # 0-d arrays, as decode gives
    parts = np.split(flat, np.cumsum(counts)[:-1])
    return [p.reshape(shapes[len(p)]) for p in parts]


def _object_values(values: Values) -> np.ndarray:
    out = np.empty(int(values.counts.sum()), object)
    out[:] = values.strings()
    return out


def _undeclared_column(values: Values, n: int) -> tuple[Any, Any]:
    """The column of a feature without declared features, and its signature."""
    if values.kind == BYTES:
        return _per_record_arrays(_object_values(values), values.counts, None), ("list", "O")
    k = values.fixed()
    if k is None:
        flat = values.flat()
        return _per_record_arrays(flat, values.counts, None), ("list", flat.dtype.str)
    stacked = values.values.reshape(n, k)
    return stacked, ("stack", stacked.dtype.str, (k,))


def _declared_shape(feature: Feature, count: int) -> tuple | None:
    """The shape ``count`` values take as ``feature`` (None: they don't fit it), as
    ``ExampleCodec`` reshapes them."""
    shape = feature.shape
    size = fixed_size(shape)
    if size is not None:
        return shape if count == size else None
    known = fixed_size(tuple(d for d in shape if d is not None)) or 0
    if (known and count % known) or (not known and count):
        return None
    fill = count // known if known else 0
    return tuple(fill if d is None else d for d in shape)


def _declared_column(feature: Feature, values: Values, n: int) -> tuple[Any, Any] | None:
    """The column of a declared feature and its signature; None where ``ExampleCodec``
    would raise, or makes per-record dtypes (str) or empty lists of no kind."""
    dt = feature.dtype
    if values.kind != _DECLARED_KIND.get(dt.kind) or not values.kind:
        return None
    if dt.kind == "O":
        flat = _object_values(values)
    elif dt.kind == "f" or dt == np.int64:
        flat = values.flat().astype(dt, copy=False)
    elif dt == np.uint64:
        flat = values.flat().view(np.uint64)
    else:
        flat = values.flat()
        info = np.iinfo(dt) if dt.kind != "b" else np.iinfo(np.uint8)
        top = 1 if dt.kind == "b" else info.max
        if flat.size and (flat.min() < info.min or flat.max() > top):
            return None
        flat = flat.astype(dt)
    shapes = {int(c): _declared_shape(feature, int(c)) for c in np.unique(values.counts)}
    if any(s is None for s in shapes.values()):
        return None
    if len(shapes) == 1 and dt.kind != "O" and (shape := next(iter(shapes.values()))) != ():
        stacked = flat.reshape((n, *shape))  # type: ignore[misc]
        return stacked, ("stack", stacked.dtype.str, shape)
    return _per_record_arrays(flat, values.counts, shapes), ("list", flat.dtype.str)


def parsed_chunk(records: Sequence[bytes | memoryview], features: Sequence[Feature] = ()
                 ) -> dict[str, Values] | None:
    """:func:`~recprep.codecs.example.chunk.parse_chunk` of a chunk of at least
    :data:`CHUNK_PARSE_MIN_RECORDS` records (only the declared ``features``' values)."""
    if len(records) < CHUNK_PARSE_MIN_RECORDS:
        return None
    return parse_chunk(records, [f.name for f in features] if features else None)


def example_decode_columns(records: Sequence[bytes | memoryview], features: Sequence[Feature] = ()
                   ) -> Columns | None:
    """The records' instances (as ``ExampleCodec(features)`` decodes them) as
    :class:`~recprep.batching.Columns`, or None (see the module docstring; with
    ``features``, str-typed features also give None)."""
    n = len(records)
    parsed = parsed_chunk(records, features)
    if parsed is None:
        return None
    tree: dict[str, Any] = {}
    signature = []
    if not features:
        for name, values in parsed.items():
            tree[name], sig = _undeclared_column(values, n)
            signature.append((name, sig))
    else:
        for feature in features:
            found = parsed.get(feature.name)
            column = None if found is None else _declared_column(feature, found, n)
            if column is None:
                return None
            tree[feature.name], sig = column
            signature.append((feature.name, sig))
    return Columns(tree, n, ("example", tuple(signature)))  # a batch copies its rows out
