"""Which built-in codec a record's first byte points to: for the advice of errors only.

A codec that refuses a record suggests the codecs that may have written it, most likely
first: ``0xF1`` starts every ``"recprep"`` record, ``0x80`` every pickle of protocol 2
and later, ``0x0A`` every non-empty ``tf.train.Example`` (its field 1, ``features``), a
pickle opcode (``(``, ``]``, ``I``...) a pickle of protocol 0 or 1; ``"raw"`` reads
anything. A reader that knows the codec a set's manifest names puts that
one first (:func:`codec_first`). Nothing here decides how data is decoded.

>>> likely_codecs(b"\\xf1\\x0e")
['recprep', 'raw']
>>> likely_codecs(b"\\x80\\x04K\\x01.")
['pickle', 'raw']
>>> codec_remedy(b"\\x0a\\x00", besides="recprep").python()
"codec='example' or codec='raw'"
"""

from __future__ import annotations

import pickletools

from ..errors import REMEDY, LocatedError, Remedy

__all__ = ["PICKLE_OPENERS", "codec_first", "codec_remedy", "first_byte", "likely_codecs"]

#: the built-in codec whose records start with this byte
_STARTS = {0xF1: "recprep", 0x80: "pickle", 0x0A: "example"}
_SAID = {"recprep": "a recprep record", "pickle": "a pickle", "example": "a tf.train.Example"}
#: the bytes a pickle may start with (its first opcode)
PICKLE_OPENERS = frozenset(ord(op.code) for op in pickletools.opcodes if op.code != ".")
#: what a codec remedy does
EFFECT = "if it was written with another codec"


def likely_codecs(record: bytes | memoryview) -> list[str]:
    """The built-in codecs that may have written ``record``, most likely first (``"raw"``
    last: it reads anything)."""
    first = bytes(record[:1])
    found = _STARTS.get(first[0]) if first else None
    if found is None and first and first[0] in PICKLE_OPENERS:
        found = "pickle"  # protocol 0 or 1
    return [found, "raw"] if found else ["raw"]


def first_byte(record: bytes | memoryview) -> str:
    """What the record's first byte says.

    >>> first_byte(b"\\xf1\\x0e"), first_byte(b"")
    ('it starts with byte 0xf1 (it looks like a recprep record)', 'it is empty')
    """
    head = bytes(record[:1])
    if not head:
        return "it is empty"
    found = _STARTS.get(head[0])
    writer = f" (it looks like {_SAID[found]})" if found else ""
    return f"it starts with byte 0x{head[0]:02x}{writer}"


def codec_remedy(record: bytes | memoryview, *, besides: str) -> Remedy:
    """``codec=`` with the codecs that may have written ``record``, other than ``besides``
    (the one that refused it)."""
    names = [name for name in likely_codecs(record) if name != besides]
    return Remedy("codec", names[0], also=tuple(names[1:]), effect=EFFECT)


def codec_first(err: LocatedError, name: str, used: str) -> LocatedError:
    """``err``, raised by codec ``used`` for a set whose manifest names codec ``name``,
    suggesting ``codec=name`` first: ahead of the values of its ``codec`` remedy, or as a
    remedy of its own when it had none (an error whose remedy is to allow pickles keeps
    it: the record does hold a pickle).

    >>> from recprep.errors import DecodeError
    >>> err = DecodeError("bad{remedy}", remedy=Remedy("codec", "pickle", also=("raw",)))
    >>> str(codec_first(err, "raw", "recprep"))
    "bad; pass codec='raw' or codec='pickle'"
    >>> str(codec_first(DecodeError("bad"), "recprep", "example"))
    "bad (read with codec='example'); pass codec='recprep' to read it with the codec its \
manifest names"
    """
    if name == used or any(r.option == "allow_pickle" for r in err.remedies):
        return err
    said = [r for r in err.remedies if r.option == "codec"]
    detail = err.detail
    if said:
        values = [name, *(v for v in said[0].values if v != name)]
        first = Remedy("codec", values[0], also=tuple(values[1:]), effect=said[0].effect)
        remedies = tuple(first if r is said[0] else r for r in err.remedies)
    else:
        first = Remedy("codec", name, effect="to read it with the codec its manifest names")
        remedies = (first, *err.remedies)
        detail = f"{detail} (read with codec={used!r}){REMEDY}"
    out = type(err).__new__(type(err))
    out.__dict__.update(err.__dict__)
    out.remedies = remedies
    LocatedError.__init__(out, detail, path=err.path, offset=err.offset,
                      record_index=err.record_index)
    return out
