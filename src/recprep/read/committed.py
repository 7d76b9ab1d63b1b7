"""What readers check of the commit protocol: one committed set, or an error — never a mix.

A writer (``convert``, ``recprep cp``, ``recprep.spark``) commits a set in this order
(:mod:`recprep.storage.staging`, ``docs/format.md`` §3): journal written into the set's staging
directory, old manifest removed, shards moved in, manifest moved in, journal removed. So
**while a manifest is present, the shards under final names are the ones it lists**, and
a set without a manifest but with a journal is *not committed* (its files may mix two
sets). A reader (:class:`CommittedSets`, used by :class:`recprep.read.sources.Sources`):

* refuses a set without a manifest whose journal exists
  (:class:`~recprep.errors.SetChangedError`; ``on_corrupt="skip"`` reads its files as they
  are, with an :class:`~recprep.errors.UncommittedSetWarning`);
* notes the manifest's identity (size, inode and mtime; an object store's ETag) as it
  reads it (on S3 from the response of the one GET that reads it), and then:

  - when the manifest records each shard's ETag (sets committed on an object store by
    this version), opens each shard pinned to it: every read of the shard asks for that
    object (``If-Match``), so a shard replaced since the set was committed fails the read
    (:class:`~recprep.storage.fetch.ObjectChangedError`, s3fs's ``FileExpired``), which
    becomes :class:`~recprep.errors.SetChangedError`. No request per shard before its
    reads: its size is the manifest's;
  - otherwise (a local or in-memory set, a set written before ETags were recorded),
    after opening each shard checks that the manifest is unchanged (one request per
    shard on an object store) and that the shard's size is the manifest's: the open file
    (a local inode; an object store read pinned to the ETag seen at open) then belongs to
    the set the reader holds.

  Either way a set replaced after the reader was built raises
  :class:`~recprep.errors.SetChangedError` when the reader reads it. A pinned set read
  from a ``cache_dir``'s copies (its own bytes, checked against its manifest) asks the
  store in the background, once per pass: the pass waits for no round trip, and raises
  as soon as the answer says the set changed — a pass that ends before its answer
  comes (one shorter than a round trip to the store) leaves it to the next pass;
* checks the CRC-32C of a shard read whole when its last byte is read
  (:class:`~recprep.errors.CorruptDataError`).

Example
-------
>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/commit", list(range(6)), 2, "p")
>>> reader = RecordIO("memory://doc/commit/p")
>>> _ = convert("memory://doc/commit", list(range(60)), 2, "p", overwrite=True)
>>> list(reader())  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
recprep.errors.SetChangedError: memory:///doc/commit/p: the set was replaced ...
"""

from __future__ import annotations

import contextlib
import posixpath
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from ..errors import (
    CorruptDataError,
    CorruptDataWarning,
    NotFoundError,
    RecprepError,
    SetChangedError,
    UncommittedSetWarning,
    warn,
)
from ..storage.discovery import ShardSet, missing_shards, relist
from ..storage.fetch import ObjectChangedError
from ..storage.fs import ChecksumReader, display, read_into
from ..storage.manifest import Manifest, ManifestFile, ShardInfo, fetch_manifest, identity_of
from ..storage.shardnames import manifest_name
from ..storage.shardtable import ShardTable, shard_finder
from ..storage.writers import JOURNAL, STAGING_PREFIX, uncommitted

if TYPE_CHECKING:
    from .sources import SourceFile, Sources

__all__ = ["CommittedSets", "journal_path", "manifest_identity", "pending_journal"]

def journal_path(directory: str, prefix: str) -> str:
    """Where a commit into the set ``prefix`` of ``directory`` keeps its journal."""
    return posixpath.join(directory, f"{STAGING_PREFIX}{prefix}", JOURNAL)


def pending_journal(fs: Any, directory: str, prefix: str) -> str | None:
    """The journal of a commit into the set in progress or interrupted, or None."""
    path = journal_path(directory, prefix)
    return path if fs.exists(path) else None


def manifest_identity(fs: Any, path: str) -> tuple[Any, ...] | None:
    """What tells one manifest file from its replacement (None when there is none):
    :func:`~recprep.storage.manifest.identity_of` its facts, asked of storage afresh."""
    with contextlib.suppress(Exception):
        fs.invalidate_cache(path)
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return None
    return identity_of(info)


class CommittedSets:
    """The commit checks of a :class:`~recprep.read.sources.Sources`' shard sets."""

    def __init__(self, sources: Sources) -> None:
        self._sources = sources
        self._identities: list[tuple[Any, ...] | None] = [None] * len(sources.shard_sets)
        #: sets whose manifest is being asked in the background in this pass: the answer
        self._answers: dict[int, Future[tuple[Any, ...] | None]] = {}
        #: answers a pass ended before: judged in the next pass, as soon as they come
        self._late: dict[int, Future[tuple[Any, ...] | None]] = {}
        self._entries: dict[int, dict[str, ShardInfo]] = {}
        #: the sets found by reading their manifest (their shards were never listed)
        self._unlisted_sets = {i for i, s in enumerate(sources.shard_sets)
                               if s.manifest_file is not None}

    def note(self, index: int) -> ManifestFile | None:
        """Set ``index``'s manifest file, read with its identity (which is noted), or None
        when it has none; a set without one whose commit journal is there is refused (or,
        skipping, read with a warning). A manifest that is not a regular file or too big
        raises :class:`~recprep.errors.CorruptDataError` (its identity noted first)."""
        sources, fs = self._sources, self._sources.fs
        shard_set = sources.shard_sets[index]
        if shard_set.prefix is None or shard_set.manifest_path is None:
            return None
        found, shard_set.manifest_file = shard_set.manifest_file, None  # read once
        try:
            if found is None:
                found = fetch_manifest(fs, shard_set.manifest_path)
        except CorruptDataError:
            self._identities[index] = manifest_identity(fs, shard_set.manifest_path)
            raise
        identity = self._identities[index] = None if found is None else found.identity
        journal = None if identity is not None else pending_journal(
            fs, shard_set.directory, shard_set.prefix)
        if journal is not None:
            shown = self._label(index)
            detail = uncommitted(shown, display(fs, journal))
            if sources.on_corrupt != "skip":
                raise SetChangedError(shown, detail)
            warn(UncommittedSetWarning(shown, detail))
        return found

    def check_listings(self, read_manifest: Callable[[int], Manifest | None]) -> None:
        """Make each set's listing agree with its manifest (call once the manifests are
        read, before the files are numbered).

        A set whose listed shards include one its manifest doesn't list was listed before
        a commit (filesystems such as s3fs keep listings for the life of the process) or
        holds leftovers of another set: it is listed again, its manifest read again, once.
        Still not agreeing, it raises :class:`~recprep.errors.SetChangedError` while a
        commit into it is under way, else :class:`~recprep.errors.CorruptDataError`
        (``on_corrupt="skip"``: read as listed, with a warning). A file the user named
        alone is read as named.
        """
        sources = self._sources
        for index, shard_set in enumerate(sources.shard_sets):
            manifest = sources.manifests[index]
            if manifest is None or shard_set.pattern is None or shard_set.named_alone:
                continue
            if not _unlisted(shard_set, manifest):
                continue
            paths = relist(sources.fs, shard_set)
            if not paths:
                raise NotFoundError(self._label(index), "the set is gone: a fresh listing "
                                    "holds none of its shards")
            shard_set.paths = paths
            manifest = sources.manifests[index] = read_manifest(index)
            self._entries.pop(index, None)
            unlisted = [] if manifest is None else _unlisted(shard_set, manifest)
            if not unlisted:
                continue
            journal = pending_journal(sources.fs, shard_set.directory, shard_set.prefix or "")
            shown = self._label(index)
            if journal is not None:
                raise SetChangedError(shown, uncommitted(shown, display(sources.fs, journal)))
            assert manifest is not None
            detail = (
                f"{len(unlisted)} of its shards ({display(sources.fs, unlisted[0])}...) are "
                f"not among the {manifest.num_shards} its manifest lists: they are leftovers "
                "of another set, or the manifest is not this set's (recprep verify lists "
                "them); delete the files that don't belong"
            )
            if sources.on_corrupt != "skip":
                raise CorruptDataError(detail, path=shown)
            warn(CorruptDataWarning(detail + "; reading the files as listed", path=shown,
                                    offset=None, records_lost=None))

    def _label(self, set_index: int) -> str:
        shard_set = self._sources.shard_sets[set_index]
        return display(self._sources.fs, posixpath.join(shard_set.directory,
                                                        shard_set.prefix or ""))

    def new_pass(self) -> None:
        """A pass begins: :meth:`_check_soon` asks again."""
        self._answers = {}

    def __getstate__(self) -> dict[str, Any]:
        # threads' answers stay where they are
        return {**self.__dict__, "_answers": {}, "_late": {}}

    def _check_unchanged(self, set_index: int) -> None:
        """Raise unless set ``set_index``'s manifest is the one the reader read."""
        self._judge(set_index, manifest_identity(self._sources.fs, self._manifest(set_index)))

    def _check_soon(self, set_index: int) -> None:
        """:meth:`_check_unchanged` once per pass without waiting for it: the question
        goes in a thread, and its answer is judged at the first call after it came (or
        by :meth:`settle`)."""
        late = self._late.get(set_index)
        if late is not None and late.done():
            del self._late[set_index]
            self._judge(set_index, late.result())
        answer = self._answers.get(set_index)
        if answer is None:
            answer = self._answers[set_index] = Future()
            fs, path = self._sources.fs, self._manifest(set_index)

            def ask(answer: Future[tuple[Any, ...] | None] = answer) -> None:
                try:
                    answer.set_result(manifest_identity(fs, path))
                except BaseException as err:  # judged in the reader's thread
                    answer.set_exception(err)

            threading.Thread(target=ask, name="recprep-manifest-check", daemon=True).start()
        elif answer.done():
            self._judge(set_index, answer.result())

    def settle(self) -> None:
        """A pass read to its end: raise if an answer :meth:`_check_soon` got says a set
        changed. The store holds no cached pass back: an answer still out is judged by
        the next pass, as soon as it comes (and waited for at that pass's end, a whole
        pass later)."""
        late, self._late = self._late, {}
        for set_index, answer in late.items():
            self._judge(set_index, answer.result())
        for set_index, answer in self._answers.items():
            if answer.done():
                self._judge(set_index, answer.result())
            else:
                self._late[set_index] = answer

    def _manifest(self, set_index: int) -> str:
        path = self._sources.shard_sets[set_index].manifest_path
        assert path is not None
        return path

    def _judge(self, set_index: int, now: tuple[Any, ...] | None) -> None:
        if now != self._identities[set_index]:
            shard_set = self._sources.shard_sets[set_index]
            raise SetChangedError(
                self._label(set_index),
                "the set was replaced (or is being replaced) since this reader read its "
                f"manifest ({manifest_name(shard_set.prefix or '')}): what it holds is no "
                "longer the set the reader was built for; build the reader again",
            )

    def _entry(self, file: SourceFile) -> ShardInfo | None:
        manifest = self._sources.manifests[file.set_index]
        if manifest is not None and isinstance(manifest.shards, ShardTable):
            return manifest.shards.entry(posixpath.basename(file.path))  # no lookup held
        entries = self._entries.get(file.set_index)
        if entries is None:
            shards = manifest.shards if manifest is not None else []
            entries = self._entries[file.set_index] = {s.name: s for s in shards}
        return entries.get(posixpath.basename(file.path))

    def listed_bytes(self, file: SourceFile) -> int | None:
        """The size the manifest the reader holds lists for ``file``, if it lists one."""
        entry = self._entry(file) if self._identities[file.set_index] is not None else None
        return None if entry is None else entry.bytes

    def pinned(self, file: SourceFile) -> ShardInfo | None:
        """The manifest's entry for ``file`` when it records the shard's ETag and the
        reader's files pin their reads to it (streamed from an object store by the
        fetcher, whose range reads send ``If-Match``): the reader then asks nothing of the
        shard before reading it. None otherwise: the shard is checked when opened."""
        if self._sources.files_open.fetcher is None:
            return None
        entry = self._entry(file) if self._identities[file.set_index] is not None else None
        return entry if entry is not None and entry.etag is not None else None

    def missing(self, file: SourceFile) -> RecprepError | None:
        """The error for ``file`` not found where its set's reader expected it: the set
        was replaced, or (a set found by its manifest) the shards storage doesn't hold,
        from a fresh listing — None when that listing holds them all (what said the file
        was missing was a listing the filesystem had cached: try again)."""
        index = file.set_index
        if self._identities[index] is not None:
            self._check_unchanged(index)
        if index in self._unlisted_sets:
            return missing_shards(self._sources.fs, self._sources.shard_sets[index])
        return NotFoundError(file.shown, "a file of the set is missing (it was there when "
                                         "the reader listed it)")

    def size(self, file: SourceFile) -> int:
        """The size of ``file`` as storage has it (asked again once when a cached listing
        said it is missing); a missing file raises its set's missing-file error."""
        for _ in range(2):
            try:
                return int(self._sources.fs.size(file.path))
            except FileNotFoundError:
                error = self.missing(file)
                if error is not None:
                    raise error from None
        raise NotFoundError(file.shown, "a file of the set is missing, though a listing "
                                        "taken just now holds it")

    def _open(self, file: SourceFile, entry: ShardInfo | None, pin: str | None,
              span: tuple[int, int] | None) -> Any:
        """``file`` opened from the store (pinned to ``pin``; ``span``: the bytes the read
        covers), or the missing-file error."""
        for _ in range(2):
            try:
                return self._sources.files_open.open(
                    file.path, size=None if pin is None or entry is None else entry.bytes,
                    etag=pin, span=span)
            except FileNotFoundError:
                error = self.missing(file)
                if error is not None:
                    raise error from None
            except ObjectChangedError as err:
                raise self._replaced(file.set_index, file.shown) from err
        raise NotFoundError(file.shown, "a file of the set is missing, though a listing "
                                        "taken just now holds it")

    @contextlib.contextmanager
    def open(self, file: SourceFile, whole: bool = False,
             span: tuple[int, int] | None = None) -> Iterator[BinaryIO]:
        """Open ``file`` for reading, checked against the manifest its reader holds (see
        the module docstring); ``whole``: it is read front to back, so its CRC-32C is
        checked too. ``span``: the bytes the read covers (an object store's file fetches
        them ahead)."""
        sources = self._sources
        index = file.set_index
        guarded = self._identities[index] is not None
        if not guarded and sources.manifests[index] is not None:  # committed meanwhile
            self._check_unchanged(index)
        cache, entry = sources.cache, self._entry(file) if guarded else None
        pin = None if self.pinned(file) is None or entry is None else entry.etag
        try:  # the cache's copy, or its fill while streaming (None: read from the store)
            cached = None if cache is None or entry is None else cache.open(
                sources.files_open, file.path, file.shown, entry, span=span)
        except FileNotFoundError:
            error = self.missing(file)
            raise error or NotFoundError(file.shown, "a file of the set is missing") from None
        except ObjectChangedError as err:
            raise self._replaced(file.set_index, file.shown) from err
        opened = cached if cached is not None else self._open(file, entry, pin, span)
        with opened:
            if not guarded:
                yield cast(BinaryIO, opened)
                return
            if pin is not None and cached is not None:
                # a pinned set's local copies are its own bytes, whatever the store holds
                # now: asked once a pass, in the background
                self._check_soon(index)
            elif pin is None:  # no ETag to pin reads to: ask now
                self._check_unchanged(index)
            if pin is None or cached is not None:
                if entry is not None:
                    self._check_size(opened, entry, file.shown)
            check = (whole and entry is not None and sources.on_corrupt != "skip"
                     and not getattr(opened, "verified", False))  # a checked local copy
            pinned = _Pinned(opened, self._label(index), file.shown, entry if check else None,
                             lambda: self.missing(file))
            yield cast(BinaryIO, pinned)

    def _replaced(self, index: int, shown: str) -> SetChangedError:
        return SetChangedError(self._label(index), f"{shown} was replaced since the set was "
                               "committed (its ETag is not the one its manifest records); "
                               "build the reader again")

    def _check_size(self, opened: Any, entry: ShardInfo, shown: str) -> None:
        size = opened.seek(0, 2)
        opened.seek(0)
        if size == entry.bytes:
            return
        how = "cut off" if size < entry.bytes else "longer"
        detail = (f"the manifest says {entry.bytes} bytes, the file has {size} ({how}): it "
                  "changed since the set was committed")
        if self._sources.on_corrupt == "skip":
            warn(CorruptDataWarning(detail, path=shown, offset=min(size, entry.bytes),
                                    records_lost=None))
            return
        raise CorruptDataError(detail, path=shown, offset=min(size, entry.bytes))


def _unlisted(shard_set: ShardSet, manifest: Manifest) -> list[str]:
    """The paths of ``shard_set`` its manifest doesn't list."""
    find = shard_finder(manifest.shards)
    return [p for p in shard_set.paths if find(posixpath.basename(p)) is None]


class _Pinned:
    """A shard opened under a manifest. An object store's "the object changed since it was
    opened" becomes :class:`~recprep.errors.SetChangedError`; with ``expected``, the
    CRC-32C of the bytes read front to back is compared with it at the last byte."""

    def __init__(self, file: Any, label: str, shown: str, expected: ShardInfo | None,
                 missing: Callable[[], RecprepError | None] | None = None) -> None:
        self._file = file
        self._missing = missing  # the error for a shard found missing when read (streamed)
        self._label = label
        self._shown = shown
        self._expected = expected
        self._sum = ChecksumReader(file)  # counts the bytes read here, front to back
        #: the file's size when it is known without a request (a streamed shard's)
        self.size: int | None = getattr(file, "size", None)

    def read(self, size: int = -1) -> bytes:
        pos = self._file.tell() if self._expected is not None else 0
        data: bytes = self._guarded(self._file.read, size)
        self._count(pos, data)
        return data

    def readinto(self, buffer: memoryview) -> int:
        pos = self._file.tell() if self._expected is not None else 0
        n: int = self._guarded(lambda: read_into(self._file, buffer))
        self._count(pos, buffer[:n].toreadonly())
        return n

    def _guarded(self, read: Callable[..., Any], *args: Any) -> Any:
        """``read(*args)``, an object store's "the object changed" said as
        :class:`~recprep.errors.SetChangedError`, a shard gone as missing."""
        try:
            return read(*args)
        except OSError as err:  # s3fs: FileExpired; a pinned range read: ObjectChangedError
            if isinstance(err, ObjectChangedError) or type(err).__name__ == "FileExpired":
                raise SetChangedError(
                    self._label, f"{self._shown} was replaced while it was being read; "
                    "build the reader again") from err
            if isinstance(err, FileNotFoundError) and self._missing is not None:
                error = self._missing()  # a streamed shard is asked for at its first read
                raise error or NotFoundError(self._shown, "a file of the set is missing") \
                    from None
            raise

    def _count(self, pos: int, data: bytes | memoryview) -> None:
        """Count ``data``, read at ``pos``, into the CRC-32C of the file front to back
        (with a manifest's ``expected``: checked at its last byte)."""
        expected = self._expected
        if expected is not None and pos <= self._sum.done < pos + len(data):
            self._sum.update(pos, data)
            if self._sum.done == expected.bytes:
                self._expected = None
                if self._sum.crc32c != expected.crc32c:
                    raise CorruptDataError(
                        f"the file's CRC-32C is {self._sum.crc32c:08x}, its manifest says "
                        f"{expected.crc32c:08x}: its bytes changed since the set was "
                        "committed", path=self._shown, offset=0)

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._file.seek(offset, whence))

    def tell(self) -> int:
        return int(self._file.tell())
