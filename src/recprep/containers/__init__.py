"""Container formats (``format=``), in a registry keyed by name.

Built in: ``"recordio"`` (Go/PaddlePaddle/ElasticDL, the default) and
``"recordio-legacy"`` (pyrecordio 0.0.4). Both are read by the same reader, which
tells the variants apart from the bytes.

Example
-------
>>> from recprep.containers import available_formats, detect_format
>>> available_formats()
['recordio', 'recordio-legacy']
>>> detect_format(bytes.fromhex("04030201")).name
'recordio'
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from .base import DEFAULT_MAX_CHUNK_BYTES, Chunk, ChunkInfo, Format, RecordWriter
from .recordio import LegacyRecordIOFormat, RecordIOFormat

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
