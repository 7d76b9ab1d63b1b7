"""A manifest's shard list read as :meth:`~recprep.storage.manifest.Manifest.to_json`
writes it, entry by entry from the file's bytes: no JSON object per entry (at 100,000
shards ``json``'s parse holds some 40 MB of dicts at once, which the allocator keeps once
they are freed, in the trainer and in every worker forked from it).

:func:`cut_shard_list` cuts the list out of a manifest's bytes and puts in its place a
string no file can foresee: the rest is parsed by ``json``, and the list is the
document's only when that string is the document's ``shards`` (the last key so named, as
``json`` takes). :meth:`ShardListText.table` reads the entries, each as ``json`` would
(names and ETags of characters a JSON string holds as they are, ``\\"`` and ``\\\\``
aside; ints of at most 19 digits), and checks them as
:func:`~recprep.storage.manifest.Manifest.from_json` does; anything else raises
``ValueError``, and the manifest is parsed the careful way, which says what is wrong.

Example
-------
>>> data = (b'{\\n  "name_prefix": "p",\\n  "shards": [\\n    {\\n      "name": '
...         b'"p-00000-of-00000",\\n      "records": 3,\\n      "bytes": 60,\\n      "crc32c": '
...         b'"0000000a"\\n    }\\n  ],\\n  "schema": {}\\n}\\n')
>>> rest, token, listed = cut_shard_list(data)
>>> import json; json.loads(rest)["shards"] == token
True
>>> list(listed.table("p", lambda size: size, lambda etag: True))
[ShardInfo(name='p-00000-of-00000', records=3, bytes=60, crc32c=10, etag=None)]
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from typing import Any

import numpy as np

from .shardtable import SetPaths, ShardTable

__all__ = ["ShardListText", "cut_shard_list"]

#: a shard entry as ``to_json`` writes it
_SHARD_ENTRY = re.compile(
    rb'\n    \{\n      "name": "([ !#-\[\]-~]{1,1024})",\n      "records": (0|[1-9][0-9]{0,18}),'
    rb'\n      "bytes": (0|[1-9][0-9]{0,18}),\n      "crc32c": "([0-9a-fA-F]{8})"'
    rb'(?:,\n      "etag": "((?:[ !#-\[\]-~]|\\["\\])*)")?\n    \}(,?)')
_JSON_ESCAPE = re.compile(rb'\\(["\\])')
_LIST_START = b'\n  "shards": [\n    {'
_LIMIT = 1 << 63
#: sizes below this are scaled by any compressor's expansion (at most 1032) in ``int64``
_EXACT = 1 << 52


class ShardListText:
    """The ``count`` entries of a shard list, ``data[start:end]``."""

    __slots__ = ("count", "data", "end", "start")

    def __init__(self, data: bytes, start: int, end: int, count: int) -> None:
        self.data, self.start, self.end, self.count = data, start, end, count

    def table(self, prefix: str, most_records: Callable[[int], int],
              etag_ok: Callable[[str], Any]) -> ShardTable:
        """The entries as a :class:`~.shardtable.ShardTable`, each checked: its name the
        prefix's shard name, its ints below 2**63 and its records no more than
        ``most_records`` of its bytes (asked of all the sizes at once, as an array), its
        ETag (if any) ``etag_ok``; ``ValueError`` if an entry isn't, or isn't laid out as
        written."""
        count = self.count
        most_records(0)  # (a format's first use may import it: done before the arrays)
        records = np.empty(count, dtype=np.int64)
        sizes = np.empty(count, dtype=np.int64)
        crcs = np.empty(count, dtype=np.uint32)
        etags: list[str | None] = [None] * count
        pos, match, names = self.start, _SHARD_ENTRY.match, SetPaths("", prefix, count)
        for index in range(count):
            found = match(self.data, pos)
            if found is None or found[1] != names.name(index).encode() or (
                    found[6] != (b"," if index + 1 < count else b"")):
                raise ValueError(f"shards[{index}] is not laid out as written")
            held, size = int(found[2]), int(found[3])
            etag = None if found[5] is None else _JSON_ESCAPE.sub(rb"\1", found[5]).decode()
            if size >= _LIMIT or held >= _LIMIT or (etag is not None and not etag_ok(etag)):
                raise ValueError(f"shards[{index}] is refused")
            records[index], sizes[index], crcs[index] = held, size, int(found[4], 16)
            etags[index] = etag
            pos = found.end()
        if pos != self.end:
            raise ValueError("the shard list goes on")
        if count and int(sizes.max()) < _EXACT:  # 4096 at once, without overflow
            for at in range(0, count, 4096):
                most = most_records(sizes[at:at + 4096])  # type: ignore[arg-type]
                if bool((records[at:at + 4096] > most).any()):
                    raise ValueError("a shard claims more records than its bytes can hold")
        elif any(r > most_records(s) for r, s in zip(records.tolist(), sizes.tolist(),
                                                       strict=True)):
            raise ValueError("a shard claims more records than its bytes can hold")
        return ShardTable(prefix, records, sizes, crcs, etags)


def cut_shard_list(data: bytes) -> tuple[bytes, str, ShardListText] | None:
    """``(rest, token, listed)``: ``data`` with its last list laid out as a shard list
    at the top level's indentation replaced by the JSON string ``token``, and that
    list; None when there is none."""
    start = data.rfind(_LIST_START)
    if start < 0:
        return None
    start += len(_LIST_START) - 6  # the newline before the first entry
    end = data.find(b"\n  ]", start)
    if end < 0:
        return None
    token = f"recprep-shards-{secrets.token_hex(16)}"
    rest = data[:start - 1] + json.dumps(token).encode() + data[end + 4:]
    return rest, token, ShardListText(data, start, end, data.count(b"\n    {", start, end))
