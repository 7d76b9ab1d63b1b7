"""A block's records laid out shard by shard in one buffer, framed as their chunks hold them.

The write loop sends instance ``j`` to file ``j % files``. For a block of rows a codec
made at once (a :class:`~recprep.codecs.blocks.RecordBlock` that is ``laid_out``), and a
format whose chunks hold records back to back
(:attr:`~recprep.containers.base.Format.record_framing`), :class:`BlockLayout` places the
records into one buffer in file order — file 0's records of the block, then file 1's,
… — each with room for its framing, which the format fills
(:meth:`~recprep.containers.base.Format.frame_records`). Each file's records are then
one run of that buffer, which its writer takes as its chunks' payload
(:meth:`~recprep.containers.base.RecordWriter.write_framed`): no record is ever a
``bytes`` of its own. The files get the same bytes as writing each record.

>>> from recprep.codecs.blocks import RecordList
>>> from recprep.containers import get_format
>>> layout = BlockLayout(RecordList([b"a", b"bb", b"", b"c"]), 5, 3, get_format("recordio"))
>>> bytes(layout.buffer)  # instances 5, 6, 7, 8 to files 2, 0, 1, 2
b'\\x02\\x00\\x00\\x00bb\\x00\\x00\\x00\\x00\\x01\\x00\\x00\\x00a\\x01\\x00\\x00\\x00c'
>>> layout.runs(5, 9)  # (file, records of the block in layout order): files 0, 1, 2
[(0, 0, 1), (1, 1, 2), (2, 2, 4)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..codecs.blocks import RecordBlock
    from ..containers import Format

__all__ = ["BlockLayout"]


class BlockLayout:
    """The records of ``block`` (instances ``first``, ``first + 1``, ...) laid out for
    ``files`` files round-robin in one ``buffer`` (see the module docs): in layout order,
    record ``p`` is instance ``first + rows[p]`` at ``starts[p]``, ``lengths[p]`` bytes."""

    def __init__(self, block: RecordBlock, first: int, files: int, fmt: Format) -> None:
        framing = fmt.record_framing
        assert framing is not None
        before, after = framing
        n = block.n
        self.first, self.files = first, files
        off = first % files
        per_file = -(-(n + off) // files)
        # row i of the block goes to file (off + i) % files: column c of this grid
        grid = (np.arange(per_file * files, dtype=np.int64) - off).reshape(per_file, files).T
        kept = (grid >= 0) & (grid < n)
        self.rows = rows = grid[kept]  # file 0's rows, then file 1's...
        counts = kept.sum(axis=1)
        self.begins = np.concatenate(([0], np.cumsum(counts)))  # file c: begins[c]:[c + 1]
        #: the block row of each file's first record (it may have none in the block)
        self.first_rows = (np.arange(files) - off) % files
        lengths = block.lengths()
        self.lengths = lengths[rows]
        ends = np.cumsum(self.lengths + (before + after))
        self.starts = ends - self.lengths - after
        self.buffer = np.empty(int(ends[-1]) if n else 0, np.uint8)
        placed = np.empty(n, np.int64)
        placed[rows] = self.starts
        block.place(self.buffer, placed)
        fmt.frame_records(self.buffer, placed, lengths)

    def runs(self, start: int, stop: int) -> list[tuple[int, int, int]]:
        """For instances ``start:stop`` (within the block), each file that gets some:
        ``(file, p, q)``, its records being ``p:q`` in layout order."""
        a, b = start - self.first, stop - self.first
        files = self.files
        out = []
        for file, (row, begin, end) in enumerate(zip(
                self.first_rows.tolist(), self.begins[:-1].tolist(), self.begins[1:].tolist(),
                strict=True)):
            p = begin + max(0, -(-(a - row) // files))
            q = min(end, begin + max(0, -(-(b - row) // files)))
            if q > p:
                out.append((file, p, q))
        return out

    def instance(self, p: int) -> int:
        """The instance index of the record at ``p`` in layout order."""
        return self.first + int(self.rows[p])
