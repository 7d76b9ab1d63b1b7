"""Bytes that are not what they should be: damaged chunks, records a codec can't
decode, pickles refused, files that are not recprep's."""

from __future__ import annotations

from .base import REMEDY, LocatedError, RecprepError, RecprepWarning, Remedy


class CorruptDataError(LocatedError, ValueError):
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


class DecodeError(LocatedError, ValueError):
    """A record's bytes are not a valid encoding for the codec reading them."""


class PickleRefusedError(LocatedError):
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


class RecordsLostError(CorruptDataError):
    """Records a file was counted with are gone (damage, or the file changed): a
    :class:`~recprep.read.dataset.MapDataset` raises it even with ``on_corrupt="skip"``, as
    leaving them out would shift every later index. Attributes as
    :class:`~recprep.errors.CorruptDataError`.
    """

    remedies = ()  # type: ignore[assignment]  # skipping can't help: no remedy to say


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


class ArrowMappingError(RecprepError, TypeError):
    """A column of instances has no Arrow type (``to_arrow``, ``batches(format="arrow")``,
    the Arrow stream): values of mixed types, ints beyond int64, complex numbers, other
    objects — or a batch whose column types differ from the stream's schema.

    Attributes: ``column`` (its name; nested fields dotted), ``index`` (the instance of the
    pass, counted from 0), ``detail``.
    """

    def __init__(self, column: str, index: int, detail: str) -> None:
        self.column = column
        self.index = index
        self.detail = detail
        super().__init__(
            f"column {column!r} can't be made Arrow at instance {index} of the pass: {detail}"
            f"{REMEDY}", remedy=Remedy("schema", effect="to give the columns' Arrow types"))


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
