"""The write side: instances into committed shard sets.

Data flows one way, input -> codec -> container -> storage:

* :mod:`~recprep.write.convert` — :func:`~recprep.convert`, the public entry point, and
  its steps in order;
* :mod:`~recprep.write.job` — :class:`~recprep.write.job.ConvertJob`, what a conversion
  was asked to do, built once and handed to every step;
* :mod:`~recprep.write.resume` — the resume and commit checks (what a killed run left,
  whether a set may be written);
* :mod:`~recprep.write.tasks` — the tasks of a conversion, run on the executor and
  recorded in staging;
* :mod:`~recprep.write.sidefiles` — the side files committed with the shards (record
  indexes, the chunk index from what the writers reported);
* :mod:`~recprep.write.prepare` — :func:`~recprep.prepare`, raw files through a model file;
* :mod:`~recprep.write.inputs` and :mod:`~recprep.write.tables` — what ``convert``
  accepts, as readers it can run and split;
* :mod:`~recprep.write.plan` — the units of work of a conversion and how they are assembled;
* :mod:`~recprep.write.options` — :class:`~recprep.write.options.WriteOptions`, how a
  task writes records (format, codec, compressor, chunk size), checked once;
* :mod:`~recprep.write.loop` — the write loop every task runs: encode, frame, write;
* :mod:`~recprep.write.sinks` and :mod:`~recprep.write.filepool` — a task's output files:
  in memory within a budget, a bounded number open on storage;
* :mod:`~recprep.write.assembly` — shards made of staged pieces;
* :mod:`~recprep.write.progress` — progress bars and callbacks.
"""
