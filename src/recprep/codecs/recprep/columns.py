"""A whole chunk of ``"recprep"`` records decoded at once into columns (numpy, no per-record call).

The chunk's first record is walked into a layout (:mod:`~recprep.codecs.recprep.layout`),
unless one of the layouts used last fits. Every record of the chunk is then checked
against the layout at once — shared bytes equal, ``True``/``False`` tags valid, sizes
within the record, nothing left over — and the values are cut out as strided views of the
joined records. A layout that every record passes decodes each one exactly as
:meth:`RecprepCodec.decode` would, so anything else (mixed layouts, damage, pickles, named
tuples, lists, sets, 0-d or empty arrays, non-UTF-8 strings) gives ``None``: the caller
decodes record by record, which raises where it should.

>>> from recprep.codecs.recprep import RecprepCodec
>>> codec = RecprepCodec()
>>> records = [codec.encode((i, float(i), "w" * i)) for i in range(5)]
>>> recprep_decode_columns(records, codec.decode).tree
(array([0, 1, 2, 3, 4]), array([0., 1., 2., 3., 4.]), array(['', 'w', 'ww', 'www', \
'wwww'], dtype=object))
>>> mixed = [codec.encode((1, 2)), codec.encode((1, "2"))]
>>> recprep_decode_columns(mixed, codec.decode) is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._core.batching import Columns
from ..._core.native import kernels
from ..._core.records import PayloadBuffer, Records
from .layout import Layout, layout_of, layout_program, layout_segments
from .wire import FORMAT_TAG, T_FALSE, T_TRUE

__all__ = ["LAYOUT_MIN_RECORDS", "recprep_decode_columns", "recprep_decode_rows"]

LAYOUT_MIN_RECORDS = 4  # fewer: decoding them one by one costs less than a layout check

#: makes a column of the ``n`` str (``is_str``) or bytes values at ``pos`` of ``size`` bytes
#: of a chunk's payload ``u8``, or None if one isn't valid
Strings = Callable[[np.ndarray, np.ndarray, np.ndarray, bool, int], Any]

#: the layouts used last (most recent first), tried before walking a chunk's first record
_RECENT_LAYOUTS: list[Layout] = []
LAYOUTS_KEPT = 2


def _stacked(dt: np.dtype) -> np.dtype:
    """The dtype ``np.stack`` gives arrays of ``dt`` (non-native byte order: native)."""
    return np.stack([np.zeros(1, dt)]).dtype


def recprep_decode_columns(records: Sequence[Any], decode: Callable[[bytes], Any]
                           ) -> Columns | None:
    """The records' values as columns, or None where they don't share one layout.

    ``decode`` (the ``"recprep"`` codec's) decodes one record, the first, to learn its
    layout.
    """
    found = _columns_and_layout(records, decode)
    return None if found is None else found[0]


def _columns_and_layout(records: Sequence[Any], decode: Callable[[bytes], Any],
                        strings: Strings | None = None) -> tuple[Columns, Layout] | None:
    """The records' columns and their layout; ``strings`` makes a column of str or bytes
    values (default: an object array of them)."""
    strings = strings or _string_column
    n = len(records)
    if n < LAYOUT_MIN_RECORDS:
        return None
    first = bytes(records[0])
    if not first or first[0] != FORMAT_TAG:
        return None
    if isinstance(records, Records):  # spans of the chunk's payload: nothing is copied
        buf, starts, ends = records.payload, records.starts, records.ends
    else:
        buf = b"".join(records)
        lens = np.fromiter(map(len, records), np.int64, n)
        ends = np.cumsum(lens)
        starts = ends - lens
    for recent in list(_RECENT_LAYOUTS):  # a layout every record passes decodes them all
        cols = _cut_columns(recent, buf, starts, ends, n, strings)
        if cols is not None:
            return cols, recent
    try:
        value = decode(first)
    except Exception:
        return None
    lay = layout_of(first, value)
    if lay is None:
        return None
    _RECENT_LAYOUTS.insert(0, lay)
    del _RECENT_LAYOUTS[LAYOUTS_KEPT:]
    cols = _cut_columns(lay, buf, starts, ends, n, strings)
    return None if cols is None else (cols, lay)


#: leaf kinds whose column gives back the decoded values themselves (``tolist``)
_ROW_KINDS = frozenset({"int", "float", "complex", "bool", "str", "bytes", "none"})


def _rowwise(kind: Any) -> bool:
    """Whether a leaf of this kind gives, row by row, what ``decode`` gives: Python
    values, numpy scalars, and arrays in C order and the machine's byte order (each row
    copied into an array of its own)."""
    if type(kind) is not tuple:
        return kind in _ROW_KINDS
    if kind[0] == "np":
        return True
    return kind[3] == 0 and np.dtype(kind[1]).isnative  # ("nd", dtype, shape, order)


def recprep_decode_rows(records: Sequence[Any], decode: Callable[[bytes], Any]
                        ) -> list[Any] | None:
    """The records' values — exactly what ``decode`` gives for each — made from their
    columns, or None unless they share one layout of numbers, strings, bytes, ``None``,
    numpy scalars and arrays (C order, native byte order: each row is copied into an
    array of its own, as ``decode`` makes it).

    >>> from recprep.codecs.recprep import RecprepCodec
    >>> codec = RecprepCodec()
    >>> records = [codec.encode({"i": i, "s": "ab"[:i]}) for i in range(4)]
    >>> recprep_decode_rows(records, codec.decode)
    [{'i': 0, 's': ''}, {'i': 1, 's': 'a'}, {'i': 2, 's': 'ab'}, {'i': 3, 's': 'ab'}]
    """
    found = _columns_and_layout(records, decode)
    if found is None:
        return None
    cols, lay = found
    if lay.rowwise is None:
        lay.rowwise = all(map(_rowwise, lay.kinds))
    if not lay.rowwise:
        return None
    return _rows(cols.tree, lay.template, lay.kinds)


def _rows(tree: Any, template: Any, kinds: list[Any]) -> list[Any]:
    """The values of a column tree, one per record (numpy scalars stay numpy, array rows
    are copied out)."""
    if template[0] == "leaf":
        if isinstance(tree, list):
            return tree
        kind = kinds[template[1]]
        if type(kind) is not tuple:
            return tree.tolist()
        return list(tree) if kind[0] == "np" else list(map(np.array, tree))
    if template[0] == "tuple":
        rows = (_rows(t, c, kinds) for t, c in zip(tree, template[1], strict=True))
        return list(zip(*rows, strict=False))  # equal lengths: one row per record
    names = template[1]
    columns = [_rows(tree[k], t, kinds) for k, t in zip(names, template[2], strict=True)]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=False)]


def _cut_columns(lay: Layout, buf: PayloadBuffer, starts: np.ndarray, ends: np.ndarray, n: int,
                 strings: Strings) -> Columns | None:
    """The columns of the ``n`` records ``buf[starts[i]:ends[i]]`` if all pass ``lay``."""
    u8 = np.frombuffer(buf, np.uint8)
    native = kernels()
    if native is not None:  # big records alike: a strided view of them (nothing copied)
        rows = _evenly_spaced(u8, starts, ends, n) if ends[0] - starts[0] >= 256 else None
        return _cut_walked(native, lay, buf, starts, ends, rows, strings)
    rows = _evenly_spaced(u8, starts, ends, n)
    off = 0
    extra: np.ndarray | None = None  # per record, what sized values moved the cursor
    leaves: list[Any] = [None] * lay.slots
    lengths: list[Any] = [None] * lay.lslots

    def take(size: int) -> np.ndarray | None:
        """The next ``size`` bytes of every record, one row each."""
        if rows is not None and extra is None:
            return rows[:, off : off + size] if off + size <= rows.shape[1] else None
        pos = starts + off if extra is None else starts + off + extra
        if not (pos + size <= ends).all():
            return None
        return _gathered(buf, pos, size)

    for size, consts, ops, data in layout_segments(lay):
        if size:
            got = take(size)
            if got is None or not _shared_bytes_hold(got, consts):
                return None
            if not _cut_fixed(got, ops, leaves, lengths, n):
                return None
            off += size
        else:
            for op, _ in ops:  # only Nones: no bytes of their own
                leaves[op[1]] = [None] * n
        if data is None:
            break
        _, slot, lslot, is_str = data
        sizes = lengths[lslot]
        pos = starts + off if extra is None else starts + off + extra
        if not (pos + sizes <= ends).all():
            return None
        leaves[slot] = strings(u8, pos, sizes, is_str, n)
        if leaves[slot] is None:
            return None
        extra = sizes if extra is None else extra + sizes
    final = starts + off if extra is None else starts + off + extra
    if not (final == ends).all():
        return None
    return Columns(_filled(lay.template, leaves), n, lay.signature)


def _evenly_spaced(u8: np.ndarray, starts: np.ndarray, ends: np.ndarray, n: int
                   ) -> np.ndarray | None:
    """The records as the rows of one strided view of ``u8`` (nothing copied), if they
    are all as long and evenly spaced; else None."""
    first, width = int(starts[0]), int(ends[0] - starts[0])
    native = kernels()
    if native is not None and _int64s(starts) and _int64s(ends):
        stride = native.evenly_spaced(starts, ends)  # one pass, where numpy takes 6 calls
    else:
        stride = _even_stride(starts, ends, first, width, n)
    if stride < 0:
        return None
    view = np.ndarray((n, width), np.uint8, u8, first, (stride, 1))
    view.flags.writeable = False
    return view


def _even_stride(starts: np.ndarray, ends: np.ndarray, first: int, width: int, n: int
                 ) -> int:
    """The stride of records all ``width`` long and evenly spaced from ``first``; -1
    if they aren't."""
    stride = int(starts[1]) - first if n > 1 else width
    if stride < width or int(starts[-1]) != first + (n - 1) * stride:
        return -1  # not evenly spaced (checked whole below, when the ends say so)
    if not (bool((ends - starts == width).all())
            and bool((starts[1:] - starts[:-1] == stride).all())):
        return -1
    return stride


def _int64s(a: np.ndarray) -> bool:
    return a.dtype == np.int64 and a.flags.c_contiguous


def _cut_walked(native: Any, lay: Layout, buf: PayloadBuffer, starts: np.ndarray,
                ends: np.ndarray, rows: np.ndarray | None, strings: Strings
                ) -> Columns | None:
    """:func:`_cut_columns` with the records checked against the layout in C
    (``walk_layout``: shared bytes, sizes, nothing left over), which finds where each
    segment of each record begins; each value is then copied out by ``gather_items``
    into a column of its own, or (the first segment of records all alike) cut from a
    strided view of them, and each str/bytes value by ``gather_spans``."""
    n = len(starts)
    segments = layout_segments(lay)
    program, consts = layout_program(lay)
    at = np.empty((len(segments), n), np.int64)
    starts, ends = np.ascontiguousarray(starts), np.ascontiguousarray(ends)  # (int64)
    if not native.walk_layout(buf, starts, ends, program, consts, at):
        return None
    leaves: list[Any] = [None] * lay.slots
    lengths: list[Any] = [None] * lay.lslots
    for k, (size, _, ops, data) in enumerate(segments):
        if k == 0 and rows is not None:
            if not _cut_fixed(rows[:, :size], ops, leaves, lengths, n):
                return None
        else:
            for op, offset in ops:
                got = np.empty((n, _OP_BYTES.get(op[0], op[2] if op[0] == "fixed" else 0)),
                               np.uint8)
                if got.shape[1]:
                    native.gather_items(buf, at[k], offset, got)
                if not _cut_fixed(got, [(op, 0)], leaves, lengths, n):
                    return None
        if data is None:
            break
        _, slot, lslot, is_str = data
        leaves[slot] = strings(np.frombuffer(buf, np.uint8), at[k] + size, lengths[lslot],
                               is_str, n)
        if leaves[slot] is None:
            return None
    return Columns(_filled(lay.template, leaves), n, lay.signature)


#: the bytes of a layout operation's value in a record (a "fixed" one: its own size)
_OP_BYTES = {"tagbool": 1, "len": 4, "none": 0}


def _gathered(buf: PayloadBuffer, pos: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` bytes at each of ``pos`` in ``buf``, a row each (C order): one gather
    of ``size``-byte items (numpy copies an item at a time, a fraction of gathering rows
    of a strided view byte by byte)."""
    if not size:
        return np.empty((len(pos), 0), np.uint8)
    items = np.ndarray((len(buf) - size + 1,), f"V{size}", buf, 0, (1,))
    return items[pos].view(np.uint8).reshape(len(pos), size)


#: the widest unsigned words (bytes, dtype) a run of shared bytes is compared in
_WORDS = ((8, "<u8"), (4, "<u4"), (2, "<u2"), (1, "u1"))
_WORDS_MIN_ROWS = 512  # fewer rows: a numpy call per word costs more than it saves


def _shared_bytes_hold(got: np.ndarray, consts: list[tuple[int, np.ndarray]]) -> bool:
    """Whether every row of ``got`` holds the bytes ``consts`` says (``(offset, bytes)``
    runs): with many rows, each run compared a word of up to 8 bytes at a time (a column
    of words against one int, a third of the time of byte by byte); with few, a run at a
    time (fewer numpy calls).

    >>> rows = np.frombuffer(b"ABCDEFGHIJ" * 600, np.uint8).reshape(600, 10)
    >>> _shared_bytes_hold(rows, [(1, np.frombuffer(b"BCDEFGHIJ", np.uint8))])
    True
    >>> _shared_bytes_hold(rows, [(0, np.frombuffer(b"AC", np.uint8))])
    False
    """
    if len(got) < _WORDS_MIN_ROWS:
        return all((got[:, at : at + len(want)] == want).all() for at, want in consts)
    for at, want in consts:
        raw = want.tobytes()
        done = 0
        while done < len(raw):
            size, word = next(w for w in _WORDS if w[0] <= len(raw) - done)
            column = got[:, at + done : at + done + size].view(word)
            if not bool((column == int.from_bytes(raw[done : done + size], "little")).all()):
                return False
            done += size
    return True


def _cut_fixed(got: np.ndarray, ops: list[tuple[tuple, int]], leaves: list[Any],
               lengths: list[Any], n: int) -> bool:
    """Fill ``leaves`` and ``lengths`` from ``got``, a segment's fixed-width bytes of
    every record (one row each), as its operations say; False if a value isn't valid."""
    for op, at in ops:
        name = op[0]
        if name == "fixed":
            _, slot, nbytes, dt, shape, fortran, kind = op
            leaf = _leaf_column(got[:, at : at + nbytes], dt, shape, fortran, kind, n)
            if leaf is None:
                return False
            leaves[slot] = leaf
        elif name == "tagbool":
            tags = got[:, at]
            if not ((tags == T_TRUE) | (tags == T_FALSE)).all():
                return False
            leaves[op[1]] = tags == T_TRUE
        elif name == "len":
            lengths[op[1]] = got[:, at : at + 4].view("<u4")[:, 0].astype(np.int64)
        else:  # none
            leaves[op[1]] = [None] * n
    return True


def _leaf_column(got: np.ndarray, dt: np.dtype, shape: tuple, fortran: bool, kind: str,
                 n: int) -> Any:
    """The column of a fixed-width leaf from its bytes ``got`` (a row per record), as
    ``collate`` makes it of the decoded values; None if a value isn't valid."""
    if kind == "bool" or dt.kind == "b":  # any byte but 0 is True, as the decoder reads it
        flat = got != 0
    else:
        flat = got.view(dt)
    if dt.kind == "U":
        points = got.view(dt.str[0] + "u4")
        if points.size and points.max() > 0x10FFFF:
            return None
    if kind == "np":
        native = dt.newbyteorder("=")
        return flat[:, 0].astype(native) if native != flat.dtype else flat[:, 0]
    if kind == "nd" and flat.dtype.byteorder == ">" and _stacked(flat.dtype) != flat.dtype:
        flat = flat.astype(_stacked(flat.dtype))  # as np.stack gives them: native order
    if not shape:
        return flat[:, 0]
    if fortran:
        return flat.reshape((n, *shape[::-1])).transpose((0, *range(len(shape), 0, -1)))
    return flat.reshape((n, *shape))


def _string_column(u8: np.ndarray, pos: np.ndarray, size: np.ndarray, is_str: bool,
                   n: int) -> np.ndarray | None:
    """An object array of the ``n`` str (or bytes) values at ``pos`` of ``size`` bytes."""
    total = int(size.sum())
    out = np.empty(n, dtype=object)
    if not total:
        out[:] = [""] * n if is_str else [b""] * n
        return out
    native = kernels()
    if native is not None:  # the values end to end, copied in C
        offsets = np.empty(n + 1, np.int64)
        data = np.frombuffer(native.gather_spans(u8, pos, size, offsets)[0], np.uint8)
        placed = offsets[:-1]
    else:
        placed = np.cumsum(size) - size
        data = u8[np.repeat(pos - placed, size) + np.arange(total)]
    counts = np.bincount(data, minlength=256)[:128 if is_str else 256]
    free = np.flatnonzero(counts == 0)
    if free.size:  # join with a byte no value holds, split in C
        sep = int(free[0])
        joined = np.insert(data, placed[1:], sep).tobytes()
        try:
            parts: list[Any] = (joined.decode("utf-8", "surrogatepass").split(chr(sep))
                                if is_str else joined.split(bytes((sep,))))
        except UnicodeDecodeError:
            return None
    else:
        blob = data.tobytes()
        cuts = placed.tolist() + [total]
        try:
            parts = [blob[a:b].decode("utf-8", "surrogatepass") if is_str else blob[a:b]
                     for a, b in zip(cuts, cuts[1:], strict=False)]
        except UnicodeDecodeError:
            return None
    if len(parts) != n:
        return None
    out[:] = parts
    return out


def _filled(template: Any, leaves: list[Any]) -> Any:
    """The column tree of ``template`` with its leaves' columns."""
    if template[0] == "leaf":
        return leaves[template[1]]
    if template[0] == "tuple":
        return tuple(_filled(t, leaves) for t in template[1])
    return {k: _filled(t, leaves) for k, t in zip(template[1], template[2], strict=True)}

