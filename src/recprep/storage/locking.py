"""One writer per shard set: an exclusive lock file next to the output.

On a local (POSIX) filesystem, ``convert`` creates ``{output}/.recprep-lock-{prefix}``
holding the owner's host and pid. The owner is written to a temporary file first, which
is then hard-linked to the lock's name — atomic and create-if-absent, so of two
conversions into the same prefix one wins and the other fails with
:class:`OutputLockedError`, and a lock file is never seen empty (where the filesystem
has no hard links, ``O_CREAT | O_EXCL`` is used and the owner written after).

A lock whose owner is dead (same host, no such process) is stale and is taken over, so a
conversion killed with SIGKILL doesn't block the next one; so is an empty or unreadable
lock file older than :data:`UNREADABLE_GRACE` seconds (a run killed between creating and
writing it, or a disk that filled up). A lock that can't be created because the disk is
full or read-only raises :class:`~recprep.errors.WriteError` naming the directory.

Object stores have no atomic create-if-absent that every fsspec backend offers, so no
lock is taken there: two conversions into one prefix on S3 may both run, and the last
one's manifest wins (each set is still whole, never mixed: every shard is written under a
staging name and the manifest names the shards with their CRC-32C). Don't do that.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import secrets
import socket
import time
from typing import Any

from ..errors import OutputLockedError, WriteError
from . import failpoints
from .fs import is_local

LOCK_PREFIX = ".recprep-lock-"
#: an empty or unreadable lock file this old (seconds) is a dead writer's
UNREADABLE_GRACE = 5.0


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _snapshot(path: str) -> tuple[bytes, int, float] | None:
    """A lock file's bytes, inode and age; None when it is gone."""
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
            stat = os.fstat(f.fileno())
    except FileNotFoundError:
        return None
    return data, stat.st_ino, time.time() - stat.st_mtime


def _parse_lock_owner(data: bytes) -> dict[str, Any] | None:
    try:
        owner = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return owner if isinstance(owner, dict) else None


class ShardSetLock:
    """The lock of one shard set (a no-op on filesystems that can't lock).

    ``name`` is the set's prefix, or a name of recprep's own for a whole directory
    (``{cp}``: braces can't be in a prefix).
    """

    def __init__(self, fs: Any, output: str, prefix: str) -> None:
        self.fs = fs
        self.directory = output
        self.path = posixpath.join(output, f"{LOCK_PREFIX}{prefix}")
        self.held = False
        #: temporaries of this lock that processes killed while taking it left behind
        #: (found and removed when it was acquired): runs that died before doing anything
        self.killed_takers = 0

    def acquire(self) -> None:
        if not is_local(self.fs):
            return
        me = json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode()
        try:
            for _ in range(3):
                if self._create(me):
                    self.held = True
                    self._remove_dead_temporaries()
                    return
                if not self._take_over_stale():
                    break
            owner = self._owner_text()
        except OSError as err:  # disk full, read-only, permissions
            raise WriteError(self.directory, err) from err
        raise OutputLockedError(self.path, owner)

    def _create(self, owner: bytes) -> bool:
        """Create the lock holding ``owner``; False when it exists."""
        tmp = f"{self.path}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(owner)
            failpoints.hit("lock.write")
            try:
                os.link(tmp, self.path)
                return True
            except FileExistsError:
                return False
            except OSError as err:
                if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP,
                                     errno.EXDEV, errno.EMLINK):
                    raise
            return self._create_exclusive(owner)  # no hard links here
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _create_exclusive(self, owner: bytes) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            failpoints.hit("lock.created")
            with os.fdopen(fd, "wb") as f:
                f.write(owner)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # never leave an empty lock behind
            raise
        return True

    def _remove_dead_temporaries(self) -> None:
        """Temporaries of this lock (``{lock}.{pid}-{token}.tmp``, ``{lock}.stale-{pid}``)
        left by processes of this host that died between writing and linking them
        (counted in :attr:`killed_takers`)."""
        base = posixpath.basename(self.path)
        with contextlib.suppress(OSError):
            for name in os.listdir(self.directory):
                if not name.startswith(base + "."):
                    continue
                rest = name[len(base) + 1:].removeprefix("stale-")
                pid = rest.split("-", 1)[0].split(".", 1)[0]
                if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
                    self.killed_takers += 1
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(self.directory, name))

    def _owner(self) -> dict[str, Any] | None:
        snap = _snapshot(self.path)
        return None if snap is None else _parse_lock_owner(snap[0])

    def _owner_text(self) -> str:
        owner = self._owner()
        if owner is None:
            return "unknown owner"
        return f"pid {owner.get('pid')} on {owner.get('host')}"

    def _stale(self, data: bytes, age: float) -> bool:
        owner = _parse_lock_owner(data)
        if owner is None:  # empty or unreadable: a writer died before finishing it
            return age > UNREADABLE_GRACE
        if owner.get("host") != socket.gethostname():
            return False
        pid = owner.get("pid")
        return isinstance(pid, int) and not isinstance(pid, bool) and not process_alive(pid)

    def _take_over_stale(self) -> bool:
        snap = _snapshot(self.path)
        if snap is None:
            return True  # removed meanwhile: try to create it again
        data, inode, age = snap
        if not self._stale(data, age):
            return False
        # Move the file aside atomically and check it is the one judged stale: another
        # process may have taken over in between.
        aside = f"{self.path}.stale-{os.getpid()}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return True
        moved = _snapshot(aside)
        if moved is None or moved[:2] != (data, inode):  # a live lock: put it back
            with contextlib.suppress(FileExistsError):
                os.link(aside, self.path)
            with contextlib.suppress(OSError):
                os.unlink(aside)
            return False
        os.unlink(aside)
        return True

    def release(self) -> None:
        if self.held:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self.held = False

    def __enter__(self) -> ShardSetLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
