"""Helpers the panel drivers share: strict option reading and rate-limited problem logs.

Options are typed, bounded, and unknown keys are rejected. Every error is a ``DriverConfigError`` that names the driver and the option, e.g.
``hid_panel option "buttons.reveal": expected a bit number 0..7, got 9``, because a typo in
the table's YAML must stop the daemon at start, not leave a button dead on the floor.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable, Mapping

from drivers.base import DriverConfigError

_REQUIRED = object()


class OptionReader:
    def __init__(self, options: Mapping[str, Any], driver: str):
        if not isinstance(options, Mapping):
            raise DriverConfigError(f"{driver} options must be a mapping, got {type(options).__name__}")
        self._options = dict(options)
        self._driver = driver
        self._read: set[str] = set()

    def error(self, key: str, message: str) -> DriverConfigError:
        return DriverConfigError(f'{self._driver} option "{key}": {message}', key, message)

    def _get(self, key: str, default: Any) -> Any:
        self._read.add(key)
        if key not in self._options or self._options[key] is None:
            if default is _REQUIRED:
                raise self.error(key, "is required")
            return default
        return self._options[key]

    def integer(self, key: str, default: Any = _REQUIRED, minimum: int | None = None,
                maximum: int | None = None) -> Any:
        value = self._get(key, default)
        if value is default and default is not _REQUIRED:
            return value
        return self.check_int(key, value, minimum, maximum)

    def check_int(self, key: str, value: Any, minimum: int | None = None,
                  maximum: int | None = None) -> int:
        """An int, or a string such as "0x16c0" (YAML users write USB ids in hex)."""
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str):
            try:
                number = int(value.strip(), 0)
            except ValueError:
                number = None
        if number is None:
            raise self.error(key, f"expected an integer, got {value!r}")
        if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
            raise self.error(key, f"must be in {minimum}..{maximum}, got {value!r}")
        return number

    def number(self, key: str, default: float, minimum: float, maximum: float) -> float:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, f"expected a number, got {value!r}")
        if not minimum <= value <= maximum:
            raise self.error(key, f"must be in {minimum}..{maximum}, got {value!r}")
        return float(value)

    def text(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self._get(key, default)
        if value is default and default is not _REQUIRED:
            return value
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def mapping(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self._get(key, default)
        if value is default and default is not _REQUIRED:
            return value
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping of name: value, got {value!r}")
        return dict(value)

    def bit_map(self, key: str, max_bit: int, names: tuple[str, ...] | None,
                default: Any = _REQUIRED) -> dict[str, int]:
        """``{name: bit}``; names limited to ``names`` when given; no bit used twice."""
        raw = self.mapping(key, default)
        out: dict[str, int] = {}
        for name, bit in raw.items():
            where = f"{key}.{name}"
            if names is not None and name not in names:
                raise self.error(where, f"unknown name; expected one of: {', '.join(names)}")
            if not isinstance(name, str) or not name.isidentifier():
                raise self.error(where, "names must be plain words like start_round")
            out[name] = self.check_int(where, bit, 0, max_bit)
        by_bit: dict[int, str] = {}
        for name, bit in out.items():
            if bit in by_bit:
                raise self.error(f"{key}.{name}", f"bit {bit} is already used by {by_bit[bit]}")
            by_bit[bit] = name
        return out

    def finish(self) -> None:
        """Reject options nobody read: a typo is an error, not a silently ignored key."""
        unknown = sorted(set(self._options) - self._read)
        if unknown:
            known = ', '.join(sorted(self._read))
            raise DriverConfigError(
                f"{self._driver}: unknown option(s) {', '.join(map(repr, unknown))}; "
                f"known options: {known}",
                problems=[(key, f"unknown option; known: {known}") for key in unknown])



class RateLimitedLog:
    """Logs a recurring device problem at most once per ``interval_s``, with the count of
    occurrences since the last line, so a babbling device cannot flood the journal."""

    def __init__(self, logger: logging.Logger, interval_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic):
        self._logger = logger
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, message: str, *args: Any) -> None:
        now = self._monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        suppressed = self._suppressed.pop(key, 0)
        if suppressed:
            message += f" ({suppressed} more like this since the last report)"
        self._logger.warning(message, *args)
