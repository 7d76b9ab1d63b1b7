"""The write side: instances into committed shard sets.

Data flows one way, input -> codec -> container -> storage:

* :mod:`~recprep.write.convert` — :func:`~recprep.convert`, the public entry point;
* :mod:`~recprep.write.prepare` — :func:`~recprep.prepare`, raw files through a model file;
* :mod:`~recprep.write.inputs` — what ``convert`` accepts, as readers it can run and split;
* :mod:`~recprep.write.plan` — the units of work of a conversion and how they are assembled;
* :mod:`~recprep.write.loop` — the write loop every task runs: encode, frame, write;
* :mod:`~recprep.write.progress` — progress bars and callbacks.
"""
