"""One writer per shard set: an exclusive lock file next to the output.

On a local (POSIX) filesystem, ``convert`` creates ``{output}/.recprep-lock-{prefix}``
with ``O_CREAT | O_EXCL`` — atomic, so of two conversions into the same prefix one wins
and the other fails with :class:`OutputLockedError`. The file holds the owner's host and
pid; a lock whose owner is dead (same host, no such process) is stale and is taken over,
so a conversion killed with SIGKILL doesn't block the next one.

Object stores have no atomic create-if-absent that every fsspec backend offers, so no
lock is taken there: two conversions into one prefix on S3 may both run, and the last
one's manifest wins (each set is still whole, never mixed: every shard is written under a
staging name and the manifest names the shards with their CRC-32C). Don't do that.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import socket
from typing import Any

from .errors import RecprepError

LOCK_PREFIX = ".recprep-lock-"


class OutputLockedError(RecprepError, FileExistsError):
    """Another conversion is writing this shard set. Attributes: ``path``, ``owner``."""

    def __init__(self, path: str, owner: str) -> None:
        self.path = path
        self.owner = owner
        super().__init__(
            f"another conversion ({owner}) is writing this shard set: {path} is held; "
            "wait for it to finish, or write to another prefix. If no such process runs, "
            "delete the lock file"
        )


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ShardSetLock:
    """The lock of one shard set (a no-op on filesystems that can't lock)."""

    def __init__(self, fs: Any, output: str, prefix: str) -> None:
        self.fs = fs
        self.path = posixpath.join(output, f"{LOCK_PREFIX}{prefix}")
        self.held = False

    def acquire(self) -> None:
        if not _is_local(self.fs):
            return
        me = {"host": socket.gethostname(), "pid": os.getpid()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._take_over_stale():
                    raise OutputLockedError(self.path, self._owner_text()) from None
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held = True
            return
        raise OutputLockedError(self.path, self._owner_text())

    def _owner(self) -> dict[str, Any] | None:
        try:
            with open(self.path) as f:
                return dict(json.load(f))
        except (OSError, ValueError, TypeError):
            return None

    def _owner_text(self) -> str:
        owner = self._owner()
        if owner is None:
            return "unknown owner"
        return f"pid {owner.get('pid')} on {owner.get('host')}"

    def _take_over_stale(self) -> bool:
        owner = self._owner()
        if owner is None or owner.get("host") != socket.gethostname():
            return False
        pid = owner.get("pid")
        if not isinstance(pid, int) or _alive(pid):
            return False
        # the owner died without releasing it. Move the file aside atomically and check it
        # is the one judged stale: another process may have taken over in between.
        aside = f"{self.path}.stale-{os.getpid()}"
        try:
            os.rename(self.path, aside)
        except OSError as err:
            if err.errno == errno.ENOENT:
                return True  # someone removed it meanwhile: try to create it again
            raise
        try:
            with open(aside) as f:
                moved = json.load(f)
        except (OSError, ValueError):
            moved = None
        if moved != owner:  # a live lock: put it back (unless yet another one appeared)
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
            os.unlink(aside)
            return False
        os.unlink(aside)
        return True

    def release(self) -> None:
        if self.held:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.held = False

    def __enter__(self) -> ShardSetLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
