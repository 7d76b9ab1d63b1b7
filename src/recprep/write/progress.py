"""Progress reporting: a tqdm bar on a terminal or in Jupyter, a user callback, or nothing.

``progress=`` takes ``None`` (a bar when stderr is a terminal, or in a Jupyter kernel),
``True``/``False``, or a callable ``callback(instances_done, shards_done)`` called as work
advances. In Jupyter the bar is tqdm's text line in one output of the cell, replaced in
place as it advances (an IPython display updated by its id): a saved notebook holds one
line, the bar's final state. (tqdm's text on stderr left a line per refresh in saved
notebooks, and its ``ipywidgets`` widget is saved as it was first shown, at 0%.)

What the bar counts against a total (so it shows a percentage, a rate and an ETA):
``tasks_total`` (``recprep prepare``: its raw files) counts the input partitions read,
with instances and shards beside it (a task that reads a group of partitions adds them all
when it finishes: ``add_tasks(count)``); ``total_instances`` (an input of known length)
counts instances; with neither, instances are counted without a total.

Example
-------
>>> seen = []
>>> bar = Progress(lambda n, s: seen.append((n, s)), total_shards=2, desc="p")
>>> bar.add_instances(3); bar.add_shards(); bar.close()
>>> seen
[(3, 0), (3, 1)]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

ProgressArg = bool | Callable[[int, int], Any] | None


def in_jupyter() -> bool:
    """True in a Jupyter kernel (an IPython ``ZMQInteractiveShell``), not in a terminal
    IPython or plain Python.

    >>> in_jupyter()
    False
    """
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class DisplayLine:
    """A file for tqdm's text bar in a Jupyter kernel: each line tqdm writes replaces the
    text of one output of the cell (an IPython display, updated by its id), so the cell
    shows the bar's last line, live and once the notebook is saved."""

    encoding = "utf-8"  # the bar is drawn with block characters (tqdm asks)

    def __init__(self) -> None:
        from IPython.display import display

        self._handle = display({"text/plain": ""}, raw=True, display_id=True)
        self.line = ""

    def write(self, text: str) -> int:
        line = text.rpartition("\r")[2].rstrip()  # tqdm writes "\r" + the line (+ "\n")
        if line and line != self.line:
            self.line = line
            self._handle.update({"text/plain": line}, raw=True)
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: each line is sent as it is written."""


#: the width of a bar in Jupyter (a cell has no terminal to size it by)
JUPYTER_COLUMNS = 100


def _bar(**kwargs: Any) -> Any:
    """A tqdm text bar: on stderr, or in Jupyter on one output line updated in place."""
    from tqdm.std import tqdm

    if in_jupyter():
        return tqdm(file=DisplayLine(), ncols=JUPYTER_COLUMNS, **kwargs)
    return tqdm(file=sys.stderr, dynamic_ncols=True, **kwargs)


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
        total_instances: int | None = None,
    ) -> None:
        self.instances = self.tasks = self.shards = 0
        self._callback = progress if callable(progress) else None
        self._total_shards = total_shards
        self._tasks_total = tasks_total
        self._bar: Any = None
        if progress is None:
            show = sys.stderr.isatty() or in_jupyter()
        else:
            show = progress is True
        if show:
            if tasks_total is None:
                big = total_instances is None or total_instances >= 10_000
                self._bar = _bar(desc=desc, total=total_instances, unit=" instances",
                                 unit_scale=big)
            else:
                self._bar = _bar(desc=desc, total=tasks_total, unit=f" {task_unit}")
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
