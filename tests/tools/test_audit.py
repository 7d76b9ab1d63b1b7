"""The exactly-once checker (``recprep.testing.check_exactly_once``) and ``recprep audit``.

A clean pipeline is reported clean (RecordIO plain and shuffled, world changes, epochs,
index splits, mixes, torch datasets in process and with worker processes); a pipeline
broken on purpose (a wrapper that drops, repeats or reorders an instance on resume) is
caught, with the ids and the places. The command runs as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import InvalidArgumentError, RecordIO, convert, index_split, mix
from recprep.read.mixing import Mix
from recprep.read.splits import IndexSplit
from recprep.testing import Plan, check_exactly_once, instance_id

N = 60
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


@pytest.fixture
def pattern(tmp_path) -> str:
    convert(str(tmp_path / "d"), [(i, f"w{i}") for i in range(N)], 4, "t",
            chunk_bytes=128, progress=False)
    return str(tmp_path / "d" / "t-*-of-*")


def plain(pattern: str, **options: Any):
    return lambda rank, world: RecordIO(pattern, rank=rank, world_size=world, **options)


def shuffled(pattern: str):
    return plain(pattern, shuffle=True, seed=11, shuffle_buffer=8)


def ids(*values: Any) -> list[str]:
    return [instance_id(v) for v in values]


# -- clean pipelines: OK -----------------------------------------------------------------------


@pytest.mark.parametrize("world", [1, 3])
def test_a_plain_reader_stopped_twice_over_two_epochs_is_exactly_once(pattern, world):
    report = check_exactly_once(plain(pattern), Plan(world=world, stops=[0.3, 0.7],
                                                     epochs=2))
    assert report.ok and bool(report)
    assert (report.instances, report.interrupted, report.distinct) == (2 * N, 2 * N, N)
    assert report.missing == report.duplicated == [] and report.same_order is True
    assert report.order == "rank"
    assert [(p.world, p.began, p.stopped_in, p.instances) for p in report.phases] == [
        (world, "start", 0, 36), (world, "resumed", 1, 48), (world, "resumed", None, 36)]
    text = str(report)
    assert text.startswith("exactly-once: OK\n")
    assert "none missing, none duplicated" in text and "the same as uninterrupted" in text


@pytest.mark.parametrize("worlds", [(4, [3]), (2, [3, 1]), (3, [3])])
def test_a_shuffled_reader_resumed_with_other_world_sizes_is_exactly_once(pattern, worlds):
    world, resume = worlds
    stops = [0.37] if len(resume) == 1 else [0.25, 0.6]
    report = check_exactly_once(shuffled(pattern), Plan(world=world, stops=stops,
                                                        resume_world=resume, epochs=2))
    assert report.ok, str(report)
    assert report.order == ("rank" if resume == [world] else "global")
    assert [p.began for p in report.phases][1:] == [
        "resumed" if w == prev else "combined"
        for prev, w in zip([world, *resume], resume, strict=False)]


def test_a_stop_at_zero_resumes_from_the_start(pattern):
    report = check_exactly_once(shuffled(pattern), Plan(world=2, stops=[0.0],
                                                        resume_world=3))
    assert report.ok and [p.instances for p in report.phases] == [0, N]


def test_an_index_split_is_exactly_once(pattern):
    def make(rank, world):
        return index_split(RecordIO(pattern, rank=rank, world_size=world),
                           {"train": 0.75, "val": 0.25})["train"]

    report = check_exactly_once(make, Plan(world=2, stops=[0.4], epochs=2))
    assert report.ok and report.instances == 2 * 45 and report.distinct == 45


def test_an_index_split_across_world_sizes_needs_combine_states(pattern):
    def make(rank, world):
        return index_split(RecordIO(pattern, rank=rank, world_size=world),
                           {"train": 0.75, "val": 0.25})["train"]

    plan = Plan(world=2, stops=[0.4], resume_world=3)
    if hasattr(IndexSplit, "combine_states"):
        assert check_exactly_once(make, plan).ok
        return
    with pytest.raises(InvalidArgumentError, match=r"changes the world from 2 to 3 ranks, "
                       r"but IndexSplit has no combine_states"):
        check_exactly_once(make, plan)


def mixed(tmp_path, pattern, *, shuffle_b=False):
    convert(str(tmp_path / "b"), [("b", i) for i in range(30)], 2, "b", progress=False)

    def make(rank, world):
        return mix([RecordIO(pattern, rank=rank, world_size=world, shuffle=True, seed=2,
                             shuffle_buffer=8),
                    RecordIO(str(tmp_path / "b" / "b-*"), rank=rank, world_size=world,
                             shuffle=shuffle_b, seed=9)],
                   [2, 1], seed=5, stop="all")
    return make


def test_a_mix_is_exactly_once(tmp_path, pattern):
    report = check_exactly_once(mixed(tmp_path, pattern), Plan(world=2, stops=[0.2, 0.55],
                                                               epochs=2))
    assert report.ok, str(report)
    assert report.instances == 2 * (N + 30)


def test_a_mix_across_world_sizes(tmp_path, pattern):
    if not hasattr(Mix, "combine_states"):
        pytest.skip("Mix.combine_states isn't there yet (issue 26, item 1): a mix resumes "
                    "only into the same world size")
    make = mixed(tmp_path, pattern, shuffle_b=True)
    plan = Plan(world=4, stops=[0.37], resume_world=3, epochs=2)
    report = check_exactly_once(make, plan, source=lambda x: x[0] == "b")
    assert report.ok, str(report)  # exactly once, each source in its order
    assert report.instances == report.interrupted == 2 * (N + 30)
    assert [p.began for p in report.phases] == ["start", "combined"]


# The checker's first finds (issue 26): a split or a mix loaded with the state of a rank
# that had finished its pass, then set to that epoch again (the order of a training loop:
# load, then set_epoch each epoch), reads the whole epoch again; RecordIO reads nothing.
# Strict: when they are fixed, these XPASS and fail; remove the markers then.


def thirteen(tmp_path) -> str:
    convert(str(tmp_path / "o"), [(i,) for i in range(13)], 1, "o", progress=False)
    return str(tmp_path / "o" / "o-*")


def test_a_split_rank_that_had_finished_reads_nothing_more_that_epoch(tmp_path):
    path = thirteen(tmp_path)
    report = check_exactly_once(
        lambda r, w: index_split(RecordIO(path, rank=r, world_size=w), {"all": 1.0})["all"],
        Plan(world=5, stops=[0.5], epochs=2))
    assert report.ok, str(report)


def test_a_mix_rank_that_had_finished_reads_nothing_more_that_epoch(tmp_path):
    path = thirteen(tmp_path)
    report = check_exactly_once(
        lambda r, w: mix([RecordIO(path, rank=r, world_size=w)], [1], seed=1),
        Plan(world=3, stops=[0.5], epochs=2))
    assert report.ok, str(report)


def test_a_recordio_rank_that_had_finished_reads_nothing_more_that_epoch(tmp_path):
    path = thirteen(tmp_path)
    for world, stop in [(5, 0.5), (3, 0.5)]:
        report = check_exactly_once(lambda r, w: RecordIO(path, rank=r, world_size=w),
                                    Plan(world=world, stops=[stop], epochs=2))
        assert report.ok, str(report)


# -- broken pipelines: caught, with the ids and the places ---------------------------------------


class Broken:
    """A reader that misbehaves when resumed: ``"drop"`` the first instance it would
    yield, ``"repeat"`` the last instance it had yielded, or ``"swap"`` the first two."""

    def __init__(self, reader: RecordIO, how: str) -> None:
        self.reader, self.how, self.resumed, self.last = reader, how, False, None

    def set_epoch(self, epoch: int) -> None:
        self.reader.set_epoch(epoch)

    @staticmethod
    def combine_states(states: list[dict[str, Any]]) -> dict[str, Any]:
        return {"inner": RecordIO.combine_states([s["inner"] for s in states]),
                "last": None}

    def state_dict(self) -> dict[str, Any]:
        return {"inner": self.reader.state_dict(), "last": self.last}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.reader.load_state_dict(state["inner"])
        self.resumed, self.last = True, state["last"]

    def __call__(self) -> Iterator[Any]:
        stream = self.reader()
        if self.resumed:
            self.resumed = False
            if self.how == "drop":
                next(stream, None)
            elif self.how == "repeat" and self.last is not None:
                yield tuple(self.last)
            elif self.how == "swap":
                first, second = next(stream), next(stream)
                stream = iter([second, first, *stream])
        for item in stream:
            self.last = item
            yield item


def broken(pattern, how, **options):
    return lambda rank, world: Broken(RecordIO(pattern, rank=rank, world_size=world,
                                               **options), how)


def test_an_instance_dropped_on_resume_is_caught_with_its_id_and_place(pattern):
    report = check_exactly_once(broken(pattern, "drop"), Plan(world=2, stops=[0.5]))
    uninterrupted = {}
    for rank in (0, 1):  # what each rank reads, uninterrupted
        uninterrupted[rank] = list(RecordIO(pattern, rank=rank, world_size=2)())
    lost = [uninterrupted[r][15] for r in (0, 1)]  # 30 consumed: 15 per rank
    assert not report.ok and report.missing_total == 2 and report.duplicated == []
    assert [(c.id, c.epoch, c.expected, c.found) for c in report.missing] == sorted(
        (i, 0, 1, 0) for i in ids(*lost))
    places = {c.id: c.where for c in report.missing}
    assert places[instance_id(lost[0])] == ["rank 0/15 uninterrupted"]
    assert places[instance_id(lost[1])] == ["rank 1/15 uninterrupted"]
    assert {c.instance for c in report.missing} == {repr(v) for v in lost}
    text = str(report)
    assert text.startswith("exactly-once: FAILED: 2 id(s) missing; the order differs\n")
    assert f"id {instance_id(lost[0])} {lost[0]!r} in epoch 0: expected 1, found 0 " \
           "(at rank 0/15 uninterrupted)" in text


def test_an_instance_repeated_on_resume_is_caught_with_both_places(pattern):
    report = check_exactly_once(broken(pattern, "repeat", shuffle=True, seed=4),
                                Plan(world=1, stops=[0.125], epochs=2))
    first = list(RecordIO(pattern, shuffle=True, seed=4)())
    again = first[14]  # 15 consumed (0.125 of 2 x 60): the 15th comes twice
    assert not report.ok and report.missing == [] and report.duplicated_total == 1
    [count] = report.duplicated
    assert (count.id, count.epoch, count.expected, count.found) == (
        instance_id(again), 0, 1, 2)
    assert count.where == ["phase 0 rank 0/14", "phase 1 rank 0/0"]
    assert report.same_order is False
    assert report.divergence is not None
    assert (report.divergence.rank, report.divergence.position, report.divergence.found,
            report.divergence.expected) == (0, 15, instance_id(again),
                                           instance_id(first[15]))
    assert "1 id(s) duplicated" in str(report).splitlines()[0]


def test_a_reordering_on_resume_is_caught_by_the_order_alone(pattern):
    report = check_exactly_once(broken(pattern, "swap", shuffle=True, seed=4),
                                Plan(world=3, stops=[0.5], resume_world=2))
    assert report.missing == report.duplicated == [] and not report.ok
    assert report.order == "global" and report.same_order is False
    old = [RecordIO(pattern, rank=r, world_size=3, shuffle=True, seed=4) for r in range(3)]
    streams = [r() for r in old]
    for _ in range(10):  # lockstep to the stop: 30 instances, 10 a rank
        for stream in streams:
            next(stream)
    rank0 = RecordIO(pattern, rank=0, world_size=2, shuffle=True, seed=4)
    rank0.load_state_dict(RecordIO.combine_states([r.state_dict() for r in old]))
    a, b = list(rank0())[:2]  # what the new rank 0 should yield first: a, then b
    div = report.divergence
    assert div is not None and div.rank is None and div.phase == 1 and div.position == 30
    assert (div.expected, div.found) == (instance_id(a), instance_id(b))
    assert "the order differs" in str(report).splitlines()[0]
    assert "differs (global: the ranks' streams concatenated) at the global order, " \
           "epoch 0, position 30 (phase 1)" in str(report)
    assert check_exactly_once(broken(pattern, "swap", shuffle=True, seed=4),
                              Plan(world=3, stops=[0.5], resume_world=2), order="none").ok


def test_a_loss_in_the_second_epoch_names_that_epoch(pattern):
    report = check_exactly_once(broken(pattern, "drop"), Plan(world=1, stops=[0.75],
                                                              epochs=2))
    assert [(c.epoch, c.instance) for c in report.missing] == [(1, repr((30, "w30")))]


def test_order_within_each_source(pattern):
    """A reordering inside one source is found and named with ``source=``; a stream whose
    sources only interleave differently passes."""
    report = check_exactly_once(broken(pattern, "swap", shuffle=True, seed=4),
                                Plan(world=1, stops=[0.5]), source=lambda x: x[0] % 2)
    div = report.divergence
    assert not report.ok and div is not None and div.source in ("0", "1")
    assert f"rank 0 of source {div.source}, epoch 0" in str(report)

    class Interleaved(Broken):  # two sources, both in order, interleaved differently
        def __call__(self):
            items = super().__call__()
            if self.how == "moved":  # resumed: read to the end (no stop follows), moved
                rest = list(items)
                items = iter([x for x in rest if x[0] % 2 == 0] +
                             [x for x in rest if x[0] % 2])
            yield from items

        def load_state_dict(self, state):
            super().load_state_dict(state)
            self.how = "moved"

    def make(rank, world):
        return Interleaved(RecordIO(pattern, rank=rank, world_size=world), "none")

    assert check_exactly_once(make, Plan(stops=[0.5]), source=lambda x: x[0] % 2).ok
    assert not check_exactly_once(make, Plan(stops=[0.5])).ok


def test_a_key_function_names_instances_by_the_users_id(pattern):
    report = check_exactly_once(broken(pattern, "drop"), Plan(stops=[0.5]),
                                key=lambda item: item[0])
    assert [c.id for c in report.missing] == ["30"]
    assert report.to_dict()["missing"][0]["id"] == "30"


# -- what can't be checked: errors --------------------------------------------------------------


def test_an_unshuffled_reader_refuses_a_world_change(pattern):
    with pytest.raises(InvalidArgumentError, match=r"resuming with 3 rank\(s\) after the "
                       r"stop at 0.5: state 0 .* only states of shuffled passes"):
        check_exactly_once(plain(pattern), Plan(world=2, stops=[0.5], resume_world=3))


def test_a_reader_without_states_is_refused(pattern):
    with pytest.raises(InvalidArgumentError, match="has no state_dict/load_state_dict"):
        check_exactly_once(lambda r, w: [1, 2, 3], Plan(stops=[0.5]))


def test_ranks_that_draw_their_own_seeds_are_refused(pattern):
    with pytest.raises(InvalidArgumentError, match=r"rank 0 and rank 1 of 2 read with "
                       r"different seeds .* pass a fixed seed= to every rank"):
        check_exactly_once(plain(pattern, shuffle=True), Plan(world=2))


def test_worker_processes_with_a_world_change_are_refused(pattern):
    pytest.importorskip("torchdata.stateful_dataloader")
    from recprep.torch import RecordIODataset

    def make(rank, world):
        return RecordIODataset(pattern, rank=rank, world_size=world, shuffle=True, seed=3)

    with pytest.raises(InvalidArgumentError, match=r"from 2 to 1 ranks with workers=1: "
                       r"the states are StatefulDataLoader's, which don't combine"):
        check_exactly_once(make, Plan(world=2, stops=[0.5], resume_world=1), workers=1)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world=st.integers(1, 4), resume=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       fractions=st.lists(st.floats(0, 0.99), min_size=3, max_size=3),
       epochs=st.integers(1, 2), seed=st.integers(0, 100))
def test_any_plan_over_a_shuffled_reader_is_exactly_once(pattern, world, resume, fractions,
                                                         epochs, seed):
    """No false alarm: shuffled RecordIO passes resume exactly once and in order through
    any stops and world sizes."""
    stops = sorted(fractions[:len(resume)])
    report = check_exactly_once(
        plain(pattern, shuffle=True, seed=seed, shuffle_buffer=8),
        Plan(world=world, stops=stops, resume_world=resume, epochs=epochs))
    assert report.ok, str(report)
    assert report.interrupted == report.instances == epochs * N


@pytest.mark.parametrize("kwargs, message", [
    ({"stops": [0.5, 0.2]}, "increasing order"),
    ({"stops": [1.0]}, r"fractions in \[0, 1\)"),
    ({"world": 0}, "world must be an int >= 1"),
    ({"stops": [0.2, 0.4], "resume_world": [2]}, "one world size per stop"),
    ({"resume_world": 0}, "resume_world must be an int >= 1"),
])
def test_a_bad_plan_is_refused(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        Plan(**kwargs)


def test_the_default_id_tells_values_apart():
    a = np.arange(3, dtype=np.int32)
    assert instance_id(a) == instance_id(a.copy()) != instance_id(a.astype(np.int64))
    assert instance_id((1, "x")) != instance_id([1, "x"]) != instance_id((1, b"x"))
    assert instance_id({"a": 1, "b": 2}) == instance_id({"b": 2, "a": 1})
    assert instance_id("ab") != instance_id(("a", "b"))


# -- torch: a dataset whose iterator holds the state; real worker processes -----------------------


def test_a_torch_dataset_in_process_and_with_worker_processes(pattern):
    pytest.importorskip("torch")
    pytest.importorskip("torchdata.stateful_dataloader")
    from recprep.torch import RecordIODataset

    def make(rank, world):
        return RecordIODataset(pattern, rank=rank, world_size=world, shuffle=True, seed=3,
                               shuffle_buffer=8)

    in_process = check_exactly_once(make, Plan(world=2, stops=[0.4], epochs=2))
    assert in_process.ok and in_process.instances == 2 * N, str(in_process)
    workers = check_exactly_once(make, Plan(world=2, stops=[0.4]), workers=2)
    assert workers.ok and workers.instances == N, str(workers)
    assert workers.distinct == N


# -- the command ---------------------------------------------------------------------------------


def run_cli(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    command = ["-m", "recprep", *args] if code is None else ["-c", code, *args]
    return subprocess.run([sys.executable, *command], capture_output=True, text=True,
                          timeout=300)


def test_the_command_says_ok_and_exits_0(pattern):
    done = run_cli("audit", pattern, "--world", "4", "--stop", "0.37", "--resume-world",
                   "3", "--shuffle", "--seed", "7")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "exactly-once: OK"
    assert "  plan: world 4, stop at 0.37 -> world 3; 1 epoch" in lines
    assert "    phase 1: world 3, resumed (states combined), to the end: 38 instances" in lines
    assert lines[-1] == "  seed: 7 (--seed 7 repeats this check)"


def test_the_command_json(pattern):
    done = run_cli("audit", pattern, "--world", "2", "--stop", "0.3", "--stop", "0.6",
                   "--epochs", "2", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True and report["instances"] == report["interrupted"] == 2 * N
    assert report["plan"] == {"world": 2, "stops": [0.3, 0.6], "worlds": [2, 2, 2],
                              "epochs": 2}
    assert [p["instances"] for p in report["phases"]] == [36, 36, 48]
    assert report["missing"] == report["duplicated"] == [] and report["same_order"] is True


def test_the_command_exits_2_when_the_check_cannot_run(pattern, tmp_path):
    done = run_cli("audit", pattern, "--world", "2", "--stop", "0.5", "--resume-world", "3")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("recprep: error: resuming with 3 rank(s) after the stop at "
                                  "0.5: state 0 is of an unshuffled pass")
    missing = run_cli("audit", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "recprep: error:" in missing.stderr


PLANTED = textwrap.dedent("""
    import sys
    from recprep.read.reader import RecordIO
    from recprep.cli import main
    loaded = RecordIO.load_state_dict
    def load_one_ahead(self, state):  # a planted bug: a resume skips one instance
        loaded(self, {**state, "yielded": state["yielded"] + 1})
    RecordIO.load_state_dict = load_one_ahead
    sys.exit(main(sys.argv[1:]))
""")


def test_the_command_exits_1_and_names_what_a_broken_resume_lost(pattern):
    done = run_cli("audit", pattern, "--world", "2", "--stop", "0.5", "--json",
                   code=PLANTED)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["missing_total"] == 2
    lost = sorted((m["instance"], m["where"]) for m in report["missing"])
    read = [list(RecordIO(pattern, rank=r, world_size=2)()) for r in (0, 1)]
    assert lost == sorted((repr(read[r][15]), [f"rank {r}/15 uninterrupted"])
                          for r in (0, 1))
    text = run_cli("audit", pattern, "--world", "2", "--stop", "0.5", code=PLANTED)
    assert text.returncode == 1
    assert text.stdout.startswith("exactly-once: FAILED: 2 id(s) missing; the order differs")
