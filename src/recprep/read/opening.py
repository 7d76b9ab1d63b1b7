"""Opening what a reader reads: :func:`open_sources` resolves its pattern into shard sets
and their files, and :class:`Skipped` tallies what skipping damage left out.

>>> from recprep import convert
>>> from recprep.read.options import ReadOptions
>>> _ = convert("memory://doc/opening", list(range(4)), 2, "o")
>>> sources = open_sources("memory://doc/opening/o", None, ReadOptions())
>>> [f.shown.rsplit("/", 1)[1] for f in sources.files]
['o-00000-of-00001', 'o-00001-of-00001']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptDataWarning, InvalidArgumentError
from ..storage.discovery import resolve_shard_sets
from ..storage.fs import resolve
from .options import ReadOptions
from .sources import Sources

__all__ = ["Skipped", "open_sources"]


@dataclass
class Skipped:
    """What a reader with ``on_corrupt="skip"`` has left out so far (every skip is also a
    :class:`~recprep.errors.CorruptDataWarning`): ``events`` (damaged chunks, torn tails,
    damaged manifests), ``records`` (records known lost) and ``unknown`` (events whose
    loss could not be counted)."""

    events: int = 0
    records: int = 0
    unknown: int = 0

    def add(self, warning: CorruptDataWarning) -> None:
        self.events += 1
        if warning.records_lost is None:
            self.unknown += 1
        else:
            self.records += warning.records_lost


def open_sources(
    pattern: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    storage_options: Mapping[str, Any] | None, options: ReadOptions,
    on_skip: Callable[[CorruptDataWarning], None] | None = None,
) -> Sources:
    """The files a reader's ``pattern`` names (a glob, a directory, a file, ``dir/prefix``,
    or a list of them; local or fsspec URLs), resolved into shard sets, their manifests
    read (see :mod:`recprep.storage.discovery`)."""
    given: list[Any] = [pattern] if isinstance(pattern, (str, os.PathLike)) else list(pattern)
    if not given or not all(isinstance(p, (str, os.PathLike)) for p in given):
        raise InvalidArgumentError(
            f"pattern must be a path, URL or glob (str or pathlib.Path) or a non-empty "
            f"list of them, got {pattern!r}"
        )
    patterns = [os.fspath(p) for p in given]
    fs, _ = resolve(patterns[0], storage_options)
    paths = [resolve(p, storage_options)[1] for p in patterns]
    return Sources(fs, resolve_shard_sets(fs, paths), format=options.format,
                   compressor=options.compressor, max_chunk_bytes=options.max_chunk_bytes,
                   on_corrupt=options.on_corrupt, on_skip=on_skip, cache=options.cache,
                   fetch=options.fetch)
