"""An instance's values as ``tf.train.Example`` lists: the encoding side of the codec.

:func:`inferred_array` makes the array of a value when no features are declared (a Python
``float`` is float64, and refused: Example floats are float32); :func:`list_pieces` turns
an array into the Feature kind and the pieces of its list message (float32 bytes,
varints built by numpy, or one field per byte string), which
:func:`~recprep.codecs.example.wire.example` frames into the record.

>>> kind, pieces = list_pieces("x", inferred_array("x", [3, 300]))
>>> kind == INTS, b"".join(pieces).hex(" ")
(True, '0a 03 03 ac 02')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import EncodeError
from .wire import BYTES, FLOATS, INTS, field_head, varints

__all__ = ["FLOAT64_REFUSED", "inferred_array", "list_pieces", "not_utf8_error"]

#: why a float64 value or feature is refused
FLOAT64_REFUSED = (
    "Example floats are float32: declare the feature float32, or use codec='recprep' "
    "for exact float64"
)


def list_pieces(name: str, arr: np.ndarray) -> tuple[int, list[bytes]]:
    """The Feature oneof field number and the pieces of its list message's body."""
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype.itemsize > 4:
            raise EncodeError(f"feature {name!r} is {arr.dtype.name}: {FLOAT64_REFUSED}")
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


def inferred_array(name: Any, value: Any) -> np.ndarray:
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
        raise EncodeError(f"feature {name!r}: a Python float is float64, and {FLOAT64_REFUSED}")
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
        raise EncodeError(f"feature {name!r}: Python floats are float64, and {FLOAT64_REFUSED}")
    return arr



def not_utf8_error(values: Mapping[str, Any]) -> EncodeError:
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
