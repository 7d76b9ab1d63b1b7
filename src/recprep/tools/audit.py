"""A checker users can run: :func:`check_exactly_once` reads a pipeline through stops,
resumes and world-size changes and says whether every instance came exactly as often as
in an uninterrupted run, and in the same order.

It runs the user's readers twice, in this process: first uninterrupted (every rank of
``plan.world``, ``plan.epochs`` epochs), then interrupted: stopped where the plan says
(a fraction of all the instances the uninterrupted run yielded), every rank's
``state_dict()`` taken and passed through JSON (as a checkpoint file would), the readers
dropped, new ones made for the next world size, the states loaded (combined with the
reader's ``combine_states`` when the world changes), and read on to the end. The two runs
are compared by instance identity, epoch by epoch, as multisets, and by order.

>>> from recprep import RecordIO, convert
>>> _ = convert("memory://doc/audit", [(i, f"w{i}") for i in range(40)], 3, "a")
>>> def make_reader(rank, world):
...     return RecordIO("memory://doc/audit/a-*", shuffle=True, seed=5, shuffle_buffer=8,
...                     rank=rank, world_size=world)
>>> report = check_exactly_once(make_reader, plan=Plan(world=4, stops=[0.37],
...                                                    resume_world=3))
>>> report.ok, report.instances, report.missing, report.duplicated, report.same_order
(True, 40, [], [], True)
>>> print(report)  # doctest: +NORMALIZE_WHITESPACE
exactly-once: OK
  plan: world 4, stop at 0.37 -> world 3; 1 epoch
  uninterrupted: 40 instances (40 distinct ids) from 4 ranks
  interrupted: 40 instances in 2 phases
    phase 0: world 4, from the start, stopped in epoch 0 after 14 instances
    phase 1: world 3, resumed (states combined), to the end: 26 instances
  coverage: every id as often as uninterrupted (none missing, none duplicated)
  order: the same as uninterrupted (global: the ranks' streams concatenated)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from ..errors import InvalidArgumentError
from .auditrun import Job, Notes, Seen, instance_id

__all__ = ["Divergence", "ExactlyOnceReport", "IdCount", "PhaseRun", "Plan",
           "check_exactly_once", "instance_id"]

OrderCheck = Literal["auto", "rank", "global", "none"]


@dataclass(frozen=True)
class Plan:
    """Where a checked run stops and what it resumes with.

    ``world`` ranks read from the start; the run stops at each fraction of ``stops``
    (fractions of all the instances of the uninterrupted run, ``epochs`` epochs of every
    rank, increasing, each in ``[0, 1)``), and resumes with ``resume_world`` ranks: one
    number for every resume, or one per stop; ``None``, the same ``world``.

    >>> Plan(world=4, stops=[0.37], resume_world=3).worlds()
    [4, 3]
    >>> Plan(world=2, stops=[0.2, 0.5, 0.9], resume_world=[3, 1, 2]).worlds()
    [2, 3, 1, 2]
    >>> Plan(stops=[0.5, 0.2])
    Traceback (most recent call last):
    ...
    recprep.errors.InvalidArgumentError: a plan's stops must be fractions in [0, 1) in \
increasing order, got [0.5, 0.2]
    """

    world: int = 1
    stops: Sequence[float] = (0.5,)
    resume_world: int | Sequence[int] | None = None
    epochs: int = 1

    def __post_init__(self) -> None:
        stops = list(self.stops)
        if not all(isinstance(f, (int, float)) and not isinstance(f, bool) and 0 <= f < 1
                   for f in stops) or stops != sorted(stops):
            raise InvalidArgumentError(
                f"a plan's stops must be fractions in [0, 1) in increasing order, got {stops}")
        object.__setattr__(self, "stops", tuple(stops))
        if isinstance(self.resume_world, Sequence):
            object.__setattr__(self, "resume_world", tuple(self.resume_world))
        for name, value in [("world", self.world), ("epochs", self.epochs),
                            *[("resume_world", w) for w in self.worlds()[1:]]]:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgumentError(f"a plan's {name} must be an int >= 1, got "
                                           f"{value!r}")

    def worlds(self) -> list[int]:
        """The world size of each phase: the first, then one per stop."""
        resume = self.resume_world
        if resume is None:
            return [self.world] * (len(self.stops) + 1)
        if isinstance(resume, int):
            return [self.world] + [resume] * len(self.stops)
        if len(resume) != len(self.stops):
            raise InvalidArgumentError(
                f"a plan's resume_world needs one world size per stop: {len(self.stops)} "
                f"stops, {len(resume)} sizes ({list(resume)})")
        return [self.world, *resume]

    def __str__(self) -> str:
        worlds = self.worlds()
        steps = [f"world {worlds[0]}"] + [f"stop at {f:g} -> world {w}"
                                          for f, w in zip(self.stops, worlds[1:], strict=True)]
        epochs = f"{self.epochs} epoch" + ("s" if self.epochs > 1 else "")
        return ", ".join(steps) + f"; {epochs}"


@dataclass(frozen=True)
class IdCount:
    """An id the interrupted run yielded a different number of times than the
    uninterrupted one, in one epoch: ``where`` says where it came (``rank/position`` in
    the uninterrupted run for a missing id, ``phase:rank/position`` in the interrupted
    run for a duplicated one)."""

    id: str
    epoch: int
    expected: int
    found: int
    instance: str
    where: list[str]

    def __str__(self) -> str:
        return (f"id {self.id} {self.instance} in epoch {self.epoch}: expected "
                f"{self.expected}, found {self.found} (at {', '.join(self.where)})")


@dataclass(frozen=True)
class Divergence:
    """The first place the interrupted run's order leaves the uninterrupted one's:
    ``rank`` (None for the global order) and ``position`` in the stream of ``epoch``, the
    ``phase`` that yielded it, and the ids expected and found there (None: the stream
    ended, or had nothing there); with ``source=``, the source whose order it is, and
    the position among that source's instances."""

    epoch: int
    rank: int | None
    position: int
    phase: int
    expected: str | None
    found: str | None
    source: str | None = None

    def __str__(self) -> str:
        where = "the global order" if self.rank is None else f"rank {self.rank}"
        if self.source is not None:
            where += f" of source {self.source}"
        expected, found = (("the end" if i is None else f"id {i}")
                           for i in (self.expected, self.found))
        return (f"{where}, epoch {self.epoch}, position {self.position} (phase "
                f"{self.phase}): expected {expected}, found {found}")


@dataclass(frozen=True)
class PhaseRun:
    """One phase of the interrupted run as it was run: its world size, how it began
    (``"start"``, ``"resumed"`` with each rank's own state, ``"combined"``), the epoch
    it stopped in (None: read to the end) and the instances it yielded."""

    world: int
    began: str
    stopped_in: int | None
    instances: int

    def __str__(self) -> str:
        began = {"start": "from the start", "resumed": "resumed (each rank its state)",
                 "combined": "resumed (states combined)"}[self.began]
        if self.stopped_in is None:
            return f"world {self.world}, {began}, to the end: {self.instances} instances"
        return (f"world {self.world}, {began}, stopped in epoch {self.stopped_in} after "
                f"{self.instances} instances")


@dataclass
class ExactlyOnceReport:
    """What :func:`check_exactly_once` found; ``str()`` says it for people, and
    :meth:`to_dict` for programs.

    ``ok`` is the verdict: no id missing or duplicated in any epoch, and the order the
    same (unless ``order="none"``). ``missing`` and ``duplicated`` list the ids whose
    counts differ (at most ``limit`` of each; ``missing_total``/``duplicated_total``
    count them all); ``same_order`` is None when order wasn't checked.
    """

    ok: bool
    plan: Plan
    instances: int
    distinct: int
    interrupted: int
    phases: list[PhaseRun]
    missing: list[IdCount] = field(default_factory=list)
    duplicated: list[IdCount] = field(default_factory=list)
    missing_total: int = 0
    duplicated_total: int = 0
    order: str = "none"
    same_order: bool | None = None
    divergence: Divergence | None = None

    def __bool__(self) -> bool:
        return self.ok

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (the plan's fields, each phase, each count)."""
        out = asdict(self)
        out["plan"] = {"world": self.plan.world, "stops": list(self.plan.stops),
                       "worlds": self.plan.worlds(), "epochs": self.plan.epochs}
        return out

    def __str__(self) -> str:
        problems = [f"{n} id(s) {what}" for n, what in [
            (self.missing_total, "missing"), (self.duplicated_total, "duplicated")] if n]
        if self.same_order is False:
            problems.append("the order differs")
        lines = ["exactly-once: " + ("OK" if self.ok else "FAILED: " + "; ".join(problems)),
                 f"  plan: {self.plan}",
                 f"  uninterrupted: {self.instances} instances ({self.distinct} distinct "
                 f"ids) from {self.plan.world} ranks",
                 f"  interrupted: {self.interrupted} instances in {len(self.phases)} phases"]
        lines += [f"    phase {k}: {p}" for k, p in enumerate(self.phases)]
        if not (self.missing_total or self.duplicated_total):
            lines.append("  coverage: every id as often as uninterrupted (none missing, "
                         "none duplicated)")
        for title, counts, total in [("missing", self.missing, self.missing_total),
                                     ("duplicated", self.duplicated, self.duplicated_total)]:
            if total:
                more = f" (the first {len(counts)})" if total > len(counts) else ""
                lines.append(f"  {title}: {total}{more}")
                lines += [f"    {c}" for c in counts]
        lines.append("  order: " + self._order_line())
        return "\n".join(lines)

    def _order_line(self) -> str:
        what = {"rank": "each rank's stream", "global": "global: the ranks' streams "
                "concatenated"}.get(self.order, "")
        if self.same_order is None:
            return "not checked"
        if self.same_order:
            return f"the same as uninterrupted ({what})"
        return f"differs ({what}) at {self.divergence}"


def check_exactly_once(
    make_reader: Callable[[int, int], Any],
    plan: Plan | None = None,
    *,
    key: Callable[[Any], Hashable] | None = None,
    order: OrderCheck = "auto",
    source: Callable[[Any], Hashable] | None = None,
    workers: int = 0,
    limit: int = 20,
) -> ExactlyOnceReport:
    """Check that a pipeline stopped and resumed as ``plan`` says yields every instance
    exactly as often as an uninterrupted run, in the same order.

    Parameters
    ----------
    make_reader
        ``make_reader(rank, world)`` builds rank ``rank`` of ``world``'s reader with the
        user's options (same seed on every rank): a :class:`~recprep.RecordIO`, an
        ``index_split`` part, a ``mix(...)``, or a torch ``IterableDataset`` such as
        ``RecordIODataset``. It is called afresh for every phase, as a restarted job
        would. What it returns needs ``state_dict``/``load_state_dict`` (on itself or
        on its iterator), and a static ``combine_states`` for a plan that changes the
        world size.
    plan
        Where to stop and with what to resume (:class:`Plan`; default: one rank, one stop
        half way).
    key
        The identity of an instance (default :func:`instance_id`, a digest of its value).
    order
        ``"rank"``: each rank's stream (across stops) equals the uninterrupted rank's;
        ``"global"``: the instances of each phase, ranks concatenated in rank order, come
        in the uninterrupted run's concatenated order (what shuffled passes promise across
        world sizes); ``"auto"``: ``"rank"`` when the world never changes, else
        ``"global"``; ``"none"``: order isn't part of the verdict.
    source
        Which source an instance comes from (``lambda x: x["dataset"]`` for a mix): order
        is then compared within each source's instances, for readers that promise each
        source's order but not how sources interleave (a ``mix`` across a world-size
        change). Default: all instances are one stream.
    workers
        Read each rank through torchdata's ``StatefulDataLoader`` with this many worker
        processes (its state is the rank's); ``0``: in this process.
    limit
        The most missing (and duplicated) ids listed in the report.

    Raises
    ------
    InvalidArgumentError
        The plan changes the world size and the reader has no ``combine_states``, or the
        reader has no states; a reader's own errors (a state it refuses) pass through.
    """
    plan = Plan() if plan is None else plan
    if order not in ("auto", "rank", "global", "none"):
        raise InvalidArgumentError(
            f"order must be 'auto', 'rank', 'global' or 'none', got {order!r}")
    key = instance_id if key is None else key
    worlds = plan.worlds()
    if order == "auto":
        order = "rank" if len(set(worlds)) == 1 else "global"
    notes = Notes(source)
    reference: list[Seen] = []
    Job(make_reader, plan.world, workers, 0, notes).run(
        range(plan.epochs), key, reference, None)
    seen, phases = _interrupted(make_reader, plan, key, workers, notes, len(reference))
    report = ExactlyOnceReport(
        ok=False, plan=plan, instances=len(reference),
        distinct=len({s.id for s in reference}), interrupted=len(seen), phases=phases,
        order=order)
    _count(report, reference, seen, notes.previews, limit)
    if order != "none":
        groups = None if source is None else notes.groups
        report.divergence = _first_divergence(reference, seen, order, plan.epochs, groups)
        report.same_order = report.divergence is None
    report.ok = not (report.missing_total or report.duplicated_total) and (
        report.same_order is not False)
    return report


def _interrupted(make_reader: Callable[[int, int], Any], plan: Plan,
                 key: Callable[[Any], Hashable], workers: int,
                 notes: Notes, total: int
                 ) -> tuple[list[Seen], list[PhaseRun]]:
    """The interrupted run: each phase's ranks made, loaded, read to its stop."""
    seen: list[Seen] = []
    phases: list[PhaseRun] = []
    states: list[Any] | None = None
    epoch, worlds = 0, plan.worlds()
    for k, world in enumerate(worlds):
        job = Job(make_reader, world, workers, k, notes)
        began = "start"
        if states is not None:
            combine = getattr(type(job.ranks[0].reader), "combine_states", None)
            try:
                job.load(states, combine)
            except InvalidArgumentError as err:
                raise InvalidArgumentError(
                    f"resuming with {world} rank(s) after the stop at {plan.stops[k - 1]:g}: "
                    f"{err}") from err
            began = "resumed" if len(states) == world else "combined"
        until = int(plan.stops[k] * total) if k < len(plan.stops) else None
        before = len(seen)
        try:
            stopped = job.run(range(epoch, plan.epochs), key, seen, until)
        except BaseException:
            job.close()
            raise
        phases.append(PhaseRun(world, began, stopped, len(seen) - before))
        if stopped is None:  # read to the end: later stops have nothing left to stop
            job.close()
            break
        states, epoch = job.states(), stopped
    return seen, phases


def _count(report: ExactlyOnceReport, reference: list[Seen], seen: list[Seen],
           previews: dict[Hashable, str], limit: int) -> None:
    """Fill ``report.missing`` and ``report.duplicated``: per ``(epoch, id)``, the counts
    of the two runs compared."""
    want = Counter((s.epoch, s.id) for s in reference)
    got = Counter((s.epoch, s.id) for s in seen)
    short = sorted(k for k in want if got[k] < want[k])
    extra = sorted((k for k in got if got[k] > want[k]), key=repr)
    report.missing_total, report.duplicated_total = len(short), len(extra)
    for bucket, keys, run, place in [(report.missing, short, reference, _at_reference),
                                     (report.duplicated, extra, seen, _at_phase)]:
        for epoch, ident in keys[:limit]:
            where = [place(s) for s in run if s.epoch == epoch and s.id == ident]
            bucket.append(IdCount(str(ident), epoch, want[(epoch, ident)],
                                got[(epoch, ident)], previews.get(ident, "?"),
                                where))


def _at_reference(s: Seen) -> str:
    return f"rank {s.rank}/{s.position} uninterrupted"


def _at_phase(s: Seen) -> str:
    return f"phase {s.phase} rank {s.rank}/{s.position}"


def _first_divergence(reference: list[Seen], seen: list[Seen], order: str, epochs: int,
                      groups: dict[Hashable, Hashable] | None) -> Divergence | None:
    """The first place the order of ``seen`` leaves that of ``reference`` (in each group
    of ``groups``, the source of each id, when given)."""
    check = _rank_divergence if order == "rank" else _global_divergence
    for epoch in range(epochs):
        ref = [s for s in reference if s.epoch == epoch]
        got = [s for s in seen if s.epoch == epoch]
        if groups is None:
            found = check(ref, got, epoch)
            if found is not None:
                return found
            continue
        buckets: dict[Hashable, tuple[list[Seen], list[Seen]]] = {}
        for side, run in enumerate((ref, got)):
            for s in run:
                buckets.setdefault(groups[s.id], ([], []))[side].append(s)
        for group in sorted(buckets, key=repr):
            found = check(*buckets[group], epoch)
            if found is not None:
                return replace(found, source=str(group))
    return None


def _by_rank(run: list[Seen]) -> dict[int, list[Seen]]:
    """Each rank's stream: its instances in phase order (lockstep keeps each phase's
    instances of one rank in order)."""
    streams: dict[int, list[Seen]] = {}
    for s in sorted(run, key=lambda s: (s.phase, s.rank, s.position)):
        streams.setdefault(s.rank, []).append(s)
    return streams


def _rank_divergence(ref: list[Seen], got: list[Seen], epoch: int) -> Divergence | None:
    want, have = _by_rank(ref), _by_rank(got)
    for rank in sorted(set(want) | set(have)):
        a, b = want.get(rank, []), have.get(rank, [])
        for i in range(max(len(a), len(b))):
            x = a[i].id if i < len(a) else None
            y = b[i].id if i < len(b) else None
            if x != y:
                phase = b[i].phase if i < len(b) else b[-1].phase if b else 0
                return Divergence(epoch, rank, i, phase, _id_text(x), _id_text(y))
    return None


def _global_divergence(ref: list[Seen], got: list[Seen], epoch: int) -> Divergence | None:
    """Each phase's instances, ranks concatenated, must come in the reference order (ranks
    concatenated) less what earlier phases consumed: as a subsequence of it, and equal to
    it in the last phase of the epoch (which read the epoch to its end)."""
    order = [s.id for s in sorted(ref, key=lambda s: (s.rank, s.position))]
    consumed: Counter[Hashable] = Counter()
    phases = sorted({s.phase for s in got})
    position = 0
    for phase in phases:
        part = [s.id for s in sorted((s for s in got if s.phase == phase),
                                     key=lambda s: (s.rank, s.position))]
        left, skip = [], Counter(consumed)
        for ident in order:
            if skip[ident]:
                skip[ident] -= 1
            else:
                left.append(ident)
        at = _equal_at(left, part) if phase == phases[-1] else _within_at(left, part)
        if at is not None:
            i, expected = at
            return Divergence(epoch, None, position + i, phase, _id_text(expected),
                              _id_text(part[i] if i < len(part) else None))
        position += len(part)
        consumed.update(part)
    return None


def _equal_at(want: list[Hashable], have: list[Hashable]) -> tuple[int, Hashable] | None:
    """The first position where ``have`` differs from ``want``, and what ``want`` has
    there (None when ``have`` is longer)."""
    for i in range(max(len(want), len(have))):
        x = want[i] if i < len(want) else None
        if i >= len(have) or x != have[i]:
            return i, x
    return None


def _within_at(want: list[Hashable], have: list[Hashable]) -> tuple[int, Hashable] | None:
    """The first item of ``have`` that breaks it being a subsequence of ``want``, and the
    item of ``want`` the scan stood at."""
    i = 0
    for k, ident in enumerate(have):
        start = i
        while i < len(want) and want[i] != ident:
            i += 1
        if i == len(want):
            return k, want[start] if start < len(want) else None
        i += 1
    return None


def _id_text(ident: Hashable | None) -> str | None:
    return None if ident is None else str(ident)
