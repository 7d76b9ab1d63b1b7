"""The base layer: what every other part of recprep builds on, and which imports nothing
else of recprep (but :mod:`recprep.errors`).

* :mod:`~recprep._core.registry` — the plug-in registries (lazy dotted paths, entry points);
* :mod:`~recprep._core.names` — the ``Literal`` types of the names users pass;
* :mod:`~recprep._core.arguments` — checking a public call's arguments against its hints;
* :mod:`~recprep._core.batching` — the layout of a batch (:class:`Columns`, ``collate``);
* :mod:`~recprep._core.records` — a chunk's records (:class:`Records`), :class:`Chunk`,
  :class:`Gap`.

The public faces of the first three are :mod:`recprep.registry`, :mod:`recprep.names` and
:mod:`recprep.batching`.
"""
