"""Looking inside datasets: what shard sets a directory holds, and their first instances.

:func:`list_datasets` takes its facts from manifests when there are any; a set without
one is described from its chunk headers (hopping header to header, never decoding a
record), so its codec is ``"unknown"``. :func:`head` reads the first instances with
:class:`~recprep.RecordIO`, and :func:`render_value` (public as ``recprep.tools.describe``)
renders a value for people: arrays by dtype, shape and a short preview.

Example
-------
>>> import numpy as np
>>> from recprep import convert
>>> _ = convert("memory://doc/inspect", [(np.arange(3.0), 7)], 1, "p")
>>> [(d.prefix, d.num_shards, d.records, d.codec) for d in list_datasets("memory://doc/inspect")]
[('p', 1, 1, 'recprep')]
>>> print(render_value(head("memory://doc/inspect", 1)[0]))
(ndarray float64 (3,) [0., 1., 2.], int 7)
"""

from __future__ import annotations

import math
import posixpath
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any

import numpy as np

from .._core.arguments import checked
from ..containers import sniff
from ..containers.fileindex import build_index
from ..errors import CorruptDataError, InvalidArgumentError
from ..read.committed import pending_journal, uncommitted
from ..storage.fs import display, open_regular, resolve
from ..storage.shardnames import parse_shard_name
from ._sets import FoundSet, find_all

__all__ = ["DatasetInfo", "head", "list_datasets", "render_value"]

UNKNOWN = "unknown"


@dataclass
class DatasetInfo:
    """One shard set as ``recprep ls`` shows it.

    ``num_shards`` is what the set should have, ``shards_present`` what storage holds;
    ``records`` is None when a damaged shard hides the count. ``source`` says where the
    facts come from: ``"manifest"`` or ``"chunk headers"``. When the path named some of
    the set's shards only (one shard, a glob of a few), the facts are those shards' and
    ``set_shards`` is how many the whole set has (else None).
    """

    path: str
    prefix: str
    num_shards: int
    shards_present: int
    records: int | None
    bytes: int
    format: str
    codec: str
    compressor: str
    source: str
    notes: list[str] = field(default_factory=list)
    set_shards: int | None = None

    @property
    def complete(self) -> bool:
        return self.shards_present == self.num_shards

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}


def _from_headers(fs: Any, found: FoundSet) -> DatasetInfo:
    """Facts of a set without a manifest, from its files: each one's format (sniffed),
    what its start says (:meth:`~recprep.containers.base.Format.describe`) and its
    record count (chunk headers, or a read that verifies every record)."""
    records: int | None = 0
    formats: set[str] = set()
    compressors: set[str] = set()
    notes = []
    for path in found.shards:
        if found.sizes.get(path, 0) == 0:
            continue  # an empty shard: a valid file with no records
        shown = display(fs, path)
        try:
            with open_regular(fs, path) as f:
                container = sniff(f, path=shown)
                if container is None:
                    continue
                facts = container.describe(f, path=shown)
                count = build_index(f, container, path=shown).num_records
        except CorruptDataError as err:
            records = None
            notes.append(f"{err}; run recprep verify")
            continue
        if records is not None:
            records += count
        formats.add(facts.get("format", UNKNOWN))
        if "compressor" in facts:
            compressors.add(facts["compressor"])
    return _part(found, DatasetInfo(
        path=display(fs, found.label),
        prefix=found.prefix or "",
        num_shards=len(found.shards) + len(found.missing),
        shards_present=len(found.shards),
        records=records,
        bytes=sum(found.sizes.values()),
        format=",".join(sorted(formats)) or UNKNOWN,
        codec=UNKNOWN,
        compressor=",".join(sorted(compressors)) or UNKNOWN,
        source="chunk headers",
        notes=notes,
    ), set_shards=_shards_by_name(found))


def _shards_by_name(found: FoundSet) -> int:
    """How many shards the set has by its shards' names (``-of-`` the last index)."""
    parsed = parse_shard_name(posixpath.basename(found.shards[0])) if found.shards else None
    return 0 if parsed is None else parsed.last + 1


def _part(found: FoundSet, info: DatasetInfo, set_shards: int) -> DatasetInfo:
    """``info`` of the shards a path named, when it named part of the set only."""
    if found.whole:
        if found.missing and found.manifest_path is None:
            info.notes.append(
                f"{len(found.missing)} of its {set_shards} shards missing and no manifest: "
                "some shards of a set (a partial copy?), not a committed set; readers "
                "refuse it by directory or glob and read its files named one by one")
        elif found.missing:
            info.notes.append(f"{len(found.missing)} shard(s) missing; run recprep verify")
        return info
    info.set_shards = set_shards
    named = len(found.shards)
    which = (f"one shard ({posixpath.basename(found.shards[0])})" if named == 1 else
             f"{named}")
    info.notes.append(
        f"the path names {which} of the set's {set_shards} shards: the facts are "
        f"{'that shard' if named == 1 else 'those shards'}'{'s' if named == 1 else ''}; "
        f"`recprep ls {info.path}` "
        "shows the whole set"
    )
    return info


def _describe_set(fs: Any, found: FoundSet) -> DatasetInfo:
    manifest = found.manifest
    if manifest is None:
        info = _from_headers(fs, found)
        if found.manifest_error is not None:
            info.notes.insert(0, str(found.manifest_error))
        elif found.prefix is not None and (
                journal := pending_journal(fs, found.directory, found.prefix)):
            info.notes.insert(0, uncommitted(info.path, display(fs, journal)))
        return info
    entries = {posixpath.join(found.directory, s.name): s for s in manifest.shards}
    named = [entries[p] for p in found.shards if p in entries]
    if found.whole:
        shards, records, size = manifest.num_shards, manifest.num_records, (
            manifest.total_bytes)
    else:  # the shards named: the manifest's facts of those
        shards = len(found.shards)
        records = sum(s.records for s in named)
        size = sum(s.bytes for s in named) + sum(
            found.sizes[p] for p in found.shards if p not in entries)
    info = DatasetInfo(
        path=display(fs, found.label),
        prefix=manifest.name_prefix,
        num_shards=shards,
        shards_present=len(found.shards),
        records=records if len(named) == len(found.shards) else None,
        bytes=size,
        format=manifest.format,
        codec=manifest.codec,
        compressor=manifest.compressor,
        source="manifest",
    )
    if found.unexpected:
        info.notes.append(f"{len(found.unexpected)} shard(s) its manifest doesn't list; run "
                          "recprep verify")
    return _part(found, info, manifest.num_shards)


@checked
def list_datasets(
    path: str | Sequence[str], *, storage_options: Mapping[str, Any] | None = None
) -> list[DatasetInfo]:
    """The shard sets in a directory (or named by a glob or ``dir/prefix``), described.

    Parameters
    ----------
    path
        A directory, glob or ``dir/prefix``, or shards (or a list of them); a local path
        or an fsspec URL. Paths that name files of one set (the files an unquoted glob
        expands to) describe that set once.
    storage_options
        Passed to fsspec.

    Returns
    -------
    list of DatasetInfo
        One per set, in path order.

    Examples
    --------
    >>> from recprep import convert
    >>> _ = convert("memory://doc/ls", list(range(10)), 4, "a", compressor="gzip")
    >>> d = list_datasets("memory://doc/ls")[0]
    >>> d.num_shards, d.records, d.compressor, d.source
    (4, 10, 'gzip', 'manifest')
    >>> from recprep.storage import resolve
    >>> fs, _ = resolve("memory://doc/ls")
    >>> fs.rm("/doc/ls/a.manifest.json")
    >>> d = list_datasets("memory://doc/ls")[0]
    >>> d.records, d.format, d.codec, d.compressor, d.source
    (10, 'recordio', 'unknown', 'gzip', 'chunk headers')
    """
    patterns = [path] if isinstance(path, str) else list(path)
    named = [resolve(pattern, storage_options) for pattern in patterns]
    return [_describe_set(fs, found) for fs, found in find_all(named, lone_files=False)]


@checked
def head(
    path: str | Sequence[str],
    n: int = 5,
    *,
    allow_pickle: bool = False,
    codec: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **reader_options: Any,
) -> list[Any]:
    """The first ``n`` instances that ``RecordIO(path)`` yields; ``reader_options``
    (``format=``, ``on_corrupt=``, ``max_chunk_bytes=``...) go to the reader.

    Examples
    --------
    >>> from recprep import convert
    >>> _ = convert("memory://doc/head", [(i, str(i)) for i in range(9)], 3, "h")
    >>> head("memory://doc/head", 4)
    [(0, '0'), (1, '1'), (2, '2'), (3, '3')]
    """
    from ..read.reader import RecordIO

    if not isinstance(n, int) or n < 0:
        raise InvalidArgumentError(f"n must be a non-negative int, got {n!r}")
    reader = RecordIO(
        path, codec=codec, allow_pickle=allow_pickle, storage_options=storage_options,
        **reader_options,
    )
    return list(islice(reader(), n))


_BIG_INT_BITS = 4000  # ~1200 decimal digits: longer ints are shown by size and in hex
_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60


@checked
def render_value(value: Any, *, preview: int = 6) -> str:
    """One line describing ``value``: arrays by dtype, shape and their first items.

    Examples
    --------
    >>> import numpy as np
    >>> render_value(np.zeros((2, 3), np.float32))
    'ndarray float32 (2, 3) [0., 0., 0., 0., 0., 0.]'
    >>> render_value(np.arange(100))
    'ndarray int64 (100,) [0, 1, 2, 3, 4, 5, ...]'
    >>> render_value((b"\\x00" * 40, "txt", np.float16(1.5), {"k": [1, 2]}))
    "(bytes[40] b'\\\\x00\\\\x00\\\\x00\\\\x00\\\\x00\\\\x00\\\\x00\\\\x00'..., str 'txt', \
float16 1.5, {'k': [int 1, int 2]})"
    """
    if isinstance(value, np.ndarray):
        flat = value.reshape(-1)[:preview]
        items = np.array2string(flat, separator=", ", threshold=preview + 1, precision=4)
        if value.size > preview:
            items = items[:-1] + ", ...]"
        return f"ndarray {value.dtype} {value.shape} {items}"
    if isinstance(value, np.generic):
        return f"{value.dtype} {value.item()!r}"
    if isinstance(value, tuple):
        inner = ", ".join(render_value(v, preview=preview) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, list):
        shown = ", ".join(render_value(v, preview=preview) for v in value[:preview])
        more = f", ... ({len(value) - preview} more)" if len(value) > preview else ""
        return f"[{shown}{more}]"
    if isinstance(value, dict):
        pairs = list(value.items())
        shown = ", ".join(f"{k!r}: {render_value(v, preview=preview)}" for k, v in pairs[:preview])
        more = f", ... ({len(pairs) - preview} more)" if len(pairs) > preview else ""
        return "{" + shown + more + "}"
    if isinstance(value, (bytes, bytearray)):
        cut = bytes(value[:8])
        return f"{type(value).__name__}[{len(value)}] {cut!r}{'...' if len(value) > 8 else ''}"
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int) and value.bit_length() > _BIG_INT_BITS:
        # repr() refuses ints of more than 4300 digits (sys.set_int_max_str_digits)
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{type(value).__name__} of about {digits} digits {hex(value)[:18]}..."
    return f"{type(value).__name__} {_REPR.repr(value)}"
