"""Progress reporting: a tqdm bar on a terminal, a user callback, or nothing.

``progress=`` takes ``None`` (a bar when stderr is a terminal), ``True``/``False``, or a
callable ``callback(instances_done, shards_done)`` called as work advances.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

ProgressArg = bool | Callable[[int, int], Any] | None


class Progress:
    """Counts instances and finished shards; forwards them to a bar or a callback."""

    def __init__(self, progress: ProgressArg, *, total_shards: int, desc: str) -> None:
        self.instances = 0
        self.shards = 0
        self._callback = progress if callable(progress) else None
        self._bar: Any = None
        show = sys.stderr.isatty() if progress is None else progress is True
        if show:
            from tqdm.auto import tqdm

            self._bar = tqdm(desc=desc, unit=" instances", unit_scale=True, dynamic_ncols=True)
            self._bar.set_postfix(shards=f"0/{total_shards}")
        self._total_shards = total_shards

    def add_instances(self, count: int) -> None:
        self.instances += count
        if self._bar is not None:
            self._bar.update(count)
        if self._callback is not None:
            self._callback(self.instances, self.shards)

    def add_shards(self, count: int = 1) -> None:
        self.shards += count
        if self._bar is not None:
            self._bar.set_postfix(shards=f"{self.shards}/{self._total_shards}")
        if self._callback is not None:
            self._callback(self.instances, self.shards)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
