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

from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = [
    "ChunkTooLargeError",
    "CorruptDataError",
    "DecodeError",
    "EncodeError",
    "InvalidArgumentError",
    "MissingDependencyError",
    "MissingShardsError",
    "NotFoundError",
    "OutputExistsError",
    "PickleRefusedError",
    "RecprepError",
    "TaskFailedError",
    "WriteError",
]


def _rebuild(
    cls: type[RecprepError], args: tuple[Any, ...], state: dict[str, Any]
) -> RecprepError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class RecprepError(Exception):
    """Base class of every error recprep raises on purpose.

    Errors pickle with their attributes, so they travel back from worker processes and
    cluster tasks intact.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


class InvalidArgumentError(RecprepError, ValueError):
    """An argument has a value recprep can't use; raised before anything is written."""


class MissingDependencyError(RecprepError, ImportError):
    """An optional engine is not installed; the message names the extra to install.

    Attributes: ``package`` (the module that failed to import), ``extra``.
    """

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs {package!r}, which is not installed: "
            f"pip install 'recprep[{extra}]'"
        )


class OutputExistsError(RecprepError, FileExistsError):
    """The output already holds a shard set with this prefix and ``overwrite`` is off.

    Attributes: ``path`` (the output directory), ``existing`` (the files found).
    """

    def __init__(self, path: str, existing: Sequence[str]) -> None:
        self.path = path
        self.existing = list(existing)
        shown = ", ".join(self.existing[:3]) + (" ..." if len(self.existing) > 3 else "")
        super().__init__(
            f"{path} already holds {len(self.existing)} file(s) of this shard set "
            f"({shown}); pass overwrite=True to replace them once the new set is complete, "
            "or choose another name_prefix or output path"
        )


class NotFoundError(RecprepError, FileNotFoundError):
    """Nothing to read where the user pointed. Attributes: ``path``."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        super().__init__(f"{path}: {detail}; check the path (and storage_options)")


class MissingShardsError(RecprepError, FileNotFoundError):
    """A glob matched part of a shard set whose other shards don't exist.

    Attributes: ``pattern``, ``missing`` (the expected paths that aren't there).
    """

    def __init__(self, pattern: str, missing: Sequence[str], found: int) -> None:
        self.pattern = pattern
        self.missing = list(missing)
        shown = ", ".join(self.missing[:5]) + (" ..." if len(self.missing) > 5 else "")
        super().__init__(
            f"{pattern!r} matched {found} shard(s) of a set that should have "
            f"{found + len(self.missing)}; missing: {shown}. Copy the missing shards, or "
            "name the files you want explicitly to read only those"
        )


_L = TypeVar("_L", bound="_Located")


class _Located(RecprepError):
    """Mixin for errors about a place in a file: prefixes the message with it."""

    #: what to do, appended to the message
    hint = ""

    def __init__(
        self,
        detail: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        record_index: int | None = None,
    ) -> None:
        self.detail = detail
        self.path = path
        self.offset = offset
        self.record_index = record_index
        where = []
        if path is not None:
            where.append(str(path))
        if offset is not None:
            where.append(f"at byte {offset}")
        if record_index is not None:
            where.append(f"record {record_index} of the chunk")
        prefix = " ".join(where)
        message = f"{prefix}: {detail}" if prefix else detail
        super().__init__(message + self.hint)

    def located(self: _L, **where: object) -> _L:
        """Return a copy of this error with location facts filled in where missing."""
        facts: dict[str, Any] = {
            "path": self.path, "offset": self.offset, "record_index": self.record_index
        }
        facts.update({k: v for k, v in where.items() if facts.get(k) is None})
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        _Located.__init__(err, self.detail, **facts)
        return err


class CorruptDataError(_Located, ValueError):
    """A file's bytes are not what the format says: bad magic, checksum, length, ...

    Attributes: ``path``, ``offset`` (of the chunk or record), ``detail``.
    """

    hint = (
        " (the file is damaged: copy it again from its source; `recprep verify` lists all "
        "damage; RecordIO(..., on_corrupt='skip') reads around it)"
    )


class ChunkTooLargeError(CorruptDataError):
    """A chunk claims (or decompresses to) more than ``max_chunk_bytes``.

    Attributes: ``size`` (claimed or reached), ``limit``.
    """

    def __init__(self, size: int, limit: int, **where: object) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"chunk needs at least {size} bytes, more than max_chunk_bytes={limit}; "
            "the file is damaged, or it has unusually large chunks: raise max_chunk_bytes",
            **where,  # type: ignore[arg-type]
        )

    hint = ""


class DecodeError(_Located, ValueError):
    """A record's bytes are not a valid encoding for the codec reading them."""


class PickleRefusedError(_Located):
    """A record holds a pickle and ``allow_pickle`` is off.

    Unpickling runs code chosen by whoever wrote the file, so recprep never does it
    unless asked: pass ``allow_pickle=True`` only for data you trust.
    """

    def __init__(self, detail: str | None = None, **where: object) -> None:
        super().__init__(
            detail
            or (
                "the record holds a pickled value, and unpickling can execute arbitrary "
                "code; pass allow_pickle=True if you trust where this file came from"
            ),
            **where,  # type: ignore[arg-type]
        )


class EncodeError(RecprepError, TypeError):
    """An instance can't be encoded by the chosen codec.

    Attributes: ``instance_index`` (position in the reader's output, when known).
    """

    def __init__(self, detail: str, instance_index: int | None = None) -> None:
        self.detail = detail
        self.instance_index = instance_index
        where = f"instance {instance_index}: " if instance_index is not None else ""
        super().__init__(where + detail)


class WriteError(RecprepError, OSError):
    """Writing a shard failed (disk full, permission, network...).

    Attributes: ``path``, ``original`` (the underlying exception).
    """

    def __init__(self, path: str, original: BaseException) -> None:
        self.path = path
        self.original = original
        super().__init__(
            f"writing {path} failed: {type(original).__name__}: {original}; "
            "nothing was committed and the temporaries were removed (check output_path, "
            "its permissions and free space)"
        )


class TaskFailedError(RecprepError):
    """A conversion task failed; carries what failed and the original error.

    Attributes: ``task`` (a description: partition / shard), ``original`` (the original
    exception when it could be sent back, else None), ``original_type``,
    ``original_message``, ``original_traceback`` (text).
    """

    def __init__(
        self,
        task: str,
        original_type: str,
        original_message: str,
        original_traceback: str = "",
    ) -> None:
        self.task = task
        self.original_type = original_type
        self.original_message = original_message
        self.original: BaseException | None = None
        self.original_traceback = original_traceback
        shown = original_type.rsplit(".", 1)[-1] if original_type.startswith("recprep.") else (
            original_type
        )
        super().__init__(
            f"{task} failed with {shown}: {original_message}; nothing was committed "
            "(the original traceback is in .original_traceback; the CLI shows it with "
            "--debug)" + (f"\n\n{original_traceback}" if original_traceback else "")
        )
