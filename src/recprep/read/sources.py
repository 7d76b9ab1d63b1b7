"""The files a reader reads: their containers, record counts, chunk indexes and chunks.

:class:`Sources` numbers a reader's files (shard sets in order, shards in index order),
knows each one's record count — from the set's manifest, else from the file's chunk index
(:mod:`recprep.containers.fileindex`), never by decoding — and reads the raw chunks of a
:class:`~recprep.read.ranks.Piece`: a whole file front to back, or a record range by
seeking through the index. Indexes are built once and cached. Nothing here decodes a
record: that is the codec's job, in the reader.

Example
-------
>>> from recprep import convert
>>> from recprep.read.ranks import Piece
>>> from recprep.storage import resolve
>>> from recprep.storage.discovery import resolve_shard_sets
>>> _ = convert("memory://doc/sources", [b"a", b"b", b"c"], 2, "s", codec="raw")
>>> fs, path = resolve("memory://doc/sources/s-*")
>>> sources = Sources(fs, resolve_shard_sets(fs, [path]))
>>> [sources.count(n) for n in range(len(sources.files))]
[2, 1]
>>> [list(chunk.records) for chunk, _ in sources.chunks(Piece(0, 1, 2))]
[[b'c']]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO

from ..containers import DEFAULT_MAX_CHUNK_BYTES, Chunk, Format, Gap, get_format, sniff
from ..containers.base import Quietly, report_skip
from ..containers.fileindex import FileIndex, build_index
from ..errors import (
    CorruptDataError,
    CorruptDataWarning,
    InvalidArgumentError,
    RecordRangeError,
    RecordsLostError,
    Remedy,
    warn,
)
from ..storage.discovery import ShardSet
from ..storage.fetch import Fetcher, FetchOptions, streams_ranges
from ..storage.fs import display, in_this_process, is_local
from ..storage.manifest import Manifest
from .cache import ShardCache
from .committed import CommittedSets
from .filepool import FilePool
from .filetable import CountArray, Marks, SourceFile, checked_counts, number_files
from .placing import place_chunks, read_range_chunks
from .ranks import Piece

__all__ = ["SourceFile", "Sources"]

log = logging.getLogger("recprep")


class Sources:
    """A reader's files, in reading order, with their counts, indexes and chunks.

    Parameters
    ----------
    fs
        The fsspec filesystem of the files.
    shard_sets
        What the reader's patterns resolved to.
    format
        A container format forced by the user; ``None`` detects it per file.
    max_chunk_bytes, on_corrupt
        As for :class:`~recprep.RecordIO`.
    cache
        Where shards of committed remote sets are kept locally (:mod:`recprep.read.cache`).
    """

    def __init__(
        self,
        fs: Any,
        shard_sets: Sequence[ShardSet],
        *,
        format: Format | None = None,
        compressor: str | None = None,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        on_corrupt: str = "raise",
        on_skip: Callable[[CorruptDataWarning], None] | None = None,
        cache: ShardCache | None = None,
        fetch: FetchOptions | None = None,
    ) -> None:
        self._fs = fs
        self.shard_sets = list(shard_sets)
        self.format = format
        self.compressor = compressor
        self.max_chunk_bytes = max_chunk_bytes
        self.on_corrupt = on_corrupt
        self.on_skip = on_skip
        protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
        #: local copies of remote shards (see read/cache.py); a local set is read where it is
        self.cache = None if {"file", "local"} & set(protocols) else cache
        #: object stores: shards streamed as ranges in parallel (see storage/fetch.py)
        self.fetcher = Fetcher(fs, fetch) if streams_ranges(fs) else None
        if self.fetcher is not None:
            self.fetcher.warm()  # its connections set up while the manifests are read
        self.files_open = FilePool(fs, fetcher=self.fetcher)  # round-robin reads: bounded fds
        self.commits = CommittedSets(self)  # notes each manifest's identity: read/committed.py
        self.manifests: list[Manifest | None] = [
            self._manifest(i) for i in range(len(self.shard_sets))]
        self.commits.check_listings(self._manifest)  # a listing older than its manifest
        #: the files, numbered: made on demand from the sets' paths (read/filetable.py)
        self.files, self._counts = number_files(self._display, self.shard_sets,
                                                self.manifests)
        self.known_count = self._counts.get  # a count known without asking storage
        self._indexes: dict[int, FileIndex] = {}
        self._chunk_tables: dict[int, Any] = {}  # per set: its chunk side file, if usable
        self._counts_checked = Marks(len(self.files))  # manifest counts checked against files

    def _display(self, path: str) -> str:
        """``path`` as users write it."""
        return display(self.fs, path)

    def _manifest(self, index: int) -> Manifest | None:
        """The manifest of shard set ``index``, if it has one (read once, with its
        identity: :meth:`~recprep.read.committed.CommittedSets.note`). A damaged one
        raises, or with ``on_corrupt="skip"`` is left aside with a warning: counts then
        come from the shards' own chunk headers, as ``recprep ls`` does."""
        shard_set = self.shard_sets[index]
        try:
            found = self.commits.note(index)
            return None if found is None else found.parse()
        except CorruptDataError as err:
            assert shard_set.manifest_path is not None
            if self.on_corrupt != "skip":
                raise
            warning = CorruptDataWarning(
                f"the manifest is damaged ({err.detail}); reading the shards without it, "
                "from their own headers (format detected from the bytes)",
                path=display(self.fs, shard_set.manifest_path), offset=None,
                records_lost=None,
            )
            warn(warning)
            if self.on_skip is not None:
                self.on_skip(warning)
            return None

    @property
    def fs(self) -> Any:
        """The files' filesystem (made again in a forked process: ``in_this_process``)."""
        fs = in_this_process(self._fs)
        if fs is not self._fs:
            self._fs = self.files_open.fs = fs
        return fs

    def pass_ended(self) -> None:
        """A pass is over: say once if the store throttled it."""
        if self.fetcher is not None and self.shard_sets:
            first = self.shard_sets[0]
            where = f"{first.directory}/{first.prefix}" if first.prefix else first.paths[0]
            self.fetcher.warn_throttled(display(self.fs, where))

    def span(self, piece: Piece) -> tuple[int, int] | None:
        """The bytes a read of ``piece`` covers, where known without a request: a whole
        file's (its size from the manifest), a range's from its set's chunk index."""
        listed = self.commits.listed_bytes(self.files[piece.file])
        if listed is None or piece.whole:
            return None if listed is None else (0, listed)
        index = self._indexes.get(piece.file) or self._chunk_side(piece.file)
        if index is None:
            return None
        end = index.num_records if piece.end is None else piece.end
        return index.byte_span(piece.start, end, listed)

    @property
    def set_of(self) -> list[int]:
        """Each file's shard set, by file number."""
        return self.files.set_indexes().tolist()

    def describe_set(self, index: int) -> str:
        """Shard set ``index`` in a line: where it is, its shards, what its manifest says."""
        shard_set, manifest = self.shard_sets[index], self.manifests[index]
        if shard_set.prefix is None:
            return display(self.fs, shard_set.paths[0])
        described = (f"{display(self.fs, shard_set.directory)}/{shard_set.prefix}: "
                     f"{len(shard_set.paths)} shards")
        if manifest is not None:
            described += (f", {manifest.num_records} instances, {manifest.format}/"
                          f"{manifest.codec}/{manifest.compressor}")
        return described

    def range_piece(self, path: str, start: int, end: int) -> Piece | None:
        """Records ``start:end`` of the file at ``path`` as a piece (None when empty);
        :class:`~recprep.errors.RecordRangeError` unless ``0 <= start <= end <=`` its
        count."""
        number = self.number(path)
        count = self.count(number)
        shown = self.files[number].shown
        for name, value in (("start", start), ("end", end)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise RecordRangeError(shown, start, end, count, f"{name} must be an int")
        if start < 0 or end < start or end > count:
            detail = "start is negative" if start < 0 else (
                "end is before start" if end < start else "end is past the last record"
            )
            raise RecordRangeError(shown, start, end, count, detail)
        if start == end:
            return None
        return Piece(number) if (start, end) == (0, count) else Piece(number, start, end)

    def number(self, path: str) -> int:
        """The number of the file at ``path`` (as :attr:`files` shows it, or the fs path)."""
        number = self.files.number(path)
        number = self.files.number(path.rstrip("/")) if number is None else number
        if number is None:
            shown = ", ".join(f.shown for f in self.files[:3])
            raise InvalidArgumentError(
                f"{path!r} is not one of this reader's files ({shown}"
                f"{' ...' if len(self.files) > 3 else ''}); pass a path as tasks() or "
                ".paths give it"
            )
        return number

    def count(self, number: int) -> int:
        """The records of file ``number``: from its manifest, else from its index.

        A manifest's count is first checked against what the file's size can hold
        (nothing is sized by an unchecked number); reading the file checks it exactly.
        """
        count = self._counts.get(number)
        if count is None:
            count = self._counts[number] = self.index(number).num_records
            return count
        checked = self._counts_checked
        if number not in checked:
            file = self.files[number]
            manifest = self.manifests[file.set_index]
            if manifest is not None and self.commits.pinned(file) is None:  # else: its
                size = self.commits.size(file)  # size is the manifest's, reads pinned
                most = manifest.max_records(size)
                if count > most or (count == 0 and size > 0):
                    detail = (
                        f"the manifest says the file holds {count} records, but its {size} "
                        + (f"bytes can hold at most {most} ({manifest.format}, "
                           f"{manifest.compressor})" if count else "bytes hold some")
                        + ": the manifest is damaged or not this set's"
                    )
                    if self.on_corrupt != "skip":
                        raise CorruptDataError(detail, path=file.shown)
                    listed = self.commits.listed_bytes(file)
                    if listed is not None and listed != size:  # the file changed, not the
                        report_skip(  # manifest: what it lacks is lost, the rest keeps its place
                            self.on_skip, detail.replace(
                                "the manifest is damaged or not this set's",
                                f"the file is not the {listed} bytes its manifest lists"),
                            path=file.shown, offset=None, records_lost=None)
                        checked.add(number)
                        return count
                    report_skip(self.on_skip,
                                detail + "; counting the file's own records instead",
                                path=file.shown, offset=None, records_lost=0)
                    del self._counts[number]
                    checked.add(number)
                    count = self._counts[number] = self.index(number).num_records
            checked.add(number)
        return count

    def all_counts(self, later_up_to: int = 0) -> CountArray:
        """:meth:`count` of every file, in one array (:func:`.filetable.checked_counts`)."""
        return checked_counts(self._counts, self._counts_checked, self.files, self.manifests,
                              self.count, is_local(self.fs), later_up_to)

    def proven_count(self, number: int) -> int:
        """The records of file ``number``, proven: a count its manifest vouches for, or
        else its chunk headers' counts each checked by reading the file once (a header's
        count is covered by no checksum). A count that can't be proven raises
        :class:`~recprep.errors.CorruptDataError` — with ``on_corrupt="skip"`` a
        :class:`~recprep.errors.RecordsLostError`: the damage can be read around, but
        not counted."""
        if self.manifests[self.files[number].set_index] is not None:
            return self.count(number)
        index = self.index(number)
        if not index.trusted:
            for _ in self.chunks(Piece(number, 0, index.num_records)):
                pass  # the walk proves each chunk's count, or raises
        if not index.trusted:
            raise RecordsLostError(
                "the file's chunk headers count records its bytes don't hold where they "
                "say (damage was skipped): how many records it holds can't be proven, so "
                "the set's order can't be told", path=self.files[number].shown)
        return index.num_records

    def container(self, handle: BinaryIO, number: int) -> Format | None:
        """The format of file ``number``, open as ``handle`` (None when it is empty): the
        one forced by the user, else the one its set's manifest names, else detected
        from its bytes."""
        forced, path = self.format, self.files[number].path
        if forced is None:
            manifest = self.manifests[self.files.set_of(number)]
            forced = None if manifest is None else get_format(manifest.format)
        size = getattr(handle, "size", None)
        if size is None and forced is not None:  # its manifest's size: checked at open
            size = self.commits.listed_bytes(self.files[number])
        if forced is not None and isinstance(size, int):
            return None if size == 0 else forced  # known without reading a byte
        if forced is not None:
            handle.seek(0)
            empty = not handle.read(1)
            handle.seek(0)
            return None if empty else forced
        return sniff(handle, path=display(self.fs, path),
                     remedy=Remedy("format", effect="to say what it is"))

    def index(
        self, number: int, handle: BinaryIO | None = None, container: Format | None = None
    ) -> FileIndex:
        """The chunk index of file ``number``, built once (from ``handle`` if open)."""
        index = self._indexes.get(number)
        if index is not None:
            return index
        file = self.files[number]
        index = self._chunk_side(number)
        if index is not None:  # the set's side file: no chunk header read
            self._indexes[number] = index
            return index
        if handle is None:
            with self.commits.open(file) as opened:
                return self.index(number, opened)
        container = container or self.container(handle, number)
        side = None if container is None else self._side_index(number, container)
        skipped: list[CorruptDataWarning] = []

        def note(warning: CorruptDataWarning) -> None:
            skipped.append(warning)
            if self.on_skip is not None:
                self.on_skip(warning)

        if container is None:
            index = FileIndex.from_counts([], [], True)
        elif side is not None:
            index = side
        else:
            index = build_index(
                handle, container, path=file.shown, max_chunk_bytes=self.max_chunk_bytes,
                on_corrupt=self.on_corrupt, on_skip=note,
            )
            log.debug("recprep: indexed %s: %d chunks, %d records",
                      file.shown, index.num_chunks, index.num_records)
        listed = self._counts.get(number) if self.manifests[file.set_index] else None
        if listed is not None and index.settle(listed):
            pass  # the manifest vouches for the sum of the counts (and what damage lost)
        elif listed is not None and not skipped:
            detail = (
                f"the manifest says the file holds {listed} records, its chunk headers "
                f"hold {index.num_records}: the manifest is damaged or not this file's"
            )
            if self.on_corrupt != "skip":
                raise CorruptDataError(detail, path=file.shown)
            report_skip(note, detail + "; reading what the file holds", path=file.shown,
                        offset=None, records_lost=max(listed - index.num_records, 0))
        self._indexes[number] = index
        return index

    def _chunk_side(self, number: int) -> FileIndex | None:
        """File ``number``'s index from its RecordIO set's side file (``.{prefix}.chunks``,
        :mod:`recprep.storage.chunkindex`), read once per set; None without one, or when it is
        not usable (then with a warning)."""
        from ..storage.chunkindex import load_table

        file = self.files[number]
        manifest = self.manifests[file.set_index]
        if manifest is None or not get_format(manifest.format).chunk_header_bytes or (
            self.format is not None and self.format.name != manifest.format
        ) or (self.compressor is not None and self.compressor != manifest.compressor):
            return None
        tables = self._chunk_tables
        if file.set_index not in tables:
            where = self.shard_sets[file.set_index].manifest_path
            assert where is not None  # a set with a manifest
            tables[file.set_index] = load_table(
                self.fs, where.rsplit("/", 1)[0] if "/" in where else "", manifest,
                self.on_corrupt,
            )
        table = tables[file.set_index]
        return None if table is None else table.index(file.path.rsplit("/", 1)[-1])

    def _side_index(self, number: int, container: Format) -> FileIndex | None:
        """File ``number``'s index from its record index side file (a plain TFRecord
        file's ``.{name}.tfindex``), when its format keeps one and it gives random access.
        In a set with a manifest, only a side file the manifest vouches for is used."""
        kind = container.record_index
        if kind is None:
            return None
        from ..storage.sideindex import load_index

        file = self.files[number]
        manifest = self.manifests[file.set_index]
        vouched = None
        if manifest is not None:
            vouched = manifest.side_file(kind.name_for(file.path.rsplit("/", 1)[-1]))
            if vouched is None:
                return None  # not one the set's manifest vouches for: scanned instead
        side = load_index(self.fs, file.path, container, vouched=vouched,
                          on_corrupt=self.on_corrupt, size=self.commits.listed_bytes(file))
        if side is None or not side.seeks(side.compressor):
            return None
        return FileIndex.from_record_index(side)

    def chunks(
        self, piece: Piece, wrap: Callable[[BinaryIO], BinaryIO] | None = None
    ) -> Iterator[tuple[Chunk, int] | Gap]:
        """The chunks of ``piece``, each with how many of its records were cut off its
        front (by the start of a range), and — with ``on_corrupt="skip"`` — a
        :class:`~recprep.containers.base.Gap` in place of each run of its records lost
        to damage: together they hold exactly the piece's records, each at its own
        number (see :mod:`recprep.read.placing`). A whole file is read front to back
        without an index; a range seeks through the index. ``wrap`` wraps the open file
        (to gate its reads, see :class:`~recprep.read.prefetch.CpuGate`).

        Damage raises, or with ``on_corrupt="skip"`` is skipped with a
        :class:`~recprep.errors.CorruptDataWarning` (handed to ``on_skip`` too). A whole
        file must hold the records its manifest (or index) counts: a count that
        disagrees with what was read is damage too."""
        file = self.files[piece.file]
        options: dict[str, Any] = {
            "max_chunk_bytes": self.max_chunk_bytes, "on_corrupt": self.on_corrupt,
        }
        span = self.span(piece) if self.fetcher is not None else None
        with self.commits.open(file, piece.whole, span=span) as opened:
            handle = opened if wrap is None else wrap(opened)
            container = self.container(handle, piece.file)
            if container is None:
                expected = self._counts.get(piece.file) if piece.whole else piece.end
                if expected:
                    detail = f"the file is empty, but {expected} records were expected"
                    if self.on_corrupt == "raise":
                        raise CorruptDataError(detail, path=file.shown)
                    report_skip(self.on_skip, detail, path=file.shown, offset=0,
                                records_lost=expected - piece.start)
                    yield Gap(expected - piece.start)
                return
            if piece.whole:
                yield from self._whole(piece.file, handle, container, options)
                return
            index = self.index(piece.file, handle, container)
            end = index.num_records if piece.end is None else piece.end
            yield from read_range_chunks(
                handle, container, index, piece.start, end, path=file.shown,
                on_skip=self.on_skip, anchors=lambda: self._anchors(piece.file), **options,
            )

    def _whole(
        self, number: int, handle: BinaryIO, container: Format, options: dict[str, Any]
    ) -> Iterator[tuple[Chunk, int] | Gap]:
        """File ``number`` read front to back, its chunks placed at their numbers (an
        iterator, not a generator of its own: one layer less per chunk)."""
        file = self.files[number]
        read = dict(options)
        if self.compressor is not None:
            read["compressor"] = self.compressor
        return place_chunks(
            lambda note: container.read_chunks(handle, path=file.shown, on_skip=note, **read),
            path=file.shown, count=self._counts.get(number),
            count_of=lambda: self.count(number), anchors=lambda: self._anchors(number),
            on_corrupt=self.on_corrupt, on_skip=self.on_skip, kind=container.record_index,
        )

    def _anchors(self, number: int) -> Iterator[FileIndex | None]:
        """Trusted indexes of file ``number`` to find where reading is after damage: the
        one a reader has (its set's side file), then its chunk headers hopped anew."""
        yield self._indexes.get(number)
        yield self._chunk_side(number)
        manifest = self.manifests[self.files[number].set_index]
        container = self.format or (None if manifest is None else get_format(manifest.format))
        yield None if container is None else self._side_index(number, container)
        yield self._rescan(number)

    def _rescan(self, number: int) -> FileIndex | None:
        """After damage that may have moved the chunks after it: file ``number``'s chunk
        headers hopped again, as the file is now (what was skipped is already reported:
        quietly), trusted when they add up to its manifest's count; else None."""
        file = self.files[number]
        listed = self._counts.get(number) if self.manifests[file.set_index] else None
        if listed is None:
            return None  # nothing vouches for header counts
        with self.commits.open(file) as opened:
            container = self.container(opened, number)
            if container is None:
                return None
            index = build_index(opened, container, path=file.shown,
                                max_chunk_bytes=self.max_chunk_bytes, on_corrupt="skip",
                                on_skip=Quietly())
        return index if index.settle(listed) else None
