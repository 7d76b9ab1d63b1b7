"""Storage: files on fsspec filesystems, named, committed and found again.

* :mod:`~recprep.storage.fs` — filesystems, display paths, regular files only, streaming
  CRC-32C;
* :mod:`~recprep.storage.shardnames` — shard and manifest names;
* :mod:`~recprep.storage.discovery` — which files of a directory form which shard sets;
* :mod:`~recprep.storage.manifest` — a set's manifest, validated;
* :mod:`~recprep.storage.chunkindex` — a RecordIO set's chunk-index side file;
* :mod:`~recprep.storage.staging` — the hidden staging directory and the atomic commit;
* :mod:`~recprep.storage.locking` — one writer per output set;
* :mod:`~recprep.storage.writers` — what a writer at work leaves in a directory, told to
  readers;
* :mod:`~recprep.storage.openfiles` — how many files the read and write file pools keep
  open.

Nothing here imports the read or write side, codecs or containers' readers.
"""

from .fs import ChecksumReader, ChecksumWriter, checksum, display, resolve

__all__ = ["ChecksumReader", "ChecksumWriter", "checksum", "display", "resolve"]
