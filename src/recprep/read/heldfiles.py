"""Local shard files a :class:`~recprep.read.dataset.MapDataset` keeps open between
lookups, trusted only while their paths still name them (:class:`ColdReads`).

A lookup whose chunk isn't cached used to open its shard through every check that catches
a replaced set (the manifest asked again, the shard's size compared with the manifest's)
and read its chunk through the careful walk: about three quarters of its time. A local
RecordIO shard read that way once is then *held*: its descriptor is kept in a small LRU
(:class:`HeldFiles`: at most :data:`MAX_HELD` per dataset, and a quarter of what a
reader's file pool may keep open under a low file limit), with the identity of the file
(device, inode, size, mtime in ns) and of its set's manifest as they were before those
checks passed. A later lookup reads its chunk from a held file with one ``os.pread``,
and only after an ``os.stat`` of the shard's path and one of the manifest's find both
unchanged (a few microseconds): a set replaced, or a shard replaced or changed in place,
is noticed at the lookup that follows, which goes the careful way again and raises what
it always raised. So is anything unexpected in the chunk's bytes
(:mod:`~recprep.containers.recordio_lookup` takes a chunk only when it is sound).

Example
-------
>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> path = os.path.join(root, "shard")
>>> with open(path, "wb") as f:
...     _ = f.write(b"0123456789")
>>> held = HeldFiles(2)
>>> held.hold(0, path, None, None, 10)
True
>>> os.pread(held.get(0).fd, 4, 3)
b'3456'
>>> os.replace(path, path + ".old"); open(path, "wb").close()
>>> held.get(0) is None  # the path names another file now: dropped
True
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codecs import Codec
from ..containers import get_format
from ..containers.recordio import RecordIOFormat
from ..containers.recordio_lookup import ChunkMarks, sound_chunk_records, sound_record
from ..errors import LocatedError
from ..storage.fs import is_local
from ..storage.openfiles import default_max_open
from .mapchunks import DecodedChunk

if TYPE_CHECKING:
    from .reader import RecordIO

__all__ = ["MAX_HELD", "MAX_MARKED", "ColdReads", "HeldFile", "HeldFiles", "file_identity"]

#: shard files a dataset keeps open at most (fewer under a low file limit)
MAX_HELD = 64
#: chunks whose :class:`~recprep.containers.recordio_lookup.ChunkMarks` a dataset keeps
#: at most, least recently used let go first (2.3 kB each for a default chunk of small
#: records, some 5 kB at most: 5 to 10 MB per dataset, or per DataLoader worker)
MAX_MARKED = 2048


def file_identity(path: str) -> tuple[int, int, int, int] | None:
    """What tells the file at ``path`` from its replacement or a change in place (device,
    inode, size, mtime in ns); None when there is none, or it is not a regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class HeldFile:
    """An open shard: its descriptor (closed when the last holder lets go of it), the
    identity of the file it is, and its set's manifest path and identity (None: a file
    with no manifest)."""

    __slots__ = ("fd", "identity", "manifest", "manifest_identity", "path")

    def __init__(self, fd: int, path: str, identity: tuple[int, int, int, int],
                 manifest: str | None, manifest_identity: tuple[int, ...] | None) -> None:
        self.fd, self.path, self.identity = fd, path, identity
        self.manifest, self.manifest_identity = manifest, manifest_identity

    @property
    def size(self) -> int:
        return self.identity[2]

    def unchanged(self) -> bool:
        """Whether the path still names this file, unchanged, and the manifest is the one
        seen before the file was checked."""
        if file_identity(self.path) != self.identity:
            return False
        return self.manifest is None or file_identity(self.manifest) == self.manifest_identity

    def __del__(self, _close: Any = os.close) -> None:  # bound: still there at exit
        _close(self.fd)


class HeldFiles:
    """At most ``max_held`` :class:`HeldFile` by file number, least recently used let go
    first. A file let go while a lookup in another thread reads it stays open until that
    lookup is done (the descriptor closes with its last reference)."""

    def __init__(self, max_held: int | None = None) -> None:
        if max_held is None:
            max_held = min(MAX_HELD, max(1, default_max_open() // 4))
        self.max_held = max_held
        self._held: OrderedDict[int, HeldFile] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, number: object) -> bool:
        return number in self._held

    def get(self, number: int) -> HeldFile | None:
        """File ``number``, held and unchanged (see :meth:`HeldFile.unchanged`); one found
        changed is let go, and None returned."""
        with self._lock:
            held = self._held.get(number)
            if held is None:
                return None
            self._held.move_to_end(number)
        if held.unchanged():
            return held
        self.drop(number)
        return None

    def drop(self, number: int) -> None:
        """Let go of file ``number`` (if held)."""
        with self._lock:
            self._held.pop(number, None)

    def hold(self, number: int, path: str, manifest: str | None,
             manifest_before: tuple[int, ...] | None, size: int | None) -> bool:
        """Hold file ``number`` at the local ``path``, just read through the checks of its
        set, whose ``manifest`` had the identity ``manifest_before`` before those checks
        (None and None: no manifest); ``size``: the bytes its manifest lists. Whether it
        is held: not when it is not a regular file of that size, or the manifest was
        missing before."""
        if manifest is not None and manifest_before is None:
            return False
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return False
        st = os.fstat(fd)
        identity = st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns
        if not stat.S_ISREG(st.st_mode) or (size is not None and st.st_size != size):
            os.close(fd)
            return False
        held = HeldFile(fd, path, identity, manifest, manifest_before)
        with self._lock:
            self._held[number] = held
            self._held.move_to_end(number)
            while len(self._held) > self.max_held:
                self._held.popitem(last=False)
        return True


#: what :meth:`ColdReads.before` takes before a file is read the careful way
Before = tuple[str, "str | None", "tuple[int, ...] | None", "int | None"]


class ColdReads:
    """The chunks of ``reader``'s local RecordIO shards read from held files
    (:class:`HeldFiles`): for each file held, its chunks' offsets and first record
    numbers, and how its records decode. A file is held only when its index is plain
    (every chunk where it says, holding the records it says, nothing lost)."""

    def __init__(self, reader: RecordIO) -> None:
        self.reader = reader
        self.files = HeldFiles()
        self._plain: dict[int, tuple[list[int], list[int], str, Codec, str | None]] = {}
        # what lookups learned of each chunk, by (file, chunk, the file's identity)
        self._marks: OrderedDict[tuple[int, int, tuple[int, ...]], ChunkMarks] = OrderedDict()

    def __contains__(self, number: object) -> bool:
        return number in self._plain

    def _bytes(self, number: int, k: int) -> tuple[bytes, int, int, HeldFile] | None:
        """Chunk ``k`` of held file ``number``: the bytes from its offset to the next
        chunk's, its offset, its record count and the held file; None when the file is
        not held, or changed (let go)."""
        held = self.files.get(number)
        if held is None:
            return None
        offsets, firsts = self._plain[number][:2]
        start = offsets[k]
        end = offsets[k + 1] if k + 1 < len(offsets) else held.size
        try:
            data = os.pread(held.fd, end - start, start)
        except OSError:
            self.files.drop(number)
            return None
        return data, start, firsts[k + 1] - firsts[k], held

    def chunk(self, number: int, k: int) -> DecodedChunk | None:
        """Chunk ``k`` of file ``number`` read from its held file with one ``pread``, or
        None: the file isn't held or changed, or the chunk's bytes aren't exactly sound
        (the caller reads it the careful way, which raises what is wrong)."""
        found = self._bytes(number, k)
        if found is None:
            return None
        data, start, count, _ = found
        records = sound_chunk_records(data, count, self.reader._sources.max_chunk_bytes)
        if records is None:
            return None
        _, firsts, shown, codec, written_with = self._plain[number]
        return DecodedChunk(records, start, shown, codec, self.reader.allow_pickle,
                            firsts[k], written_with)

    def instance(self, number: int, k: int, p: int) -> list[Any] | None:
        """``[instance]``: record ``p`` of chunk ``k`` of file ``number`` read from its
        held file, its chunk decompressed and cut only as far as the record, from the
        last record before it that lookups in the chunk proved (its
        :class:`~recprep.containers.recordio_lookup.ChunkMarks`: for a dataset that
        keeps no chunk); None as for :meth:`chunk`, or when the record doesn't decode
        (read the careful way, the error names it)."""
        found = self._bytes(number, k)
        if found is None:
            return None
        data, _, count, held = found
        record = sound_record(data, count, p, self.reader._sources.max_chunk_bytes,
                              self._marks_of((number, k, held.identity)))
        if record is None:
            return None
        try:
            return self._plain[number][3].decode_many(
                [record], allow_pickle=self.reader.allow_pickle)
        except LocatedError:
            return None

    def _marks_of(self, key: tuple[int, int, tuple[int, ...]]) -> ChunkMarks:
        """The marks of chunk ``key`` (made, and the least recently used let go, as
        needed: at most :data:`MAX_MARKED`)."""
        marks = self._marks
        with self.files._lock:
            found = marks.get(key)
            if found is not None:
                marks.move_to_end(key)
                return found
            found = marks[key] = ChunkMarks()
            if len(marks) > MAX_MARKED:
                marks.popitem(last=False)
        return found

    def before(self, number: int) -> Before | None:
        """What :meth:`hold` needs to hold file ``number`` once it is read the careful
        way, taken before (its local path, its set's manifest path and identity, the
        size its manifest lists); None when its chunks are never read from a held file
        (not a local RecordIO file outside a cache, or held already)."""
        sources = self.reader._sources
        if number in self.files or not is_local(sources.fs) or sources.cache is not None or (
                not hasattr(os, "pread")):  # (Windows has none)
            return None
        file = sources.files[number]
        manifest = sources.manifests[file.set_index]
        forced = sources.format or (None if manifest is None else get_format(manifest.format))
        if not isinstance(forced, RecordIOFormat):
            return None
        size = sources.commits.listed_bytes(file)
        if manifest is not None and size is None:
            return None  # a manifest whose identity isn't noted, or that doesn't list it
        strip = sources.fs._strip_protocol
        path = sources.shard_sets[file.set_index].manifest_path
        local = None if manifest is None or path is None else strip(path)
        return strip(file.path), local, None if local is None else file_identity(local), size

    def hold(self, number: int, path: str, manifest: str | None,
             identity: tuple[int, ...] | None, size: int | None) -> None:
        """Hold file ``number``, just read the careful way (``path`` and the rest: what
        :meth:`before` took), when its index is plain."""
        sources = self.reader._sources
        index = sources.index(number)
        if not index.seekable or index.records is not None or index.unknown or (
            not index.trusted) or not (index.counts == np.diff(index.firsts)).all():
            return
        if self.files.hold(number, path, manifest, identity, size):
            file = sources.files[number]
            self._plain[number] = (index.offsets.tolist(), index.firsts.tolist(), file.shown,
                                   self.reader.codec_for(file.set_index),
                                   self.reader.written_with(file.set_index))
