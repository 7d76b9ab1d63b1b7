"""``copy``: shard sets from one filesystem to another, every file checked, manifests last.

The sources are expanded first (see :mod:`recprep.tools._sets`): a directory copies
every visible file in it; a glob its matches; ``dir/prefix`` or a manifest the whole set.
Copying every shard of a set copies its manifest too; copying some shards of a set
doesn't (the destination would claim shards it hasn't got).

Then, as in ``convert``'s commit protocol (``docs/format.md`` §3):

1. The destination directory's ``cp`` lock and each destination set's lock are taken
   (local storage), and temporaries a killed ``cp`` left are removed.
2. Each file is streamed, several at a time, into a hidden temporary — a set's files into
   the set's staging directory ``.recprep-staging-{prefix}/``, other files as
   ``.recprep-cp-{token}-{name}`` — while its CRC-32C is computed; a source whose CRC-32C
   differs from its manifest's is refused. Each temporary is read back and its size and
   CRC-32C compared with the source's.
3. Only when every file checks out: files of no set are moved to their names, and each
   set is committed with the journal: its old manifest removed, its files moved in, the
   manifest moved in **last**. Readers see the old set, the new one, or an error (a set
   without a manifest whose journal is there is not committed), never a mix; a copy
   killed mid-commit is finished by copying again (or ``convert(..., resume=True)``).
4. Any failure before that removes the temporaries: no partial file ever has a final
   name, and the destination is as it was.

Example
-------
>>> from recprep import RecordIO, convert
>>> _ = convert("memory://doc/cp-src", list(range(5)), 2, "p")
>>> result = copy("memory://doc/cp-src/p", "memory://doc/cp-dst")
>>> [f.dest.rsplit("/", 1)[1] for f in result.files]
['.p.chunks', 'p-00000-of-00001', 'p-00001-of-00001', 'p.manifest.json']
>>> list(RecordIO("memory://doc/cp-dst")())
[0, 1, 2, 3, 4]
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import posixpath
import sys
import threading
import time
import uuid
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._core.arguments import checked
from ..errors import (
    CorruptDataError,
    InvalidArgumentError,
    MissingShardsError,
    NotFoundError,
    OutputExistsError,
    PartialCopyWarning,
    RecprepError,
    WriteError,
    warn,
)
from ..storage import failpoints
from ..storage.discovery import SET_KINDS, Kind, classify, list_entries
from ..storage.fs import checksum, display, open_regular, resolve
from ..storage.locking import ShardSetLock
from ..storage.shardnames import has_magic, manifest_name, parse_shard_name
from ..storage.staging import Staging, note_cleanup_failure
from ._sets import FoundSet, find_all, find_sets, visible_files

__all__ = ["TEMP_PREFIX", "CopiedFile", "CopyResult", "copy"]

log = logging.getLogger("recprep")

#: temporaries are named ``{TEMP_PREFIX}{token}-{name}`` in the destination directory
TEMP_PREFIX = ".recprep-cp-"


@dataclass(frozen=True)
class CopiedFile:
    """One file copied and checked: URLs, byte size and CRC-32C (8 hex digits)."""

    source: str
    dest: str
    bytes: int
    crc32c: str


@dataclass
class CopyResult:
    """What :func:`copy` copied, in commit order (manifests last)."""

    dest: str
    files: list[CopiedFile]
    elapsed: float

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def __str__(self) -> str:
        """What was copied: the files a listing shows, and the hidden side files (a set's
        chunk index) that travel with their set, counted apart."""
        rate = self.total_bytes / 1e6 / self.elapsed if self.elapsed > 0 else 0.0
        hidden = sum(posixpath.basename(f.dest).startswith(".") for f in self.files)
        side = f" and {hidden} hidden side file(s)" if hidden else ""
        return (
            f"{len(self.files) - hidden} file(s){side}, {self.total_bytes} bytes -> "
            f"{self.dest} in {self.elapsed:.2f} s ({rate:.1f} MB/s), every file checked "
            "(size, CRC-32C)"
        )


@dataclass(frozen=True)
class _Item:
    fs: Any
    path: str
    size: int
    expected_crc: int | None  # from the manifest, when it lists the file
    is_manifest: bool

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


class _Cancelled(RecprepError):
    """Internal: another transfer failed, this one stops."""


class _Bar:
    """Bytes copied, to a tqdm bar (on a terminal, or ``progress=True``) or a callback."""

    def __init__(self, progress: Any, total: int, files: int) -> None:
        self._lock = threading.Lock()
        self.bytes = self.files = 0
        self._total_files = files
        self._callback: Callable[[int, int], Any] | None = (
            progress if callable(progress) else None
        )
        self._bar: Any = None
        if (sys.stderr.isatty() if progress is None else progress is True):
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total, unit="B", unit_scale=True, unit_divisor=1024,
                desc="recprep cp", dynamic_ncols=True,
            )

    def add(self, nbytes: int = 0, files: int = 0) -> None:
        with self._lock:
            self.bytes += nbytes
            self.files += files
            if self._bar is not None:
                self._bar.update(nbytes)
                if files:
                    self._bar.set_postfix(checked=f"{self.files}/{self._total_files}")
            if self._callback is not None:
                self._callback(self.bytes, self.files)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _set_items(fs: Any, found: FoundSet, whole_directory: bool) -> list[_Item]:
    manifest = found.manifest
    crcs = {s.name: s.crc32c for s in manifest.shards} if manifest is not None else {}
    items = [
        _Item(fs, p, found.sizes[p], crcs.get(posixpath.basename(p)), False)
        for p in found.shards
    ]
    if found.manifest_error is not None and not whole_directory:
        raise found.manifest_error  # the set can't be copied as a set without it
    if found.missing and found.whole and not whole_directory:  # a set named: it all
        raise MissingShardsError(display(fs, found.label),
                                 [display(fs, p) for p in found.missing], len(found.shards),
                                 manifest=found.manifest is not None)
    if found.missing:
        log.warning(
            "recprep: %s lacks %d shard(s) of its set (%s...)", display(fs, found.label),
            len(found.missing), display(fs, found.missing[0]),
        )
    if not found.whole and not whole_directory:  # some shards named: not a set's copy
        total = manifest.num_shards if manifest is not None else (
            len(found.shards) + len(found.missing))
        parsed = parse_shard_name(posixpath.basename(found.shards[0]))
        if manifest is None and parsed is not None:
            total = parsed.last + 1
        warn(PartialCopyWarning(display(fs, found.label), len(items), total))
        return items
    if found.manifest_path is None:
        return items
    complete = manifest is not None and not found.missing and len(items) == manifest.num_shards
    if complete or whole_directory:
        size = int(fs.size(found.manifest_path))
        items.append(_Item(fs, found.manifest_path, size, None, True))
        if manifest is not None:  # the set's side files go with it (in its commit)
            items += [_Item(fs, p, size, None, False) for p, size in found.side_files.items()]
    return items


def _named(named: Sequence[tuple[Any, str]]) -> list[_Item]:
    """The files that sources other than directories name: sets whose files several
    sources name (an unquoted glob's files) taken as one (see ``_sets.find_all``)."""
    items = []
    for fs, found in find_all(named):
        if found.prefix is None:
            items.append(_Item(fs, found.shards[0], found.sizes[found.shards[0]], None, False))
        else:
            items.extend(_set_items(fs, found, whole_directory=False))
    return items


def _directory(fs: Any, path: str) -> list[_Item]:
    """The files a directory source names: every visible file, sets with their side files."""
    entries = list_entries(fs, path)
    listing = visible_files(entries)
    if not listing:
        raise NotFoundError(display(fs, path), "the directory holds no file to copy")
    try:
        sets = find_sets(fs, path)
    except NotFoundError:
        sets = []
    items = [it for found in sets for it in _set_items(fs, found, whole_directory=True)]
    taken = {it.path for it in items}
    items += [_Item(fs, p, e.size, None, e.kind is Kind.MANIFEST) for p, e in
              sorted(listing.items()) if p not in taken]
    skipped = [e for e in entries if e.is_dir]
    if skipped:
        log.info("recprep: cp doesn't recurse; skipped %d subdirectories", len(skipped))
    return items


def _plan(sources: Sequence[str], storage_options: Mapping[str, Any] | None) -> list[_Item]:
    items: dict[str, _Item] = {}
    expanded: list[_Item] = []
    named = []
    for source in sources:
        fs, path = resolve(source, storage_options)
        if has_magic(path) or not fs.isdir(path):
            named.append((fs, path))
        else:
            expanded.extend(_directory(fs, path))
    expanded.extend(_named(named))
    for item in expanded:
        seen = items.get(item.name)
        here = display(item.fs, item.path)
        if seen is not None and display(seen.fs, seen.path) != here:
            raise InvalidArgumentError(
                f"two sources have the name {item.name!r} ({display(seen.fs, seen.path)} "
                f"and {here}); copy them into different destinations"
            )
        items[item.name] = item
    # manifests last; otherwise in a stable order
    return sorted(items.values(), key=lambda it: (it.is_manifest, it.name))


def _stream(item: _Item, dfs: Any, temp: str, bar: _Bar, stop: threading.Event) -> tuple[int, int]:
    """Copy ``item`` into ``temp``; returns the source's ``(crc32c, size)`` as read."""
    shown = display(item.fs, item.path)

    def on_block(block: bytes) -> None:
        bar.add(len(block))
        if stop.is_set():
            raise _Cancelled("stopped: another transfer failed")

    if stop.is_set():
        raise _Cancelled("stopped: another transfer failed")
    try:
        source = open_regular(item.fs, item.path, what="a file to copy")
    except FileNotFoundError:
        raise NotFoundError(shown, "disappeared before it could be copied") from None
    with source, dfs.open(temp, "wb") as out:
        try:
            return checksum(source, out=out, on_block=on_block)
        except FileNotFoundError:
            raise NotFoundError(shown, "disappeared while it was being copied") from None


def _checksum(fs: Any, path: str) -> tuple[int, int]:
    """``(crc32c, size)`` of a file, read back from storage."""
    with fs.open(path, "rb") as f:
        return checksum(f)


def _copy_one(
    item: _Item, dfs: Any, temp: str, final: str, bar: _Bar, stop: threading.Event
) -> CopiedFile:
    source, dest = display(item.fs, item.path), display(dfs, final)
    try:
        crc, size = _stream(item, dfs, temp, bar, stop)
        if size != item.size:
            raise CorruptDataError(
                f"read {size} bytes where the listing said {item.size}: the file changed "
                "during the copy; copy it again once it is stable", path=source,
            )
        if item.expected_crc is not None and crc != item.expected_crc:
            raise CorruptDataError(
                f"its CRC-32C is {crc:08x}, its manifest says {item.expected_crc:08x}: the "
                "source is damaged (run recprep verify on it); nothing was copied",
                path=source,
            )
        got_crc, got_size = _checksum(dfs, temp)
        if (got_crc, got_size) != (crc, size):
            raise CorruptDataError(
                f"the copy has {got_size} bytes, CRC-32C {got_crc:08x}; the source has "
                f"{size} bytes, CRC-32C {crc:08x}; nothing was committed", path=dest,
            )
    except RecprepError:
        raise
    except Exception as err:
        raise WriteError(dest, err) from err
    bar.add(files=1)
    failpoints.hit("cp.copied")
    log.debug("recprep: copied %s -> %s (%d bytes, crc32c %08x)", source, dest, size, crc)
    return CopiedFile(source, dest, size, f"{crc:08x}")


def _run(pool: cf.Executor, calls: Iterable[tuple[Any, ...]], stop: threading.Event) -> list:
    """Run ``fn(*args)`` for each ``(fn, *args)``; on the first failure stop the rest and
    raise it (after the running ones have stopped)."""
    futures = [pool.submit(*call) for call in calls]
    try:
        cf.wait(futures, return_when=cf.FIRST_EXCEPTION)
        for future in futures:
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise future.exception()  # type: ignore[misc]
        return [f.result() for f in futures]
    except BaseException:
        stop.set()
        for future in futures:
            future.cancel()
        cf.wait(futures)
        raise


def _remove(fs: Any, paths: Iterable[str], error: BaseException) -> None:
    for path in paths:
        try:
            if fs.exists(path):
                fs.rm(path)
        except Exception as failure:  # cleanup must not hide the error that led here
            note_cleanup_failure(error, f"removing the temporary {path}", failure)


@checked
def copy(
    sources: str | Sequence[str],
    dest: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    dest_storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    num_workers: int = 8,
    progress: Any = None,
) -> CopyResult:
    """Copy files and shard sets into the directory ``dest``, checking every copy.

    Parameters
    ----------
    sources
        Directories, globs, ``dir/prefix`` (a whole set), manifests or files; local paths
        or fsspec URLs. Each file lands in ``dest`` under its own name.
    dest
        The destination directory (created if missing); any fsspec URL.
    storage_options
        Passed to fsspec for the sources, and for ``dest`` unless ``dest_storage_options``.
    dest_storage_options
        Passed to fsspec for ``dest`` (to copy between two differently-configured stores).
    overwrite
        Replace destination files of the same name (and uncommit the destination sets
        being replaced first). Without it, any such file raises
        :class:`~recprep.errors.OutputExistsError` before anything is copied.
    num_workers
        Files transferred at the same time (threads).
    progress
        ``None`` (a bar of bytes when stderr is a terminal), ``True``, ``False``, or
        ``callback(bytes_done, files_checked)``.

    Returns
    -------
    CopyResult
        Each file copied (source, destination, size, CRC-32C), manifests last.

    Examples
    --------
    >>> from recprep import convert
    >>> _ = convert("memory://doc/cp2", list(range(4)), 2, "a")
    >>> copy("memory://doc/cp2/a-*-of-*", "memory://doc/cp2-out").total_bytes > 0
    True
    >>> copy("memory://doc/cp2/a", "memory://doc/cp2-out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recprep.errors.OutputExistsError: memory:///doc/cp2-out already holds 4 file(s) of this ...
    """
    started = time.perf_counter()
    names = [sources] if isinstance(sources, str) else list(sources)
    if not names or not all(isinstance(s, str) for s in names):
        raise InvalidArgumentError(f"sources must be a path or a list of paths, got {sources!r}")
    if not isinstance(num_workers, int) or num_workers < 1:
        raise InvalidArgumentError(f"num_workers must be a positive int, got {num_workers!r}")
    items = _plan(names, storage_options)
    options = storage_options if dest_storage_options is None else dest_storage_options
    dfs, dpath = resolve(dest, options)
    shown = display(dfs, dpath)
    if dfs.isfile(dpath):
        raise InvalidArgumentError(f"{shown} is a file; the destination must be a directory")
    finals = {it.name: posixpath.join(dpath, it.name) for it in items}
    for it in items:
        if display(it.fs, it.path) == display(dfs, finals[it.name]):
            raise InvalidArgumentError(f"{display(it.fs, it.path)} would be copied onto itself")
    groups = _by_set(items)
    replaced = _replaced(dfs, dpath, items, finals)
    if replaced and not overwrite:
        raise OutputExistsError(shown, [display(dfs, p) for p in replaced])
    try:
        dfs.makedirs(dpath, exist_ok=True)
    except OSError as err:
        raise WriteError(shown, err) from err
    with contextlib.ExitStack() as stack:
        for name in ["{cp}", *sorted(p for p in groups if p is not None)]:
            stack.enter_context(ShardSetLock(dfs, dpath, name))
        replaced = _replaced(dfs, dpath, items, finals)  # again, now that no one writes
        if replaced and not overwrite:
            raise OutputExistsError(shown, [display(dfs, p) for p in replaced])
        _remove_leftovers(dfs, dpath)
        copied = _copy_and_commit(dfs, dpath, items, finals, groups, replaced, progress,
                                  num_workers)
    result = CopyResult(shown, copied, time.perf_counter() - started)
    log.info("recprep: %s", result)
    return result


def _by_set(items: Sequence[_Item]) -> dict[str | None, list[_Item]]:
    """The items by the destination set they belong to (None: files of no set)."""
    groups: dict[str | None, list[_Item]] = {}
    for item in items:
        name = classify(item.name)
        groups.setdefault(name.prefix if name.kind in SET_KINDS else None, []).append(item)
    return groups


def _remove_leftovers(dfs: Any, dpath: str) -> None:
    """Temporaries of ``cp`` runs that were killed: on local storage this run holds the
    directory's ``cp`` lock, so no other ``cp`` writes here (on object stores, as for
    ``convert``, two writers into one directory at once are not supported)."""
    try:
        entries = dfs.ls(dpath, detail=False)
    except FileNotFoundError:  # an object store's empty "directory"
        return
    for entry in entries:
        name = posixpath.basename(entry.rstrip("/"))
        if name.startswith(TEMP_PREFIX):
            log.info("recprep: removing %s, left by a killed copy", display(dfs, entry))
            try:
                dfs.rm(entry, recursive=True)
            except OSError as err:
                raise WriteError(display(dfs, entry), err) from err


def _copy_and_commit(
    dfs: Any, dpath: str, items: Sequence[_Item], finals: Mapping[str, str],
    groups: Mapping[str | None, list[_Item]], replaced: Sequence[str], progress: Any,
    num_workers: int,
) -> list[CopiedFile]:
    """Copy every item into a temporary (a set's files into its staging directory),
    check them all, then commit: files of no set by a rename, each set with the journaled
    commit protocol (manifest last)."""
    token = uuid.uuid4().hex[:12]
    stagings = {p: Staging(dfs, dpath, p) for p in groups if p is not None}
    temps: dict[str, str] = {}
    for prefix, members in groups.items():
        for it in members:
            temps[it.name] = (stagings[prefix].file(f"cp-{it.name}") if prefix is not None
                              else posixpath.join(dpath, f"{TEMP_PREFIX}{token}-{it.name}"))
    bar = _Bar(progress, sum(it.size for it in items), len(items))
    stop = threading.Event()
    try:
        for staging in stagings.values():
            staging.create(keep=False)
        with cf.ThreadPoolExecutor(num_workers, thread_name_prefix="recprep-cp") as pool:
            calls = [(_copy_one, it, dfs, temps[it.name], finals[it.name], bar, stop)
                     for it in items]
            copied = _run(pool, calls, stop)
            lone = [it.name for it in groups.get(None, [])]
            _run(pool, [(_move, dfs, temps[n], finals[n]) for n in lone], stop)
        for prefix, staging in stagings.items():
            _commit_set(dfs, dpath, staging, groups[prefix], temps, replaced)
    except BaseException as err:
        _remove(dfs, [temps[it.name] for it in groups.get(None, [])], err)
        for staging in stagings.values():
            if not staging.committing:  # else its journal says how to finish: keep it
                staging.clear(err)
        raise
    finally:
        bar.close()
    return copied


def _move(fs: Any, source: str, dest: str) -> None:
    try:
        fs.mv(source, dest)
    except OSError as err:
        raise WriteError(display(fs, dest), err) from err


def _commit_set(
    dfs: Any, dpath: str, staging: Staging, members: Sequence[_Item],
    temps: Mapping[str, str], replaced: Sequence[str],
) -> None:
    """Commit one destination set: with its manifest, journaled (readers never see a mix
    of the old and new files); without (some shards of a set only), the old manifest is
    removed and the shards moved in — the result is not a committed set."""
    data = {it.name: temps[it.name] for it in members if not it.is_manifest}
    manifests = [it for it in members if it.is_manifest]
    prefix = staging.prefix
    old = [p for p in replaced if posixpath.basename(p) in data
           or _of_set(posixpath.basename(p), prefix, data)]
    try:
        if manifests:
            manifest = bytes(dfs.cat_file(temps[manifests[0].name]))
            dfs.rm(temps[manifests[0].name])
            staging.commit(data, manifest, replaced=old)
            return
        final_manifest = posixpath.join(dpath, manifest_name(prefix))
        if dfs.exists(final_manifest):
            dfs.rm(final_manifest)  # uncommit the destination set first
        for name, temp in data.items():
            dfs.mv(temp, posixpath.join(dpath, name))
        staging.clear()  # a journal an interrupted commit left still marks the set
    except OSError as err:
        raise WriteError(display(dfs, dpath), err) from err


def _replaced(dfs: Any, dpath: str, items: list[_Item], finals: Mapping[str, str]) -> list[str]:
    """Destination files the copy would replace: same names, and the manifests of the sets
    whose shards it copies."""
    if not dfs.isdir(dpath):
        return []
    names = {it.name for it in items}
    prefixes = {n.prefix for it in items if (n := classify(it.name)).kind is Kind.SHARD}
    return [e.path for e in list_entries(dfs, dpath) if e.name in finals
            or any(_of_set(e.name, p, names) for p in prefixes if p is not None)]


def _of_set(name: str, prefix: str, shards: Container[str]) -> bool:
    """Whether ``name`` is the manifest or a side file of the set ``prefix`` (a shard's
    side file: of one of ``shards``)."""
    what = classify(name)
    return what.kind is not Kind.SHARD and what.of_set(prefix, shards)
