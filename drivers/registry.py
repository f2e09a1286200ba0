"""Drivers by name, imported lazily; other packages add drivers through entry points.

A built-in name maps to ``"module:Class"``; the module is imported only when that driver is
created, so a table without a USB panel never imports pyusb. Third-party packages register in
the ``pokdeng_table.drivers`` entry-point group with the same ``module:Class`` value.
"""

from __future__ import annotations

from typing import Any

from controller.plugins import Registry
from drivers.base import Driver, DriverConfigError

ENTRY_POINT_GROUP = "pokdeng_table.drivers"

#: built-in drivers: name -> "module:Class" (filled in by the driver modules' authors)
BUILTIN: dict[str, str] = {
    # card-reading shoes (drivers/shoe.py): one name per protocol, or "shoe" + protocol option
    "shoe": "drivers.shoe:SerialShoe",
    "beetek": "drivers.shoe:BeeTekShoe",
    "rfid": "drivers.shoe:RfidShoe",
    "pdt": "drivers.shoe:PdtShoe",
    # dealer panel with the supervisor key switch (docs/panel.md)
    "hid_panel": "drivers.hid_panel:HidPanel",
    "line_panel": "drivers.line_panel:LinePanel",
    "sim_panel": "drivers.sim.panel:SimPanel",
}

DRIVERS = Registry(ENTRY_POINT_GROUP, BUILTIN, noun="driver", error=DriverConfigError)


def available() -> dict[str, str]:
    """Every known driver name with its ``module:Class`` target."""
    return DRIVERS.available()


def driver_class(name: str) -> type[Driver]:
    cls: type[Driver] = DRIVERS.load(name, base=Driver)  # an import by name, checked there
    return cls


def create(name: str, *args: Any, **kwargs: Any) -> Driver:
    """Instantiate the driver called ``name`` with the given arguments."""
    return driver_class(name)(*args, **kwargs)
