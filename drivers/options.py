"""Reading a driver's options: typed, bounded, unknown keys rejected, every problem at once.

Each reader records what is wrong and returns the default, so one ``finish()`` raises a single
``DriverConfigError`` listing every problem, each naming its option, e.g.
``hid_panel option "buttons.reveal": must be in 0..7, got 9``: a typo in the table's YAML must
stop the daemon at start, not leave a button dead on the floor, and the config check
(controller/service/config/settings.py) shows them all under their key paths in one go.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from drivers.base import DriverConfigError

_REQUIRED = object()


class OptionReader:
    def __init__(self, options: Mapping[str, Any] | None, driver: str):
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise DriverConfigError(
                f"{driver} options must be a mapping, got {type(options).__name__}")
        self._options = dict(options)
        self._driver = driver
        self._read: set[str] = set()
        self._problems: list[tuple[str | None, str]] = []

    def problem(self, key: str | None, message: str) -> None:
        """Record a problem with option ``key`` (None: the options as a whole)."""
        self._problems.append((key, message))

    def allow(self, *keys: str) -> None:
        """Options that are known although this reader does not read them."""
        self._read.update(keys)

    def raw(self, key: str, default: Any = _REQUIRED, required: str = "is required") -> Any:
        """The option as written (None when missing and required: the problem is recorded)."""
        self._read.add(key)
        if key not in self._options or self._options[key] is None:
            if default is _REQUIRED:
                self.problem(key, required)
                return None
            return default
        return self._options[key]

    def integer(self, key: str, default: Any = _REQUIRED, minimum: int | None = None,
                maximum: int | None = None) -> Any:
        value = self.raw(key, default)
        if value is None or (value is default and default is not _REQUIRED):
            return value
        return self.check_int(key, value, minimum, maximum, default)

    def check_int(self, key: str, value: Any, minimum: int | None = None,
                  maximum: int | None = None, default: Any = None) -> Any:
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
            self.problem(key, f"expected an integer, got {value!r}")
            return None if default is _REQUIRED else default
        if not _within(number, minimum, maximum):
            self.problem(key, f"must be {_bounds(minimum, maximum)}, got {value!r}")
            return None if default is _REQUIRED else default
        return number

    def number(self, key: str, default: float, minimum: float, maximum: float | None = None,
               *, allow_zero: bool = False) -> float:
        """A finite number within bounds; ``allow_zero`` also takes 0 (a switch-off value)."""
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value):
            self.problem(key, f"expected a number, got {value!r}")
            return float(default)
        if not (_within(value, minimum, maximum) or (allow_zero and value == 0)):
            zero = " or 0" if allow_zero else ""
            self.problem(key, f"must be {_bounds(minimum, maximum)}{zero}, got {value!r}")
            return float(default)
        return float(value)

    def text(self, key: str, default: Any = _REQUIRED, *, required: str = "is required",
             choices: tuple[str, ...] | None = None) -> Any:
        value = self.raw(key, default, required)
        if value is None or (value is default and default is not _REQUIRED):
            return value
        if not isinstance(value, str) or not value:
            self.problem(key, f"expected a non-empty string, got {value!r}")
            return None if default is _REQUIRED else default
        if choices is not None and value not in choices:
            self.problem(key, f"expected one of {', '.join(choices)}, got {value!r}")
            return None if default is _REQUIRED else default
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            self.problem(key, f"expected true or false, got {value!r}")
            return default
        return value

    def mapping(self, key: str, default: Any = _REQUIRED) -> dict[str, Any]:
        value = self.raw(key, default)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(key, f"expected a mapping of name: value, got {value!r}")
            return {}
        return dict(value)

    def bit_map(self, key: str, max_bit: int, names: tuple[str, ...] | None,
                default: Any = _REQUIRED) -> dict[str, int]:
        """``{name: bit}``; names limited to ``names`` when given; no bit used twice."""
        out: dict[str, int] = {}
        by_bit: dict[int, str] = {}
        for name, raw_bit in self.mapping(key, default).items():
            where = f"{key}.{name}"
            if names is not None and name not in names:
                self.problem(where, f"unknown name; expected one of: {', '.join(names)}")
                continue
            if not isinstance(name, str) or not name.isidentifier():
                self.problem(where, "names must be plain words like start_round")
                continue
            bit = self.check_int(where, raw_bit, 0, max_bit)
            if bit is None:
                continue
            if bit in by_bit:
                self.problem(where, f"bit {bit} is already used by {by_bit[bit]}")
                continue
            out[name] = bit
            by_bit[bit] = name
        return out

    def finish(self) -> None:
        """Raise one DriverConfigError for every problem found, unknown options included
        (a typo is an error, not a silently ignored key)."""
        unknown = sorted(set(self._options) - self._read)
        if unknown:
            known = ', '.join(sorted(self._read))
            self._problems.extend((key, f"unknown option; known: {known}") for key in unknown)
        if not self._problems:
            return
        message = "; ".join(f'{self._driver} option "{key}": {problem}' if key else
                            f"{self._driver}: {problem}" for key, problem in self._problems)
        raise DriverConfigError(message, problems=self._problems)


def _within(value: float, minimum: float | None, maximum: float | None) -> bool:
    return (minimum is None or value >= minimum) and (maximum is None or value <= maximum)


def _bounds(minimum: float | None, maximum: float | None) -> str:
    if maximum is None:
        return f">= {minimum}"
    if minimum is None:
        return f"<= {maximum}"
    return f"in {minimum}..{maximum}"
