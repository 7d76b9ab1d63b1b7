"""Records of a block laid out by ``Segments``: cut out exactly as their pieces say, in
the padded layout and back to back, whatever the lengths."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from recprep.codecs.recprep.segments import Segments

pieces = st.lists(st.one_of(
    st.tuples(st.just("const"), st.binary(max_size=5)),
    st.tuples(st.just("fixed"), st.integers(0, 9)),
    st.tuples(st.just("ragged"), st.integers(0, 300)),
), max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60), pieces, st.data())
def test_records_are_their_pieces_in_order(n, kinds, data):
    """Each record is the concatenation of its row's pieces (written out independently
    here); ragged pieces up to 300 bytes make the lengths far apart (records back to
    back) or close (a padded layout, gaps between the records)."""
    seg, expected = Segments(n), [b""] * n
    for kind, arg in kinds:
        if kind == "const":
            seg.const(arg)
            expected = [e + arg for e in expected]
        elif kind == "fixed":
            matrix = np.frombuffer(data.draw(st.binary(min_size=n * arg, max_size=n * arg)),
                                   np.uint8).reshape(n, arg)
            seg.fixed(matrix)
            expected = [e + matrix[i].tobytes() for i, e in enumerate(expected)]
        else:
            values = data.draw(st.lists(st.binary(max_size=arg), min_size=n, max_size=n))
            joined = np.frombuffer(b"".join(values), np.uint8)
            seg.ragged(np.array([len(v) for v in values], np.int64), joined)
            expected = [e + v for e, v in zip(expected, values, strict=True)]
    got = seg.records()
    assert got == expected
    assert all(type(r) is bytes for r in got)


def test_records_of_both_layouts_and_empty_ones():
    lengths = np.array([0, 3, 0, 1, 2], np.int64)
    close = Segments(5)  # lengths close: the padded layout, records 3 bytes apart
    close.ragged(lengths, np.frombuffer(b"abcdef", np.uint8))
    assert close.layout()[1].tolist() == [0, 3, 6, 9, 12]
    assert close.records() == [b"", b"abc", b"", b"d", b"ef"]
    far = Segments(3)  # one long record among short ones: back to back
    far.ragged(np.array([5000, 0, 1]), np.zeros(5001, np.uint8))
    assert far.layout()[1].tolist() == [0, 5000, 5000]
    assert far.records() == [bytes(5000), b"", b"\x00"]
    assert Segments(0).records() == []
