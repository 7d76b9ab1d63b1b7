"""Torch's shared-memory files that killed DataLoader workers leave behind, swept.

A DataLoader worker hands each batch to the trainer through a file in ``/dev/shm``
(torch's ``file_descriptor`` sharing): torch creates it, maps it and unlinks its name a
moment later, the memory living on in the open descriptors. A worker killed in that
moment (``kill -9`` of a preempted trainer and its workers) leaves the name, and the
memory, until the machine restarts. :func:`sweep_torch_shm` removes those names: files
named ``torch_<pid>_<n>_<n>`` owned by this user whose creating process no longer exists.
Unlinking a name frees nothing a living process uses (one still holding it keeps its
descriptor). :class:`~recprep.torch.RecordIODataset` sweeps once per trainer process, with
a :class:`~recprep.errors.RecprepWarning` saying what it removed.

>>> import os, tempfile
>>> shm = tempfile.mkdtemp()
>>> for name in (f"torch_{os.getpid()}_1_1", "torch_999999999_1_1", "other_1_1"):
...     open(os.path.join(shm, name), "w").close()
>>> sweep_torch_shm(shm), sorted(os.listdir(shm))  # doctest: +ELLIPSIS
(['torch_999999999_1_1'], ['other_1_1', 'torch_..._1_1'])
"""

from __future__ import annotations

import os
import re
import stat

from .locking import process_alive

__all__ = ["SHM_DIRECTORY", "sweep_torch_shm"]

#: where torch's shared-memory files live on Linux
SHM_DIRECTORY = "/dev/shm"

_NAME = re.compile(r"torch_(\d+)_\d+_\d+")


def sweep_torch_shm(directory: str = SHM_DIRECTORY) -> list[str]:
    """Remove torch's shared-memory files in ``directory`` that processes no longer
    living left behind (see the module docs); return their names, sorted."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    uid = os.getuid()
    removed = []
    for name in names:
        found = _NAME.fullmatch(name)
        if found is None or process_alive(int(found.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            info = os.lstat(path)
            if info.st_uid != uid or not stat.S_ISREG(info.st_mode):
                continue
            os.unlink(path)
        except OSError:
            continue
        removed.append(name)
    return sorted(removed)
