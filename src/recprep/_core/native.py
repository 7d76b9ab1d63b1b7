"""recprep's optional C kernels, and whether they are in use.

A few loops over a chunk's records cost numpy several passes and Python a call per
record: cutting a RecordIO payload into its records, walking TFRecord frames with both
CRC-32Cs of each checked, checking records against a ``"recprep"`` layout while finding
where each value sits, and copying values out into their columns. One more is a library's
but costs a copy: decoding a snappy framing stream (a RecordIO chunk's payload) straight
into the bytes returned, each frame's CRC-32C checked in the same pass. And the CRC-32 of
a RecordIO chunk (zlib's, for which processors have no instruction) is folded by AVX2's
carry-less multiplication where the processor has it (:func:`crc32`).
``recprep._core._kernels`` (``kernels.c``) runs them in one pass each, without the GIL.
It is built when recprep is installed where a C compiler is (a wheel built there has
it); an install without one still works, through numpy alone, and gives the same results
(``tests/codecs/test_native_kernels.py`` holds both to that). ``RECPREP_NATIVE=0`` in the
environment turns the kernels off for a process (to compare, or to rule them out).

>>> kernels() is None or hasattr(kernels(), "split_records")
True
"""

from __future__ import annotations

import importlib
import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import google_crc32c

__all__ = ["NATIVE_ENV", "crc32", "crc32c", "kernels", "native_off"]

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


def _library_crc32() -> Callable[..., int]:
    """CRC-32 by a library: isal's (PCLMUL/ARM CRC, ~5x CPython's zlib here: see
    ``benchmarks/RESULTS.md``) where it is installed, else zlib's. Same values."""
    try:
        found: Callable[..., int] = importlib.import_module("isal.isal_zlib").crc32
    except ImportError:
        return zlib.crc32
    return found


_CRC32 = _library_crc32()


def crc32(data: Any, crc: int = 0) -> int:
    """The CRC-32 (IEEE: zlib's) of ``data`` (continuing ``crc``): by the kernels where
    they are in use and the processor has AVX2's carry-less multiplication (24 GB/s on
    the machine of ``benchmarks/``), else by isal (12.6) or zlib.

    >>> crc32(memoryview(b"123456789")) == crc32(b"6789", crc32(b"12345")) == 0xCBF43926
    True
    """
    native = kernels()
    if native is not None and native.crc32_fast:
        return int(native.crc32_value(data, False, crc))
    return int(_CRC32(data, crc))


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
