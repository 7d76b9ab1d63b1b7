"""``verify``: is a dataset intact? Every chunk read, every checksum checked.

For each shard, every chunk is read and its checksum checked, its payload decompressed
and split into records (the file's container, detected from its bytes); the whole
file's size, record count and CRC-32C are compared with the manifest's. Shards the set
should have that storage doesn't hold, shards the manifest doesn't list and an
unreadable manifest are problems too. Records are not decoded by the codec: verify
checks the bytes recprep stored, so it needs no ``allow_pickle``.

Each :class:`Problem` names the file and, when the damage has a place, its byte offset.
Reading a shard stops at its first damaged chunk (what follows can't be trusted to be
framed right); its whole-file CRC-32C is still computed.

Example
-------
>>> from recprep import convert
>>> _ = convert("memory://doc/verify", [(i, str(i)) for i in range(5)], 2, "p")
>>> report = verify("memory://doc/verify")
>>> report.ok, [(s.name, s.status, s.records) for s in report.sets[0].shards]
(True, [('p-00000-of-00001', 'ok', 3), ('p-00001-of-00001', 'ok', 2)])
"""

from __future__ import annotations

import concurrent.futures as cf
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .._core.arguments import checked
from ..containers import DEFAULT_MAX_CHUNK_BYTES, sniff
from ..errors import CorruptDataError
from ..read.committed import pending_journal, uncommitted
from ..storage.fs import ChecksumReader, display, open_regular, read_regular, resolve
from ..storage.manifest import ShardInfo
from ._sets import FoundSet, find_all

__all__ = ["Problem", "SetCheck", "ShardCheck", "VerifyReport", "check_file", "verify"]

_BLOCK = 4 << 20


@dataclass
class Problem:
    """One thing wrong: where (``path``, ``offset`` or None), what ``kind``, and why.

    Kinds: ``corrupt`` (a chunk is damaged), ``missing`` (a shard isn't there),
    ``records`` / ``bytes`` / ``crc32c`` (the file differs from its manifest entry),
    ``manifest`` (the manifest can't be read), ``unexpected`` (a shard the manifest
    doesn't list), ``unreadable`` (storage refused to read the file), ``uncommitted``
    (a commit into the set is in progress or was interrupted: no manifest, and its
    journal is there — its shards may mix two sets), ``side`` (a side file the manifest
    vouches for — the chunk index, a record index — is missing or is not that file).
    """

    path: str
    offset: int | None
    kind: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path} at byte {self.offset}" if self.offset is not None else self.path
        return f"{where}: {self.message}"


@dataclass
class ShardCheck:
    """What verifying one file found; ``expected_*`` come from the manifest (or None)."""

    path: str
    name: str
    status: str  # "ok", "damaged", "missing"
    chunks: int = 0
    records: int = 0
    bytes: int | None = None
    crc32c: str | None = None
    expected_records: int | None = None
    expected_bytes: int | None = None
    expected_crc32c: str | None = None
    problems: list[Problem] = field(default_factory=list)


@dataclass
class SetCheck:
    """One shard set (or lone file): its shards' checks and the set-level problems."""

    path: str
    prefix: str | None
    manifest: str | None
    shards: list[ShardCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(s.status == "ok" for s in self.shards)


@dataclass
class VerifyReport:
    """Everything :func:`verify` checked. ``ok`` is True only when nothing is wrong."""

    sets: list[SetCheck]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.sets)

    @property
    def problems(self) -> list[Problem]:
        """Every problem, set by set, shard by shard."""
        found: list[Problem] = []
        for set_check in self.sets:
            found.extend(set_check.problems)
            for shard in set_check.shards:
                found.extend(shard.problems)
        return found

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: ``ok``, ``sets`` (with their shards) and ``problems``."""
        return {
            "ok": self.ok,
            "sets": [{**asdict(s), "ok": s.ok} for s in self.sets],
            "problems": [asdict(p) for p in self.problems],
        }




def check_file(
    fs: Any,
    path: str,
    expected: ShardInfo | None = None,
    *,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> ShardCheck:
    """Read every chunk of one shard (RecordIO or TFRecord); compare it with its manifest
    entry."""
    shown = display(fs, path)
    check = ShardCheck(shown, posixpath.basename(path), "ok")
    if expected is not None:
        check.expected_records = expected.records
        check.expected_bytes = expected.bytes
        check.expected_crc32c = f"{expected.crc32c:08x}"
    try:
        with open_regular(fs, path) as raw:
            file = ChecksumReader(raw)
            try:
                container = sniff(file, path=shown)
                chunks = () if container is None else container.read_chunks(
                    file, path=shown, max_chunk_bytes=max_chunk_bytes
                )
                for chunk in chunks:
                    check.chunks += 1
                    check.records += len(chunk.records)
            except CorruptDataError as err:
                check.problems.append(
                    Problem(err.path or shown, err.offset, "corrupt", err.detail)
                )
            crc, size = file.finish()
    except FileNotFoundError:
        check.status = "missing"
        check.problems.append(Problem(shown, None, "missing", "the file disappeared"))
        return check
    except CorruptDataError as err:  # not a regular file: a FIFO, a device
        check.status = "damaged"
        check.problems.append(Problem(err.path or shown, None, "unreadable", err.detail))
        return check
    except OSError as err:
        check.status = "damaged"
        check.problems.append(
            Problem(shown, None, "unreadable", f"{type(err).__name__}: {err}")
        )
        return check
    check.bytes, check.crc32c = size, f"{crc:08x}"
    if expected is not None:
        _compare(check, expected, crc, size)
    if check.problems:
        check.status = "damaged"
    return check


def _compare(check: ShardCheck, expected: ShardInfo, crc: int, size: int) -> None:
    """Problems where the file differs from what its manifest recorded."""
    clean = not check.problems  # chunk damage already explains counts and CRC
    if size != expected.bytes:
        how = "cut off" if size < expected.bytes else "longer"
        check.problems.append(
            Problem(
                check.path,
                min(size, expected.bytes),
                "bytes",
                f"the manifest says {expected.bytes} bytes, the file has {size} ({how})",
            )
        )
    elif clean and check.records != expected.records:
        check.problems.append(
            Problem(
                check.path,
                None,
                "records",
                f"the manifest says {expected.records} records, the file holds "
                f"{check.records}",
            )
        )
    elif clean and crc != expected.crc32c:
        check.problems.append(
            Problem(
                check.path,
                0,
                "crc32c",
                f"the file's CRC-32C is {crc:08x}, the manifest says {expected.crc32c:08x}: "
                "its bytes changed since it was written",
            )
        )


def _set_problems(fs: Any, found: FoundSet, checked: SetCheck) -> None:
    if found.manifest_error is not None:
        err = found.manifest_error
        checked.problems.append(Problem(err.path or "", err.offset, "manifest", err.detail))
    elif found.manifest is None and found.prefix is not None and (
        journal := pending_journal(fs, found.directory, found.prefix)
    ):
        checked.problems.append(Problem(
            display(fs, found.label), None, "uncommitted",
            uncommitted(display(fs, found.label), display(fs, journal)),
        ))
    elif found.manifest is None and found.prefix is not None:
        checked.notes.append(
            "no manifest: sizes, record counts and CRC-32C can't be compared (the set was "
            "not committed by recprep, or was written by another tool)"
        )
    for path in found.unexpected:
        checked.problems.append(
            Problem(display(fs, path), None, "unexpected", "a shard the manifest doesn't list")
        )
    if found.manifest is not None:
        checked.problems.extend(_side_problems(fs, found))


def _side_problems(fs: Any, found: FoundSet) -> list[Problem]:
    """The side files the manifest vouches for that are missing or are not those files
    (forged, damaged, or of another set): readers refuse them."""
    assert found.manifest is not None
    problems = []
    for side in found.manifest.side_files:
        path = posixpath.join(found.directory, side.name)
        try:
            data = read_regular(fs, path, side.bytes, what="the side file its manifest lists")
        except FileNotFoundError:
            problems.append(Problem(display(fs, path), None, "side",
                                    "a side file the manifest lists is missing (readers "
                                    "index the shards from their headers instead)"))
            continue
        except (OSError, CorruptDataError) as err:
            problems.append(Problem(display(fs, path), None, "side",
                                    "it is not the file the manifest vouches for: "
                                    f"{getattr(err, 'detail', err)}"))
            continue
        problem = side.mismatch(data)
        if problem is not None:
            problems.append(Problem(display(fs, path), None, "side", problem))
    return problems


def _missing(fs: Any, path: str, expected: ShardInfo | None) -> ShardCheck:
    shown = display(fs, path)
    check = ShardCheck(shown, posixpath.basename(path), "missing")
    if expected is not None:
        check.expected_records = expected.records
        check.expected_bytes = expected.bytes
        check.expected_crc32c = f"{expected.crc32c:08x}"
    check.problems.append(Problem(shown, None, "missing", "this shard of the set is missing"))
    return check


@checked
def verify(
    paths: str | Sequence[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    num_workers: int = 4,
) -> VerifyReport:
    """Check every chunk of every shard that ``paths`` name, and the manifests' facts.

    Parameters
    ----------
    paths
        Directories (every shard set in them), globs (one set's files), ``dir/prefix``
        for one set, a manifest (its set) or files; local paths or fsspec URLs. Paths
        that name files of one set are checked as that set, once.
    storage_options
        Passed to fsspec.
    max_chunk_bytes
        A chunk claiming or inflating to more is reported as damaged.
    num_workers
        Files checked at the same time (threads; helps on remote storage).

    Returns
    -------
    VerifyReport
        Per set and per shard what was found; ``report.ok`` is the verdict.

    Examples
    --------
    >>> from recprep import convert
    >>> from recprep.storage import resolve
    >>> _ = convert("memory://doc/verify2", list(range(6)), 3, "q")
    >>> fs, _ = resolve("memory://doc/verify2")
    >>> fs.rm("/doc/verify2/q-00001-of-00002")
    >>> report = verify("memory://doc/verify2/q")
    >>> report.ok, [str(p) for p in report.problems]
    (False, ['memory:///doc/verify2/q-00001-of-00002: this shard of the set is missing'])
    """
    patterns = [paths] if isinstance(paths, str) else list(paths)
    named = [resolve(pattern, storage_options) for pattern in patterns]
    with cf.ThreadPoolExecutor(max(1, num_workers), thread_name_prefix="recprep-verify") as pool:
        sets = [_check_set(fs, found, pool, max_chunk_bytes) for fs, found in find_all(named)]
    return VerifyReport(sets)


def _check_set(fs: Any, found: FoundSet, pool: cf.Executor, max_chunk_bytes: int) -> SetCheck:
    manifest = found.manifest
    entries = {s.name: s for s in manifest.shards} if manifest is not None else {}
    checked = SetCheck(
        display(fs, found.label),
        found.prefix,
        display(fs, found.manifest_path) if found.manifest_path else None,
    )
    _set_problems(fs, found, checked)
    futures = {
        path: pool.submit(
            check_file,
            fs,
            path,
            entries.get(posixpath.basename(path)),
            max_chunk_bytes=max_chunk_bytes,
        )
        for path in found.shards
    }
    missing = {
        path: _missing(fs, path, entries.get(posixpath.basename(path)))
        for path in found.missing
    }
    order = [s.name for s in manifest.shards] if manifest is not None else []
    rank = {name: i for i, name in enumerate(order)}
    results = [f.result() for f in futures.values()] + list(missing.values())
    if not found.listed:  # a shard its manifest lists was not there to read
        results = [_missing(fs, posixpath.join(found.directory, r.name),
                            entries.get(r.name)) if r.status == "missing" else r
                   for r in results]
    checked.shards = sorted(results, key=lambda s: (rank.get(s.name, len(rank)), s.name))
    return checked
