"""The ``"recprep"`` codec: a typed binary encoding that round-trips exactly.

A record is the format byte :data:`FORMAT_TAG` (``0xF1``) followed by exactly one
value: a one-byte type tag and a body. Python scalars and containers, sets, named tuples,
``datetime``/``decimal``/``uuid``/``fractions`` values, ``numpy`` arrays and scalars have
their own tags, matched on the *exact* type, so that type and value both come back
(``-0.0``, NaN payloads, lone surrogates, ``'>i4'`` arrays, Fortran order, time zones and
``fold``...); pandas ``Timestamp``/``Timedelta``/``NaT`` are stored as numpy values.
Anything else, subclasses included, is stored as a pickle (noted by the codec instance:
:meth:`RecprepCodec.drain_pickled`), which is decoded only with ``allow_pickle=True``.
Tuples, lists and dicts holding only ``bool``/``int``/``float``/``str``/``bytes`` are
*packed*: one struct holds all their fixed-width fields. Set elements are written sorted
by their encoded bytes, so equal sets give equal records in every process. The
byte-level format is specified in ``docs/format.md``.

Encoding and decoding are iterative (nesting costs no Python stack), and packed
containers of the signatures in use run through generated code (rationed: see
:mod:`~recprep.codecs.recprep.packed`), which keeps this pure-Python codec within reach of
``pickle``'s C speed.

The modules, by concern:

==================  =====================================================================
``codec``           :class:`RecprepCodec`: records in and out, the fast paths
``wire``            the format byte, type tags, sized fields, :class:`~.wire.Fail`, caches
``encode``          a value into the record's pieces (the iterative encoder)
``decode``          the value at an offset of a record (the iterative decoder)
``packed``          packed tuples, lists and dicts, and their generated code
``arrays``          numpy arrays and scalars
``types``           datetimes, decimals, UUIDs, fractions, named tuples, pandas values
``pickles``         the pickle fallback and its note
``layout``          what the records of a chunk share: the first record walked
``columns``         a chunk of records decoded at once into columns
``encode_columns``  a block of rows given as columns encoded at once
``segments``        records built from per-row pieces with numpy
==================  =====================================================================

Example
-------
>>> codec = RecprepCodec()
>>> record = codec.encode((1, "a"))
>>> record.hex(" ")
'f1 0e 02 00 00 00 71 73 01 00 00 00 00 00 00 00 01 00 00 00 61'
>>> codec.decode(record)
(1, 'a')
"""

from __future__ import annotations

from .codec import RecprepCodec
from .wire import FORMAT_TAG, MAX_DEPTH

__all__ = ["FORMAT_TAG", "MAX_DEPTH", "RecprepCodec"]
