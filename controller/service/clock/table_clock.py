"""The table's clock: wall-clock seconds that never go backwards, and deadlines that a step of
the wall clock (NTP, a person with ``date``) neither shortens nor lengthens.

Two sources, both parameters so tests can step a wall clock without touching the machine's:
the wall clock (``time.time``: what events carry) and the monotonic clock
(``time.monotonic``: what a countdown is measured with). Table time is:

* **free** (no deadline pending): the wall clock, but never less than the last reading. A
  forward step is followed at once; after a backward step table time *holds* until the wall
  clock passes it again, so event times never go backwards.
* **steady** (a deadline is pending, the owner loop says so with ``keep_steady(True)``): the
  table time when it became steady plus the monotonic seconds since. A wall-clock step now
  changes nothing; once steady ends, table time rejoins the wall clock as above.

Every reading compares the wall clock with the monotonic one: when their difference moves by
more than ``step_threshold`` the wall clock was stepped. The step is kept for the owner loop
(``take_steps``), which logs it and shows it in the status. docs/clock.md tells the story.

``speed`` > 1 runs table time faster than real time from ``start`` (the demo and soak runs);
such a clock is steady all the time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: a wall-clock jump larger than this against the monotonic clock is a step, not a slew
STEP_THRESHOLD_S = 1.0


@dataclass(frozen=True, slots=True)
class ClockStep:
    """A wall-clock step seen by the table: ``seconds`` > 0 forward, < 0 backward."""
    seconds: float
    wall_time: float  # the wall clock's reading just after the step

    @property
    def direction(self) -> str:
        return "forward" if self.seconds > 0 else "backward"


class TableClock:
    """The table's clock in Unix seconds; thread-safe, never decreasing.

    ``wall`` and ``monotonic`` are the sources (defaults ``time.time``, ``time.monotonic``).
    """

    speed: float

    def __init__(self, speed: float = 1.0, start: float | None = None, *,
                 wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 step_threshold: float = STEP_THRESHOLD_S):
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = speed
        self._wall = wall
        self._monotonic = monotonic
        self._step_threshold = step_threshold
        self._lock = threading.Lock()
        wall_now, mono_now = wall(), monotonic()
        self._floor: float = wall_now if start is None else start  # the last reading
        # Steady time is anchor_table + (monotonic - anchor_mono) * speed.
        self._steady: bool = speed != 1.0
        self._anchor_table: float = self._floor
        self._anchor_mono: float = mono_now
        self._wall_minus_mono: float = wall_now - mono_now
        self._steps: list[ClockStep] = []

    def __call__(self) -> float:
        return self.now()

    def now(self) -> float:
        with self._lock:
            mono = self._monotonic()
            wall = self._wall()
            self._watch_for_step(wall, mono)
            if self._steady:
                reading = self._anchor_table + (mono - self._anchor_mono) * self.speed
            else:
                reading = wall
            self._floor = max(self._floor, reading)
            return self._floor

    def keep_steady(self, steady: bool) -> None:
        """Steady (``True``) while a deadline is pending: table time then runs on the monotonic
        clock from its current reading. A fast clock is always steady."""
        if self.speed != 1.0 or steady == self._steady:
            return
        reading = self.now()
        with self._lock:
            self._steady = steady
            self._anchor_table, self._anchor_mono = reading, self._monotonic()

    @property
    def steady(self) -> bool:
        return self._steady

    def catch_up(self, table_time: float) -> None:
        """Never read earlier than ``table_time`` (the last journaled time, after a restart).
        A fast clock restarted after a stop resumes from there (the demo)."""
        now = self.now()
        if now >= table_time:
            return
        with self._lock:
            self._floor = max(self._floor, table_time)
            if self._steady:
                self._anchor_table, self._anchor_mono = table_time, self._monotonic()

    def ahead_of_wall(self) -> float:
        """Seconds table time is ahead of the wall clock (held after a backward step), else 0."""
        return max(0.0, self.now() - self._wall()) if self.speed == 1.0 else 0.0

    def take_steps(self) -> list[ClockStep]:
        """The wall-clock steps seen since the last call, oldest first."""
        with self._lock:
            steps, self._steps = self._steps, []
        return steps

    def real_seconds(self, table_seconds: float) -> float:
        """Real seconds until ``table_seconds`` of table time have passed."""
        return table_seconds / self.speed

    def _watch_for_step(self, wall: float, mono: float) -> None:
        """Both clocks advance together unless the wall clock was stepped (lock held)."""
        wall_minus_mono = wall - mono
        jump = wall_minus_mono - self._wall_minus_mono
        self._wall_minus_mono = wall_minus_mono
        if abs(jump) > self._step_threshold:
            self._steps.append(ClockStep(round(jump, 3), wall))
