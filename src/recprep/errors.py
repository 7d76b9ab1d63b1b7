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

import errno
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "AmbiguousPathError",
    "ChunkTooLargeError",
    "ClusterUnreachableError",
    "ColumnsError",
    "CorruptDataError",
    "CorruptDataWarning",
    "DatasetExistsError",
    "DecodeError",
    "EncodeError",
    "ExampleMergeWarning",
    "InputError",
    "InstanceIndexError",
    "InvalidArgumentError",
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
    "ResumeWarning",
    "SchemaConflictError",
    "SchemaMismatchError",
    "SetChangedError",
    "TaskAbandonedWarning",
    "TaskFailedError",
    "UncommittedSetWarning",
    "Unfinishable",
    "UnsplitInputWarning",
    "UnsupportedColumnError",
    "UntrustedFileError",
    "WorkerImportError",
    "WriteError",
]


def _rebuild(
    cls: type[RecprepError], args: tuple[Any, ...], state: dict[str, Any]
) -> RecprepError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


#: where a message template says a remedy ("; pass <option> <effect>", or nothing); the
#: markers of a message are said by its remedies in order
REMEDY = "{remedy}"


@dataclass(frozen=True)
class Remedy:
    """An option the user can set to get past an error, kept apart from the words.

    ``option`` is the Python keyword (``"on_corrupt"``); ``value`` what to set it to
    (``None``: a value of the user's choosing), ``also`` other values that work too;
    ``effect`` what it does. The error's message says it the Python way;
    :meth:`RecprepError.message` lets another audience say it its own way (the command
    line says ``--on-corrupt skip``).

    Examples
    --------
    >>> Remedy("on_corrupt", "skip").python(), Remedy("format").python()
    ("on_corrupt='skip'", 'format=')
    >>> Remedy("codec", "pickle", also=("raw",)).python()
    "codec='pickle' or codec='raw'"
    """

    option: str
    value: Any = None
    also: tuple[Any, ...] = ()
    effect: str = ""

    @property
    def values(self) -> tuple[Any, ...]:
        """``value`` then ``also``."""
        return (self.value, *self.also)

    def python(self) -> str:
        """How a Python caller passes it: ``on_corrupt='skip'``, ``format=``."""
        return " or ".join(
            f"{self.option}=" if v is None else f"{self.option}={v!r}" for v in self.values
        )

    def clause(self, said: str | None) -> str:
        """``"; pass SAID EFFECT"``, or ``""`` when there is nothing to say."""
        if not said:
            return ""
        return f"; pass {said}" + (f" {self.effect}" if self.effect else "")


class RecprepError(Exception):
    """Base class of every error recprep raises on purpose.

    Errors pickle with their attributes, so they travel back from worker processes and
    cluster tasks intact.

    ``remedy`` (a :class:`Remedy` or None) names the option that gets past the error
    (``remedies``: all of them, when there are several). A message with the marker
    ``{remedy}`` is a template: ``str(err)`` says the remedies the Python way,
    :meth:`message` the way its caller asks.

    Examples
    --------
    >>> err = RecprepError("x.bin: unknown format{remedy}", remedy=Remedy("format"))
    >>> str(err)
    'x.bin: unknown format; pass format='
    >>> err.message(lambda r: "--" + r.option), err.message(lambda r: None)
    ('x.bin: unknown format; pass --format', 'x.bin: unknown format')
    """

    #: the options that get past this error, in the order its message says them
    remedies: tuple[Remedy, ...] = ()

    def __init__(self, *args: Any, remedy: Remedy | Sequence[Remedy] | None = None) -> None:
        if remedy is not None:
            self.remedies = (remedy,) if isinstance(remedy, Remedy) else tuple(remedy)
        if args and isinstance(args[0], str) and REMEDY in args[0]:
            self._template = args[0]
            args = (self._say(Remedy.python), *args[1:])
        super().__init__(*args)

    @property
    def remedy(self) -> Remedy | None:
        """The first of ``remedies``, or None."""
        return self.remedies[0] if self.remedies else None

    def _say(self, say: Callable[[Remedy], str | None]) -> str:
        parts = self._template.split(REMEDY)
        clauses = [r.clause(say(r)) for r in self.remedies[: len(parts) - 1]]
        clauses += [""] * (len(parts) - 1 - len(clauses))
        return "".join(p + c for p, c in zip(parts, [*clauses, ""], strict=True))

    def message(self, say: Callable[[Remedy], str | None] | None = None) -> str:
        """The message with each remedy said by ``say(remedy)`` (``"--on-corrupt skip"``;
        None leaves that remedy out); without ``say``, ``str(self)``."""
        if say is None or "_template" not in self.__dict__:
            return str(self)
        return self._say(say)

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


class WorkerImportError(RecprepError, ImportError):
    """The Python that runs a Spark job's tasks can't import recprep (or a module recprep
    imports): the workers run another interpreter than the driver, one without recprep —
    typically a SparkSession of the user's own, started outside the activated venv.

    Attributes: ``module`` (the module that failed to import), ``python`` (the workers'
    interpreter as Spark was told it, or None), ``original_traceback`` (the worker's).
    """

    def __init__(self, module: str, python: str | None, driver_python: str,
                 original_traceback: str = "") -> None:
        self.module = module
        self.python = python
        self.original_traceback = original_traceback
        lacks = "" if module == "recprep" else f" (it lacks {module!r}, which recprep imports)"
        runs = (f"they run {python}" if python else
                "PYSPARK_PYTHON is not set, so they run the first python3 on their PATH")
        super().__init__(
            f"the Spark workers' Python can't import recprep{lacks}; set PYSPARK_PYTHON (or "
            "the spark.pyspark.python setting) to a Python where recprep is installed before "
            f"the SparkSession is created (on one machine, this driver's: {driver_python}), "
            f"or install recprep into the workers' Python ({runs}). The worker's traceback "
            "is in .original_traceback"
        )


class PluginError(RecprepError, ImportError):
    """A plug-in (an entry point of another distribution) fails to load, or loads something
    that is not a valid entry of its registry.

    Attributes: ``kind`` (``"format"``...), ``plugin`` (its name), ``value`` (the entry point's
    ``module:attr``), ``distribution`` (name and version), ``group``, ``original``.
    """

    def __init__(
        self, kind: str, name: str, value: str, distribution: str, group: str,
        original: BaseException,
    ) -> None:
        self.kind = kind
        self.plugin = name
        self.value = value
        self.distribution = distribution
        self.group = group
        self.original = original
        super().__init__(
            f"the {kind} {name!r} of {distribution} (entry point {value!r} in group "
            f"{group!r}) fails to load: {type(original).__name__}: {original}; upgrade or "
            f"uninstall {distribution.rpartition(' ')[0] or distribution}"
        )


class OutputExistsError(RecprepError, FileExistsError):
    """The output already holds a shard set with this prefix and ``overwrite`` is off.

    Attributes: ``path`` (the output directory), ``existing`` (the files found).
    """

    def __init__(self, path: str, existing: Sequence[str], *, resumable: bool = False) -> None:
        self.path = path
        self.existing = list(existing)
        shown = ", ".join(self.existing[:3]) + (" ..." if len(self.existing) > 3 else "")
        remedies = [Remedy("overwrite", True, effect="to replace them once the new set is "
                           "complete")]
        interrupted = ""
        if resumable:  # no manifest: a run that was killed before its commit
            interrupted = f" and no manifest{REMEDY} if a conversion into it was interrupted"
            remedies.insert(0, Remedy("resume", True, effect="to finish it"))
        super().__init__(
            f"{path} already holds {len(self.existing)} file(s) of this shard set "
            f"({shown}){interrupted}{REMEDY}, or choose another name prefix or output path",
            remedy=remedies,
        )


class DatasetExistsError(OutputExistsError):
    """:func:`recprep.spark.write` with ``mode="error"`` (the default) found its path
    holding files: it says the modes that write there anyway.

    Attributes: ``path`` (the dataset directory), ``existing`` (the entries found).
    """

    def __init__(self, path: str, existing: Sequence[str]) -> None:
        self.path = path
        self.existing = list(existing)
        shown = ", ".join(self.existing[:3]) + (" ..." if len(self.existing) > 3 else "")
        count = len(self.existing)
        RecprepError.__init__(
            self,
            f"{path} already holds {count} entr{'y' if count == 1 else 'ies'} ({shown})"
            f"{REMEDY}{REMEDY}, or write to another path",
            remedy=[
                Remedy("mode", "overwrite", effect="to replace the partition directories the "
                       "DataFrame has rows for once it is written (with "
                       "partition_overwrite='static': everything)"),
                Remedy("mode", "append", effect="to add a shard set beside what is there"),
            ],
        )


class ClusterUnreachableError(RecprepError, ConnectionError):
    """Nothing answered at a cluster's address within the connect timeout.

    Attributes: ``address`` (as given), ``timeout`` (seconds), ``detail`` (the last error).
    """

    def __init__(self, what: str, address: str, timeout: float, detail: str) -> None:
        self.address = address
        self.timeout = timeout
        self.detail = detail
        super().__init__(
            f"can't reach the {what} at {address} within {timeout:g} s ({detail}); check "
            f"that it is running and the address is right{REMEDY}",
            remedy=Remedy("connect_timeout", effect="to wait longer for one that is starting"),
        )


class NotFoundError(RecprepError, FileNotFoundError):
    """Nothing to read where the user pointed. Attributes: ``path``, ``detail``."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(
            f"{path}: {detail}; check the path{REMEDY}",
            remedy=Remedy("storage_options", effect="if the storage needs credentials or "
                          "an endpoint"),
        )


class AmbiguousPathError(InvalidArgumentError):
    """A path names several shard sets where one is expected (a directory holding
    ``train`` and ``test``, a glob matching files of both): reading them as one stream
    would mix them.

    Attributes: ``path`` (as given), ``directory``, ``sets`` (name -> number of shards
    matched), ``paths`` (name -> the path that names that set alone: pass one, or a list).
    """

    def __init__(
        self, path: str, directory: str, sets: Mapping[str, int], detail: str = "",
        *, paths: Mapping[str, str] | None = None, files: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.directory = directory
        self.sets = dict(sets)
        base = directory.rstrip("/")
        given = dict(paths or {})
        self.paths = {name: given.get(name, f"{base}/{name}") for name in self.sets}
        lone = set(files)  # names that are single data files, not sets

        def said(name: str, count: int) -> str:
            return "a file" if name in lone else f"{count} shard{'' if count == 1 else 's'}"

        listed = ", ".join(f"{name} ({said(name, count)})" for name, count in self.sets.items())
        one = next((self.paths[n] for n in self.sets if n not in lone), f"{base}/name")
        if any(c in one for c in "*?["):
            name_one = f"Name one: {one!r}"
        else:
            name_one = (f"Name one set: {one!r} (the directory and the set's prefix), its "
                        f"glob '{one}-*-of-*' or its manifest '{one}.manifest.json'")
        super().__init__(
            f"{path}: {detail or 'the directory holds several shard sets'}: {listed}. "
            f"{name_one}; to read several sets as one stream on purpose, pass a list of "
            f"them: {list(self.paths.values())!r}"
        )


class MissingShardsError(RecprepError, FileNotFoundError):
    """A glob matched part of a shard set whose other shards don't exist.

    Attributes: ``pattern``, ``missing`` (the expected paths that aren't there).
    """

    def __init__(
        self, pattern: str, missing: Sequence[str], found: int, *, manifest: bool = True
    ) -> None:
        self.pattern = pattern
        self.missing = list(missing)
        shown = ", ".join(self.missing[:5]) + (" ..." if len(self.missing) > 5 else "")
        alone = "" if manifest else (
            " The set's manifest isn't there either: these are some shards of a set (a "
            "partial copy?), not a committed set.")
        super().__init__(
            f"{pattern!r} matched {found} shard(s) of a set that should have "
            f"{found + len(self.missing)}; missing: {shown}.{alone} Copy the missing shards, "
            "or pass the files you want as a list of paths to read only those (on the "
            "command line: the files themselves, e.g. an unquoted glob)"
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
        remedy: Remedy | Sequence[Remedy] | None = None,
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
        super().__init__(message + self.hint, remedy=remedy)

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
        f"damage{REMEDY})"
    )
    remedies = (Remedy("on_corrupt", "skip", effect="to read around it"),)


class ChunkTooLargeError(CorruptDataError):
    """A chunk claims (or decompresses to) more than ``max_chunk_bytes``.

    Attributes: ``size`` (claimed or reached), ``limit``.
    """

    def __init__(self, size: int, limit: int, **where: object) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"chunk needs at least {size} bytes, more than the limit of {limit}",
            **where,  # type: ignore[arg-type]
        )

    hint = f"; the file is damaged, or it has unusually large chunks{REMEDY}"
    remedies = (Remedy("max_chunk_bytes", effect="with a larger limit to read them"),)


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
            or "the record holds a pickled value, and unpickling can execute arbitrary code",
            **where,  # type: ignore[arg-type]
        )

    hint = REMEDY
    remedies = (
        Remedy("allow_pickle", True, effect="if you trust where this file came from"),
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
    """Writing a shard failed (disk full, permission, network, out of file descriptors...).

    Attributes: ``path``, ``original`` (the underlying exception). The message says what
    to check: the output's permissions and free space, or — for ``EMFILE``/``ENFILE`` —
    the open-files limit, with its value.
    """

    def __init__(self, path: str, original: BaseException) -> None:
        self.path = path
        self.original = original
        exhausted = getattr(original, "errno", None) in (errno.EMFILE, errno.ENFILE)
        done = ("nothing was committed" if exhausted  # (removing them may need descriptors)
                else "nothing was committed and the temporaries were removed")
        super().__init__(
            f"writing {path} failed: {type(original).__name__}: {original}; {done} "
            f"({_advice(original)})"
        )


def _advice(original: BaseException) -> str:
    """What to check after ``original`` failed a write."""
    code = getattr(original, "errno", None)
    if code == errno.ENFILE:
        return ("the system's table of open files is full, for all processes together "
                "(fs.file-max): close files elsewhere, or raise that limit")
    if code != errno.EMFILE:
        return "check output_path, its permissions and free space"
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = f"{soft}" + ("" if hard == soft else f", at most {hard} without root")
    except (ImportError, OSError, ValueError):  # not POSIX
        limit = "unknown here"
    return (f"this process reached its limit of open files (RLIMIT_NOFILE, `ulimit -n`: "
            f"{limit}); recprep holds at most a quarter of it (256 at most) for a task's "
            "shards, whatever their number, so the rest are held by the program itself: "
            "raise the limit (`ulimit -n` in the shell that starts the job, or "
            "resource.setrlimit) or close files the program keeps open")


class TaskFailedError(RecprepError):
    """A conversion task failed; carries what failed and the original error.

    Attributes: ``task`` (a description: partition / shard), ``original`` (the original
    exception when it could be sent back, else None; also the ``__cause__``),
    ``original_type``, ``original_message``, ``original_traceback`` (text: kept out of
    the message, which stays one readable sentence). An argument error of the user's
    (:class:`InvalidArgumentError`) raised inside a task is never wrapped in it: it
    reaches the caller as it is, on every executor.
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
        said = "nothing was committed" in original_message  # say it once
        super().__init__(
            f"{task} failed with {shown}: {original_message}"
            + ("" if said else "; nothing was committed")
            + (" (the original traceback is in .original_traceback; the CLI shows it with "
               "--debug)" if original_traceback else "")
        )

    def message(self, say: Callable[[Remedy], str | None] | None = None) -> str:
        """As :meth:`RecprepError.message`, saying the original error's remedy."""
        original = self.original
        if say is not None and isinstance(original, RecprepError) and self.original_message:
            return str(self).replace(self.original_message, original.message(say), 1)
        return super().message(say)


class InputError(RecprepError):
    """recprep couldn't turn the user's input into instances (e.g. a DataFrame column that
    pandas or pyarrow can't hand out as values).

    Told apart from :class:`WriteError` on purpose: the input is at fault, not the output.
    (An exception a reader raises itself propagates as it is, inside the
    :class:`TaskFailedError` of its task, with a note that the input raised it.)
    Attributes: ``instance_index`` (how many instances the input had yielded before it
    raised), ``original`` (the exception it raised).
    """

    def __init__(self, original: BaseException, instance_index: int) -> None:
        self.original = original
        self.instance_index = instance_index
        super().__init__(
            f"the input raised {type(original).__name__} after {instance_index} instance(s): "
            f"{original}; this is an error of the input (the reader), not of the output; "
            "nothing was committed"
        )


class ColumnsError(InputError, InvalidArgumentError):
    """A dict given to ``convert`` is not a dict of columns (column name -> a 1-D
    sequence, all of one length); raised before anything is written.

    Attributes: ``original`` (None), ``instance_index`` (0).
    """

    def __init__(self, detail: str) -> None:
        self.original = None  # type: ignore[assignment]  # nothing raised: the dict is wrong
        self.instance_index = 0
        RecprepError.__init__(self, f"reader is a dict, read as a table of columns: {detail}")


class OutputLockedError(RecprepError, FileExistsError):
    """Another conversion is writing this shard set. Attributes: ``path``, ``owner``."""

    def __init__(self, path: str, owner: str) -> None:
        self.path = path
        self.owner = owner
        super().__init__(
            f"another conversion ({owner}) is writing this shard set: {path} is held; "
            "wait for it to finish, or write to another prefix. If no such process runs, "
            "delete the lock file"
        )


class InstanceIndexError(InvalidArgumentError, IndexError):
    """A :class:`~recprep.read.dataset.MapDataset` was asked for an instance it doesn't have
    (or an index that is not an int). Attributes: ``where``, ``index``, ``num_instances``."""

    def __init__(self, where: str, index: Any, num_instances: int, detail: str) -> None:
        self.where, self.index, self.num_instances = where, index, num_instances
        super().__init__(
            f"{where}: {detail}: the dataset holds {num_instances} instances, so ask for "
            f"{-num_instances} <= index < {num_instances}"
        )


class RecordsLostError(CorruptDataError):
    """Records a file was counted with are gone (damage, or the file changed): a
    :class:`~recprep.read.dataset.MapDataset` raises it even with ``on_corrupt="skip"``, as
    leaving them out would shift every later index. Attributes as
    :class:`~recprep.errors.CorruptDataError`.
    """

    remedies = ()  # type: ignore[assignment]  # skipping can't help: no remedy to say


class Unfinishable(RecprepError):
    """A journal whose files are gone: the commit can't be finished, only done again."""


class UnsupportedColumnError(InvalidArgumentError):
    """A column's Spark type can't be written with the chosen codec (or as a partition
    column). Attributes: ``column``, ``type``."""

    def __init__(self, column: str, type: str, detail: str) -> None:
        self.column = column
        self.type = type
        super().__init__(f"column {column!r} ({type}) can't be written: {detail}")


class SchemaConflictError(InvalidArgumentError):
    """Two directories (or shard sets) of one dataset record different columns.

    Attributes: ``first``, ``second`` (the two places).
    """

    def __init__(self, first: str, second: str, detail: str) -> None:
        self.first = first
        self.second = second
        super().__init__(f"{first} and {second} hold different columns ({detail}); read "
                         f"them separately{REMEDY}",
                         remedy=Remedy("schema", effect="to read them with one schema"))


class SchemaMismatchError(EncodeError):
    """An instance doesn't match its features.

    Attributes: ``feature`` (its name, or ``None`` when the instance as a whole is wrong),
    ``expected`` and ``found`` (descriptions), and ``instance_index`` when known.
    """

    def __init__(
        self,
        feature: str | None,
        expected: str,
        found: str,
        reason: str = "",
        instance_index: int | None = None,
    ) -> None:
        self.feature = feature
        self.expected = expected
        self.found = found
        self.reason = reason
        #: the dtype of the value found, when it was an array or scalar
        self.found_dtype: np.dtype | None = None
        what = "instance" if feature is None else f"feature {feature!r}"
        detail = f"{what}: expected {expected}, found {found}"
        super().__init__(detail + (f" ({reason})" if reason else ""), instance_index)


class RecordRangeError(InvalidArgumentError, IndexError):
    """``read_range`` was asked for records a file doesn't have.

    Attributes: ``path``, ``start``, ``end``, ``num_records``.
    """

    def __init__(self, path: str, start: Any, end: Any, num_records: int, detail: str) -> None:
        self.path = path
        self.start = start
        self.end = end
        self.num_records = num_records
        super().__init__(
            f"{path}: can't read records [{start!r}, {end!r}): {detail}; the file holds "
            f"{num_records} records, so ask for 0 <= start <= end <= {num_records}"
        )


class ModelFileError(RecprepError, ValueError):
    """The model file can't be loaded, or lacks what ``prepare`` needs.

    Attributes: ``path``.
    """

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        super().__init__(f"model file {path}: {detail}")


class RawFileError(RecprepError):
    """Preparing one raw file failed. Attributes: ``file``, ``instance_index`` (or None),
    ``reason``."""

    def __init__(self, file: str, reason: str, instance_index: int | None = None) -> None:
        self.file = file
        self.reason = reason
        self.instance_index = instance_index
        where = f", instance {instance_index}" if instance_index is not None else ""
        super().__init__(
            f"{file}{where}: {reason}; fix the data or the model file{REMEDY}",
            remedy=Remedy("on_error", "skip", effect="to skip such files with a report"),
        )


class RecprepWarning(UserWarning):
    """Base class of the warnings recprep gives about what it does on purpose."""


class PickleFallbackWarning(RecprepWarning):
    """``convert`` stored a value as a pickle: readers need ``allow_pickle=True`` for it.

    Given once per type per conversion, at write time, naming the type and the first
    instance that held it. Attributes: ``type_name``, ``instance_index``.
    """

    def __init__(self, type_name: str, instance_index: int | None) -> None:
        self.type_name = type_name
        self.instance_index = instance_index
        where = f" (first in instance {instance_index})" if instance_index is not None else ""
        super().__init__(
            f"recprep's codec has no type for {type_name}{where}; it is stored as a pickle, "
            "which readers refuse unless they pass allow_pickle=True (unpickling runs code). "
            "Convert it to a supported type (numpy array, str, bytes, dict...) to avoid this"
        )


class PluginWarning(RecprepWarning):
    """A plug-in was left out: it fails to load (said while a registry loads every entry,
    e.g. to detect a file's format), it wants a name already taken, or its distribution's
    entry points can't be read. The message names the distribution."""


class UnsplitInputWarning(RecprepWarning):
    """A parallel executor got one reader it can't split: it runs as one task (or, for a
    one-shot iterable, in this process). Pass :func:`recprep.partitions` of readers, or a
    sized input (list, array, DataFrame), to spread the work."""


class CorruptDataWarning(RecprepWarning):
    """A reader with ``on_corrupt="skip"`` dropped damaged data.

    Attributes: ``path``, ``offset``, ``records_lost`` (``None`` when unknown), ``detail``.
    """

    def __init__(
        self, detail: str, *, path: str | None, offset: int | None,
        records_lost: int | None,
    ) -> None:
        self.detail = detail
        self.path = path
        self.offset = offset
        self.records_lost = records_lost
        lost = "an unknown number of" if records_lost is None else str(records_lost)
        where = f"{path} at byte {offset}" if offset is not None else f"{path}"
        super().__init__(f"{where}: skipped damaged data, {lost} record(s) lost ({detail})")


class SetChangedError(RecprepError):
    """A shard set is not one committed set for this reader: a commit into it is in
    progress or was interrupted (its shards may mix two sets), or it was replaced after
    the reader read its manifest. Attributes: ``path`` (the set), ``detail``.
    """

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"{path}: {detail}")


class UntrustedFileError(RecprepError, ValueError):
    """A side file in an output directory (``options.json``, ``done-*.json``,
    ``commit.json`` of a staging directory) that recprep's own runs didn't write for this
    set, or that names a path outside it: refused, never acted on.
    Attributes: ``path``, ``detail``.
    """

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(
            f"{path}: refused: {detail}. recprep only reuses staged work its own runs "
            f"recorded; delete the staging directory, or run again without resume{REMEDY}",
            remedy=Remedy("overwrite", True, effect="to replace the set"),
        )


class UncommittedSetWarning(RecprepWarning):
    """A reader with ``on_corrupt="skip"`` reads the files of a set that isn't committed
    (a commit into it was interrupted or is in progress): they may mix two sets.
    Attributes: ``path``.
    """

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        super().__init__(f"{path}: {detail}; reading its files as they are")


class PartialCopyWarning(RecprepWarning):
    """``recprep cp`` copied some shards of a set and not its manifest (the shards named
    are not the whole set): the copy is not a committed set. Readers refuse its directory
    and globs (:class:`MissingShardsError`) and read its files named one by one.
    Attributes: ``path`` (the set copied from), ``copied``, ``total`` (its shards).
    """

    def __init__(self, path: str, copied: int, total: int) -> None:
        self.path = path
        self.copied = copied
        self.total = total
        super().__init__(
            f"{path}: copying {copied} of the set's {total} shards, without its manifest: "
            "the copy is some shards of a set, not a committed set. Readers refuse its "
            "directory and globs as a set missing shards; read the copied files by naming "
            "them (a list of paths; on the command line, the files themselves)"
        )


class ExampleMergeWarning(RecprepWarning):
    """A record stores a feature in a shape TensorFlow's two readers disagree on: in pieces
    that protobuf merges (``tf.train.Example.FromString``) and ``tf.io.parse_example``
    reads otherwise or refuses, or in a map entry with an unknown field. recprep gives
    protobuf's values.

    Attributes: ``feature`` (its name).
    """

    def __init__(self, feature: str, message: str) -> None:
        self.feature = feature
        super().__init__(message)


class ResumeWarning(RecprepWarning):
    """A loaded reader state was dropped unused: the next pass was of another epoch
    (``set_epoch`` was called with a different one), so it starts that epoch afresh."""


class KilledRunWarning(RecprepWarning):
    """``convert(resume=True)`` without ``overwrite=True`` found traces of a run killed
    before it recorded what it was asked to do, and nothing of its work: it returns the
    complete set there as it is (verified), which is not that run's data if it was an
    overwrite. Attributes: ``path`` (the output)."""

    def __init__(self, path: str, trace: str) -> None:
        self.path = path
        super().__init__(
            f"{path}: a run into this shard set was killed before it recorded what it was "
            f"asked to do ({trace}), and nothing of its work is staged; the complete set "
            "there is returned as it is, verified. If that run was an overwrite, its data is "
            "not in it: run the conversion again with overwrite=True (and resume=True)"
        )


class TaskAbandonedWarning(RecprepWarning):
    """A task failed ``max_attempts`` times in an epoch and is not handed out again."""


class MovedModuleWarning(RecprepWarning):
    """An import used a module path from before the package root was regrouped into
    ``read/``, ``write/`` and ``storage/``; it works for one more release."""


def warn(warning: Warning) -> None:
    """Issue ``warning``, attributed to the innermost caller outside recprep (the user's
    line that called recprep, or a thread's bootstrap), so that it shows by default and
    points at the user's code.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn(RecprepWarning("look"))
    >>> str(seen[0].message), seen[0].category.__name__
    ('look', 'RecprepWarning')
    """
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").partition(".")[
        0
    ] == "recprep":
        level, frame = level + 1, frame.f_back
    warnings.warn(warning, stacklevel=level)


def add_note(err: BaseException, text: str) -> None:
    """``err.add_note(text)``, also on Python 3.10 (which has no ``add_note`` but shows
    nothing of ``__notes__`` either: the note is kept for code that reads it).

    >>> err = ValueError("x"); add_note(err, "more"); err.__notes__
    ['more']
    """
    note = getattr(err, "add_note", None)  # Python >= 3.11
    if note is not None:
        note(text)
    else:
        err.__notes__ = [*getattr(err, "__notes__", []), text]  # type: ignore[attr-defined]
