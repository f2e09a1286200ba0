"""Reading systemd unit files as the tests compare them."""

from __future__ import annotations

from pathlib import Path


def unit_directives(unit: Path) -> dict[str, list[str]]:
    """Every `Key=value` of a unit file, values of repeated keys in order (sections ignored)."""
    found: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        found.setdefault(key.strip(), []).append(value.strip())
    return found
