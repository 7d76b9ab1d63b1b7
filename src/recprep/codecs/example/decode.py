"""A record's lists as arrays: the decoding side of the codec.

Without features, each list is a 1-D array (``float32``, ``int64``, or ``object`` holding
``bytes``): :func:`undeclared_arrays`. With them, each feature's list is converted to the
declared dtype and reshaped to the declared shape (:func:`declared_array`), or refused
with a :class:`~recprep.codecs.example.wire.WireError` saying why.

>>> from recprep.codecs.example.parse import parse
>>> found = parse(bytes.fromhex("0a0e0a0c0a01781207 1a050a0303ac02"))
>>> undeclared_arrays(found)
{'x': array([  3, 300])}
>>> from recprep.codecs.features import Feature
>>> kind, data, start, stop = found["x"]
>>> declared_array(Feature("x", "int16", (2, 1)), kind, READ[kind](data, start, stop))
array([[  3],
       [300]], dtype=int16)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..features import Feature, fixed_size
from .parse import READ, Found, read_bytes
from .wire import BYTES, FLOATS, INTS, KIND_NAME, WireError

__all__ = ["KIND_OF_DTYPE", "declared_array", "undeclared_arrays"]


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
KIND_OF_DTYPE = {"f": FLOATS, "b": INTS, "i": INTS, "u": INTS, "U": BYTES, "S": BYTES, "O": BYTES}


def declared_array(feature: Feature, kind: int, values: Any) -> np.ndarray:
    """The values of a list as ``feature`` declares them; raises
    :class:`WireError` if they don't fit."""
    dt = feature.dtype
    if kind != KIND_OF_DTYPE[dt.kind] and kind:
        raise WireError(f"feature {feature.name!r} is a {KIND_NAME[kind]}, but is declared "
                    f"{feature.describe()}")
    if not kind:
        values = [] if dt.kind in "USO" else _EMPTY[KIND_OF_DTYPE[dt.kind]]()
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
    return _reshaped_as_declared(feature, arr)


def _reshaped_as_declared(feature: Feature, arr: np.ndarray) -> np.ndarray:
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


def undeclared_arrays(found: dict[str, Found]) -> dict[str, np.ndarray]:
    """Each feature's list as a 1-D array, when no features are declared."""
    out = {}
    for name, (kind, data, start, stop) in found.items():
        if not kind:
            out[name] = _EMPTY[0]()
        elif kind == BYTES:
            out[name] = _object_array(read_bytes(data, start, stop))
        else:
            out[name] = READ[kind](data, start, stop)
    return out
