"""The names users pass (``format=``, ``codec=``, ``compressor=``, ``executor=``,
``on_corrupt=``, ``split=``) as ``Literal`` types, for type checkers.

Their home is :mod:`recprep._core.names` (the base layer); this is their public face.

>>> from typing import get_args
>>> from recprep.names import OnCorrupt
>>> get_args(OnCorrupt)
('raise', 'skip')
"""

from __future__ import annotations

from ._core.names import (
    CodecName,
    CompressorName,
    ExecutorName,
    FormatName,
    OnCorrupt,
    SplitMode,
)

__all__ = ["CodecName", "CompressorName", "ExecutorName", "FormatName", "OnCorrupt", "SplitMode"]
