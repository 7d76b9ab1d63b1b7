"""The ``"pickle"`` codec: one pickle per record, as PaddlePaddle v2's readers expect.

Encoding uses ``pickle.dumps(instance, protocol=4)``, the records PaddlePaddle v2's
``recordio`` readers ``pickle.loads``; what plain pickle can't handle (lambdas, local
classes) goes through ``cloudpickle`` at the same protocol. Decoding unpickles, which can
run arbitrary code, so it refuses unless ``allow_pickle=True``; a record that is no pickle
at all (its opcodes, read without running any, don't make one) is a ``DecodeError`` that
suggests the codecs that may have written it, never ``allow_pickle``.

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
import pickletools
from typing import Any

import cloudpickle

from ..errors import REMEDY, DecodeError, EncodeError, PickleRefusedError
from .base import Codec
from .guess import PICKLE_OPENERS, codec_remedy, first_byte

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
    >>> codec.decode(b"\\xf1\\x00")  # a recprep record: no pickle, whatever allow_pickle
    Traceback (most recent call last):
    ...
    recprep.errors.DecodeError: the record is not a pickle: it starts with byte 0xf1 (it \
looks like a recprep record); pass codec='recprep' or codec='raw' if it was written with \
another codec
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
        """Return ``pickle.loads(record)``; raise PickleRefusedError unless ``allow_pickle``
        (DecodeError if the record is not a pickle)."""
        if not allow_pickle:
            problem = _not_a_pickle(record)
            if problem is not None:
                raise DecodeError(f"the record is not a pickle: {problem}{REMEDY}",
                                  remedy=codec_remedy(record, besides=self.name))
            raise PickleRefusedError()
        try:
            return pickle.loads(record)
        except Exception as e:
            raise DecodeError(
                f"the record is not a valid pickle ({type(e).__name__}: {e}): "
                f"{first_byte(record)}{REMEDY}",
                remedy=codec_remedy(record, besides=self.name),
            ) from e


def _not_a_pickle(record: bytes | memoryview) -> str | None:
    """What makes ``record`` no pickle, or None if it is one: its opcodes are read up to
    their STOP with ``pickletools.genops``, which runs nothing (bytes after the STOP are
    allowed, as ``pickle.loads`` ignores them)."""
    data = bytes(record)
    if not data or data[0] not in PICKLE_OPENERS:
        return first_byte(data)
    try:
        for op, _, _ in pickletools.genops(data):
            if op.name == "STOP":
                return None
    except Exception as e:  # a bad opcode or argument, or too few bytes
        return f"{first_byte(data)}, and its opcodes don't make a pickle ({e})"
    return f"{first_byte(data)}, and its opcodes don't make a pickle (no STOP)"
