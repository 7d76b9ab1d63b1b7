"""What writers leave in a directory while they work, read back to tell a reader why a set
it asks for isn't there (yet).

A conversion holds ``.recprep-lock-{prefix}`` (local storage: its host and pid) and
writes under ``.recprep-staging-{prefix}/``; once it commits, the staging directory holds
the commit journal (``commit.json``) until the manifest is in place. ``recprep cp`` holds
``.recprep-lock-{cp}`` and writes ``.recprep-cp-*`` temporaries; ``recprep.spark``
stages under ``.recprep-staging-spark-*``. :func:`writers_in` finds them in one listing,
and :func:`explain` says what they mean for a reader: a conversion in progress (who, since
when, and what to do), or a commit in progress or interrupted.

Example
-------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> fs.pipe_file("/doc/writers/.recprep-staging-train/options.json", b"{}")
>>> [(w.prefix, w.kind, w.committing) for w in writers_in(fs, "/doc/writers")]
[('train', 'staging', False)]
>>> print(explain(writers_in(fs, "/doc/writers"), "train"))  # doctest: +ELLIPSIS
a conversion is writing the set 'train' there (staging directory memory:///doc/wri...
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import (
    AmbiguousPathError,
    MissingShardsError,
    NotFoundError,
    RecprepError,
    SetChangedError,
)
from .fs import display, read_regular
from .locking import LOCK_PREFIX
from .shardnames import (
    MANIFEST_SUFFIX,
    glob_root,
    has_magic,
    manifest_name,
    parse_shard_name,
    shard_name,
)

__all__ = ["COPY_PREFIX", "JOURNAL", "STAGING_PREFIX", "Writer", "committing", "explain",
           "explained", "uncommitted", "writers_in"]

#: a conversion's staging directory is ``{STAGING_PREFIX}{prefix}``
STAGING_PREFIX = ".recprep-staging-"
#: the commit journal in a staging directory, there while a commit is under way
JOURNAL = "commit.json"
#: ``recprep cp``'s temporaries are ``{COPY_PREFIX}{token}-{name}``
COPY_PREFIX = ".recprep-cp-"
_SPARK = STAGING_PREFIX + "spark-"
_COPY_LOCK = "{cp}"
_LOCK_BYTES = 4096


@dataclass(frozen=True)
class Writer:
    """One writer's trace in a directory.

    ``prefix`` is the set it writes (None: a copy or a Spark write into the directory);
    ``kind`` is ``"lock"``, ``"staging"`` or ``"copy"``; ``path`` the trace as users write
    it; ``owner`` the lock's ``pid … on host`` when it says; ``since`` its modification
    time (seconds since the epoch) when storage says; ``committing``: a staging directory
    holding a commit journal.
    """

    prefix: str | None
    kind: str
    path: str
    owner: str | None = None
    since: float | None = None
    committing: bool = False

    @property
    def journal(self) -> str:
        """The commit journal's path (a staging directory's)."""
        return f"{self.path}/{JOURNAL}"


def _since(info: dict[str, Any]) -> float | None:
    value = info.get("mtime", info.get("LastModified", info.get("created")))
    if value is None:
        return None
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _owner(fs: Any, path: str) -> str | None:
    try:
        owner = json.loads(read_regular(fs, path, _LOCK_BYTES, what="a lock file"))
    except Exception:  # noqa: BLE001 - a lock is only described here, never trusted
        return None
    if not isinstance(owner, dict):
        return None
    return f"pid {owner.get('pid')} on {owner.get('host')}"


def writers_in(fs: Any, directory: str) -> list[Writer]:
    """The writers at work in ``directory`` (empty when it isn't one), from one listing."""
    try:
        listed = fs.ls(directory, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for info in sorted(listed, key=lambda i: i["name"]):
        path = info["name"].rstrip("/")
        name = posixpath.basename(path)
        shown = display(fs, path)
        if name.startswith(LOCK_PREFIX):
            prefix: str | None = name[len(LOCK_PREFIX):]
            if prefix == _COPY_LOCK:
                prefix = None
            found.append(Writer(prefix, "lock", shown, _owner(fs, path), _since(info)))
        elif name.startswith(_SPARK):
            found.append(Writer(None, "staging", shown, since=_since(info)))
        elif name.startswith(STAGING_PREFIX):
            journal = posixpath.join(path, JOURNAL)
            committing = bool(fs.exists(journal))
            since = _since(fs.info(journal)) if committing else _since(info)
            found.append(Writer(name[len(STAGING_PREFIX):], "staging", shown, since=since,
                                committing=committing))
        elif name.startswith(COPY_PREFIX):
            found.append(Writer(None, "copy", shown, since=_since(info)))
    return found


def uncommitted(shown: str, journal: str, *, manifest: bool = False) -> str:
    """Why a set whose commit journal is there is refused: ``shown`` is the set;
    ``manifest``: a manifest is there (a commit started or finishing around it)."""
    there = "" if manifest else ", its manifest isn't"
    return (f"a commit into this set is in progress or was interrupted ({journal} is "
            f"there{there}): its files may mix two sets. Wait for the commit, or finish "
            "it with convert(..., resume=True) (or copy it again); on_corrupt='skip' reads "
            "the files as they are")


def _when(since: float | None) -> str:
    if since is None:
        return ""
    return " since " + time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since))


def explain(writers: Sequence[Writer], prefix: str | None) -> str | None:
    """What the ``writers`` of a directory mean for a reader of the set ``prefix`` (None:
    of any set there): a sentence to add to a "not found" message, or None when none of
    them writes it."""
    mine = [w for w in writers if prefix is None or w.prefix in (prefix, None)]
    if not mine:
        return None
    sets = sorted({w.prefix for w in mine if w.prefix is not None})
    traces = "; ".join(_trace(w) for w in mine)
    if sets:
        what = "a conversion is writing the set" + ("s " if len(sets) > 1 else " ") + (
            ", ".join(repr(s) for s in sets))
        after = ("if no such process runs, it was killed: run it again with "
                 "convert(..., resume=True) to finish it, or delete "
                 + " and ".join(w.path for w in mine if w.prefix is not None))
    else:
        what = "a copy (recprep cp or recprep.spark) is writing into this directory"
        after = ("if no such process runs, it was killed: copy again (its leftovers are "
                 "removed then)")
    return (f"{what} there ({traces}): read it once the writer is done (a set appears when "
            f"its manifest is committed); {after}")


def _trace(writer: Writer) -> str:
    if writer.kind == "lock":
        held = f" held by {writer.owner}" if writer.owner else ""
        return f"lock {writer.path}{held}{_when(writer.since)}"
    if writer.committing:
        return f"staging directory {writer.path}, committing{_when(writer.since)}"
    if writer.kind == "copy":
        return f"copy temporary {writer.path}{_when(writer.since)}"
    return f"staging directory {writer.path}{_when(writer.since)}"


def committing(writers: Iterable[Writer], prefixes: Iterable[str | None]) -> Writer | None:
    """The writer committing one of the sets ``prefixes`` (None: any), if any."""
    wanted = set(prefixes)
    return next((w for w in writers if w.committing and (
        None in wanted or w.prefix in wanted)), None)


def _involved(fs: Any, pattern: str, err: RecprepError) -> list[str | None] | None:
    """The sets whose writers may explain ``err`` (None in the list: any set of the
    directory); None when nothing a writer does can (several sets are just several)."""
    name = posixpath.basename(pattern)
    if isinstance(err, MissingShardsError):
        shards = [parse_shard_name(posixpath.basename(p)) for p in err.missing]
        found: list[str | None] = [s.prefix for s in shards if s is not None]
        return found[:1]
    if isinstance(err, AmbiguousPathError):  # one prefix of two shard counts: a commit
        globs = [posixpath.basename(p).rpartition("-*-of-") for p in err.paths.values()]
        prefixes: set[str | None] = {prefix for prefix, sep, _ in globs if sep}
        one = len(prefixes) == 1 and all(sep for _, sep, _ in globs)
        return list(prefixes) if one else None
    if has_magic(pattern):
        return [None]  # narrowed to the writers whose set the glob matches
    if fs.isdir(pattern):
        return [None]
    return [name.removesuffix(MANIFEST_SUFFIX)]


def explained(fs: Any, pattern: str, err: RecprepError) -> RecprepError:
    """``err`` (raised from a fresh listing), or what the writers at work in its directory
    make of it: a commit caught in progress is :class:`~recprep.errors.SetChangedError`,
    a set not there because a conversion is writing it says so."""
    involved: list[str | None] | None = _involved(fs, pattern, err)
    if involved is None:
        return err
    directory = glob_root(pattern) if has_magic(pattern) else (
        pattern if fs.isdir(pattern) else posixpath.dirname(pattern))
    writers = writers_in(fs, directory)
    if has_magic(pattern):  # the writers whose set the glob would match
        name = posixpath.basename(pattern)
        matching = [p for p in (w.prefix for w in writers) if p is not None and any(
            fnmatch.fnmatchcase(candidate, name) for candidate in (
                p, manifest_name(p), shard_name(p, 0, 1)))]
        involved = list(matching[:1])
    pending = committing(writers, involved)
    if pending is not None and pending.prefix is not None:
        where = posixpath.join(directory, pending.prefix)
        shown = display(fs, where)
        manifest = bool(fs.exists(where + MANIFEST_SUFFIX))
        return SetChangedError(shown, uncommitted(shown, pending.journal, manifest=manifest))
    if not isinstance(err, NotFoundError):
        return err
    said = explain(writers, None if None in involved else (involved or [""])[0])
    return err if said is None else NotFoundError(err.path, f"{err.detail}; {said}")
