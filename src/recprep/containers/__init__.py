"""Container formats (``format=``), in a registry keyed by name.

Built in: ``"recordio"`` (Go/PaddlePaddle/ElasticDL, the default),
``"recordio-legacy"`` (pyrecordio 0.0.4) and ``"tfrecord"`` (TensorFlow's, plain, gzip or
zlib). The two RecordIO variants are read by the same reader, which tells them apart from
the bytes; :func:`detect_format` tries the formats in registration order, RecordIO's magic
first, so a TFRecord file is recognised by its first record's length CRC (or its gzip or
zlib stream).

Example
-------
>>> from recprep.containers import available_formats, detect_format
>>> available_formats()
['recordio', 'recordio-legacy', 'tfrecord']
>>> detect_format(bytes.fromhex("04030201")).name
'recordio'
>>> detect_format(bytes.fromhex("0100000000000000 0175de41 61 786ee428")).name
'tfrecord'
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from .base import DEFAULT_MAX_CHUNK_BYTES, Chunk, ChunkInfo, Format, RecordWriter
from .recordio import LegacyRecordIOFormat, RecordIOFormat
from .tfrecord import TFRecordFormat

__all__ = [
    "DEFAULT_MAX_CHUNK_BYTES",
    "Chunk",
    "ChunkInfo",
    "Format",
    "RecordWriter",
    "available_formats",
    "detect_format",
    "get_format",
    "register_format",
]

_REGISTRY: dict[str, type[Format]] = {}


def register_format(cls: type[Format], *, replace: bool = False) -> None:
    """Make ``format=cls.name`` mean ``cls``."""
    if not replace and cls.name in _REGISTRY:
        raise InvalidArgumentError(
            f"a format named {cls.name!r} is already registered; pass replace=True"
        )
    _REGISTRY[cls.name] = cls


def available_formats() -> list[str]:
    """The registered format names, sorted."""
    return sorted(_REGISTRY)


def get_format(name: str) -> Format:
    """Return the format registered as ``name``."""
    try:
        return _REGISTRY[name]()
    except (KeyError, TypeError):
        raise InvalidArgumentError(
            f"unknown format {name!r}; valid formats are {available_formats()}"
        ) from None


def detect_format(head: bytes) -> Format | None:
    """The first registered format (in registration order) whose sniff accepts ``head``."""
    for cls in _REGISTRY.values():
        if cls.sniff(head):
            return cls()
    return None


register_format(RecordIOFormat)
register_format(LegacyRecordIOFormat)
register_format(TFRecordFormat)  # after RecordIO: its magic is checked first
