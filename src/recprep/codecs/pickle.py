"""The ``"pickle"`` codec: one pickle per record, as PaddlePaddle v2's readers expect.

Encoding uses ``pickle.dumps(instance, protocol=4)``, the records PaddlePaddle v2's
``recordio`` readers ``pickle.loads``; what plain pickle can't handle (lambdas, local
classes) goes through ``cloudpickle`` at the same protocol. Decoding unpickles, which can
run arbitrary code, so it refuses unless ``allow_pickle=True``.

Example
-------
>>> codec = PickleCodec()
>>> record = codec.encode((1, "a"))
>>> record[:2]
b'\\x80\\x04'
>>> codec.decode(record, allow_pickle=True)
(1, 'a')
"""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle

from ..errors import REMEDY, DecodeError, EncodeError, PickleRefusedError, Remedy
from .base import Codec

__all__ = ["PROTOCOL", "PickleCodec"]

#: the pickle protocol records are written with (PaddlePaddle v2 runs on Python 3.4+)
PROTOCOL = 4


class PickleCodec(Codec):
    """Records are pickles (protocol 4); decoding needs ``allow_pickle=True``.

    Examples
    --------
    >>> codec = PickleCodec()
    >>> double = codec.decode(codec.encode(lambda x: 2 * x), allow_pickle=True)
    >>> double(21)
    42
    >>> codec.decode(codec.encode(1))
    Traceback (most recent call last):
    ...
    recprep.errors.PickleRefusedError: the record holds a pickled value, and unpickling can \
execute arbitrary code; pass allow_pickle=True if you trust where this file came from
    """

    name = "pickle"

    def encode(self, instance: Any) -> bytes:
        """Return ``pickle.dumps(instance, protocol=4)``, or cloudpickle's if that fails."""
        try:
            return pickle.dumps(instance, protocol=PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError):
            pass  # lambdas, local classes...: cloudpickle pickles them by value
        try:
            return cloudpickle.dumps(instance, protocol=PROTOCOL)
        except Exception as e:
            raise EncodeError(
                f"codec='pickle' can't pickle a {type(instance).__qualname__} "
                f"({type(e).__name__}: {e})"
            ) from e

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return ``pickle.loads(record)``; raise PickleRefusedError unless ``allow_pickle``."""
        if not allow_pickle:
            raise PickleRefusedError()
        try:
            return pickle.loads(record)
        except Exception as e:
            raise DecodeError(
                f"the record is not a valid pickle ({type(e).__name__}: {e}){REMEDY}",
                remedy=Remedy("codec", "recprep", also=("raw",),
                              effect="if it was written with another codec"),
            ) from e
