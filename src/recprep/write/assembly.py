"""Shards made of staged pieces: the one assembly path of ``convert`` and ``recprep.spark``.

A parallel write first stages *pieces* — each a complete container file, or a window of a
file several pieces were packed into — then makes each shard of a run of them
(:func:`build_shard`), in order, without decoding a record:

* a whole piece is copied byte for byte, its CRC-32C checked against what its task
  reported, when the format's files concatenate
  (:meth:`~recprep.containers.base.Format.concatenable`: RecordIO chunks, plain TFRecord
  frames, gzip members);
* records ``start:end`` of a piece with a record index that seeks (a plain TFRecord
  piece cut by a Spark shard boundary) are copied as the byte range that holds them;
* any other cut piece has the records of its run written again (framing only), and a
  format whose files don't concatenate (a zlib TFRecord shard must be one stream) has all
  its records written through one writer, each whole piece CRC-checked as it is read.

With ``index_path``, the shard's record index is written too, from the pieces' own
record indexes (no record is read for it). The shard's chunks
(:attr:`~recprep.storage.staging.FileFacts.chunks`) come from the pieces' the same way:
a copied piece's shifted to where it landed, a rewritten run's as its writer reports them.

Example
-------
>>> import fsspec
>>> from recprep.containers import get_format
>>> from recprep.write.options import check_options
>>> fs = fsspec.filesystem("memory")
>>> options = check_options("recordio", "none", "raw", 1, 1 << 20)
>>> def piece(path, records):
...     with fs.open(path, "wb") as raw:
...         out = ChecksumWriter(raw)
...         w = options.container().writer(out, "none", 1 << 20)
...         for r in records:
...             w.write(r)
...         w.close()
...     return FileFacts(path, len(records), out.size, out.crc32c, chunks=tuple(w.chunks))
>>> runs = [PieceSlice(piece("/doc/asm/a", [b"x", b"y"])),
...         PieceSlice(piece("/doc/asm/b", [b"z"]))]
>>> facts = build_shard(fs, "/doc/asm/shard", runs, options)
>>> facts.records, [list(c.records) for c in get_format("recordio").read_chunks(
...     fs.open("/doc/asm/shard", "rb"), path="shard")]
(3, [[b'x', b'y'], [b'z']])
>>> facts.chunks, get_format("recordio").scan_chunks(fs.open("/doc/asm/shard", "rb"),
...                                                   path="shard")
(((0, 2), (30, 1)), ([0, 30], [2, 1]))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..containers import Format, RecordWriter
from ..containers.record_index import RecordIndex
from ..errors import CorruptDataError, WriteError
from ..storage.fs import ChecksumReader, ChecksumWriter, checksum
from ..storage.staging import FileFacts
from .options import WriteOptions
from .uploads import open_upload

__all__ = ["PieceSlice", "build_shard"]


@dataclass(frozen=True)
class PieceSlice:
    """Records ``start:end`` (``end`` None: to the last) of the staged piece ``facts``
    (bytes ``[facts.offset, facts.offset + facts.bytes)`` of ``facts.path``); ``index``:
    the piece's record index side file, if it has one."""

    facts: FileFacts
    start: int = 0
    end: int | None = None
    index: str | None = None

    @property
    def stop(self) -> int:
        return self.facts.records if self.end is None else self.end

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.stop == self.facts.records


class _Range:
    """A read-only window ``[offset, offset + size)`` of an open file."""

    def __init__(self, file: Any, offset: int, size: int) -> None:
        self._file, self._start, self._size, self._pos = file, offset, size, 0

    def read(self, n: int = -1) -> bytes:
        left = self._size - self._pos
        n = left if n is None or n < 0 else min(n, left)
        self._file.seek(self._start + self._pos)
        data = self._file.read(n)
        self._pos += len(data)
        return bytes(data)

    def seek(self, pos: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, min(self._size, base + pos))
        return self._pos

    def tell(self) -> int:
        return self._pos


def _changed(facts: FileFacts, crc: int, size: int) -> None:
    if size < facts.bytes:
        raise CorruptDataError(f"staged piece is {facts.bytes - size} bytes shorter than "
                               "when it was written", path=facts.path)
    if crc != facts.crc32c:
        raise CorruptDataError(
            f"staged piece changed after it was written: CRC-32C 0x{crc:08x}, "
            f"expected 0x{facts.crc32c:08x}",
            path=facts.path,
        )


def _copy(fs: Any, run: PieceSlice, out: ChecksumWriter, span: tuple[int, int] | None) -> None:
    """Copy the whole piece (its CRC-32C checked), or the byte range ``span`` of it."""
    facts = run.facts
    first, stop = (0, facts.bytes) if span is None else span
    with fs.open(facts.path, "rb") as src:
        crc, size = checksum(src, start=facts.offset + first, size=stop - first, out=out)
    if span is None:
        _changed(facts, crc, size)
    elif size < stop - first:
        raise CorruptDataError(f"staged piece is {stop - first - size} bytes shorter than "
                               "when it was written", path=facts.path)


def _records(fs: Any, run: PieceSlice, container: Format, compressor: str) -> Iterator[bytes]:
    """Records ``run.start:run.stop`` of the piece, checksums verified (and, for a whole
    piece, its CRC-32C, once read)."""
    facts = run.facts
    seen = 0
    with fs.open(facts.path, "rb") as src:
        window = ChecksumReader(_Range(src, facts.offset, facts.bytes))  # type: ignore[arg-type]
        for chunk in container.read_chunks(window, path=facts.path, compressor=compressor):
            n = len(chunk.records)
            lo, hi = max(run.start - seen, 0), min(run.stop - seen, n)
            if lo < hi:
                yield from chunk.records[lo:hi]
            seen += n
            if seen >= run.stop:
                break
        if run.whole:
            _changed(facts, *window.finish())
    if seen < run.stop:
        raise CorruptDataError(f"staged piece ends after {seen} records, {run.stop} were "
                               "expected", path=facts.path)


def _piece_index(fs: Any, kind: type[RecordIndex], run: PieceSlice) -> RecordIndex:
    assert run.index is not None
    return kind.from_bytes(bytes(fs.cat_file(run.index)), path=run.index)


class _Shard:
    """A shard being written, run after run, at the end of ``out``: with the one writer of
    the whole shard when the format's files don't concatenate, and the shard's chunks so
    far (``(offset, records)``, as :class:`FileFacts` keeps them): a copied piece's as its
    writer reported them, a rewritten run's as its new writer reports, each shifted to
    where it starts. ``None`` once a part's are unknown (a byte range copied, a writer
    that doesn't tell)."""

    def __init__(self, fs: Any, out: ChecksumWriter, options: WriteOptions) -> None:
        self.fs, self.out, self.options = fs, out, options
        self.container = options.container()
        self.writer: RecordWriter | None = None
        if not self.container.concatenable(options.compressor):
            self.writer = self.container.writer(out, options.compressor, options.chunk_bytes)
        self.chunks: list[tuple[int, int]] | None = []

    def _found(self, start: int, chunks: Sequence[tuple[int, int]] | None) -> None:
        if chunks is None:
            self.chunks = None
        elif self.chunks is not None:
            self.chunks.extend((start + offset, count) for offset, count in chunks)

    def add(self, run: PieceSlice, span: tuple[int, int] | None) -> None:
        """Write ``run``: copied (the whole piece, or the byte range ``span`` of it), or its
        records written again — through the shard's writer if it has one, else through a
        writer of the run's own."""
        start, options = self.out.size, self.options
        if self.writer is None and (run.whole or span is not None):
            _copy(self.fs, run, self.out, span)
            self._found(start, run.facts.chunks if span is None else None)
            return
        one = self.writer or self.container.writer(self.out, options.compressor,
                                                   options.chunk_bytes)
        for record in _records(self.fs, run, self.container, options.compressor):
            one.write(record)
        if self.writer is None:
            one.close()
            self._found(start, one.chunks)

    def close(self) -> tuple[tuple[int, int], ...] | None:
        """Write out what the shard's writer holds; the shard's chunks."""
        if self.writer is not None:
            self.writer.close()
            self._found(0, self.writer.chunks)
        return None if self.chunks is None else tuple(self.chunks)


def build_shard(
    fs: Any,
    path: str,
    runs: Sequence[PieceSlice],
    options: WriteOptions,
    *,
    index_path: str | None = None,
) -> FileFacts:
    """Write the shard ``path`` of ``runs``, in order (see the module docstring); with
    ``index_path`` (a format with a record index; every run has its piece's), the shard's
    record index too. Returns the shard's facts (with its chunks, from the pieces' own:
    nothing is read back). Output failures raise :class:`~recprep.errors.WriteError`; a
    piece that changed since it was staged, :class:`~recprep.errors.CorruptDataError`."""
    kind = options.container().record_index
    lengths: list[np.ndarray] = []
    try:
        with open_upload(fs, path) as raw:  # parts in flight on an object store
            out = ChecksumWriter(raw)
            shard = _Shard(fs, out, options)
            for run in runs:
                index = None
                if kind is not None and run.index is not None and (
                        index_path is not None or not run.whole):
                    index = _piece_index(fs, kind, run)
                    lengths.append(index.lengths()[run.start:run.stop])
                shard.add(run, None if index is None or run.whole
                          else index.span(run.start, run.stop))
            chunks = shard.close()
    except (WriteError, CorruptDataError):
        raise
    except OSError as err:  # disk full, network: the output's fault, as documented
        raise WriteError(path, err) from err
    facts = FileFacts(path, sum(run.stop - run.start for run in runs), out.size, out.crc32c,
                      chunks=chunks)
    if index_path is not None and kind is not None:
        joined = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        index_bytes = kind.from_lengths(joined, facts.bytes, options.compressor).to_bytes()
        try:
            with fs.open(index_path, "wb") as side:
                side.write(index_bytes)
        except OSError as err:
            raise WriteError(index_path, err) from err
    return facts
