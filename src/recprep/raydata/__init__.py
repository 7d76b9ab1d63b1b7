"""Ray Data in and out, behind :mod:`recprep.ray` (its public face).

================  ========================================================================
module            what it holds
================  ========================================================================
``reading``       :func:`~recprep.ray.read`: the datasource, one read task per rank share
``arrowbatch``    a batch of the reader's Arrow columns as a Ray Data block (arrays as tensors)
``writing``       :func:`~recprep.ray.write`: the dataset's blocks as ``convert``'s
                  partitions, on ``executor="ray"``
================  ========================================================================

Ray and pyarrow are imported only when a function is called.
"""
