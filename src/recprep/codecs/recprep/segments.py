"""Records of a block of rows, built from per-row pieces with numpy (no per-row call).

A codec that encodes columns (:meth:`~recprep.codecs.base.Codec.encode_columns`) says
what every record of the block is made of, in order, as *segments*:

* ``const`` — the same bytes in every record (a format byte, a tag, a key);
* ``fixed`` — an ``(n, w)`` uint8 matrix: row ``i`` is record ``i``'s ``w`` bytes;
* ``ragged`` — ``(lengths, data)``: record ``i``'s piece is the next ``lengths[i]`` bytes
  of ``data`` (str/bytes values, or pieces of mixed sizes).

:meth:`Segments.records` lays the records out in one buffer — in rows of a padded matrix
when the records' lengths are close (each ``fixed`` run a strided copy; after a ragged
piece, one copy per distinct shift), else back to back — and cuts them into ``bytes``.
:meth:`Segments.place` writes them where a writer says instead (a
:class:`~recprep.codecs.blocks.RecordBlock`: records laid out in a chunk's payload, room
for their framing left between them): each run of ``const`` and ``fixed`` parts is one
item per record (a ``{width}``-byte void item at every byte of the buffer, so the run
lands wherever the record is), each ragged piece a gather.

>>> seg = Segments(3)
>>> seg.const(b"<")
>>> seg.ragged(np.array([1, 0, 2]), np.frombuffer(b"abc", np.uint8))
>>> seg.fixed(np.frombuffer(b"123", np.uint8).reshape(3, 1))
>>> seg.records()
[b'<a1', b'<2', b'<bc3']
>>> buffer = np.zeros(12, np.uint8)
>>> seg.place(buffer, np.array([0, 4, 8]))
>>> buffer.tobytes()
b'<a1\\x00<2\\x00\\x00<bc3'
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..blocks import RecordBlock

__all__ = ["Segments", "merge_rows", "ragged_of"]

_SHIFT_GROUPS = 32  # a fixed run after ragged pieces: one copy per shift, up to this many
_PAD_SLACK = 2  # a padded layout may take this many times the bytes of the records


class Segments(RecordBlock):
    """The pieces of ``n`` records, in order (see the module docs)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.parts: list[tuple[str, Any]] = []
        self._laid: tuple[int, list[tuple[str, Any]], np.ndarray] | None = None

    def const(self, data: bytes) -> None:
        if data:
            self.parts.append(("const", bytes(data)))

    def fixed(self, matrix: np.ndarray) -> None:
        """``matrix``: ``(n, w)`` uint8 (any strides)."""
        if matrix.shape[1]:
            self.parts.append(("fixed", matrix))

    def ragged(self, lengths: np.ndarray, data: np.ndarray) -> None:
        """``lengths``: ``n`` ints; ``data``: their ``sum`` uint8 bytes, back to back."""
        self.parts.append(("ragged", (np.asarray(lengths, np.int64), data)))

    def extend(self, other: Segments) -> None:
        self.parts.extend(other.parts)

    def _runs(self) -> list[tuple[str, Any]]:
        """Consecutive const and fixed parts as one ``(n, w)`` matrix each."""
        runs: list[tuple[str, Any]] = []
        pending: list[tuple[str, Any]] = []

        def flush() -> None:
            if not pending:
                return
            # the const parts as one row (zeros where fixed parts go), copied to every row
            # at once, then each fixed part one item a row (a void of its width)
            template = b"".join(p if kind == "const" else bytes(p.shape[1])
                                for kind, p in pending)
            width = len(template)
            matrix = np.empty((self.n, width), np.uint8)
            matrix.view(f"V{width}")[...] = np.frombuffer(template, f"V{width}")
            at = 0
            for kind, p in pending:
                if kind == "const":
                    at += len(p)
                    continue
                w = p.shape[1]
                source = (p if p.strides[1] == 1 else np.ascontiguousarray(p)).view(f"V{w}")
                matrix[:, at : at + w].view(f"V{w}")[...] = source
                at += w
            runs.append(("fixed", matrix))
            pending.clear()

        for part in self.parts:
            if part[0] == "ragged":
                flush()
                runs.append(part)
            else:
                pending.append(part)
        flush()
        return runs

    def _runs_and_lengths(self) -> tuple[list[tuple[str, Any]], np.ndarray]:
        """:meth:`_runs` and each record's length, made once (until parts are added)."""
        if self._laid is None or self._laid[0] != len(self.parts):
            runs = self._runs()
            lengths = np.zeros(self.n, np.int64)
            for kind, part in runs:
                lengths += part.shape[1] if kind == "fixed" else part[0]
            self._laid = (len(self.parts), runs, lengths)
        return self._laid[1], self._laid[2]

    def lengths(self) -> np.ndarray:
        return self._runs_and_lengths()[1]

    def place(self, buffer: np.ndarray, starts: np.ndarray) -> None:
        if not self.n:
            return
        runs, _ = self._runs_and_lengths()
        pos = np.array(starts, np.int64)  # where each record's next piece goes
        for kind, part in runs:
            if kind == "fixed":
                width = part.shape[1]
                window = np.ndarray((len(buffer) - width + 1,), f"V{width}", buffer, 0, (1,))
                window[pos] = part.view(f"V{width}")[:, 0]  # (a run's matrix is C-ordered)
                pos += width
            else:
                sizes, data = part
                _place_ragged(buffer, pos, sizes, data)
                pos += sizes

    def layout(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(buffer, starts, lengths)``: record ``i`` is ``buffer[starts[i]:][:lengths[i]]``."""
        n = self.n
        runs, lengths = self._runs_and_lengths()
        total = int(lengths.sum())
        width = int(lengths.max()) if n else 0
        if n * width <= _PAD_SLACK * total + 4096:
            base = np.arange(n, dtype=np.int64) * width
            out = np.empty(n * width, np.uint8)
            padded = out.reshape(n, width)
        else:
            base = np.cumsum(lengths) - lengths
            out = np.empty(total, np.uint8)
            padded = None
        pos = np.zeros(n, np.int64)  # where the next piece goes, within each record
        uniform = True
        for kind, part in runs:
            if kind == "fixed":
                _place_fixed(out, padded, base, pos, uniform, part)
                pos += part.shape[1]
            else:
                sizes, data = part
                _place_ragged(out, base + pos, sizes, data)
                pos += sizes
                uniform = not n or bool((pos == pos[0]).all())
        return out, base, lengths

    def records(self) -> list[bytes]:
        """The ``n`` records, each a ``bytes``: cut out of the layout by one
        ``struct.unpack_from`` (a ``{length}s`` and a ``{gap}x`` code a record, the codes
        of each length and gap made once), with no Python call per record."""
        out, starts, lengths = self.layout()
        if not len(lengths):
            return []
        ends = starts + lengths
        gaps = np.append(starts[1:], ends[-1]) - ends  # bytes from one record to the next
        span = int(gaps.max()) + 1
        keys = (lengths * span + gaps).tolist()  # one int per (length, gap)
        codes = {key: _codes(*divmod(key, span)) for key in set(keys)}
        return list(struct.unpack_from("=" + "".join(map(codes.__getitem__, keys)),
                                       out.data, int(starts[0])))


def _codes(length: int, gap: int) -> str:
    """The ``struct`` codes of a record of ``length`` bytes, then ``gap`` skipped."""
    return f"{length}s{gap}x" if gap else f"{length}s"


def _place_fixed(out: np.ndarray, padded: np.ndarray | None, base: np.ndarray,
                 pos: np.ndarray, uniform: bool, matrix: np.ndarray) -> None:
    width = matrix.shape[1]
    if padded is not None:
        if uniform:  # every record has the same bytes before this run
            at = int(pos[0]) if len(pos) else 0
            padded[:, at : at + width] = matrix
            return
        shifts = np.unique(pos)
        if len(shifts) <= _SHIFT_GROUPS:
            for at in shifts.tolist():
                rows = pos == at
                padded[rows, at : at + width] = matrix[rows]
            return
    out[((base + pos)[:, None] + np.arange(width)).reshape(-1)] = matrix.reshape(-1)


def _place_ragged(out: np.ndarray, dest: np.ndarray, sizes: np.ndarray,
                  data: np.ndarray) -> None:
    total = len(data)
    if not total:
        return
    src = np.cumsum(sizes) - sizes
    out[np.repeat(dest - src, sizes) + np.arange(total)] = data


def ragged_of(segments: Segments) -> tuple[np.ndarray, np.ndarray]:
    """The records ``segments`` make, as ``(lengths, data)`` (a ragged piece)."""
    out, starts, lengths = segments.layout()
    if not len(lengths):
        return lengths, out[:0]
    if len(out) == int(lengths.sum()):
        return lengths, out  # back to back already
    return lengths, out[np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
                        + np.arange(int(lengths.sum()))]


def merge_rows(n: int, groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
               ) -> tuple[np.ndarray, np.ndarray]:
    """One ragged piece of ``n`` rows from ``groups`` of ``(rows, lengths, data)`` that
    together cover every row once (each group's rows ascending)."""
    lengths = np.zeros(n, np.int64)
    src = np.zeros(n, np.int64)  # where each row's piece starts in the joined data
    joined = []
    offset = 0
    for rows, sizes, data in groups:
        lengths[rows] = sizes
        src[rows] = offset + np.cumsum(sizes) - sizes
        joined.append(data)
        offset += len(data)
    data = np.concatenate(joined) if joined else np.empty(0, np.uint8)
    dest = np.cumsum(lengths) - lengths
    return lengths, data[np.repeat(src - dest, lengths) + np.arange(offset)]
