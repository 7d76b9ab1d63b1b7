"""The read side: shard files back into instances.

Data flows one way, storage -> container -> codec -> instances:

* :mod:`~recprep.read.reader` — :class:`~recprep.RecordIO`, the public reader (a facade);
* :mod:`~recprep.read.opening` — a reader's pattern resolved into shard sets;
* :mod:`~recprep.read.options` — :class:`~recprep.read.options.ReadOptions`, one value;
* :mod:`~recprep.read.passes` — pass plans, from record counts alone;
* :mod:`~recprep.read.streams` — a pass's stack, drawn once;
* :mod:`~recprep.read.sources` — the files of the shard sets read: counts, chunk indexes, chunks;
* :mod:`~recprep.read.committed` — what a reader checks of the commit protocol;
* :mod:`~recprep.read.placing` — each chunk at its proven record number, records ``start:end``;
* :mod:`~recprep.read.decoding` — chunks into instances, errors located;
* :mod:`~recprep.read.blocks` — a pass moved a block at a time: round-robin, picks, batches;
* :mod:`~recprep.read.ranks` — which files and records each rank and worker reads;
* :mod:`~recprep.read.shuffling`, :mod:`~recprep.read.prefetch`,
  :mod:`~recprep.read.cpugate`, :mod:`~recprep.read.filepool`, :mod:`~recprep.read.cache`
  — how a pass is ordered, overlapped and bounded;
* :mod:`~recprep.read.checkpoint`, :mod:`~recprep.read.positions` — a pass's resumable state;
* :mod:`~recprep.read.readstats`, :mod:`~recprep.read.statsboard` — where a reader's time
  goes (the stall report), gathered from DataLoader workers too;
* :mod:`~recprep.read.dataset`, :mod:`~recprep.read.splits`, :mod:`~recprep.read.taskqueue`
  (:mod:`~recprep.read.queuestate`), :mod:`~recprep.read.mixing`,
  :mod:`~recprep.read.epochclock` — random access, index splits, dynamic sharding and
  mixtures built on the above.
"""
