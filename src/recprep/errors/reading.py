"""Reading that can't keep up: the warning of the stall report
(:mod:`recprep.read.readstats`)."""

from __future__ import annotations

from .base import RecprepWarning


class DataStallWarning(RecprepWarning):
    """The consumer of a pass (a training loop) waited for data most of the time: the
    reader's fetching and decoding, not the consumer's work, set the pace. Given only
    when asked for (``RecordIO(..., stall_warning=0.5)``), at most once per pass.

    Attributes: ``where`` (what the reader reads), ``waited`` and ``elapsed`` (seconds of
    the span judged: a pass, or the last minutes of one), ``fetching``, ``decoding``
    (the reader's seconds so far) and ``hint`` (what to try).

    >>> w = DataStallWarning("out/train", "pass", 8.0, 10.0, 6.5, 1.2,
    ...                      "read ahead in threads (num_threads=4)")
    >>> print(w)  # doctest: +ELLIPSIS
    out/train: the consumer waited for data 80% of the pass (8.0 s of 10.0 s); ...
    """

    def __init__(self, where: str, span: str, waited: float, elapsed: float,
                 fetching: float, decoding: float, hint: str) -> None:
        self.where = where
        self.waited = waited
        self.elapsed = elapsed
        self.fetching = fetching
        self.decoding = decoding
        self.hint = hint
        super().__init__(
            f"{where}: the consumer waited for data {waited / elapsed:.0%} of the {span} "
            f"({waited:.1f} s of {elapsed:.1f} s); so far the reader spent {fetching:.1f} s "
            f"fetching and {decoding:.1f} s decoding: {hint}. reader.stats() keeps the "
            "figures; `recprep profile PATH` measures the rate the set can be read at"
        )
