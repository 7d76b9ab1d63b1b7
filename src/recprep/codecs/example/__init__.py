"""The ``"example"`` codec: instances as ``tf.train.Example`` records, without TensorFlow.

A record is the protobuf wire encoding of an ``Example`` (``docs/format.md``)::

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }     // entry: key = 1, value = 2
    Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                             Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed = true]; }
    Int64List { repeated int64 value = 1 [packed = true]; }

Integers and booleans become ``int64_list`` (``uint64`` as two's complement), ``float16``
and ``float32`` become ``float_list``, ``str`` (UTF-8) and ``bytes`` become
``bytes_list``; arrays are flattened in C order. Example floats are float32, so a float64
value (a Python ``float`` included, unless its feature is declared float32) is refused,
never narrowed. Map entries are written in TensorFlow's key order (:func:`key_order`): the
same instance gives the same bytes, equal to ``SerializeToString(deterministic=True)``
under protobuf's default (upb) backend. Records are read with protobuf's merge rules;
where ``tf.io.parse_example`` would read them otherwise, an :class:`ExampleMergeWarning`
says so.

With ``features`` (a list of :class:`~recprep.codecs.features.Feature`) the instance may
also be a tuple in feature order, and is checked by :func:`~recprep.codecs.features.check_instance`;
their dtypes and shapes go into the manifest's ``schema``, and decoding gives arrays of
the declared shapes and dtypes back. Without them, records decode to dicts of 1-D arrays:
``float32``, ``int64``, or ``object`` arrays of ``bytes``.

Encoding and decoding let numpy do the bulk: floats are one ``tobytes``/``frombuffer``
and int64 varints are built and parsed with vectorised numpy operations.

The modules, by concern:

==================  =====================================================================
``codec``           :class:`ExampleCodec`: records in and out, features checked
``wire``            the protobuf wire format: varints, fields, entries in key order
``parse``           a record's bytes into each feature's list, under protobuf's merge rules
``encode``          an instance's values as lists (the encoding side)
``decode``          a record's lists as arrays, as declared or not (the decoding side)
``chunk``           a chunk of records parsed at once: each feature's :class:`Values`
``columns``         a chunk of records as batch columns (``decode_columns``)
``arrow``           a chunk of records as one Arrow record batch (``decode_arrow_columns``)
``encode_columns``  records built a column at a time from :class:`Payload` objects
==================  =====================================================================

The columnar API
----------------
Code that moves whole columns of Examples — :mod:`recprep.spark` reads DataFrames from
chunks and writes them from Arrow batches — uses these names, the ones the codec's own
``decode_columns`` and ``encode_columns`` are built on; they give the same bytes and
values as the codec, record by record.

Parsing a chunk:

* :func:`parse_chunk(records, wanted=None) <recprep.codecs.example.chunk.parse_chunk>` —
  each feature's :class:`Values` over a chunk of records (only the ``wanted`` features'
  values read), or ``None`` where the records don't all follow the first one's layout:
  decode those one by one (:meth:`ExampleCodec.decode`), which reads every protobuf form;
* :class:`Values` — one feature's ``kind`` (:data:`BYTES`, :data:`FLOATS`, :data:`INTS`,
  or 0: no list set), how many values each record holds (``counts``), the numbers as one
  array (``values``; ``fixed()``, ``flat()``), the byte strings as one buffer and their
  ``sizes`` (``strings()``);
* :func:`byte_strings` and :func:`run_offsets` — a feature's byte strings as one Arrow
  ``binary`` (or ``string``) array, and the Arrow offsets of runs of counts: what
  :func:`example_decode_arrow` (the codec's ``decode_arrow_columns``) and
  :mod:`recprep.spark` build Arrow arrays of.

Encoding columns:

* :class:`ExampleBuilder` — ``records(payloads)``: the Example records of rows whose
  features are given as payloads (entries in TensorFlow's key order, headers cached
  across calls);
* :class:`Payload` — one feature's values for ``n`` rows: its ``name``, ``kind``, ``mode``
  (:data:`PACKED` numbers, :data:`ONE_VALUE` string, or a :data:`LIST_BODY`: a bytes
  list's whole body), the bytes of every row back to back and where each row's start,
  and which rows have no entry (``absent``);
* :func:`number_payload` and :func:`bytes_payload` — the payload of numbers (float →
  float32 bytes, bool/int → varints) or of one str/bytes value per row.

>>> import numpy as np
>>> records = [ExampleCodec().encode({"id": i}) for i in range(3)]
>>> parse_chunk(records)["id"].flat().tolist()
[0, 1, 2]
>>> ExampleBuilder().records([number_payload("id", np.arange(3))]) == records
True

Examples
--------
>>> codec = ExampleCodec()
>>> record = codec.encode({"label": 3, "image": np.array([0.5, 1.0], np.float32)})
>>> record.hex(" ")
'0a 27 0a 15 0a 05 69 6d 61 67 65 12 0c 12 0a 0a 08 00 00 00 3f 00 00 80 3f 0a 0e 0a 05 6c \
61 62 65 6c 12 05 1a 03 0a 01 03'
>>> codec.decode(record)
{'image': array([0.5, 1. ], dtype=float32), 'label': array([3])}
>>> shaped = ExampleCodec([Feature("image", "float32", (2, 1)), Feature("label", "uint8")])
>>> shaped.decode(record)
{'image': array([[0.5],
       [1. ]], dtype=float32), 'label': array(3, dtype=uint8)}
>>> codec.encode({"x": 0.5})
Traceback (most recent call last):
...
recprep.errors.EncodeError: feature 'x': a Python float is float64, and Example floats are \
float32: declare the feature float32, or use codec='recprep' for exact float64
"""

from __future__ import annotations

from ...errors import ExampleMergeWarning
from ..features import Feature
from .arrow import byte_strings, example_decode_arrow, run_offsets
from .chunk import Values, parse_chunk
from .codec import ExampleCodec
from .encode_columns import (
    LIST_BODY,
    ONE_VALUE,
    PACKED,
    ExampleBuilder,
    Payload,
    bytes_payload,
    number_payload,
)
from .wire import BYTES, FLOATS, INTS, key_order, varint

__all__ = [
    "BYTES",
    "FLOATS",
    "INTS",
    "LIST_BODY",
    "ONE_VALUE",
    "PACKED",
    "ExampleBuilder",
    "ExampleCodec",
    "ExampleMergeWarning",
    "Feature",
    "Payload",
    "Values",
    "byte_strings",
    "bytes_payload",
    "example_decode_arrow",
    "key_order",
    "number_payload",
    "parse_chunk",
    "run_offsets",
    "varint",
]
