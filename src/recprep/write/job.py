"""A conversion's job: what :func:`~recprep.convert` was asked to do, checked, as one value.

``convert`` checks its arguments and builds one :class:`ConvertJob`; every step after
takes it whole — taking the set's lock and the resume checks
(:mod:`recprep.write.resume`), running the tasks (:mod:`recprep.write.tasks`), building
the side files (:mod:`recprep.write.sidefiles`) and the commit. The job stays on the
driver: a task gets only what it needs to write (a filesystem, paths,
:class:`~recprep.write.options.WriteOptions`).

Example
-------
>>> import fsspec
>>> from recprep.executors import get_backend
>>> from recprep.write.options import check_options
>>> job = ConvertJob(fsspec.filesystem("memory"), "/doc/job", "train", 2,
...                  check_options("recordio", None, "raw", 2, None), get_backend("serial"))
>>> job.names, job.staging.path
(('train-00000-of-00001', 'train-00001-of-00001'), '/doc/job/.recprep-staging-train')
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..executors import Backend
from ..storage.fs import display
from ..storage.shardnames import shard_name
from ..storage.staging import Staging
from .options import WriteOptions
from .plan import Partitions
from .progress import Progress, ProgressArg

__all__ = ["ConvertJob"]


@dataclass(frozen=True)
class ConvertJob:
    """One conversion: where the set goes, how its records are written, and how the work
    runs (see the module docs). Built once by :func:`~recprep.convert`.

    ``fs`` and ``output`` are the output directory (as :func:`~recprep.storage.fs.resolve`
    gives them), ``prefix`` and ``num_shards`` name the set, ``options`` say how records
    are written (format, codec, compressor, chunk size), ``backend`` is the executor with
    its workers and options, and ``progress`` is ``convert``'s argument (a
    :class:`~recprep.write.progress.Progress` to report to, or what makes one).
    ``overwrite`` and ``resume`` are ``convert``'s. ``part_rows``: for a sized input, the
    instances per row range it is cut into (:func:`~recprep.write.inputs.part_rows`).
    """

    fs: Any
    output: str
    prefix: str
    num_shards: int
    options: WriteOptions
    backend: Backend
    progress: ProgressArg | Progress = None
    overwrite: bool = False
    resume: bool = False
    part_rows: int | None = None
    #: the shard names, in shard order
    names: tuple[str, ...] = field(init=False)
    #: the set's hidden staging directory, where everything is written before the commit
    staging: Staging = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = tuple(shard_name(self.prefix, i, self.num_shards)
                      for i in range(self.num_shards))
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "staging", Staging(self.fs, self.output, self.prefix))

    @property
    def shown(self) -> str:
        """The output directory as messages show it (a URL for remote storage)."""
        return display(self.fs, self.output)

    def fingerprint(self, reader: Any) -> str:
        """What staged work depends on: a resumed run reuses it only if this is unchanged
        (the input's partition groups count, and a sized input's row ranges; the input
        itself can't be compared)."""
        options = self.options
        groups = reader.groups() if isinstance(reader, Partitions) else None
        doc = {
            "format": options.format, "compressor": options.compressor,
            "codec": options.codec.name, "schema": options.codec.schema(),
            "chunk_bytes": options.chunk_bytes, "shards": list(self.names), "groups": groups,
        }
        if self.part_rows is not None:  # (absent before the cut depended on record sizes)
            doc["part_rows"] = self.part_rows
        return json.dumps(doc, sort_keys=True, default=str)
