"""Filling a :class:`~recprep.read.cache.ShardCache` while a pass streams a shard.

A reader that opens a shard missing from the cache reads it from the store as it would
without a cache (streamed ranges, :mod:`recprep.storage.fetch`), and every byte it reads
is also written, at its offset, into the shard's *partial file* in the cache directory
(``<cache name>.part``). What the partial holds is tracked as byte intervals; when they
cover the whole shard, the partial is checked (size and CRC-32C against the manifest) and
renamed whole to its cache name. Readers never see a partial as a cached shard.

One filler at a time: the reader that fills a partial holds an exclusive ``flock`` on it
(the kernel lets go when its process dies, even by SIGKILL). Another process (or
DataLoader worker) that opens the same shard meanwhile waits for the rename and then
reads the local copy, so a node downloads each byte once; when the filler lets go
without finishing (it read only part of the shard, or died), the next reader takes the
partial over. A waiter whose filler makes no progress for ``stall_seconds`` (two readers
each waiting for a shard the other fills, in crossing orders) reads from the store
instead, uncached: no pair of readers waits for each other forever. Within one process a
second open of a shard being filled reads from the store at once (a reader reads
disjoint pieces of a shard; waiting for its own thread could only stall it).

Partials are kept for a later pass to complete (with ``<cache name>.part.map``, the
intervals they hold, written when a filler lets go; bytes written by a filler that died
are not in it and are fetched again). An abandoned partial nobody holds is removed after
an hour, or when the cache needs its room.

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
import uuid
from collections.abc import Callable, Sequence
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


def remove_abandoned(path: str) -> None:
    """Remove the partial ``path`` (and its map) if nobody holds it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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


def _load_map(path: str, size: int) -> list[list[int]]:
    """The intervals a partial of ``size`` bytes holds, as its map says; [] if unsure."""
    try:
        with open(path, encoding="utf-8") as file:
            saved = json.load(file)
        have: list[list[int]] = []
        if saved.get("size") == size:
            for start, end in saved["have"]:
                if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= size:
                    _add(have, start, end)
        return have
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []


class Partial:
    """A shard's partial file in the cache, held (``flock``) by this filler: see the
    module docstring. ``have``: the byte intervals written so far."""

    def __init__(self, local: str, size: int, fd: int, have: list[list[int]]) -> None:
        self.local = local
        self.path = local + PART
        self.size = size
        self.have = have
        self._fd: int | None = fd

    @classmethod
    def claim(cls, local: str, size: int) -> Partial | None:
        """The partial of the cache file ``local`` (a shard of ``size`` bytes), held by
        this caller from now on; ``None`` while another reader holds it. A partial
        without a trustworthy map starts empty."""
        path = local + PART
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                raise FileNotFoundError(path)  # renamed or removed since we opened it
            have = _load_map(local + MAP, size) if os.fstat(fd).st_size == size else []
            if not have:
                os.ftruncate(fd, 0)
                os.ftruncate(fd, size)  # sparse: the room is taken as bytes arrive
        except (BlockingIOError, FileNotFoundError):
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return cls(local, size, fd, have)

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
        """Let go of the partial: renamed whole to its cache name when complete and its
        size and CRC-32C match ``entry`` (then True), else kept with its map for a later
        pass (a mismatch removes it)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return False
        try:
            if not self.complete:
                self._save_map()
                return False
            with open(self.path, "rb") as file:
                crc, size = checksum(file)
            if (size, crc) != (entry.bytes, entry.crc32c):
                log.debug("recprep: not caching %s: %d bytes, CRC-32C %08x; manifest: %d, "
                          "%08x", url, size, crc, entry.bytes, entry.crc32c)
                self._remove()
                return False
            os.replace(self.path, self.local)  # atomic: a reader sees all or nothing
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.local + MAP)
            log.debug("recprep: cached %s (%d bytes) as %s", url, size, self.local)
            return True
        except OSError as err:  # disk full, directory gone: the read goes on regardless
            log.debug("recprep: not caching %s: %s", url, err)
            return False
        finally:
            os.close(fd)  # lets the next reader in

    def drop(self) -> None:
        """Let go without keeping anything (another reader cached the shard meanwhile)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            self._remove()
            os.close(fd)

    def _remove(self) -> None:
        for path in (self.path, self.local + MAP):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def _save_map(self) -> None:
        temporary = f"{self.local}{MAP}.{uuid.uuid4().hex[:8]}.tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump({"size": self.size, "have": self.have}, file)
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
