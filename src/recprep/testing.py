"""Tools to trust a pipeline before a long run: :func:`check_exactly_once`.

``check_exactly_once(make_reader, plan=Plan(...))`` reads your readers, built with your
options by ``make_reader(rank, world)``, once uninterrupted and once through the stops,
resumes and world-size changes of the plan (``workers=N``: through torchdata's
``StatefulDataLoader`` with real worker processes), and reports whether every instance
came exactly as often, and in the same order (see :mod:`recprep.tools.audit`;
``recprep audit`` is the same check from the command line).

>>> from recprep import RecordIO, convert
>>> from recprep.testing import Plan, check_exactly_once
>>> _ = convert("memory://doc/testing", list(range(20)), 2, "t")
>>> report = check_exactly_once(
...     lambda rank, world: RecordIO("memory://doc/testing/t-*", rank=rank,
...                                  world_size=world),
...     plan=Plan(world=2, stops=[0.3, 0.6], epochs=2))
>>> report.ok, [p.instances for p in report.phases]
(True, [12, 12, 16])
"""

from __future__ import annotations

from .tools.audit import (
    Divergence,
    ExactlyOnceReport,
    IdCount,
    PhaseRun,
    Plan,
    check_exactly_once,
    instance_id,
)

__all__ = ["Divergence", "ExactlyOnceReport", "IdCount", "PhaseRun", "Plan",
           "check_exactly_once", "instance_id"]
