"""The first phase of a write, on the executors: each task's rows into piece files.

A Spark task receives its partition of the DataFrame as Arrow record batches, splits each
batch by partition value, encodes the rows (:mod:`recprep.spark.encode`) and appends the
records to one *piece* per partition directory — a complete container file, written under
the staging directory with a name unique to the task attempt (so a retried or speculative
attempt never mixes with another). At most ``max_open`` pieces are open at once, so a task
meeting many partition values keeps bounded buffers: the least recently used one is
finished, and a later row of that value starts a new piece.

What a task reports back (:class:`TaskReport`) is small: each piece's partition values,
record count, size and CRC-32C, and which columns held nulls — never rows. For a format
that keeps a record index (TFRecord), each piece also gets one (``{piece}.tfindex``),
computed from the records' lengths while writing.
"""

from __future__ import annotations

import collections
import posixpath
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import WriteError
from ..storage.fs import ChecksumWriter
from ..storage.staging import FileFacts
from ..write.options import WriteOptions
from .codecs import encoder_for
from .columns import ColumnSpec

__all__ = ["PieceFile", "TaskReport", "WritePlan", "write_pieces"]

MAX_OPEN = 32


@dataclass(frozen=True)
class WritePlan:
    """Everything a writing task needs; plain data, pickled to the executors."""

    fs: Any
    root: str
    staging: str
    options: WriteOptions
    data: tuple[ColumnSpec, ...]
    partitions: tuple[ColumnSpec, ...] = ()
    max_open: int = MAX_OPEN

    @property
    def indexed(self) -> bool:
        """Whether the files get a record index (the format keeps one)."""
        return self.options.container().record_index is not None

    def index_of(self, path: str) -> str | None:
        """Where the record index of the staged file ``path`` goes (None: it gets none)."""
        kind = self.options.container().record_index
        return None if kind is None else path + kind.suffix


@dataclass(frozen=True)
class PieceFile:
    """One piece file: its partition values, which task wrote it (and in which order)."""

    key: tuple[Any, ...]
    task: int
    seq: int
    facts: FileFacts
    index: str | None = None  # the staged record index of the piece


@dataclass
class TaskReport:
    """What one task wrote."""

    task: int
    pieces: list[PieceFile] = field(default_factory=list)
    #: per partition key, the columns that held a null in this task's rows
    nulls: dict[tuple[Any, ...], set[str]] = field(default_factory=dict)


class _OpenPiece:
    """A piece being written: file, checksum, container writer, record lengths."""

    def __init__(self, plan: WritePlan, path: str) -> None:
        self.plan, self.path = plan, path
        try:
            self.file = plan.fs.open(path, "wb")
        except OSError as err:
            raise WriteError(path, err) from err
        self.checksum = ChecksumWriter(self.file)
        options = plan.options
        self.writer = options.container().writer(self.checksum, options.compressor,
                                                 options.chunk_bytes)
        self.lengths: list[np.ndarray] = []

    def write(self, records: list[bytes]) -> None:
        write = self.writer.write
        try:
            for record in records:
                write(record)
        except OSError as err:
            raise WriteError(self.path, err) from err
        if self.plan.indexed:
            self.lengths.append(np.fromiter(map(len, records), np.int64, len(records)))

    def finish(self) -> tuple[FileFacts, str | None]:
        try:
            self.writer.close()
            self.file.close()
        except OSError as err:
            raise WriteError(self.path, err) from err
        facts = FileFacts(self.path, self.writer.num_records, self.checksum.size,
                          self.checksum.crc32c)
        kind = self.plan.options.container().record_index
        index_path = self.plan.index_of(self.path)
        if kind is None or index_path is None:
            return facts, None
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        index = kind.from_lengths(lengths, facts.bytes, self.plan.options.compressor)
        try:
            with self.plan.fs.open(index_path, "wb") as side:
                side.write(index.to_bytes())
        except OSError as err:
            raise WriteError(index_path, err) from err
        return facts, index_path

    def discard(self) -> None:
        try:
            self.file.close()
        except Exception:  # the error that brought us here matters more
            pass


def _split(batch: pa.RecordBatch, names: list[str]) -> Iterator[tuple[tuple[Any, ...],
                                                                      pa.RecordBatch]]:
    """``(partition values, rows)`` groups of ``batch``, in order of first appearance.
    An empty string is a null partition value, as in Spark."""
    if not names:
        yield (), batch
        return
    columns = [batch.column(n).to_pylist() for n in names]
    groups: dict[tuple[Any, ...], list[int]] = {}
    for row, key in enumerate(zip(*columns, strict=True)):
        groups.setdefault(key, []).append(row)
    for key, rows in groups.items():
        clean = tuple(None if v == "" else v for v in key)
        yield clean, batch if len(groups) == 1 else batch.take(pa.array(rows, pa.int64()))


def write_pieces(plan: WritePlan, task: int, batches: Iterable[pa.RecordBatch]) -> TaskReport:
    """Write one task's rows (its Arrow ``batches``) as pieces; report them."""
    attempt = uuid.uuid4().hex[:12]
    report = TaskReport(task)
    names = [c.name for c in plan.partitions]
    encoder = encoder_for(plan.options.codec.name, plan.data)
    open_pieces: collections.OrderedDict[tuple[Any, ...], tuple[int, _OpenPiece]] = (
        collections.OrderedDict()
    )
    seq = 0

    def finish(key: tuple[Any, ...]) -> None:
        number, piece = open_pieces.pop(key)
        facts, index = piece.finish()
        report.pieces.append(PieceFile(key, task, number, facts, index))

    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            for key, rows in _split(batch, names):
                encoder.nulls = set()
                records = encoder.encode(rows)
                if encoder.nulls:
                    report.nulls.setdefault(key, set()).update(encoder.nulls)
                if key in open_pieces:
                    open_pieces.move_to_end(key)
                else:
                    if len(open_pieces) >= plan.max_open:
                        finish(next(iter(open_pieces)))
                    path = posixpath.join(plan.staging, f"piece-{task:05d}-{attempt}-{seq:05d}")
                    open_pieces[key] = (seq, _OpenPiece(plan, path))
                    seq += 1
                open_pieces[key][1].write(records)
        for key in list(open_pieces):
            finish(key)
    except BaseException:
        for _, piece in open_pieces.values():
            piece.discard()
        raise
    report.pieces.sort(key=lambda p: p.seq)
    return report
