"""The ``"raw"`` codec: the instance is the record, bytes as they are.

For data already serialized (a ``tf.train.Example``'s ``SerializeToString()``, an
image file...). Instances must be ``bytes``, ``bytearray`` or ``memoryview``; records
decode to ``bytes``.

Example
-------
>>> codec = RawCodec()
>>> codec.encode(bytearray(b"abc"))
b'abc'
>>> codec.decode(memoryview(b"abc"))
b'abc'
"""

from __future__ import annotations

from typing import Any

from ..errors import EncodeError
from .base import Codec

__all__ = ["RawCodec"]


class RawCodec(Codec):
    """Store bytes-like instances unchanged; decode to ``bytes``.

    Examples
    --------
    >>> RawCodec().encode((1, 2))
    Traceback (most recent call last):
    ...
    recprep.errors.EncodeError: codec='raw' takes bytes-like instances (bytes, bytearray, \
memoryview); got tuple. Serialize it yourself (e.g. Example.SerializeToString()) or use \
codec='recprep'
    """

    name = "raw"

    def encode(self, instance: Any) -> bytes:
        """Return ``instance`` as ``bytes``."""
        if type(instance) is bytes:
            return instance
        if isinstance(instance, (bytes, bytearray, memoryview)):
            return bytes(instance)
        raise EncodeError(
            "codec='raw' takes bytes-like instances (bytes, bytearray, memoryview); got "
            f"{type(instance).__qualname__}. Serialize it yourself (e.g. "
            "Example.SerializeToString()) or use codec='recprep'"
        )

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return ``record`` as ``bytes``."""
        return record if type(record) is bytes else bytes(record)
