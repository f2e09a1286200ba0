"""A simulated dealer panel the demo and the tests drive in-process.

``SimPanel`` is the real ``HidPanel`` driver reading an emulated USB panel on an emulated
pyusb backend (``drivers.sim.usb_emulation``): pyusb's core and every line of the HID driver run
as they would on the table, only the hardware is Python. The demo presses buttons and turns
the key switch through it::

    panel = registry.create("sim_panel", queue.put, {"reconnect_seconds": 0.2})
    panel.start()
    panel.press("start_round")
    panel.set_pause_switch(True)
    panel.unplug(); panel.replug()
    panel.leds            # {"start_round": True, ...}: what the daemon lit

Its options are the HID panel's; vendor/product id, buttons, switch and LEDs default to the
emulated panel's layout below, which stamps every report with the panel's millisecond counter
(``timestamp_byte: 1``, right after the input bits; ``timestamp_byte: null`` for a panel
without one).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from drivers.base import Clock, InputSink
from drivers.hid_panel import HidPanel, HidPanelConfig
from drivers.sim.usb_emulation import EmulatedBackend, EmulatedHidPanel

SIM_VENDOR_ID = 0x16C0
SIM_PRODUCT_ID = 0x05DF
SIM_SERIAL = "SIM-PANEL"
DEFAULT_OPTIONS: dict[str, Any] = {
    "vendor_id": SIM_VENDOR_ID,
    "product_id": SIM_PRODUCT_ID,
    "serial": SIM_SERIAL,
    "buttons": {"new_shoe": 0, "start_round": 1, "reveal": 2, "cancel_round": 3, "end_shoe": 4},
    "pause_switch_bit": 7,
    "leds": {"new_shoe": 0, "start_round": 1, "reveal": 2, "cancel_round": 3, "end_shoe": 4},
    "timestamp_byte": 1,
}


class SimPanel(HidPanel):
    """The HID panel driver wired to its own emulated panel hardware."""

    def __init__(self, sink: InputSink, options: Mapping[str, Any] | None = None,
                 clock: Clock = time.time, name: str | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 hardware: EmulatedHidPanel | None = None):
        merged = {**DEFAULT_OPTIONS, **dict(options or {})}
        config = HidPanelConfig.from_options(merged, name or "sim_panel")
        layout = config.layout
        stamp_at = layout.timestamp_byte
        if hardware is None:
            hardware = EmulatedHidPanel(vendor_id=config.vendor_id, product_id=config.product_id,
                                        serial=config.serial, timestamped=stamp_at is not None)
        bits_length = max(layout.input_bits, default=0) // 8 + 1
        if hardware.timestamped:  # the emulated panel puts its stamp right after the bits
            if stamp_at is None or stamp_at < bits_length:
                raise ValueError(f"sim_panel: timestamp_byte must be at least {bits_length}, "
                                 "after the input bits, for the emulated panel's stamp")
            hardware.report_length = stamp_at
        elif bits_length > hardware.report_length:
            hardware.report_length = bits_length
        self.hardware = hardware
        self.bus = EmulatedBackend([self.hardware])
        super().__init__(sink, merged, clock, name or "sim_panel", backend=self.bus,
                         monotonic=monotonic)

    # -- what the dealer and the supervisor do --------------------------------------------------
    def press(self, name: str, hold_s: float | None = None) -> None:
        """Press and release a button (returns at once; the press lasts ``hold_s``)."""
        bit = self.config.layout.buttons.get(name)
        if bit is None:
            raise ValueError(f"the simulated panel has no button {name!r}; it has: "
                             f"{', '.join(self.config.layout.buttons)}")
        if hold_s is None:  # long enough to pass the debounce with room to spare
            hold_s = max(4 * self.config.debounce_s, 0.08)
        self.hardware.press_bit(bit, hold_s)

    def set_pause_switch(self, on: bool) -> None:
        """Turn the supervisor key to PAUSE (True) or RUN (False)."""
        layout = self.config.layout
        if layout.pause_bit is None:
            raise ValueError("the simulated panel has no key switch (pause_switch_bit unset)")
        self.hardware.set_bit(layout.pause_bit, bool(on) != layout.pause_active_low)

    def unplug(self) -> None:
        self.hardware.unplug()

    def replug(self) -> None:
        self.hardware.replug()

    @property
    def leds(self) -> dict[str, bool]:
        """What the panel's LEDs show now (all off before the driver first sent them)."""
        value = self.hardware.leds or 0
        body_offset = 8 if self.config.layout.led_report_id is not None else 0
        return {name: bool(value >> (bit + body_offset) & 1)
                for name, bit in self.config.layout.leds.items()}
