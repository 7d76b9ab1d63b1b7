"""Writing instances round-robin into shard (or piece) files: the work of every task.

Instance ``j`` of a stream goes to file ``j % len(paths)``. Everything here runs where
the task runs (the driver for ``serial``, a worker process, a Spark or Ray task): it is
handed a filesystem and paths, never a user's output argument.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..codecs import Codec, get_codec
from ..containers import Format, RecordWriter, get_format
from ..errors import EncodeError, InvalidArgumentError, RecprepError, WriteError, add_note
from ..storage.fs import ChecksumWriter
from ..storage.staging import FileFacts
from .filepool import PooledWriter, WritePool
from .inputs import check_reader

DEFAULT_CHUNK_BYTES = 512 << 10
"""Records per chunk are cut at this many uncompressed bytes. Measured (benchmarks/
RESULTS-reading.md, "Chunk size"): with chunks moved whole through a batches pass, 512 KiB
chunks of MNIST-like records give 1.7x the batches of 128 KiB ones and faster writes, with
``read()`` unchanged and uncached random lookups (a whole chunk each) ~20% slower; 1 MiB
gains nothing more. Snappy compresses 64 KiB blocks independently, so larger chunks don't
compress better. (The earlier sweep, record by record, had 128 KiB within a few % of the
best: see benchmarks/RESULTS.md.)"""
WRITE_BUFFER_BUDGET = 256 << 20
"""Chunk buffers of all open shards together stay under this: many shards, smaller chunks."""
MIN_CHUNK_BYTES = 64 << 10
PROGRESS_EVERY = 1024
SPILL_BYTES = 64 << 20
"""A partition task keeps its pieces in memory up to this, then writes one file each."""

#: ``callback(instances)`` told how many instances were written since its last call
Tick = Callable[[int], Any]


@dataclass(frozen=True)
class WriteOptions:
    """How records are written; plain data, so it travels to workers."""

    format: str
    compressor: str
    codec: Codec
    chunk_bytes: int
    #: the format itself: it travels to workers by class reference, so a format registered
    #: outside recprep is imported (and registered) where the task runs
    fmt: Format | None = field(default=None, compare=False, repr=False)

    def container(self) -> Format:
        return get_format(self.format) if self.fmt is None else self.fmt


def check_options(
    format: str, compressor: str | None, codec: str | Codec, num_shards: Any, chunk_bytes: Any
) -> WriteOptions:
    """Validate the writing arguments (before any file is touched)."""
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise InvalidArgumentError(f"num_shards must be an int >= 1, got {num_shards!r}")
    container = get_format(format)
    compressor = container.default_compressor if compressor is None else compressor
    if compressor not in container.compressors:
        raise InvalidArgumentError(
            f"format {format!r} has no compressor {compressor!r}; valid compressors are "
            f"{list(container.compressors)}"
        )
    if chunk_bytes is None:
        share = WRITE_BUFFER_BUDGET // num_shards
        chunk_bytes = min(DEFAULT_CHUNK_BYTES, max(MIN_CHUNK_BYTES, share))
    elif isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise InvalidArgumentError(f"chunk_bytes must be an int >= 1, got {chunk_bytes!r}")
    return WriteOptions(format, compressor, get_codec(codec), chunk_bytes, container)


def as_iterable(reader: Any) -> Iterable[Any]:
    """The instances of a PaddlePaddle-style reader (callable) or a one-shot iterable.

    """
    check_reader(reader)
    if not callable(reader):
        return reader
    made = reader()
    if isinstance(made, (str, bytes, bytearray, memoryview, Mapping)) or not hasattr(
        made, "__iter__"
    ):
        raise InvalidArgumentError(
            f"calling the reader returned a {type(made).__name__}; a reader must "
            "return an iterable of instances (e.g. be a generator function)"
        )
    return made


class _Budget:
    """Bytes buffered in memory by a task's pieces; past ``limit`` they spill to files."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.spilled = False
        self.sinks: list[_Sink] = []

    def add(self, size: int) -> None:
        self.used += size
        if self.used > self.limit and not self.spilled:
            self.spilled = True
            for sink in self.sinks:
                sink.spill()


class _MemoryFile:
    """A write-only in-memory file that reports what it holds to a budget."""

    def __init__(self, budget: _Budget) -> None:
        self.buffer = io.BytesIO()
        self.budget = budget
        self.closed = False

    def write(self, data: bytes) -> int:
        self.buffer.write(data)
        self.budget.add(len(data))
        return len(data)

    def close(self) -> None:
        self.closed = True


class _Sink:
    """One output file: opened on first use (or at the end, when ``always`` asks).

    On storage, the file is one of the task's :class:`~recprep.write.filepool.WritePool`:
    however many files the task writes, a bounded number are open at once. With a
    budget, the file starts in memory and moves to storage only if the task's buffers
    pass the budget (see :func:`write_round_robin`).
    """

    def __init__(
        self, pool: WritePool, path: str, options: WriteOptions, budget: _Budget | None = None
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
        return FileFacts(self.path, writer.num_records, checksum.size, checksum.crc32c)

    def discard(self) -> None:
        if isinstance(self.file, PooledWriter):
            self.file.abort()  # (never raises: the error that brought us here matters)
        elif self.file is not None and not self.file.closed:
            try:
                self.file.close()
            except Exception:  # the error that brought us here matters more
                pass


def write_round_robin(
    instances: Iterable[Any],
    fs: Any,
    paths: list[str],
    options: WriteOptions,
    *,
    create_empty: bool = True,
    tick: Tick | None = None,
    pack_into: str | None = None,
    spill_bytes: int = SPILL_BYTES,
    pickled: dict[str, int] | None = None,
    cuts: Sequence[int] = (),
) -> list[FileFacts | None]:
    """Encode ``instances`` into ``paths``, instance ``j`` to ``paths[j % len(paths)]``.

    Files are opened when they get their first record; with ``create_empty`` the ones
    that got none are created empty at the end (shards), otherwise they are not created
    and their facts are ``None`` (pieces). ``tick(n)`` hears about progress.

    With ``pack_into`` (pieces), the files are first kept in memory and, if they stay
    under ``spill_bytes`` together, written back to back into the single file
    ``pack_into`` (each one's facts give its ``offset`` there): one file per task instead
    of one per piece, which is what small partitions need. Past ``spill_bytes`` every
    piece moves to its own file in ``paths``.

    Errors are told apart by who caused them: the input (an exception raised while
    iterating ``instances`` propagates as it is, with a note saying so), an instance the codec
    can't represent (:class:`~recprep.errors.EncodeError` with its index), or the output
    (:class:`~recprep.errors.WriteError`). ``pickled`` (if given) is filled with the types
    the codec stored as pickles by its fallback, each with the first instance index.

    A table's rows (``instances`` with a ``column_blocks()`` method, see
    :mod:`recprep.write.tables`) are encoded a block at a time where the codec can
    (:meth:`~recprep.codecs.base.Codec.encode_columns`), row by row where it can't: the
    same records either way, written in the same order. An ``EncodeError`` of such a row
    also names its column (``err.column``).

    With ``cuts`` (instance indexes, ascending), every file's writer is cut before those
    instances (:meth:`~recprep.containers.base.RecordWriter.cut`) when the format is
    concatenable: the files are then byte for byte what writing each run of instances as a
    partition of its own and assembling the pieces gives, as a parallel executor does.
    """
    if pickled is None:
        pickled = {}
    if not options.container().concatenable(options.compressor):
        cuts = ()  # assembly writes such pieces' records again, through one writer
    cut_at = iter([*cuts, -1])
    next_cut = next(cut_at)
    budget = None if pack_into is None else _Budget(spill_bytes)
    pool = WritePool(fs, files=len(paths))
    sinks = [_Sink(pool, path, options, budget) for path in paths]
    if budget is not None:
        budget.sinks = sinks
    writes: list[Callable[[bytes], None]] = []
    writes.extend(_opener(sinks, writes, k) for k in range(len(sinks)))
    n = len(writes)
    index = -1
    reported = 0
    codec = options.codec
    codec.drain_pickled()  # what an earlier use of the codec left
    input_failed = True  # until encoding or writing fails: then the error is ours
    try:
        try:
            for run, encode, by_column in _runs(instances, options.codec):
                first = index + 1
                if encode is None:  # a block's records, made at once: a shard at a time
                    assert isinstance(run, list)
                    end = first + len(run)
                    at = first
                    while at < end:
                        if at == next_cut:
                            for sink in sinks:
                                sink.cut()
                            next_cut = next(cut_at)
                        stop = next_cut if at < next_cut < end else end
                        try:
                            _write_block(run, first, at, stop, sinks, writes)
                        except EncodeError as err:
                            input_failed = False
                            _locate(err, err.instance_index or 0, None, None)
                            raise
                        except WriteError:  # it names its file already
                            input_failed = False
                            raise
                        except OSError as err:
                            input_failed = False
                            raise WriteError(paths[err.shard], err) from err  # type: ignore[attr-defined]
                        except BaseException:
                            input_failed = False
                            raise
                        at = stop
                    index = end - 1
                    if tick is not None and end // PROGRESS_EVERY > first // PROGRESS_EVERY:
                        tick(end - reported)
                        reported = end
                    continue
                for index, instance in enumerate(run, first):
                    if index == next_cut:
                        for sink in sinks:
                            sink.cut()
                        next_cut = next(cut_at)
                    try:
                        writes[index % n](encode(instance))
                    except EncodeError as err:
                        input_failed = False
                        _locate(err, index, instance, encode if by_column else None)
                        raise
                    except WriteError:  # it names its file already
                        input_failed = False
                        raise
                    except OSError as err:
                        input_failed = False
                        raise WriteError(paths[index % n], err) from err
                    except BaseException:
                        input_failed = False
                        raise
                    if codec.pickled_pending:
                        for type_name in codec.drain_pickled():
                            pickled.setdefault(type_name, index)
                    if tick is not None and not index % PROGRESS_EVERY:
                        tick(index + 1 - reported)
                        reported = index + 1
        except Exception as err:
            if input_failed:  # the reader's own error: it stays what it is, located
                add_note(
                    err, f"recprep: raised by the input (the reader) after {index + 1} "
                    "instance(s); not an error of the output"
                )
            raise
        facts = [sink.finish(create_empty) for sink in sinks]
        if budget is not None and not budget.spilled and pack_into is not None:
            facts = _pack(fs, pack_into, sinks, facts)
    except BaseException:
        for sink in sinks:
            sink.discard()
        raise
    if tick is not None and index + 1 > reported:
        tick(index + 1 - reported)
    return facts


#: a run of the write loop: instances, the function that makes each one's record (None:
#: the run is of records already made), and whether an instance that fails is a row of
#: columns (its error then names the column)
Run = tuple[Iterable[Any], Callable[[Any], bytes] | None, bool]


def _write_block(records: Sequence[bytes], first: int, start: int, stop: int,
                 sinks: list[_Sink], writes: list[Callable[[bytes], None]]) -> None:
    """Write instances ``start:stop`` (``records[j - first]`` is instance ``j``'s), each
    to file ``j % len(sinks)``, with one ``write_many`` per file. An ``OSError`` says
    which file (``err.shard``), an ``EncodeError`` which instance (``instance_index``)."""
    n = len(sinks)
    for shard in range(n):
        begin = start + (shard - start) % n
        if begin >= stop:
            continue
        mine = records[begin - first : stop - first : n]
        done = 0  # of mine, written before write_many
        try:
            if sinks[shard].writer is None:  # the file opens on its first record
                writes[shard](mine[0])
                done = 1
            writer = sinks[shard].writer
            assert writer is not None
            writer.write_many(mine[done:] if done else mine)
        except EncodeError as err:
            position = getattr(err, "position", 0) + done if sinks[shard].writer else 0
            err.instance_index = begin + position * n
            raise
        except WriteError:
            raise
        except OSError as err:
            err.shard = shard  # type: ignore[attr-defined]
            raise


def _runs(instances: Iterable[Any], codec: Codec) -> Iterable[Run]:
    """The loop's input as runs: the instances with ``codec.encode`` — or, when they come
    as column blocks (``instances.column_blocks()``, a table's rows), each block's records
    made at once by ``codec.encode_columns`` (passed on as they are: ``bytes(record)`` is
    ``record``), or, where it can't, the block's rows with ``codec.encode``."""
    column_blocks = getattr(instances, "column_blocks", None)
    if column_blocks is None:
        return ((instances, codec.encode, False),)
    return _block_runs(column_blocks(), codec)


def _block_runs(blocks: Iterable[Any], codec: Codec) -> Iterator[Run]:
    encode_columns = codec.encode_columns
    for block in blocks:
        try:
            records = encode_columns(block.columns, block.n)
        except Exception:  # row by row: the first row that fails raises, located
            records = None
        if records is None:
            yield block.rows(), codec.encode, True
        else:
            yield records, None, False


def _locate(err: EncodeError, index: int, instance: Any,
            encode: Callable[[Any], bytes] | None) -> None:
    """Say in ``err`` which instance failed — and, for a row of columns (``encode``
    given), which column: the first whose value alone fails to encode (unless every
    column alone fails, as with a codec that wants them all)."""
    err.instance_index = index  # keep the class and its facts: add where
    where = f"instance {index}"
    if encode is not None and isinstance(instance, dict) and instance:
        failing = [name for name in instance if _fails(encode, {name: instance[name]})]
        if failing and (len(failing) < len(instance) or len(instance) == 1):
            err.column = failing[0]  # type: ignore[attr-defined]
            where += f", column {failing[0]!r}"
    err.args = (f"{where}: {err.detail}",)


def _fails(encode: Callable[[Any], bytes], value: Any) -> bool:
    try:
        encode(value)
    except EncodeError:
        return True
    except Exception:  # only an EncodeError says the codec can't take it
        return False
    return False


def _pack(
    fs: Any, path: str, sinks: list[_Sink], facts: list[FileFacts | None]
) -> list[FileFacts | None]:
    """Write the in-memory pieces back to back into ``path``; their facts there."""
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


def _opener(
    sinks: list[_Sink], writes: list[Callable[[bytes], None]], k: int
) -> Callable[[bytes], None]:
    """A first-write function for file ``k``: opens it, then steps aside for the writer."""

    def first_write(record: bytes) -> None:
        write = sinks[k].open().write
        writes[k] = write
        write(record)

    return first_write
