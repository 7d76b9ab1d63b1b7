"""The read side: shard files back into instances.

Data flows one way, storage -> container -> codec -> instances:

* :mod:`~recprep.read.reader` — :class:`~recprep.RecordIO`, the public reader, and its passes;
* :mod:`~recprep.read.files` — the files of the shard sets read: counts, chunk indexes, chunks;
* :mod:`~recprep.read.committed` — what a reader checks of the commit protocol;
* :mod:`~recprep.read.fileindex` — a file's chunk index and reading records ``start:end``;
* :mod:`~recprep.read.decoding` — chunks into instances, errors located;
* :mod:`~recprep.read.ranks` — which files and records each rank and worker reads;
* :mod:`~recprep.read.shuffling`, :mod:`~recprep.read.prefetch`,
  :mod:`~recprep.read.cpugate`, :mod:`~recprep.read.filepool`, :mod:`~recprep.read.cache`
  — how a pass is ordered, overlapped and bounded;
* :mod:`~recprep.read.checkpoint`, :mod:`~recprep.read.dataset`,
  :mod:`~recprep.read.taskqueue`, :mod:`~recprep.read.mixing` — resumable passes, random
  access, dynamic sharding and mixtures built on the above.
"""
