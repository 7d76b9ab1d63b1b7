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

from .._core.records import Chunk, Gap, Records, nbytes
from .._core.registry import Registry
from ..errors import CorruptDataError, InvalidArgumentError, Remedy
from .base import (
    DEFAULT_MAX_CHUNK_BYTES,
    SNIFF_BYTES,
    ChunkInfo,
    Format,
    RecordWriter,
    Source,
)

__all__ = [
    "DEFAULT_MAX_CHUNK_BYTES",
    "Chunk",
    "Gap",
    "ChunkInfo",
    "Format",
    "RecordWriter",
    "Records",
    "SNIFF_BYTES",
    "available_formats",
    "detect_format",
    "get_format",
    "indexing_formats",
    "nbytes",
    "register_format",
    "sniff",
]


def _check_format_class(name: str, cls: type[Format]) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Format)):
        raise InvalidArgumentError(
            f"format {name!r} must be a recprep.containers.Format subclass, got {cls!r}"
        )
    if cls.name != name:
        raise InvalidArgumentError(
            f"format {name!r} is registered as {cls.name!r} by its class {cls.__name__} "
            "(its `name` attribute); the two must agree"
        )


#: registration order is detection order (the ``recprep.formats`` plug-ins come last)
_FORMATS: Registry[type[Format]] = Registry("format", group="recprep.formats",
                                            check=_check_format_class)


def register_format(
    cls: type[Format] | str, *, name: str | None = None, replace: bool = False
) -> None:
    """Make ``format=cls.name`` mean ``cls``.

    ``cls`` may be a dotted path (``"package.module:MyFormat"``, imported on first use),
    given with its ``name``. A name already registered raises
    :class:`~recprep.errors.InvalidArgumentError` unless ``replace=True``.
    """
    if isinstance(cls, str):
        if name is None:
            raise InvalidArgumentError(f"register_format({cls!r}) needs name=: the format's "
                                       "name, to register it without importing it")
        _FORMATS.register(name, cls, replace=replace)
    else:
        _FORMATS.register(cls.name if name is None else name, cls, replace=replace)


def available_formats() -> list[str]:
    """The registered format names, sorted (plug-ins too; none is imported)."""
    return _FORMATS.available()


def get_format(name: str) -> Format:
    """Return the format registered as ``name``."""
    return _FORMATS.get(name)()


def indexing_formats() -> list[Format]:
    """The registered formats that keep a record index beside each shard
    (:attr:`Format.record_index`), in registration order.

    >>> [f.name for f in indexing_formats()]
    ['tfrecord']
    """
    return [cls() for cls in _FORMATS.values() if cls.record_index is not None]


def detect_format(head: bytes) -> Format | None:
    """The first registered format (in registration order) whose sniff accepts ``head``."""
    for cls in _FORMATS.values():
        if cls.sniff(head):
            return cls()
    return None


def sniff(file: Source, *, path: str, remedy: Remedy | None = None) -> Format | None:
    """The format of the open ``file``, from its first :data:`SNIFF_BYTES` bytes (read
    from its start; the file is left at its start): None for an empty file. Bytes no
    format accepts raise :class:`~recprep.errors.CorruptDataError` naming ``path`` (with
    ``remedy``, what the user can pass instead). The one sniff of recprep.

    >>> import io
    >>> sniff(io.BytesIO(bytes.fromhex("04030201")), path="f").name
    'recordio'
    >>> try:
    ...     sniff(io.BytesIO(b"hello"), path="f")
    ... except CorruptDataError as err:
    ...     print(err.detail)
    not a file of any known format (it starts with 68656c6c6f; known formats: \
['recordio', 'recordio-legacy', 'tfrecord'])
    """
    file.seek(0)
    head = file.read(SNIFF_BYTES) or b""
    file.seek(0)
    if not head:
        return None
    found = detect_format(head)
    if found is None:
        raise CorruptDataError(
            f"not a file of any known format (it starts with {head[:8].hex()}; known "
            f"formats: {available_formats()})", path=path, offset=0, remedy=remedy,
        )
    return found


for _name, _path in (
    ("recordio", "recordio:RecordIOFormat"),
    ("recordio-legacy", "recordio:LegacyRecordIOFormat"),
    ("tfrecord", "tfrecord:TFRecordFormat"),  # after RecordIO: its magic is checked first
):
    register_format(f"{__name__}.{_path}", name=_name)
