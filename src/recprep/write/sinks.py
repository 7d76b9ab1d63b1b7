"""One output file of a write task: in memory within a budget, or a pooled file on storage.

A task's write loop (:mod:`recprep.write.loop`) writes each of its files through a
:class:`FileSink`: opened on its first record, a container writer over a CRC-32C-counting
wrapper, finished into :class:`~recprep.storage.staging.FileFacts` (records, bytes,
CRC-32C and the chunks its writer reported). On storage the file is one of the task's
:class:`~recprep.write.filepool.WritePool`. A partition task's pieces start in memory
(:class:`MemoryBudget`): if they stay under the budget together they are written back to
back into one file (:func:`pack_pieces`); past it, each moves to a file of its own.
"""

from __future__ import annotations

import io
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..containers import RecordWriter
from ..errors import RecprepError, WriteError
from ..storage.fs import ChecksumWriter
from ..storage.staging import FileFacts
from .filepool import PooledWriter, WritePool

if TYPE_CHECKING:
    from .options import WriteOptions

__all__ = ["FileSink", "MemoryBudget", "pack_pieces"]


class MemoryBudget:
    """Bytes buffered in memory by a task's pieces; past ``limit`` they spill to files."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.spilled = False
        self.sinks: list[FileSink] = []

    def add(self, size: int) -> None:
        self.used += size
        if self.used > self.limit and not self.spilled:
            self.spilled = True
            for sink in self.sinks:
                sink.spill()


class _MemoryFile:
    """A write-only in-memory file that reports what it holds to a budget."""

    def __init__(self, budget: MemoryBudget) -> None:
        self.buffer = io.BytesIO()
        self.budget = budget
        self.closed = False

    def write(self, data: bytes) -> int:
        self.buffer.write(data)
        self.budget.add(len(data))
        return len(data)

    def close(self) -> None:
        self.closed = True


class FileSink:
    """One output file: opened on first use (or at the end, when ``always`` asks).

    On storage, the file is one of the task's :class:`~recprep.write.filepool.WritePool`:
    however many files the task writes, a bounded number are open at once. With a
    budget, the file starts in memory and moves to storage only if the task's buffers
    pass the budget (see :func:`~recprep.write.loop.write_round_robin`).
    """

    def __init__(
        self, pool: WritePool, path: str, options: WriteOptions,
        budget: MemoryBudget | None = None,
    ) -> None:
        self.pool, self.path, self.options, self.budget = pool, path, options, budget
        self.file: Any = None
        self.checksum: ChecksumWriter | None = None
        self.writer: RecordWriter | None = None

    def _open_storage(self) -> PooledWriter:
        return self.pool.open(self.path)  # opened (and reopened) as it is written

    def open(self) -> RecordWriter:
        if self.budget is not None and not self.budget.spilled:
            self.file = _MemoryFile(self.budget)
        else:
            self.file = self._open_storage()
        self.checksum = ChecksumWriter(self.file)
        self.writer = self.options.container().writer(
            self.checksum, self.options.compressor, self.options.chunk_bytes
        )
        return self.writer

    @property
    def in_memory(self) -> bool:
        return isinstance(self.file, _MemoryFile)

    def spill(self) -> None:
        """Move what is buffered to the sink's own file; write there from now on."""
        if not self.in_memory:
            return
        finished = self.file.closed
        data = self.file.buffer.getvalue()
        real = self._open_storage()
        try:
            real.write(data)
        except WriteError:
            raise
        except OSError as err:
            raise WriteError(self.path, err) from err
        self.file = real
        assert self.checksum is not None
        self.checksum.retarget(real)
        if finished:  # this piece was complete before the others passed the budget
            real.close()

    def cut(self) -> None:
        if self.writer is not None:
            try:
                self.writer.cut()
            except WriteError:
                raise
            except OSError as err:
                raise WriteError(self.path, err) from err

    def finish(self, always: bool) -> FileFacts | None:
        """The file's facts once written out (None: it got no record and ``always`` doesn't
        ask for it), its chunks as the writer reported them."""
        if self.writer is None:
            if not always:
                return None
            self.open()
        assert self.writer is not None and self.checksum is not None
        try:
            self.writer.close()
            self.file.close()  # where an object store uploads: its errors aren't OSErrors
        except RecprepError:
            raise
        except Exception as err:
            raise WriteError(self.path, err) from err
        writer, checksum = self.writer, self.checksum
        chunks = None if writer.chunks is None else tuple(writer.chunks)
        return FileFacts(self.path, writer.num_records, checksum.size, checksum.crc32c,
                         chunks=chunks)

    def discard(self) -> None:
        if isinstance(self.file, PooledWriter):
            self.file.abort()  # (never raises: the error that brought us here matters)
        elif self.file is not None and not self.file.closed:
            try:
                self.file.close()
            except Exception:  # the error that brought us here matters more
                pass


def pack_pieces(
    fs: Any, path: str, sinks: list[FileSink], facts: list[FileFacts | None]
) -> list[FileFacts | None]:
    """Write the in-memory pieces back to back into ``path``; their facts there (each
    one's ``offset``; its chunks stay counted from it)."""
    packed: list[FileFacts | None] = []
    offset = 0
    try:
        with fs.open(path, "wb") as out:
            for sink, fact in zip(sinks, facts, strict=True):
                if fact is None or not fact.records:
                    packed.append(None if fact is None else fact)
                    continue
                out.write(sink.file.buffer.getbuffer())
                packed.append(replace(fact, path=path, offset=offset))
                offset += fact.bytes
    except OSError as err:
        raise WriteError(path, err) from err
    return packed
