"""The names users pass for formats, codecs, compressors, executors and options.

They are ``Literal`` types, so an IDE offers the valid names and a type checker catches a
misspelt one. Formats, codecs and executors come from registries that plug-ins extend:
their parameters take ``FormatName | str`` and so on, and the registry says whether it
knows a name it is given.

Example
-------
>>> from typing import get_args
>>> get_args(CompressorName)
('snappy', 'gzip', 'zlib', 'none')
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "CodecName",
    "CompressorName",
    "ExecutorName",
    "FormatName",
    "OnCorrupt",
    "SplitMode",
]

#: container formats built in (``format=``)
FormatName = Literal["recordio", "recordio-legacy", "tfrecord"]
#: codecs built in (``codec=``)
CodecName = Literal["recprep", "pickle", "raw", "example"]
#: compressors (``compressor=``): which ones a format takes is the format's to say
CompressorName = Literal["snappy", "gzip", "zlib", "none"]
#: executors built in (``executor=``)
ExecutorName = Literal["serial", "processes", "spark", "ray"]
#: what a reader does with damaged data (``on_corrupt=``)
OnCorrupt = Literal["raise", "skip"]
#: how ranks split a reader's files (``split=``)
SplitMode = Literal["auto", "shard", "range"]
