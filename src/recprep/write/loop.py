"""Writing instances round-robin into shard (or piece) files: the work of every task.

Instance ``j`` of a stream goes to file ``j % len(paths)``. Everything here runs where
the task runs (the driver for ``serial``, a worker process, a Spark or Ray task): it is
handed a filesystem and paths, never a user's output argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..codecs import Codec
from ..codecs.blocks import RecordBlock
from ..errors import EncodeError, InvalidArgumentError, WriteError, add_note
from ..storage.staging import FileFacts
from .blocklayout import BlockLayout
from .filepool import WritePool
from .inputs import check_reader
from .options import WriteOptions
from .sinks import FileSink, MemoryBudget, pack_pieces

PROGRESS_EVERY = 1024
SPILL_BYTES = 64 << 20
"""A partition task keeps its pieces in memory up to this, then writes one file each."""

#: ``callback(instances)`` told how many instances were written since its last call
Tick = Callable[[int], Any]


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


@dataclass(frozen=True)
class LoopTarget:
    """The files one pass of the write loop writes into, and how
    (:func:`write_round_robin`); plain data, made where the task runs.

    Instance ``j`` goes to ``paths[j % len(paths)]``. With ``create_empty`` (shards) the
    files that get no record are created empty at the end; otherwise (pieces) they are not
    created and their facts are ``None``. With ``pack_into`` (pieces) the files are first
    kept in memory and, if they stay under ``spill_bytes`` together, written back to back
    into the single file ``pack_into``; past ``spill_bytes`` every piece moves to its own
    file in ``paths``. ``cuts`` are instance indexes (ascending) before which every file's
    writer is cut.
    """

    fs: Any
    paths: Sequence[str]
    options: WriteOptions
    create_empty: bool = True
    pack_into: str | None = None
    spill_bytes: int = SPILL_BYTES
    cuts: Sequence[int] = ()


def write_round_robin(
    instances: Iterable[Any],
    target: LoopTarget,
    *,
    tick: Tick | None = None,
    pickled: dict[str, int] | None = None,
    first_row: int = 0,
) -> list[FileFacts | None]:
    """Encode ``instances`` into ``target.paths``, instance ``j`` to file ``j % len(paths)``
    (see :class:`LoopTarget` for which files are made, and where); their facts, in order.
    ``tick(n)`` hears about progress.

    Files are opened when they get their first record. Packing pieces into one file
    (``target.pack_into``) is what small partitions need: one file per task instead of one
    per piece (each piece's facts give its ``offset`` there).

    Errors are told apart by who caused them: the input (an exception raised while
    iterating ``instances`` propagates as it is, with a note saying so), an instance the codec
    can't represent (:class:`~recprep.errors.EncodeError` with its index), or the output
    (:class:`~recprep.errors.WriteError`). ``pickled`` (if given) is filled with the types
    the codec stored as pickles by its fallback, each with the first instance index.
    ``first_row``: what an ``EncodeError`` counts instances from (a row range of a sized
    input names them as the input counts them); ``pickled`` counts from 0.

    A table's rows (``instances`` with a ``column_blocks()`` method, see
    :mod:`recprep.write.tables`) are encoded a block at a time where the codec can
    (:meth:`~recprep.codecs.base.Codec.encode_block`), row by row where it can't: the
    same records either way, written in the same order. Where the codec lays a block's
    records out and the format frames records back to back, they are placed straight
    into the files' chunk payloads (:class:`~recprep.write.blocklayout.BlockLayout`).
    An ``EncodeError`` of such a row also names its column (``err.column``).

    With ``target.cuts``, every file's writer is cut before those instances
    (:meth:`~recprep.containers.base.RecordWriter.cut`) when the format is concatenable:
    the files are then byte for byte what writing each run of instances as a partition of
    its own and assembling the pieces gives, as a parallel executor does.
    """
    writing = _WritePass(target, tick, {} if pickled is None else pickled, first_row)
    try:
        try:
            for run, encode, by_column in _runs(instances, target.options.codec):
                if encode is None:  # a block's records, made at once: a shard at a time
                    assert isinstance(run, RecordBlock)
                    writing.write_block(run)
                else:
                    assert not isinstance(run, RecordBlock)
                    writing.write_rows(run, encode, by_column)
        except Exception as err:
            if writing.input_failed:  # the reader's own error: it stays what it is, located
                add_note(
                    err, f"recprep: raised by the input (the reader) after {writing.index + 1} "
                    "instance(s); not an error of the output"
                )
            raise
        facts = writing.finish()
    except BaseException:
        writing.discard()
        raise
    writing.report_rest()
    return facts


class _WritePass:
    """One pass of the write loop (:func:`write_round_robin`): the task's files, where the
    next cut is, what progress has heard, and whose fault an error is."""

    def __init__(self, target: LoopTarget, tick: Tick | None, pickled: dict[str, int],
                 first_row: int = 0):
        self.target, self.tick, self.pickled = target, tick, pickled
        self.first_row = first_row
        options = target.options
        cuts = target.cuts
        if not options.container().concatenable(options.compressor):
            cuts = ()  # assembly writes such pieces' records again, through one writer
        self._cuts = iter([*cuts, -1])
        self.next_cut = next(self._cuts)
        self.budget = None if target.pack_into is None else MemoryBudget(target.spill_bytes)
        self.pool = pool = WritePool(target.fs, files=len(target.paths))
        self.sinks = [FileSink(pool, path, options, self.budget) for path in target.paths]
        if self.budget is not None:
            self.budget.sinks = self.sinks
        self.writes: list[Callable[[bytes], None]] = []
        self.writes.extend(_opener(self.sinks, self.writes, k) for k in range(len(self.sinks)))
        self.index = -1  # the last instance handed to its file
        self.reported = 0  # instances progress was told of
        options.codec.drain_pickled()  # what an earlier use of the codec left
        self.input_failed = True  # until encoding or writing fails: then the error is ours

    def cut(self) -> int:
        """Cut every file's writer; the next cut."""
        for sink in self.sinks:
            sink.cut()
        self.next_cut = next(self._cuts)
        return self.next_cut

    def fault(self, err: BaseException, index: int, instance: Any = None,
              encode: Callable[[Any], bytes] | None = None, *, file: int | None = None
              ) -> WriteError | None:
        """``err`` was raised encoding or writing instance ``index`` (to file ``file``, if
        not ``index``'s): not the input's fault. An :class:`~recprep.errors.EncodeError` is
        told where (:func:`_locate`); for an ``OSError``, the
        :class:`~recprep.errors.WriteError` naming the file to raise instead."""
        self.input_failed = False
        if isinstance(err, EncodeError):
            _locate(err, self.first_row + index, instance, encode)
        elif isinstance(err, OSError) and not isinstance(err, WriteError):
            return WriteError(self.target.paths[index % len(self.sinks) if file is None
                                                else file], err)
        return None

    def write_rows(self, instances: Iterable[Any], encode: Callable[[Any], bytes],
                   by_column: bool) -> None:
        """Encode each instance and write it to its file (the hot loop)."""
        writes, n, pickled, tick = self.writes, len(self.writes), self.pickled, self.tick
        next_cut = self.next_cut
        codec = self.target.options.codec
        index = self.index
        try:
            for index, instance in enumerate(instances, self.index + 1):
                if index == next_cut:
                    next_cut = self.cut()
                try:
                    writes[index % n](encode(instance))
                except BaseException as err:
                    output = self.fault(err, index, instance, encode if by_column else None)
                    if output is None:
                        raise
                    raise output from err
                if codec.pickled_pending:  # one attribute read; drained only when set
                    for type_name in codec.drain_pickled():
                        pickled.setdefault(type_name, index)
                if tick is not None and not index % PROGRESS_EVERY:
                    tick(index + 1 - self.reported)
                    self.reported = index + 1
        finally:
            self.index = index

    def write_block(self, block: RecordBlock) -> None:
        """Write a block's records (made at once from its columns), a file at a time:
        laid out in the files' chunk payloads (:class:`~.blocklayout.BlockLayout`) where
        the format frames records back to back and the codec places them, else as the
        ``bytes`` of each."""
        first = self.index + 1
        end = first + block.n
        fmt = self.target.options.container()
        write: Callable[[int, int, list[FileSink], list[Callable[[bytes], None]]], None]
        if fmt.record_framing is not None and block.laid_out:
            write = partial(_write_laid_out, BlockLayout(block, first, len(self.sinks), fmt))
        else:
            write = partial(_write_block, block.records(), first)
        at = first
        while at < end:
            if at == self.next_cut:
                self.cut()
            stop = self.next_cut if at < self.next_cut < end else end
            try:
                write(at, stop, self.sinks, self.writes)
            except BaseException as err:
                index = getattr(err, "instance_index", None) or 0
                output = self.fault(err, index, file=getattr(err, "shard", None))
                if output is None:
                    raise
                raise output from err
            at = stop
        self.index = end - 1
        if self.tick is not None and end // PROGRESS_EVERY > first // PROGRESS_EVERY:
            self.tick(end - self.reported)
            self.reported = end

    def finish(self) -> list[FileFacts | None]:
        """Every file written out: their facts (packed into one file, if they fit)."""
        target = self.target
        facts = [sink.finish(target.create_empty) for sink in self.sinks]
        self.pool.wait()  # uploads still going out (an object store's) are complete
        if self.budget is not None and not self.budget.spilled and target.pack_into:
            facts = pack_pieces(target.fs, target.pack_into, self.sinks, facts)
        return facts

    def discard(self) -> None:
        for sink in self.sinks:
            sink.discard()
        self.pool.discard()

    def report_rest(self) -> None:
        """Tell progress of the instances it hasn't heard of."""
        if self.tick is not None and self.index + 1 > self.reported:
            self.tick(self.index + 1 - self.reported)


#: a run of the write loop: instances, the function that makes each one's record (None:
#: the run is a block of records made at once), and whether an instance that fails is a
#: row of columns (its error then names the column)
EncodeRun = tuple[Iterable[Any] | RecordBlock, Callable[[Any], bytes] | None, bool]


def _write_block(records: Sequence[bytes], first: int, start: int, stop: int,
                 sinks: list[FileSink], writes: list[Callable[[bytes], None]]) -> None:
    """Write instances ``start:stop`` (``records[j - first]`` is instance ``j``'s), each
    to file ``j % len(sinks)``, with one ``write_many`` per file. An ``OSError`` says
    which file (``err.shard``), an ``EncodeError`` which instance (``instance_index``)."""
    n = len(sinks)
    for shard in range(n):
        begin = start + (shard - start) % n
        if begin >= stop:
            continue
        mine = records[begin - first : stop - first : n]
        with _located(shard, begin, n):
            if sinks[shard].writer is None:  # the file opens on its first record
                writes[shard](mine[0])
                begin, mine = begin + n, mine[1:]
            writer = sinks[shard].writer
            assert writer is not None
        with _located(shard, begin, n):
            writer.write_many(mine)


def _write_laid_out(layout: BlockLayout, start: int, stop: int, sinks: list[FileSink],
                    writes: list[Callable[[bytes], None]]) -> None:
    """:func:`_write_block` of a block laid out in its files' chunk payloads: each file's
    records of ``start:stop`` handed to its writer as one run
    (:meth:`~recprep.containers.base.RecordWriter.write_framed`)."""
    for shard, p, q in layout.runs(start, stop):
        sink = sinks[shard]
        with _located(shard, layout.instance(p), layout.files):
            writer = sink.writer
            if writer is None:  # the file opens on its first record
                writer = sink.open()
                writes[shard] = writer.write
            writer.write_framed(layout.buffer, layout.starts[p:q], layout.lengths[p:q])


@contextmanager
def _located(shard: int, first: int, step: int) -> Iterator[None]:
    """Errors of writing a run of instances ``first``, ``first + step``, ... to file
    ``shard``, located: an ``EncodeError`` at position ``k`` of the run is instance
    ``first + k * step`` (``instance_index``), an ``OSError`` names the file
    (``err.shard``); a ``WriteError`` is already located."""
    try:
        yield
    except EncodeError as err:
        err.instance_index = first + getattr(err, "position", 0) * step
        raise
    except WriteError:
        raise
    except OSError as err:
        err.shard = shard  # type: ignore[attr-defined]
        raise


def _runs(instances: Iterable[Any], codec: Codec) -> Iterable[EncodeRun]:
    """The loop's input as runs: the instances with ``codec.encode`` — or, when they come
    as column blocks (``instances.column_blocks()``, a table's rows), each block's records
    made at once by ``codec.encode_block`` (a :class:`~recprep.codecs.blocks.RecordBlock`),
    or, where it can't, the block's rows with ``codec.encode``."""
    column_blocks = getattr(instances, "column_blocks", None)
    if column_blocks is None:
        return ((instances, codec.encode, False),)
    return _block_runs(column_blocks(), codec)


def _block_runs(blocks: Iterable[Any], codec: Codec) -> Iterator[EncodeRun]:
    encode_block = codec.encode_block
    for block in blocks:
        try:  # a codec's columns make dict rows: other rows (tuples...) one by one
            records = encode_block(block.columns, block.n) if getattr(
                block, "instance", "dict") == "dict" else None
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


def _opener(
    sinks: list[FileSink], writes: list[Callable[[bytes], None]], k: int
) -> Callable[[bytes], None]:
    """A first-write function for file ``k``: opens it, then steps aside for the writer."""

    def first_write(record: bytes) -> None:
        write = sinks[k].open().write
        writes[k] = write
        write(record)

    return first_write
