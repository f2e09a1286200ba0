"""TableClock with fake wall and monotonic sources: steps, holds, steady deadlines, catch-up."""

from __future__ import annotations

import threading

import pytest

from controller.service.clock.table_clock import TableClock

T0 = 1_800_000_000.0


class Sources:
    """A wall clock and a monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.mono = 100.0
        self.wall_offset = T0 - 100.0

    def wall(self) -> float:
        return self.mono + self.wall_offset

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.mono += seconds

    def step(self, seconds: float) -> None:
        self.wall_offset += seconds


@pytest.fixture
def src() -> Sources:
    return Sources()


def make(src: Sources, **kwargs) -> TableClock:
    return TableClock(wall=src.wall, monotonic=src.monotonic, **kwargs)


def test_free_clock_is_the_wall_clock(src: Sources) -> None:
    clock = make(src)
    assert clock.now() == T0
    src.advance(2.5)
    assert clock.now() == T0 + 2.5
    assert clock.take_steps() == []


def test_forward_step_is_followed_at_once_when_no_countdown_runs(src: Sources) -> None:
    clock = make(src)
    src.step(3600)
    assert clock.now() == T0 + 3600
    [step] = clock.take_steps()
    assert step.seconds == 3600 and step.direction == "forward"
    assert step.wall_time == T0 + 3600
    assert clock.take_steps() == []  # reported once


def test_backward_step_holds_table_time_until_the_wall_clock_passes_it(src: Sources) -> None:
    clock = make(src)
    src.advance(10)
    assert clock.now() == T0 + 10
    src.step(-60)
    readings = []
    for _ in range(5):
        src.advance(10)
        readings.append(clock.now())
    assert readings == [T0 + 10] * 5  # held: never back, never ahead of the journal
    assert clock.ahead_of_wall() == pytest.approx(10)
    [step] = clock.take_steps()
    assert step.seconds == -60 and step.direction == "backward"
    src.advance(20)  # the wall clock is past the held time: followed again
    assert clock.now() == T0 + 20
    assert clock.ahead_of_wall() == 0


@pytest.mark.parametrize("step", [3600.0, -3600.0])
def test_a_steady_clock_ignores_steps_and_rejoins_the_wall_clock_after(
        src: Sources, step: float) -> None:
    clock = make(src)
    clock.keep_steady(True)  # a betting countdown opened at T0
    deadline = T0 + 15
    src.advance(5)
    src.step(step)
    assert clock.now() == T0 + 5
    src.advance(9.9)
    assert clock.now() < deadline
    src.advance(0.1)
    assert clock.now() == pytest.approx(deadline)  # 15 monotonic seconds, step or no step
    assert [s.seconds for s in clock.take_steps()] == [step]
    clock.keep_steady(False)
    src.advance(1)
    if step > 0:
        assert clock.now() == pytest.approx(T0 + 16 + step)
    else:
        assert clock.now() == pytest.approx(deadline)  # held until the wall clock passes it
        clock.keep_steady(True)  # a new countdown runs while table time is held
        src.advance(15)
        assert clock.now() == pytest.approx(deadline + 15)


def test_small_differences_are_not_steps(src: Sources) -> None:
    clock = make(src)
    for _ in range(10):
        src.advance(1)
        src.step(0.2)  # a slewing clock never looks like a step
        clock.now()
    assert clock.take_steps() == []
    src.step(1.5)
    clock.now()
    assert [s.seconds for s in clock.take_steps()] == [1.5]


def test_catch_up_never_reads_earlier_than_the_journal(src: Sources) -> None:
    clock = make(src)
    clock.catch_up(T0 + 100)  # the last journaled time is ahead (a backward step before)
    assert clock.now() == T0 + 100
    clock.keep_steady(True)
    src.advance(3)
    assert clock.now() == T0 + 103
    clock.catch_up(T0)  # behind: changes nothing
    assert clock.now() == T0 + 103


def test_fast_clock_runs_speed_times_real_time_and_resumes_after_a_restart(src: Sources) -> None:
    clock = make(src, speed=10.0, start=0.0)
    src.advance(1.5)
    assert clock.now() == pytest.approx(15.0)
    assert clock.real_seconds(30.0) == 3.0
    src.step(-3600)  # the real wall clock does not move a fast clock
    src.advance(1)
    assert clock.now() == pytest.approx(25.0)
    restarted = make(src, speed=10.0, start=0.0)
    restarted.catch_up(500.0)
    src.advance(1)
    assert restarted.now() == pytest.approx(510.0)


def test_readings_from_many_threads_never_decrease() -> None:
    clock = TableClock()
    seen: list[list[float]] = [[] for _ in range(4)]

    def read(out: list[float]) -> None:
        for _ in range(2000):
            out.append(clock.now())

    threads = [threading.Thread(target=read, args=(out,)) for out in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for out in seen:
        assert out == sorted(out)


def test_speed_must_be_positive() -> None:
    with pytest.raises(ValueError, match="speed"):
        TableClock(0)
