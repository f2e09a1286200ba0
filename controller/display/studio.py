"""What a studio's stream graphic shows beside the game: the table's bet limits, its currency
and branding colours (the config's ``display.studio``), and the paytable the table settles by;
and the studio's time zone, whose day the game ids carry.

The paytable is not a setting: it is read from the rules the table settles with
(``controller/rules/hands.py``), so the stream can never promise odds the table does not pay.
The limits, colours and time zone are the studio's; ``parse_studio`` checks them and names
each bad key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from controller.rules.hands import (
    PAIR_BET_WIN_RETURN,
    PLAYER_BET_DEDUCTED,
    RETURN_LOSE_PATTERN,
    RETURN_WIN,
    RETURN_WIN_PATTERN,
)

#: the colours a studio may set, and the defaults (display.css ``--accent``, ``--brand``)
COLOUR_KEYS = {"accent": "#ffd23f", "brand": "#0b1713"}
_HEX_COLOUR = re.compile(r"^#[0-9a-fA-F]{6}$")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
LIMIT_KEYS = ("player", "pair")
STUDIO_KEYS = ("currency", "limits", "colours", "timezone")
#: the largest bet limit: nine digits (999,999,999 fits its line on every page; a page's
#: numbers end at 2**53 and "1e400" would read as infinity)
LIMIT_MAX = 999_999_999


def _odds(units: int) -> str:
    return f"{units}:1"


#: the paytable, one row per case, as the screens' words key and the odds: units won or lost
#: per unit staked, from the returns the table pays (a Player bet takes two units: stake and
#: held amount; docs/rules.md §7, §8)
PAYTABLE: tuple[dict[str, str | None], ...] = (
    {"key": "pay.win", "odds": _odds(RETURN_WIN - PLAYER_BET_DEDUCTED)},
    {"key": "pay.win_pattern", "odds": _odds(RETURN_WIN_PATTERN - PLAYER_BET_DEDUCTED)},
    {"key": "pay.lose_pattern", "odds": _odds(PLAYER_BET_DEDUCTED - RETURN_LOSE_PATTERN)},
    {"key": "pay.tie", "odds": None},
    {"key": "pay.pair", "odds": _odds(PAIR_BET_WIN_RETURN - 1)},
    {"key": "pay.banker_06", "odds": None},
)


@dataclass(frozen=True)
class Limits:
    minimum: int
    maximum: int


@dataclass(frozen=True)
class StudioSettings:
    """``display.studio``: limits per bet (``player``, ``pair``), the currency code, colours,
    and the IANA time zone of the table's day (``""``: the system's local zone)."""

    currency: str = ""
    limits: Mapping[str, Limits] = field(default_factory=dict)
    colours: Mapping[str, str] = field(default_factory=lambda: dict(COLOUR_KEYS))
    timezone: str = ""

    def zone(self) -> tzinfo | None:
        """The zone whose day a game id carries; None: the system's local zone."""
        return ZoneInfo(self.timezone) if self.timezone else None

    def to_json(self) -> dict[str, Any]:
        """What the pages get in the feed's ``state``: plain JSON, paytable included."""
        return {"currency": self.currency,
                "limits": {name: {"min": limit.minimum, "max": limit.maximum}
                           for name, limit in self.limits.items()},
                "colours": dict(self.colours), "paytable": [dict(row) for row in PAYTABLE],
                "timezone": self.timezone}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StudioSettings:
        """Back from ``to_json`` (the screen process gets its settings as JSON)."""
        return cls(currency=str(data.get("currency") or ""),
                   limits={name: Limits(int(v["min"]), int(v["max"]))
                           for name, v in (data.get("limits") or {}).items()},
                   colours=dict(data.get("colours") or COLOUR_KEYS),
                   timezone=str(data.get("timezone") or ""))


def parse_studio(data: object, where: str = "display.studio") -> tuple[StudioSettings, list[str]]:
    """The studio section, and every problem found in it, each naming its key path."""
    if data is None:
        return StudioSettings(), []
    if not isinstance(data, Mapping):
        return StudioSettings(), [f"{where}: must be a mapping ({', '.join(STUDIO_KEYS)}), "
                                  f"got {data!r}"]
    problems: list[str] = []
    unknown = sorted(set(map(str, data)) - set(STUDIO_KEYS))
    problems += [f"{where}.{key}: unknown key ({', '.join(STUDIO_KEYS)})" for key in unknown]
    currency = data.get("currency", "")
    if currency != "" and (not isinstance(currency, str) or not _CURRENCY.fullmatch(currency)):
        problems.append(f"{where}.currency: must be a three-letter ISO 4217 code such as PHP, "
                        f"MYR or JPY, got {currency!r}")
        currency = ""
    limits = _parse_limits(data.get("limits") or {}, f"{where}.limits", problems)
    colours = _parse_colours(data.get("colours") or {}, f"{where}.colours", problems)
    zone = _parse_timezone(data.get("timezone", ""), f"{where}.timezone", problems)
    return StudioSettings(str(currency), limits, colours, zone), problems


def _parse_timezone(name: object, where: str, problems: list[str]) -> str:
    """An IANA zone name the system's time zone database has ("": the system's local zone)."""
    if name == "":
        return ""
    if not isinstance(name, str):
        problems.append(f"{where}: must be an IANA time zone name such as Asia/Manila, "
                        f"got {name!r}")
        return ""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: not even a name ("../x")
        problems.append(f"{where}: {name!r} is not a time zone this system knows (an IANA "
                        f"name such as Asia/Manila or Europe/London; tzdata lists them)")
        return ""
    return name


def _parse_limits(data: object, where: str, problems: list[str]) -> dict[str, Limits]:
    if not isinstance(data, Mapping):
        problems.append(f"{where}: must be a mapping of player and pair, got {data!r}")
        return {}
    limits: dict[str, Limits] = {}
    for name, value in data.items():
        path = f"{where}.{name}"
        if name not in LIMIT_KEYS:
            problems.append(f"{path}: unknown bet (player, pair)")
            continue
        if not isinstance(value, Mapping) or set(value) != {"min", "max"}:
            problems.append(f"{path}: must be {{min: N, max: N}}, got {value!r}")
            continue
        low, high = value["min"], value["max"]
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= LIMIT_MAX
                   for v in (low, high)):
            problems.append(f"{path}: min and max must be whole amounts from 1 to "
                            f"{LIMIT_MAX:,}, got min {low!r}, max {high!r}")
        elif low > high:
            problems.append(f"{path}: min {low} is above max {high}")
        else:
            limits[str(name)] = Limits(low, high)
    return limits


def _parse_colours(data: object, where: str, problems: list[str]) -> dict[str, str]:
    colours = dict(COLOUR_KEYS)
    if not isinstance(data, Mapping):
        problems.append(f"{where}: must be a mapping of accent and brand, got {data!r}")
        return colours
    for name, value in data.items():
        path = f"{where}.{name}"
        if name not in COLOUR_KEYS:
            problems.append(f"{path}: unknown colour ({', '.join(COLOUR_KEYS)})")
        elif not isinstance(value, str) or not _HEX_COLOUR.fullmatch(value):
            problems.append(f"{path}: must be a colour as #rrggbb (quoted in YAML), "
                            f"got {value!r}")
        else:
            colours[str(name)] = value.lower()
    return colours
