"""The exceptions recprep raises on purpose.

Every one derives from :class:`RecprepError`, and also from the builtin exception that
fits (``ValueError`` for bad arguments, ``FileExistsError`` for output that is already
there, ...), so ``except ValueError`` keeps working for code that doesn't know recprep.
Each carries the facts of the failure as attributes (``path``, ``offset``, ``shard``,
``instance_index``...) as well as in its message, which says what was expected, what
was found and what to do.

Example
-------
>>> from recprep.errors import CorruptDataError, RecprepError
>>> err = CorruptDataError("bad magic 0x00000000", path="out/p-00000-of-00001", offset=40)
>>> isinstance(err, RecprepError), isinstance(err, ValueError), err.offset
(True, True, 40)
>>> print(err)  # doctest: +ELLIPSIS
out/p-00000-of-00001 at byte 40: bad magic 0x00000000 (the file is damaged: ...)
"""

from __future__ import annotations

from .base import REMEDY as REMEDY
from .base import LocatedError, RecprepError, RecprepWarning, Remedy
from .base import add_note as add_note
from .base import warn as warn
from .data import (
    ArrowMappingError,
    ChunkTooLargeError,
    CorruptDataError,
    CorruptDataWarning,
    DecodeError,
    ExampleMergeWarning,
    ModelFileError,
    PickleRefusedError,
    RawFileError,
    RecordsLostError,
    UntrustedFileError,
)
from .paths import (
    AmbiguousPathError,
    MissingShardsError,
    NotFoundError,
    PartialCopyWarning,
    SetChangedError,
    UncommittedSetWarning,
)
from .reading import DataStallWarning
from .stores import StoreUnavailableError, ThrottledWarning
from .usage import (
    ClusterUnreachableError,
    InstanceIndexError,
    InvalidArgumentError,
    MissingDependencyError,
    MovedModuleWarning,
    PluginError,
    PluginWarning,
    RecordRangeError,
    ResumeMismatchError,
    ResumeMismatchWarning,
    ResumeWarning,
    SchemaConflictError,
    UnsupportedColumnError,
    WorkerImportError,
)
from .writing import (
    ColumnsError,
    DatasetExistsError,
    EncodeError,
    InputError,
    KilledRunWarning,
    OutputExistsError,
    OutputLockedError,
    PickleFallbackWarning,
    SchemaMismatchError,
    TaskAbandonedWarning,
    TaskFailedError,
    Unfinishable,
    UnsplitInputWarning,
    WriteError,
)

__all__ = [
    "AmbiguousPathError",
    "ArrowMappingError",
    "ChunkTooLargeError",
    "ClusterUnreachableError",
    "ColumnsError",
    "CorruptDataError",
    "CorruptDataWarning",
    "DataStallWarning",
    "DatasetExistsError",
    "DecodeError",
    "EncodeError",
    "ExampleMergeWarning",
    "InputError",
    "InstanceIndexError",
    "InvalidArgumentError",
    "LocatedError",
    "KilledRunWarning",
    "MissingDependencyError",
    "MissingShardsError",
    "MovedModuleWarning",
    "ModelFileError",
    "NotFoundError",
    "OutputExistsError",
    "OutputLockedError",
    "PartialCopyWarning",
    "PickleFallbackWarning",
    "PickleRefusedError",
    "PluginError",
    "PluginWarning",
    "RawFileError",
    "RecordRangeError",
    "RecordsLostError",
    "RecprepError",
    "RecprepWarning",
    "Remedy",
    "ResumeMismatchError",
    "ResumeMismatchWarning",
    "ResumeWarning",
    "SchemaConflictError",
    "SchemaMismatchError",
    "SetChangedError",
    "StoreUnavailableError",
    "TaskAbandonedWarning",
    "TaskFailedError",
    "ThrottledWarning",
    "UncommittedSetWarning",
    "Unfinishable",
    "UnsplitInputWarning",
    "UnsupportedColumnError",
    "UntrustedFileError",
    "WorkerImportError",
    "WriteError",
]

# the classes are public here: tracebacks, pickles and the docs name them recprep.errors.*
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
