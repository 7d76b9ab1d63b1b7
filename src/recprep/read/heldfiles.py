"""Local shard files a :class:`~recprep.read.dataset.MapDataset` keeps open between
lookups, trusted only while their paths still name them.

A lookup whose chunk isn't cached used to open its shard through every check that catches
a replaced set (the manifest asked again, the shard's size compared with the manifest's)
and read its chunk through the careful walk: about three quarters of its time. A shard
read that way once is then *held*: its descriptor is kept in a small LRU
(:class:`HeldFiles`, at most :data:`MAX_HELD` per dataset, a quarter of those a reader's
file pool may hold), with the identity of the file it is (device, inode, size, mtime in
ns) and of its set's manifest as it was before those checks passed. A later lookup reads
its chunk from a held file with one ``os.pread`` only after an ``os.stat`` of the shard's
path and of the manifest's finds both unchanged (a few microseconds): a set replaced,
or a shard replaced or changed in place, since is noticed at the lookup that follows,
which goes the careful way again and raises what it always raised. So does anything
unexpected in the chunk's bytes (:func:`~recprep.containers.recordio_reading.sound_chunk_records`).

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
>>> os.replace(path + "", path + ".old"); open(path, "wb").close()
>>> held.get(0) is None  # the path names another file now: dropped
True
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict

from ..storage.openfiles import default_max_open

__all__ = ["MAX_HELD", "HeldFile", "HeldFiles", "file_identity"]

#: shard files a dataset keeps open at most (fewer under a low file limit)
MAX_HELD = 64


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

    def __del__(self) -> None:
        os.close(self.fd)


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
