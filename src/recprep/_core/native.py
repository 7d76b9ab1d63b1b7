"""recprep's optional C kernels, and whether they are in use.

A few loops over a chunk's records cost numpy several passes and Python a call per
record: cutting a RecordIO payload into its records, walking TFRecord frames with both
CRC-32Cs of each checked, checking records against a ``"recprep"`` layout while finding
where each value sits, and copying values out into their columns. One more is a library's
but costs a copy: decoding a snappy framing stream (a RecordIO chunk's payload) straight
into the bytes returned, each frame's CRC-32C checked in the same pass.
``recprep._core._kernels`` (``kernels.c``) runs them in one pass each, without the GIL.
It is built when recprep is installed where a C compiler is (a wheel built there has
it); an install without one still works, through numpy alone, and gives the same results
(``tests/codecs/test_native_kernels.py`` holds both to that). ``RECPREP_NATIVE=0`` in the
environment turns the kernels off for a process (to compare, or to rule them out).

>>> kernels() is None or hasattr(kernels(), "split_records")
True
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import google_crc32c

__all__ = ["NATIVE_ENV", "crc32c", "kernels", "native_off"]

#: set to ``0`` in the environment: recprep doesn't use its C kernels (numpy alone)
NATIVE_ENV = "RECPREP_NATIVE"

_LOADED: list[ModuleType | None] = []  # [the kernels, or None], once looked up


def kernels() -> ModuleType | None:
    """The compiled kernels, or None where they weren't built or are turned off."""
    if not _LOADED:
        _LOADED.append(_load())
    return _LOADED[0]


def _load() -> ModuleType | None:
    if os.environ.get(NATIVE_ENV, "1").strip() == "0":
        return None
    try:
        from . import _kernels  # type: ignore[attr-defined]
    except ImportError:
        return None
    module: ModuleType = _kernels
    return module


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """The CRC-32C of ``data`` (continuing ``crc``, that of the bytes before it): by the
    kernels where they are in use, else by google_crc32c (which takes no buffer but
    ``bytes``: another is copied for it).

    >>> crc32c(memoryview(b"123456789")) == crc32c(b"6789", crc32c(b"12345")) == 0xE3069283
    True
    """
    native = kernels()
    if native is not None:
        return int(native.crc32c_value(data, False, crc))
    return int(google_crc32c.extend(crc, data if type(data) is bytes else bytes(data)))


@contextmanager
def native_off() -> Iterator[None]:
    """Within the block, recprep runs without its C kernels (this thread and others):
    how the tests hold the numpy path to the same results.

    >>> with native_off():
    ...     kernels() is None
    True
    """
    saved = list(_LOADED)
    _LOADED[:] = [None]
    try:
        yield
    finally:
        _LOADED[:] = saved
