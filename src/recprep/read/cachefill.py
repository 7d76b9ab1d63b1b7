"""Filling a :class:`~recprep.read.cache.ShardCache` while a pass streams a shard.

A reader that opens a shard missing from the cache reads it from the store as it would
without a cache (streamed ranges, :mod:`recprep.storage.fetch`), and every byte it reads
is also written, at its offset, into the shard's *partial file* in the cache directory
(``<cache name>.part``). What the partial holds is tracked as byte intervals; when they
cover the whole shard, the partial is checked (size and CRC-32C against the manifest) and
renamed whole to its cache name. Readers never see a partial as a cached shard.

Fillers hold the bytes they will read: a lock on the byte range of their pass (``span``)
in the partial (an open file description lock on Linux — per open file, released by the
kernel when it closes or its process dies, even by SIGKILL; a ``flock`` of the whole
partial elsewhere). So ranks, tasks and DataLoader workers that read disjoint parts of a
shard fill its partial at once, each fetching only its part; each merges what it wrote
into the partial's map when it lets go, and the one that finds the map whole checks the
partial and renames it. A reader whose bytes another process is filling (two processes
reading the whole set) waits for the rename and then reads the local copy, so a node
downloads each byte once; when that filler lets go without finishing (it read only part
of the shard, or died), the reader takes over. A waiter whose filler makes no progress
for ``stall_seconds`` (two readers each waiting for a shard the other fills, in crossing
orders) reads from the store instead, uncached: no pair of readers waits for each other
forever. Within one process, an open of bytes another thread is filling reads from the
store at once (a reader reads disjoint pieces of a shard; waiting for its own thread
could only stall it).

Partials are kept for a later pass to complete, with ``<cache name>.part.map`` (the
intervals they hold, tied to the partial's inode, written when a filler lets go: bytes
written by a filler that died are not in it and are fetched again). A partial nobody
holds is removed after an hour without use.

Example
-------
>>> import os, tempfile
>>> local = os.path.join(tempfile.mkdtemp(), "s.shard")
>>> partial = Partial.claim(local, 6)
>>> partial.write(0, b"abc"); partial.write(3, b"def")
>>> partial.have, partial.complete
([[0, 6]], True)
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import os
import shutil
import struct
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..storage.fs import checksum
from ..storage.manifest import ShardInfo

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: shards are downloaded whole instead
    fcntl = None  # type: ignore[assignment]

__all__ = ["CAN_FILL", "FillingFile", "Partial", "cgroup_memory_limit", "default_cache_bytes",
           "memory_backed", "remove_abandoned"]

log = logging.getLogger("recprep")

PART = ".part"  # a partial file: <cache name>.part
MAP = ".part.map"  # the intervals it holds: <cache name>.part.map
#: the share of the cache directory's free space (plus what the cache holds) it may use
DISK_SHARE = 0.8
#: on a memory-backed filesystem, the share of the cgroup's memory limit it may use
MEMORY_SHARE = 0.5
#: where the container's memory limit is read: cgroup v2, then v1
CGROUP_MEMORY_FILES: tuple[str, ...] = ("/sys/fs/cgroup/memory.max",
                                        "/sys/fs/cgroup/memory/memory.limit_in_bytes")
MOUNTS_FILE = "/proc/self/mounts"
_MEMORY_FS = {"tmpfs", "ramfs"}
#: whether partials can be held across processes here (``flock``); else shards are
#: downloaded whole at their first open
CAN_FILL = fcntl is not None
#: ``struct flock`` on 64-bit Linux: fillers hold byte ranges of a partial (open file
#: description locks: per open file, released when it closes or its process dies), so
#: readers of disjoint parts of a shard fill it at once; elsewhere a filler holds it whole
_FLOCK = struct.Struct("hhqqi4x")
_RANGES = (CAN_FILL and sys.platform.startswith("linux") and hasattr(fcntl, "F_OFD_SETLK")
           and struct.calcsize("l") == 8)
_UNLIMITED = 1 << 60  # cgroup v1 says "no limit" with a number about this large


def cgroup_memory_limit(files: Sequence[str] | None = None) -> int | None:
    """The container's memory limit in bytes from the first of ``files`` that can be read
    (default :data:`CGROUP_MEMORY_FILES`); ``None`` when unlimited or unreadable.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", delete=False) as f:
    ...     _ = f.write("4294967296\\n")
    >>> cgroup_memory_limit([f.name, "/nonexistent"]), cgroup_memory_limit(["/nonexistent"])
    (4294967296, None)
    """
    for path in CGROUP_MEMORY_FILES if files is None else files:
        try:
            with open(path, encoding="ascii") as file:
                text = file.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text == "max":
            return None
        try:
            value = int(text)
        except ValueError:
            continue
        return value if 0 < value < _UNLIMITED else None
    return None


def memory_backed(directory: str, mounts: str | None = None) -> bool:
    """Whether ``directory`` is on a memory-backed filesystem (tmpfs, ramfs), from the
    mount table ``mounts`` (default :data:`MOUNTS_FILE`); False when it can't be read."""
    try:
        with open(MOUNTS_FILE if mounts is None else mounts, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    where, best, kind = os.path.realpath(directory), "", ""
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ").replace("\\011", "\t")
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind in _MEMORY_FS


def default_cache_bytes(directory: str, held: int = 0, *, cgroup_files: Sequence[str] | None
                        = None, mounts: str | None = None) -> int:
    """The bound of a cache in ``directory`` holding ``held`` bytes when none is given:
    :data:`DISK_SHARE` of the directory's free space plus ``held``, and, on a
    memory-backed filesystem (whose pages count against the container's memory), at
    most :data:`MEMORY_SHARE` of the cgroup memory limit (see :func:`cgroup_memory_limit`).

    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> default_cache_bytes(directory) <= shutil.disk_usage(directory).free
    True
    """
    limit = int(DISK_SHARE * (shutil.disk_usage(directory).free + held))
    if memory_backed(directory, mounts):
        memory = cgroup_memory_limit(cgroup_files)
        if memory is not None:
            limit = min(limit, int(MEMORY_SHARE * memory))
    return max(1, limit)


def _lock(fd: int, start: int, length: int, wait: bool = False) -> bool:
    """Hold bytes ``[start, start + length)`` of ``fd``'s file (``length`` 0: to the end
    and beyond) — the whole file where byte ranges can't be held; whether it is held."""
    try:
        if _RANGES:
            command = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
            fcntl.fcntl(fd, command, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, start, length, 0))
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except (BlockingIOError, PermissionError):
        return False
    return True


def _others_hold(fd: int, size: int) -> bool:
    """Whether a filler other than ``fd``'s holds bytes of its partial."""
    if not _RANGES:
        return False  # held whole: nobody else is in
    found = fcntl.fcntl(fd, fcntl.F_OFD_GETLK,
                        _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, size, 0))
    return bool(_FLOCK.unpack(found)[0] != fcntl.F_UNLCK)


@contextlib.contextmanager
def _meta(fd: int, size: int) -> Iterator[None]:
    """Fillers of one partial, one at a time (reading and writing its map): a lock on
    the byte past its end."""
    if not _RANGES:
        yield
        return
    _lock(fd, size, 1, wait=True)
    try:
        yield
    finally:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, size, 1, 0))


def remove_abandoned(path: str) -> None:
    """Remove the partial ``path`` (and its map) if nobody holds it."""
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        if not _lock(fd, 0, 0):
            return
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            os.remove(path)
            if path.endswith(PART):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path[:-len(PART)] + MAP)
    except OSError:  # held by its filler, or gone
        pass
    finally:
        os.close(fd)


def _add(have: list[list[int]], start: int, end: int) -> None:
    """Merge ``[start, end)`` into the sorted, disjoint intervals ``have``."""
    if have and have[-1][0] <= start <= have[-1][1]:  # reading on: the usual case
        have[-1][1] = max(have[-1][1], end)
        return
    k = bisect.bisect_left(have, [start, end])
    have.insert(k, [start, end])
    k = max(0, k - 1)
    while k + 1 < len(have):
        if have[k + 1][0] <= have[k][1]:
            have[k][1] = max(have[k][1], have.pop(k + 1)[1])
        elif have[k][0] > end:
            break
        else:
            k += 1


def _load_map(path: str, size: int, inode: int) -> list[list[int]]:
    """The intervals the partial (``size`` bytes, inode ``inode``) holds, as its map
    says; [] if unsure."""
    try:
        with open(path, encoding="utf-8") as file:
            saved = json.load(file)
        have: list[list[int]] = []
        if saved.get("size") == size and saved.get("inode") == inode:
            for start, end in saved["have"]:
                if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= size:
                    _add(have, start, end)
        return have
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []


class Partial:
    """A shard's partial file in the cache, bytes ``span`` of it held by this filler:
    see the module docstring. ``have``: the byte intervals written (by this filler, and
    by those before it whose map was read)."""

    def __init__(self, local: str, size: int, fd: int, have: list[list[int]]) -> None:
        self.local = local
        self.path = local + PART
        self.size = size
        self.have = have
        #: the bytes this filler holds
        self.span = (0, max(1, size))
        self._fd: int | None = fd

    @classmethod
    def claim(cls, local: str, size: int,
              span: tuple[int, int] | None = None) -> Partial | None:
        """The partial of the cache file ``local`` (a shard of ``size`` bytes), bytes
        ``span`` (default: all) held by this caller from now on; ``None`` while another
        filler holds some of them."""
        start, end = span if span is not None else (0, size)
        start, end = max(0, start), min(size, end)
        if end <= start:
            start, end = 0, max(1, size)
        path = local + PART
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            if not _lock(fd, start, end - start):
                raise BlockingIOError(path)
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                raise FileNotFoundError(path)  # renamed or removed since we opened it
            with _meta(fd, size):
                stat = os.fstat(fd)
                have = _load_map(local + MAP, size, stat.st_ino) if stat.st_size == size else []
                if stat.st_size != size:
                    os.ftruncate(fd, size)  # sparse: the room is taken as bytes arrive
        except (BlockingIOError, FileNotFoundError):
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        partial = cls(local, size, fd, have)
        partial.span = (start, end) if _RANGES else (0, max(1, size))
        return partial

    def overlaps(self, span: tuple[int, int] | None) -> bool:
        """Whether a fill of ``span`` (None: the whole shard) needs bytes this one holds."""
        start, end = span if span is not None else (0, self.size)
        if end <= start or not _RANGES:
            start, end = 0, max(1, self.size)
        return start < self.span[1] and self.span[0] < end

    @property
    def complete(self) -> bool:
        """Whether every byte of the shard has been written."""
        return self.have == [[0, self.size]] or (self.size == 0)

    def write(self, offset: int, data: bytes) -> None:
        """Write ``data`` (bytes the reader read) at ``offset``."""
        if self._fd is None or not data:
            return
        end = min(self.size, offset + len(data))
        if end <= offset:
            return
        os.pwrite(self._fd, data[:end - offset], offset)
        _add(self.have, offset, end)

    def finish(self, url: str, entry: ShardInfo) -> bool:
        """Let go of the partial: with what the other fillers wrote, renamed whole to its
        cache name when complete and its size and CRC-32C match ``entry`` (then True),
        else kept with its map for a later pass (a mismatch removes it)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return False
        try:
            with _meta(fd, self.size):
                inode = os.fstat(fd).st_ino
                if not self._ours(inode):
                    return False  # another filler completed it (or found it wrong)
                for start, end in _load_map(self.local + MAP, self.size, inode):
                    _add(self.have, start, end)
                if not self.complete:
                    self._save_map(inode)
                    return False
                return self._rename(url, entry)
        except OSError as err:  # disk full, directory gone: the read goes on regardless
            log.debug("recprep: not caching %s: %s", url, err)
            return False
        finally:
            os.close(fd)  # lets the next reader in

    def _rename(self, url: str, entry: ShardInfo) -> bool:
        with open(self.path, "rb") as file:
            crc, size = checksum(file)
        if (size, crc) != (entry.bytes, entry.crc32c):
            log.debug("recprep: not caching %s: %d bytes, CRC-32C %08x; manifest: %d, %08x",
                      url, size, crc, entry.bytes, entry.crc32c)
            self._remove()
            return False
        os.replace(self.path, self.local)  # atomic: a reader sees all or nothing
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.local + MAP)
        log.debug("recprep: cached %s (%d bytes) as %s", url, size, self.local)
        return True

    def drop(self) -> None:
        """Let go, keeping nothing written since the map (the shard was cached meanwhile,
        or the disk is full): removed unless another filler holds it."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with _meta(fd, self.size):
                if self._ours(os.fstat(fd).st_ino) and not _others_hold(fd, self.size):
                    self._remove()
        except OSError:
            pass
        finally:
            os.close(fd)

    def _ours(self, inode: int) -> bool:
        """Whether the partial's path still names the file this filler holds."""
        try:
            return os.stat(self.path).st_ino == inode
        except FileNotFoundError:
            return False

    def _remove(self) -> None:
        for path in (self.path, self.local + MAP):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def _save_map(self, inode: int) -> None:
        temporary = f"{self.local}{MAP}.{uuid.uuid4().hex[:8]}.tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump({"size": self.size, "inode": inode, "have": self.have}, file)
        os.replace(temporary, self.local + MAP)


class FillingFile:
    """A shard read from the store whose bytes also go into its :class:`Partial`
    (``read``/``seek``/``tell``; ``size`` as the store's file has it). Closing it lets
    go of the partial: renamed into the cache when whole and checked."""

    def __init__(self, inner: Any, partial: Partial, url: str, entry: ShardInfo,
                 on_finish: Callable[[Partial], None] | None = None) -> None:
        self._inner = inner
        self._on_finish = on_finish
        self._partial: Partial | None = partial
        self._url = url
        self._entry = entry
        self.size: int | None = getattr(inner, "size", None)
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        pos = self._inner.tell()
        data: bytes = self._inner.read(size)
        if data and self._partial is not None:
            try:
                self._partial.write(pos, data)
            except OSError as err:  # disk full: go on reading, without caching
                log.debug("recprep: not caching %s: %s", self._url, err)
                partial, self._partial = self._partial, None
                partial.drop()
                if self._on_finish is not None:
                    self._on_finish(partial)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._inner.seek(offset, whence))

    def tell(self) -> int:
        return int(self._inner.tell())

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._inner.close()
        finally:
            partial, self._partial = self._partial, None
            if partial is not None:
                try:
                    partial.finish(self._url, self._entry)
                finally:
                    if self._on_finish is not None:
                        self._on_finish(partial)

    def __enter__(self) -> FillingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
