"""What ``convert`` accepts as input, turned into readers it can run and split.

* A PaddlePaddle-style reader (a no-argument callable returning an iterable), a one-shot
  iterable, or :func:`~recprep.partitions`: used as they are.
* A table — a pandas ``DataFrame``, a pyarrow ``Table``, ``RecordBatch`` or ``Dataset``,
  or a dict of equal-length columns — becomes a :class:`~recprep.write.tables.TableReader`:
  one instance per row, in row order, a dict ``{column: value}``, read a block of rows
  at a time (:mod:`recprep.write.tables` says how values come back). The index of a
  DataFrame is not written (a warning says so unless it is the default ``0..n-1``):
  ``df.reset_index()`` keeps it as a column.
* A sized sequence — a list, tuple, ``range``, numpy array, pandas ``Series`` or a table —
  with more than :data:`ROWS_PER_PART` instances is split into row ranges
  (:func:`split_sized`) by a rule that depends on its length and its records' size
  alone (:func:`part_rows`), so every executor reads the same partitions and writes the
  same bytes; a parallel executor reads them in parallel.
* Values that are iterable only by accident (``str``, ``bytes``, a dict that is not one
  of columns, a polars ``DataFrame``, which iterates over its columns) are refused.

Example
-------
>>> import pyarrow as pa
>>> reader = as_input(pa.table({"x": [1, None], "s": ["a", "b"]}))
>>> rows = list(reader())
>>> rows
[{'x': np.int64(1), 's': 'a'}, {'x': None, 's': 'b'}]
>>> len(reader), type(rows[0]["x"]).__name__
(2, 'int64')
>>> list(as_input({"x": [1, 2], "y": ["a", "b"]})())
[{'x': 1, 'y': 'a'}, {'x': 2, 'y': 'b'}]
"""

from __future__ import annotations

import copy
import math
import sys
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgumentError, UnsplitInputWarning, warn
from .tables import TableReader, is_table, package_name

if TYPE_CHECKING:
    from ..codecs import Codec

__all__ = [
    "ROWS_PER_PART",
    "TableReader",
    "as_input",
    "check_reader",
    "is_sized",
    "part_rows",
    "split_sized",
]

ROWS_PER_PART = 32768
"""A sized input is cut into parts of about this many instances (when it has at least two
parts' worth): few enough parts that task overhead stays small, and big enough that each
shard's share of a part makes big chunks (every part ends the chunks it wrote, so that
all executors write the same bytes): with 10 shards, 3,276 instances per shard and part,
128 KiB of 40-byte records. Measured (benchmarks/RESULTS-reading.md): at 8,192,
chunks of small records held ~800 of them, and decoding them a chunk at a time paid its
fixed cost per chunk four times as often."""

PART_FILL = 0.9
"""With small records, a part holds more than :data:`ROWS_PER_PART` instances: as many as
make each shard's share of it about this fraction of a chunk (:func:`part_rows`), so
that the share is one nearly full chunk rather than a full one and a sliver."""

SAMPLE_WINDOWS, SAMPLE_ROWS, SAMPLE_BYTES = 8, 64, 1 << 20
""":func:`part_rows` encodes up to ``SAMPLE_ROWS`` instances at each of
``SAMPLE_WINDOWS`` evenly spaced places, and stops once it has ``SAMPLE_BYTES``."""

_ACCIDENTAL = (str, bytes, bytearray, memoryview, Mapping)


def check_reader(reader: Any) -> None:
    """Raise unless ``reader`` is a callable or an iterable that isn't one by accident.

    >>> check_reader("abc")
    Traceback (most recent call last):
    ...
    recprep.errors.InvalidArgumentError: reader is a str, which is iterable only by accident; \
pass a no-argument callable returning an iterable of instances, an iterable, or a table \
(pandas DataFrame, pyarrow Table)
    """
    if isinstance(reader, _ACCIDENTAL):
        raise InvalidArgumentError(
            f"reader is a {type(reader).__name__}, which is iterable only by accident; pass "
            "a no-argument callable returning an iterable of instances, an iterable, or a "
            "table (pandas DataFrame, pyarrow Table)"
        )
    if package_name(reader) == "polars" and hasattr(reader, "to_arrow"):
        raise InvalidArgumentError(
            f"reader is a polars {type(reader).__name__}, which iterates over its columns, "
            "not its rows; pass reader.to_arrow() (one instance per row)"
        )
    if not callable(reader) and not hasattr(reader, "__iter__"):
        raise InvalidArgumentError(
            f"reader must be a no-argument callable returning an iterable (a PaddlePaddle "
            f"reader), an iterable of instances or a table, got {type(reader).__name__}"
        )


def as_input(reader: Any) -> Any:
    """``reader`` as convert runs it: tables (dicts of columns included) become
    :class:`TableReader`\\ s; the rest is checked (:func:`check_reader`) and returned as
    it is."""
    if is_table(reader):
        return TableReader(reader)
    check_reader(reader)
    return reader


def is_sized(reader: Any) -> bool:
    """Whether ``reader`` is data of a known length that slicing splits (not a reader that
    produces data when called)."""
    if isinstance(reader, TableReader):
        return True
    if isinstance(reader, (list, tuple, range, np.ndarray)):
        return True
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(reader, pandas.Series)


def part_rows(reader: Any, codec: Codec, num_shards: int, chunk_bytes: int) -> int:
    """Instances per part of the sized input ``reader`` (:func:`split_sized`):
    :data:`ROWS_PER_PART`, or more when its records are small — enough that each of the
    ``num_shards`` shards' share of a part fills :data:`PART_FILL` of a chunk of
    ``chunk_bytes`` (every part ends the chunks it wrote, so parts of 32,768 small
    records made chunks of a quarter of the size a reader decodes fastest, and with
    hundreds of shards, of a few dozen records).

    The records' size is the mean of a sample encoded with a copy of ``codec`` (its
    warnings and its notes of pickled types left out: the tasks give those), a few
    windows spread over the input; it depends on the input and the codec alone, never
    on the executor. An input too small to split, a pyarrow ``Dataset`` of files (a
    sample would read files here, before any task runs), or a sample the codec fails on
    (the task that meets the instance says which) gets :data:`ROWS_PER_PART`.

    >>> from recprep.codecs import get_codec
    >>> small = [(i, "a") for i in range(100_000)]
    >>> part_rows(small, get_codec("recprep"), 10, 512 << 10) > 100_000
    True
    >>> part_rows([bytes(1000)] * 100_000, get_codec("raw"), 10, 512 << 10)
    32768
    """
    count = len(reader)
    if count < 2 * ROWS_PER_PART or not getattr(reader, "in_memory", True):
        return ROWS_PER_PART  # one part whatever its records' size; or files, not read here
    mean = _mean_record_bytes(reader, count, codec)
    if mean is None:
        return ROWS_PER_PART
    return max(ROWS_PER_PART, int(PART_FILL * num_shards * chunk_bytes / mean))


def _mean_record_bytes(reader: Any, count: int, codec: Codec) -> float | None:
    """The mean size of a sample of ``reader``'s records (:func:`part_rows`), or None
    when ``codec`` fails on it."""
    sampled = size = 0
    try:
        codec = copy.deepcopy(codec)  # a fallback's notes of pickled types stay its own
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for window in range(SAMPLE_WINDOWS):
                start = count * window // SAMPLE_WINDOWS
                for instance in _instances(reader, start, min(count, start + SAMPLE_ROWS)):
                    size += len(codec.encode(instance))
                    sampled += 1
                    if size >= SAMPLE_BYTES:
                        return size / sampled
    except Exception:  # a sample only (or a codec that can't be copied): the task that
        return None  # writes the instance raises, located
    return size / sampled if sampled and size else None


def _instances(reader: Any, start: int, end: int) -> Iterable[Any]:
    """Instances ``start:end`` of the sized input ``reader``."""
    part = _range_of(reader, start, end)
    return part() if isinstance(part, TableReader) else part


def _range_of(reader: Any, start: int, end: int) -> Any:
    """Rows ``start:end`` of the sized input ``reader``, as the same kind of input."""
    if isinstance(reader, TableReader):
        return reader.rows(start, end)
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(reader, pandas.Series):
        return reader.iloc[start:end]
    return reader[start:end]


def split_sized(reader: Any, max_parts: int, rows_per_part: int = ROWS_PER_PART
                ) -> list[Any] | None:
    """The row ranges of a sized input, as readers — or None when it is too small to split.

    The cut depends only on the input's length, ``max_parts`` and ``rows_per_part``
    (:func:`part_rows`), never on the executor: ``ceil(len / rows_per_part)`` parts, at
    most ``max_parts``, as even as can be.

    >>> parts = split_sized(list(range(80_000)), 256)
    >>> [len(p) for p in parts], parts[1][0]
    ([26666, 26667, 26667], 26666)
    >>> split_sized(list(range(20_000)), 256) is None
    True
    >>> split_sized(list(range(80_000)), 256, 100_000) is None
    True
    """
    count = len(reader)
    parts = min(max_parts, math.ceil(count / rows_per_part))
    if parts < 2:
        return None
    bounds = [count * p // parts for p in range(parts + 1)]
    return [_range_of(reader, a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def warn_unsplit(reader: Any, executor: str) -> None:
    """Say that ``reader`` runs as one task on the parallel ``executor``, and what to do."""
    kind = "a one-shot iterable" if not callable(reader) else "a single reader"
    where = "in this process" if not callable(reader) else "as one task"
    warn(
        UnsplitInputWarning(
            f"executor={executor!r} got {kind} ({type(reader).__name__}), which can't be "
            f"split: it is read {where}, without parallelism. Pass "
            "recprep.partitions([...]) of readers (one per file, say), or a list, array or "
            "DataFrame, to spread the work"
        )
    )
