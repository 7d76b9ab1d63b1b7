"""recprep: training data into sharded RecordIO files, and back.

Example
-------
>>> from recprep import convert, RecordIO
>>> result = convert("memory://doc/init", [(i, i * 0.5) for i in range(6)], 2, "toy")
>>> list(RecordIO("memory://doc/init/toy-*-of-*")())
[(0, 0.0), (1, 0.5), (2, 1.0), (3, 1.5), (4, 2.0), (5, 2.5)]
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from . import _moved
from ._version import __version__
from .codecs import Codec, available_codecs, get_codec, register_codec
from .codecs.features import Feature
from .containers import available_formats, get_format, register_format
from .decorators import batch, shuffle
from .errors import (
    AmbiguousPathError,
    ChunkTooLargeError,
    ClusterUnreachableError,
    CorruptDataError,
    CorruptDataWarning,
    DataStallWarning,
    DecodeError,
    EncodeError,
    InputError,
    InvalidArgumentError,
    MissingDependencyError,
    MissingShardsError,
    NotFoundError,
    OutputExistsError,
    PickleFallbackWarning,
    PickleRefusedError,
    RecprepError,
    RecprepWarning,
    SetChangedError,
    StoreUnavailableError,
    TaskFailedError,
    ThrottledWarning,
    UncommittedSetWarning,
    UnsplitInputWarning,
    UntrustedFileError,
    WriteError,
)
from .executors import available_executors, register_executor
from .read.mixing import mix
from .read.reader import RecordIO
from .read.readstats import ReadStats
from .read.splits import index_split
from .read.taskqueue import TaskQueue
from .storage.fetch import FetchOptions, FetchStats
from .storage.manifest import Manifest

if TYPE_CHECKING:
    from .write.convert import ConvertResult, convert
    from .write.plan import partitions
    from .write.prepare import PrepareResult, prepare

#: names of the write side, imported on first use: a reader (a spawned DataLoader
#: worker unpickling its dataset) imports only the read side
_LAZY = {"ConvertResult": ".write.convert", "convert": ".write.convert",
         "partitions": ".write.plan", "PrepareResult": ".write.prepare",
         "prepare": ".write.prepare"}

__all__ = [
    "AmbiguousPathError",
    "ChunkTooLargeError",
    "ClusterUnreachableError",
    "Codec",
    "ConvertResult",
    "CorruptDataError",
    "CorruptDataWarning",
    "DataStallWarning",
    "DecodeError",
    "EncodeError",
    "Feature",
    "FetchOptions",
    "FetchStats",
    "InputError",
    "InvalidArgumentError",
    "Manifest",
    "MissingDependencyError",
    "MissingShardsError",
    "NotFoundError",
    "OutputExistsError",
    "PickleFallbackWarning",
    "PickleRefusedError",
    "PrepareResult",
    "ReadStats",
    "RecordIO",
    "RecprepError",
    "RecprepWarning",
    "SetChangedError",
    "StoreUnavailableError",
    "TaskFailedError",
    "TaskQueue",
    "ThrottledWarning",
    "UncommittedSetWarning",
    "UnsplitInputWarning",
    "UntrustedFileError",
    "WriteError",
    "__version__",
    "available_codecs",
    "available_executors",
    "available_formats",
    "batch",
    "convert",
    "get_codec",
    "get_format",
    "index_split",
    "mix",
    "partitions",
    "prepare",
    "register_codec",
    "register_executor",
    "register_format",
    "shuffle",
]

logging.getLogger("recprep").addHandler(logging.NullHandler())
_moved.install(sys.modules[__name__])


def __getattr__(name: str) -> Any:
    """``recprep.spark`` on first use, so ``import recprep`` never imports pyspark; the
    write side's names (``convert``, ``prepare``...) on first use too."""
    import importlib

    if name == "spark":
        return importlib.import_module(".spark", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'recprep' has no attribute {name!r}")
