"""The library behind recprep's command-line tools: copy, list, inspect and verify data.

Each tool is a function that returns a result object and prints nothing; the CLI
(:mod:`recprep.cli`) only parses arguments and renders these results.

* :func:`copy` (``recprep cp``): copy shard sets between any two fsspec filesystems,
  each file checked (size and CRC-32C) before it gets its final name, manifests last;
* :func:`list_datasets` (``recprep ls``): the shard sets of a directory and their facts;
* :func:`head` and :func:`describe` (``recprep head``): the first instances, readable;
* :func:`verify` (``recprep verify``): every chunk and checksum, and the manifests' facts.
"""

from __future__ import annotations

from .copy import CopiedFile, CopyResult, copy
from .inspect import DatasetInfo, head, list_datasets
from .inspect import render_value as describe
from .verify import Problem, SetCheck, ShardCheck, VerifyReport, verify

__all__ = [
    "CopiedFile",
    "CopyResult",
    "DatasetInfo",
    "Problem",
    "SetCheck",
    "ShardCheck",
    "VerifyReport",
    "copy",
    "describe",
    "head",
    "list_datasets",
    "verify",
]
