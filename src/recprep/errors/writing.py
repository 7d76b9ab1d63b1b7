"""Writing sets: output already there or locked, records that can't be encoded, write
failures, failed tasks and input, commits that can't be finished."""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from .base import REMEDY, RecprepError, RecprepWarning, Remedy
from .usage import InvalidArgumentError


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


class EncodeError(RecprepError, TypeError):
    """An instance can't be encoded by the chosen codec.

    Attributes: ``instance_index`` (position in the reader's output, when known).
    """

    def __init__(self, detail: str, instance_index: int | None = None) -> None:
        self.detail = detail
        self.instance_index = instance_index
        where = f"instance {instance_index}: " if instance_index is not None else ""
        super().__init__(where + detail)


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


class Unfinishable(RecprepError):
    """A journal whose files are gone: the commit can't be finished, only done again."""


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


class UnsplitInputWarning(RecprepWarning):
    """A parallel executor got one reader it can't split: it runs as one task (or, for a
    one-shot iterable, in this process). Pass :func:`recprep.partitions` of readers, or a
    sized input (list, array, DataFrame), to spread the work."""


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
