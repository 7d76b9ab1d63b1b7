"""Failpoints: named places where a test can make the process die on purpose.

``RECPREP_FAILPOINTS="commit.move=3"`` makes the 3rd pass through ``hit("commit.move")``
end the process at once (``os._exit(137)``, like SIGKILL: no cleanup, no ``finally``).
Crash-consistency tests use it to stop a conversion exactly mid-commit, where a random
kill rarely lands. Unset (always, outside such tests), ``hit`` is a dictionary lookup.
"""

from __future__ import annotations

import os
import threading

_LOCK = threading.Lock()  # moves on object stores hit "commit.move" from several threads
_ARMED: dict[str, int] = {}
for _item in filter(None, os.environ.get("RECPREP_FAILPOINTS", "").split(",")):
    _name, _, _count = _item.partition("=")
    _ARMED[_name.strip()] = int(_count or 1)


def hit(name: str) -> None:
    """Die here if the failpoint ``name`` is armed and its count is reached."""
    if name in _ARMED:
        with _LOCK:
            _ARMED[name] -= 1
            if _ARMED[name] <= 0:
                os._exit(137)
