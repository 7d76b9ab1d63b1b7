"""Progress reporting: a tqdm bar on a terminal, a user callback, or nothing.

``progress=`` takes ``None`` (a bar when stderr is a terminal), ``True``/``False``, or a
callable ``callback(instances_done, shards_done)`` called as work advances. With
``tasks_total`` (``recprep prepare``: one task a raw file) the bar counts tasks against that
total — so it has a rate and an ETA — and shows instances and shards beside it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

ProgressArg = bool | Callable[[int, int], Any] | None


class Progress:
    """Counts instances, finished reading tasks and shards; feeds a bar or a callback."""

    def __init__(
        self,
        progress: ProgressArg,
        *,
        total_shards: int,
        desc: str,
        tasks_total: int | None = None,
        task_unit: str = "files",
    ) -> None:
        self.instances = self.tasks = self.shards = 0
        self._callback = progress if callable(progress) else None
        self._total_shards = total_shards
        self._tasks_total = tasks_total
        self._bar: Any = None
        show = sys.stderr.isatty() if progress is None else progress is True
        if show:
            from tqdm.auto import tqdm

            if tasks_total is None:
                self._bar = tqdm(desc=desc, unit=" instances", unit_scale=True,
                                 dynamic_ncols=True)
            else:
                self._bar = tqdm(desc=desc, total=tasks_total, unit=f" {task_unit}",
                                 dynamic_ncols=True)
            self._refresh()

    def _refresh(self) -> None:
        postfix = {"shards": f"{self.shards}/{self._total_shards}"}
        if self._tasks_total is not None:
            postfix["instances"] = str(self.instances)
        self._bar.set_postfix(postfix, refresh=False)

    def _tell(self) -> None:
        if self._callback is not None:
            self._callback(self.instances, self.shards)

    def add_instances(self, count: int) -> None:
        self.instances += count
        if self._bar is not None:
            if self._tasks_total is None:
                self._bar.update(count)
            else:
                self._refresh()
        self._tell()

    def add_tasks(self, count: int = 1) -> None:
        self.tasks += count
        if self._bar is not None and self._tasks_total is not None:
            self._bar.update(count)

    def add_shards(self, count: int = 1) -> None:
        self.shards += count
        if self._bar is not None:
            self._refresh()
            self._bar.refresh()
        self._tell()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
