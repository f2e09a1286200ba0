"""Contact debouncing for panel buttons and the key switch. Pure: the caller passes the time.

The times are the panel's own where it has a clock (a millisecond stamp in each report or line,
unwrapped by ``DeviceClock``): a press and its release read together after the process stalled
are still as far apart as the panel saw them (docs/panel.md "When did the panel see it").

Two rules, both in ``debounce_s`` seconds:
- ``Debouncer``: a new level counts only once it has held for ``debounce_s``; contact bounce
  and glitches shorter than that are ignored. Releases are debounced like presses, so a
  re-press within ``debounce_s`` of a release is part of the same press (no second edge);
- ``RepeatGuard``: a press that comes less than ``debounce_s`` after the previous accepted
  press of the same button is ignored. The serial line panel, whose firmware debounces and
  sends only press lines, uses this rule.
"""

from __future__ import annotations

from collections.abc import Mapping


class Debouncer:
    """Stable levels of named channels, from raw level samples."""

    def __init__(self, debounce_s: float):
        if debounce_s < 0:
            raise ValueError("debounce time must be >= 0")
        self.debounce_s = debounce_s
        self._stable: dict[str, bool] = {}
        self._candidate: dict[str, tuple[bool, float]] = {}  # level, since

    def reset(self, levels: Mapping[str, bool]) -> None:
        """Adopt ``levels`` as the stable state without reporting them (a fresh connection)."""
        self._stable = dict(levels)
        self._candidate.clear()

    def feed(self, now: float, levels: Mapping[str, bool]) -> None:
        """A raw sample of every channel's level, seen by the panel no later than ``now``."""
        for name, level in levels.items():
            pending = self._candidate.get(name)
            if level == self._stable.get(name):
                self._candidate.pop(name, None)  # a glitch that went back: forget it
            elif pending is None or pending[0] != level:
                self._candidate[name] = (level, now)

    def poll(self, now: float) -> list[tuple[str, bool]]:
        """Level changes that have held for the debounce time, oldest first, given that the
        levels last fed were still the panel's levels at ``now`` (a time no later than the
        panel's next change: call it before feeding that change)."""
        confirmed = sorted(
            (since, name, level) for name, (level, since) in self._candidate.items()
            if now - since >= self.debounce_s
        )
        for _, name, level in confirmed:
            self._stable[name] = level
            del self._candidate[name]
        return [(name, level) for _, name, level in confirmed]

    def next_deadline(self) -> float | None:
        """When the earliest pending change will be confirmed, or None if none is pending."""
        if not self._candidate:
            return None
        return min(since for _, since in self._candidate.values()) + self.debounce_s


class RepeatGuard:
    """Drops a press of a button that follows its previous accepted press too closely."""

    def __init__(self, window_s: float):
        if window_s < 0:
            raise ValueError("repeat window must be >= 0")
        self.window_s = window_s
        self._last: dict[str, float] = {}

    def accept(self, name: str, now: float) -> bool:
        last = self._last.get(name)
        if last is not None and now - last < self.window_s:
            return False
        self._last[name] = now
        return True


STAMP_MODULUS = 1 << 32  # a panel's millisecond counter: 32 bits, wrapping after 49.7 days


class DeviceClock:
    """A panel's free-running millisecond counter as seconds that never wrap back.

    Stamps are taken in the order the panel sent them; each is after the previous one by
    its difference modulo 2**32 ms, so a wrap of the counter is a step forward, not back."""

    def __init__(self) -> None:
        self._last_ms: int | None = None
        self._seconds = 0.0

    def seconds(self, stamp_ms: int) -> float:
        if self._last_ms is not None:
            self._seconds += ((stamp_ms - self._last_ms) % STAMP_MODULUS) / 1000.0
        self._last_ms = stamp_ms % STAMP_MODULUS
        return self._seconds
