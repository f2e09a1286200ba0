"""Plugins by name: built-in ones plus those other packages add through an entry-point group.

A plugin is named by a ``"module:attr"`` target (several, ``;``-separated, when a plugin has
more than one part, as a transport has its class and its settings class). Nothing is imported
until a plugin is loaded, so a table that does not use a USB panel or MQTT never imports
pyusb or paho. Used by drivers (drivers/registry.py) and transports (controller.transports).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


class Registry:
    """The plugins of one kind: ``builtin`` name -> target, and the entry points of ``group``
    (a built-in name wins over an entry point of the same name)."""

    def __init__(self, group: str, builtin: Mapping[str, str], *, noun: str,
                 error: type[Exception] = LookupError):
        self.group = group
        self.builtin = dict(builtin)
        self.noun = noun          # "driver", "transport kind": what the error messages say
        self.error = error        # raised for an unknown name or a target of the wrong type

    def available(self) -> dict[str, str]:
        """Every known name with its target."""
        # importlib.metadata (email, zipfile, csv…) only when a plugin is looked up, not for
        # every command that imports a registry's errors
        from importlib.metadata import entry_points

        found = dict(self.builtin)
        for ep in entry_points(group=self.group):
            found.setdefault(ep.name, ep.value)
        return found

    def targets(self, name: str) -> list[str]:
        """The ``module:attr`` targets of ``name``, one per part."""
        known = self.available()
        if name not in known:
            raise self.error(f"unknown {self.noun} {name!r}; known: "
                             f"{', '.join(sorted(known)) or 'none installed'}")
        return [part.strip() for part in known[name].split(";")]

    def load(self, name: str, part: int = 0, *, base: type | None = None) -> Any:
        """Import part ``part`` of plugin ``name``; with ``base``, it must be a subclass."""
        target = self.targets(name)[part]
        module_name, _, attr = target.partition(":")
        loaded = getattr(importlib.import_module(module_name), attr)
        if base is not None and not (isinstance(loaded, type) and issubclass(loaded, base)):
            raise self.error(f"{self.noun} {name!r} ({target}) is not a {base.__name__} class")
        return loaded
