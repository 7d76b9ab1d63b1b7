"""A container format defined outside recprep, as a user would: RecordIO's framing under a
name of its own, registered when this module is imported.

Workers (processes, Spark, Ray) import it when they unpickle a task that holds the format
(it travels by class reference), so it is registered there too.
"""

from __future__ import annotations

from recprep.containers import register_format
from recprep.containers.recordio import RecordIOFormat

NAME = "outside-recordio"


class OutsideFormat(RecordIOFormat):
    """The Go RecordIO bytes, known to recprep as ``outside-recordio``, gzip by default."""

    name = NAME
    default_compressor = "gzip"


def register() -> None:
    """Register the format (again: replacing is harmless)."""
    register_format(OutsideFormat, replace=True)


register()
