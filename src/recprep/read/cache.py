"""A local directory of remote shards, filled while passes stream them, so that later
epochs of a remote set read locally.

``RecordIO(url, cache_dir=..., cache_bytes=...)`` hands its reads of a committed remote set
to a :class:`ShardCache`. On an object store (a filesystem the reader streams from, see
:mod:`recprep.storage.fetch`), a shard not yet cached is read from the store exactly as
without a cache — the same range requests, the first instance after one round trip —
and the bytes the reader reads are written into a partial file in the cache directory as
they pass; when the partial holds the whole shard its size and CRC-32C are checked
against the set's manifest and it is renamed (atomically) to its cache name
(:mod:`recprep.read.cachefill`: each byte filled by one reader across threads and
processes, which hold byte ranges of the partial with kernel locks; ranks reading
disjoint parts fill it at once; a rank that reads part of a shard leaves a partial the
next pass completes; a killed filler's partial is taken over by the next reader). Other filesystems
(``memory://``, synchronous ones) download a shard whole at its first open, under a
temporary name, checked before the rename. Later opens — the next epoch, another reader,
another process or DataLoader worker sharing the directory — read the local file. What
is and isn't cached:

* only shards with an entry in their set's manifest (the manifest's size and CRC-32C are
  what make a cached copy trustworthy); a file without one is read from the store;
* only sets on a non-local filesystem (a local set is read where it is);
* a shard larger than ``cache_bytes`` is read from the store.

The cache name holds a digest of the shard's URL, size and CRC-32C, so a set replaced
under the same name never reads the old bytes. The least recently used shards (by file
mtime, set at every use) are removed when the cached bytes would pass ``cache_bytes``;
without ``cache_bytes`` the bound is :func:`~recprep.read.cachefill.default_cache_bytes`
(80% of the directory's free space plus what the cache holds, and on a tmpfs at most half
the container's cgroup memory limit). Readers never see a partial file. A cached file is
checked again (CRC-32C, a local read) the first time a :class:`ShardCache` uses it and
whenever its mtime or size changed since; a damaged one is fetched again, with a
:class:`~recprep.errors.CorruptDataWarning`.

Example
-------
>>> import tempfile
>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/cache", list(range(6)), 2, "c")
>>> directory = tempfile.mkdtemp()
>>> read = RecordIO("memory://doc/cache/c", cache_dir=directory)
>>> list(read()), len(read.cache.entries())
([0, 1, 2, 3, 4, 5], 2)
>>> list(read())  # read from the local copies
[0, 1, 2, 3, 4, 5]
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import posixpath
import threading
import time
import uuid
from typing import Any, Literal

import fsspec

from ..errors import CorruptDataError, CorruptDataWarning, InvalidArgumentError, warn
from ..storage.fs import checksum, open_regular
from ..storage.manifest import ShardInfo
from .cachefill import (
    CAN_FILL,
    MAP,
    PART,
    FillingFile,
    Partial,
    default_cache_bytes,
    remove_abandoned,
)
from .filepool import FilePool, PooledFile

__all__ = ["ShardCache"]

log = logging.getLogger("recprep")

_SUFFIX = ".shard"  # cached shards; partials and downloads in progress end in ".part"
_STALE_PART_SECONDS = 3600  # a partial nobody holds, this old, was abandoned
#: how long a reader waits for another process's filler that makes no progress
STALL_SECONDS = 60.0
_POLL_SECONDS = 0.05
_FILLING: dict[str, list[Partial]] = {}  # this process's fillers, by cache file
_FILLING_LOCK = threading.Lock()


def _let_go(partial: Partial) -> None:
    with _FILLING_LOCK:
        held = _FILLING.get(partial.local, [])
        if partial in held:
            held.remove(partial)
        if not held:
            _FILLING.pop(partial.local, None)


def _forked() -> None:
    """In a forked child (a DataLoader worker): the parent's fills are not its own."""
    global _FILLING_LOCK
    _FILLING_LOCK = threading.Lock()
    _FILLING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _crc_of(path: str) -> tuple[int, int]:
    """``(size, CRC-32C)`` of the local file ``path`` (the cache directory is local by
    definition); a FIFO or device planted under a cache name is refused, never read."""
    with open_regular(fsspec.filesystem("file"), path, what="a cached shard") as file:
        crc, size = checksum(file)
    return size, crc


class ShardCache:
    """Shards of remote sets, kept whole in ``directory`` (at most ``max_bytes``), filled
    as passes stream them (see the module docstring).

    Parameters
    ----------
    directory
        A local directory (created if missing); several readers and processes may share it.
    max_bytes
        The most the cached shards may hold together; ``None``: the default bound,
        :func:`~recprep.read.cachefill.default_cache_bytes` (80% of the directory's free
        space plus what the cache holds; on tmpfs at most half the container's memory
        limit), fixed when the cache is made.

    Attributes
    ----------
    stall_seconds
        How long a reader waits for another process filling the same shard while that
        process writes nothing (then it reads from the store, uncached).
    """

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int | None = None) -> None:
        if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 1):
            raise InvalidArgumentError(
                f"cache_bytes must be a positive int or None, got {max_bytes!r}")
        self.directory = os.path.abspath(os.fspath(directory))
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as err:
            raise InvalidArgumentError(
                f"cache_dir={self.directory!r} can't be used as a cache directory: {err}"
            ) from None
        self.max_bytes: int = (default_cache_bytes(self.directory, self.size())
                               if max_bytes is None else max_bytes)
        self.stall_seconds = STALL_SECONDS
        self._files = FilePool(fsspec.filesystem("file"))
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._verified: dict[str, tuple[int, int, int]] = {}  # name -> (ino, size, mtime)
        #: partials claimed before their shard's open (see :meth:`claim_ahead`), by
        #: (cache file, span), with the process that claimed them
        self._ahead: dict[tuple[str, tuple[int, int] | None], tuple[Partial, str, ShardInfo]]
        self._ahead, self._ahead_pid = {}, os.getpid()

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": self.directory, "max_bytes": self.max_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["directory"], state["max_bytes"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"ShardCache({self.directory!r}, max_bytes={self.max_bytes})"

    @staticmethod
    def name_for(url: str, entry: ShardInfo) -> str:
        """The cache name of the shard at ``url`` as its manifest describes it."""
        digest = hashlib.sha256(
            f"{url}\0{entry.bytes}\0{entry.crc32c:08x}".encode()).hexdigest()[:32]
        return f"{posixpath.basename(url)[:80]}.{digest}{_SUFFIX}"

    def entries(self) -> list[str]:
        """The cached shards' file names, least recently used first."""
        return [name for name, _, _ in self._scan()]

    def size(self) -> int:
        """The bytes the cached shards hold together."""
        return sum(size for _, size, _ in self._scan())

    def open(self, pool: FilePool, path: str, url: str, entry: ShardInfo,
             span: tuple[int, int] | None = None) -> Any:
        """The shard ``path`` of ``pool``'s filesystem (shown as ``url``, described by
        ``entry``) as a file to read: its local copy when cached; else, where the pool
        streams from an object store, the store's file filling the cache as it is read
        (``span``: the bytes the pass reads; see :mod:`recprep.read.cachefill`), and for
        other filesystems a copy downloaded whole first. ``None`` when it isn't cached
        (too large, gone, its bytes don't match ``entry``, or a stalled filler elsewhere):
        read it from the store."""
        if entry.bytes > self.max_bytes:
            return None
        name = self.name_for(url, entry)
        local = os.path.join(self.directory, name)
        if pool.fetcher is not None and CAN_FILL:
            return self._streamed(pool, path, url, entry, span)
        with self._key_lock(name):
            if not self._usable(local, name, url, entry):
                if not self._download(pool.fs, path, url, entry, local):
                    return None
            return self._local(local, name)

    def claim_ahead(self, url: str, entry: ShardInfo, span: tuple[int, int] | None
                    ) -> Literal["claimed", "cached", "store", "held"]:
        """Claim the partial of a shard a pass will open soon, before its first ranges
        are fetched ahead. ``"claimed"``: this reader fills it now (its :meth:`open`
        takes the claim); ``"cached"``: it is cached (nothing to fetch); ``"store"``: too
        large to cache, read from the store; ``"held"``: another filler (in this process
        or another) holds some of its bytes, or partials can't be held here — its bytes
        must not be fetched ahead (its open waits for that filler, so that the node
        downloads each byte once). :meth:`release_ahead` lets go of claims no open took.

        A pass claims its first group in its order and stops at the first shard held:
        readers starting the same pass at once don't each hold shards the other needs
        first."""
        if entry.bytes > self.max_bytes:
            return "store"
        local = os.path.join(self.directory, self.name_for(url, entry))
        if os.path.exists(local):
            return "cached"
        if not CAN_FILL:
            return "held"
        with _FILLING_LOCK:
            if any(p.overlaps(span) for p in _FILLING.get(local, [])):
                return "held"
            self._evict(room=entry.bytes)
            partial = Partial.claim(local, entry.bytes, span)
            if partial is None:
                return "held"
            _FILLING.setdefault(local, []).append(partial)
        with self._lock:
            if self._ahead_pid != os.getpid():  # forked: the parent's claims aren't ours
                self._ahead, self._ahead_pid = {}, os.getpid()
            self._ahead[(local, span)] = (partial, url, entry)
        return "claimed"

    def release_ahead(self) -> None:
        """Let go of the partials :meth:`claim_ahead` claimed that no open took (kept
        with their maps for a later pass)."""
        with self._lock:
            claimed = self._ahead if self._ahead_pid == os.getpid() else {}
            self._ahead, self._ahead_pid = {}, os.getpid()
        for partial, url, entry in claimed.values():
            try:
                partial.finish(url, entry)
            finally:
                _let_go(partial)

    def _claimed(self, local: str, span: tuple[int, int] | None) -> Partial | None:
        """The partial of ``local`` claimed ahead for ``span`` (taken), if any."""
        with self._lock:
            if self._ahead_pid != os.getpid():
                return None
            found = self._ahead.pop((local, span), None)
        return None if found is None else found[0]

    def _local(self, local: str, name: str) -> PooledFile | None:
        """The cached file ``local`` opened (its use noted for the LRU)."""
        now = time.time_ns()
        with contextlib.suppress(OSError):  # last use, for the LRU
            os.utime(local, ns=(now, now))
        try:
            stat = os.stat(local)
            opened = self._files.open(local)
        except FileNotFoundError:  # evicted by another process just now
            return None
        self._verified[name] = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        opened.verified = True  # by _usable, just now or earlier against this identity
        return opened

    def _streamed(self, pool: FilePool, path: str, url: str, entry: ShardInfo,
                  span: tuple[int, int] | None) -> Any:
        """The local copy, or the store's file filling the partial this reader claims,
        or (another process filling it) the local copy once renamed into place."""
        name = self.name_for(url, entry)
        local = os.path.join(self.directory, name)
        claimed = self._claimed(local, span)
        if claimed is not None:
            return self._filling(pool, path, url, entry, span, claimed)
        evicted, seen, since = False, None, time.monotonic()
        while True:
            if self._usable(local, name, url, entry):
                return self._local(local, name)
            with _FILLING_LOCK:
                held = _FILLING.get(local, [])
                if any(p.overlaps(span) for p in held):  # this process fills those bytes
                    return None  # (waiting for its own thread could only stall it)
                if not evicted:
                    self._evict(room=entry.bytes)
                    evicted = True
                partial = Partial.claim(local, entry.bytes, span)
                if partial is not None:
                    _FILLING.setdefault(local, []).append(partial)
            if partial is not None:
                return self._filling(pool, path, url, entry, span, partial)
            try:  # another process fills it: wait while it makes progress
                mtime = os.stat(local + PART).st_mtime_ns
            except FileNotFoundError:
                continue  # renamed into place, or removed: look again
            if mtime != seen:
                seen, since = mtime, time.monotonic()
            elif time.monotonic() - since > self.stall_seconds:
                log.debug("recprep: %s is being cached by another reader that made no "
                          "progress for %.0f s: reading it from the store", url,
                          self.stall_seconds)
                return None
            time.sleep(_POLL_SECONDS)

    def _filling(self, pool: FilePool, path: str, url: str, entry: ShardInfo,
                 span: tuple[int, int] | None, partial: Partial) -> Any:
        """The store's file, its bytes going into ``partial`` as they are read."""
        try:
            name = self.name_for(url, entry)
            if os.path.exists(partial.local) and self._usable(partial.local, name, url, entry):
                partial.drop()  # cached between our look and our claim (a damaged copy
                _let_go(partial)  # was removed, with a warning: fill it again)
                return self._local(partial.local, name)
            inner = pool.open(path, size=entry.bytes, etag=entry.etag, span=span)
        except BaseException:
            partial.finish(url, entry)
            _let_go(partial)
            raise
        return FillingFile(inner, partial, url, entry, on_finish=self._filled)

    def _filled(self, partial: Partial) -> None:
        """A filler let go of ``partial``: make room for what it cached."""
        _let_go(partial)
        try:  # checked as it was renamed: the next open needn't check it again
            stat = os.stat(partial.local)
        except FileNotFoundError:
            return
        name = os.path.basename(partial.local)
        self._verified[name] = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        self._evict(room=0, keep=partial.local)

    def _key_lock(self, name: str) -> threading.Lock:
        with self._lock:
            lock = self._key_locks.get(name)
            if lock is None:
                lock = self._key_locks[name] = threading.Lock()
            return lock

    def _usable(self, local: str, name: str, url: str, entry: ShardInfo) -> bool:
        """Whether the cached copy at ``local`` is there and whole (checked once per
        change of its identity); a damaged one is removed with a warning."""
        try:
            stat = os.stat(local)
        except FileNotFoundError:
            return False
        if self._verified.get(name) == (stat.st_ino, stat.st_size, stat.st_mtime_ns):
            return True
        try:
            size, crc = _crc_of(local)
        except CorruptDataError as err:  # a FIFO or device under the cache name
            found = err.detail
        else:
            if (size, crc) == (entry.bytes, entry.crc32c):
                return True
            found = f"{size} bytes with CRC-32C {crc:08x}"
        warn(CorruptDataWarning(
            f"the cached copy {local} of this shard has {found}, its manifest says "
            f"{entry.bytes} bytes with {entry.crc32c:08x}: it was damaged in the cache; "
            "downloading it again", path=url, offset=None, records_lost=0))
        self._verified.pop(name, None)
        with contextlib.suppress(FileNotFoundError):
            os.remove(local)
        return False

    def _download(self, fs: Any, path: str, url: str, entry: ShardInfo, local: str) -> bool:
        """Copy the shard into place at ``local`` if its bytes match ``entry``."""
        self._evict(room=entry.bytes)
        part = f"{local}.{os.getpid()}.{uuid.uuid4().hex[:8]}{PART}"
        try:
            with open_regular(fs, path) as source, open(part, "wb") as out:
                crc, size = checksum(source, out=out)
            if (size, crc) != (entry.bytes, entry.crc32c):
                log.debug("recprep: not caching %s: %d bytes, CRC-32C %08x; manifest: %d, "
                          "%08x", url, size, crc, entry.bytes, entry.crc32c)
                return False
            os.replace(part, local)  # atomic: readers see nothing or the whole shard
        except OSError as err:  # gone, replaced meanwhile, disk full: read it from fs
            log.debug("recprep: not caching %s: %s", url, err)
            return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part)
        log.debug("recprep: cached %s (%d bytes) as %s", url, size, local)
        self._evict(room=0, keep=local)
        return True

    def _scan(self) -> list[tuple[str, int, int]]:
        """``(name, size, mtime)`` of the cached shards, least recently used first; old
        abandoned downloads are removed on the way."""
        found = []
        now = time.time()
        with os.scandir(self.directory) as listing:
            for item in listing:
                try:
                    stat = item.stat()
                except FileNotFoundError:
                    continue
                if item.name.endswith(_SUFFIX):
                    found.append((item.name, stat.st_size, stat.st_mtime_ns))
                elif now - stat.st_mtime <= _STALE_PART_SECONDS:
                    continue
                elif item.name.endswith(PART):
                    remove_abandoned(item.path)
                elif item.name.endswith(".tmp"):  # a map being written when its filler died
                    with contextlib.suppress(OSError):
                        os.remove(item.path)
                elif item.name.endswith(MAP) and not os.path.exists(item.path[:-len(MAP)]
                                                                    + PART):
                    with contextlib.suppress(OSError):
                        os.remove(item.path)
        found.sort(key=lambda f: f[2])
        return found

    def _evict(self, room: int, keep: str | None = None) -> None:
        """Remove least recently used shards until ``room`` more bytes fit the bound."""
        found = self._scan()
        total = sum(size for _, size, _ in found) + room
        for name, size, _ in found:
            if total <= self.max_bytes:
                break
            path = os.path.join(self.directory, name)
            if path == keep:
                continue
            with contextlib.suppress(OSError):  # POSIX: open readers keep their copy
                os.remove(path)
                log.debug("recprep: evicted %s from the shard cache", name)
            total -= size
