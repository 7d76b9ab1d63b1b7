"""How many files recprep keeps open at once: the bound its file pools share.

A reader takes one record from each shard in turn, and a write task writes instance
``j`` to file ``j % N``: either way every file is in use for the whole pass, so both
keep a bounded number of real handles open (:mod:`recprep.read.filepool`,
:mod:`recprep.write.filepool`) and take the bound from here.

Example
-------
>>> 8 <= default_max_open() <= MAX_OPEN_FILES
True
"""

from __future__ import annotations

__all__ = ["MAX_OPEN_FILES", "default_max_open"]

MAX_OPEN_FILES = 256
"""Real handles a file pool keeps open at most: well under the common limit of 1,024 (and
never more than a quarter of the process's own limit, see :func:`default_max_open`)."""


def default_max_open() -> int:
    """:data:`MAX_OPEN_FILES`, or a quarter of the process's file limit if that is less
    (at least 8): the rest stays for the user's program and recprep's other files."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # not POSIX
        return MAX_OPEN_FILES
    if soft == resource.RLIM_INFINITY:
        return MAX_OPEN_FILES
    return max(8, min(MAX_OPEN_FILES, soft // 4))
