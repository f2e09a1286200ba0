"""``pokdeng-table read-panel``: what is my button panel sending?

    pokdeng-table read-panel --usb VID:PID [--serial S] [--raw]   # a USB HID panel
    pokdeng-table read-panel --line URL [--baudrate N]            # a serial line panel
    pokdeng-table read-panel --config /etc/pokdeng-table/table.yaml   # the table's panel section

Prints each input (button, switch, device) as a table-script JSON line on stdout and problems
and retries as plain lines on stderr. ``--raw`` also prints every USB report with the numbers
of the bits set, to find which bit each button and the key switch are wired to. Ctrl-C or
SIGTERM ends it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

PROG = "read-panel"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "read-panel", help="print what the dealer button panel sends, as table-script lines",
        description="Open the dealer panel and print each input as a table-script JSON line.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--usb", metavar="VID:PID", help="a USB HID panel, e.g. 16c0:05df "
                        "(buttons on bits 0-4 and the key switch on bit 7 unless --config)")
    source.add_argument("--line", metavar="URL", help="a serial line panel (any pyserial URL)")
    source.add_argument("--config", metavar="FILE", help="use the panel section of a table config")
    parser.add_argument("--serial", help="--usb: the panel's USB serial number")
    parser.add_argument("--baudrate", type=int, help="--line: line speed (default 9600)")
    parser.add_argument("--raw", action="store_true",
                        help="--usb/--config with hid_panel: also print every report and its bits")
    parser.add_argument("--reconnect-seconds", type=float, default=1.0,
                        help="retry period while the panel is away (default 1)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug log lines too")
    parser.set_defaults(func=run)


def _driver_spec(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The driver name and options the arguments ask for; ValueError when they do not fit."""
    if args.config:
        from controller.service.config.settings import load_config

        panel = load_config(args.config).panel
        if panel is None:
            raise ValueError(f"{args.config} has no panel section")
        options = panel.driver_options()
        options.setdefault("reconnect_seconds", args.reconnect_seconds)
        return panel.driver, options
    if args.line:
        options = {"url": args.line, "reconnect_seconds": args.reconnect_seconds}
        if args.baudrate is not None:
            options["baudrate"] = args.baudrate
        return "line_panel", options
    from drivers.sim.panel import DEFAULT_OPTIONS

    vid, sep, pid = args.usb.partition(":")
    try:
        ids = int(vid, 16), int(pid, 16)
    except ValueError:
        ids = None
    if not sep or ids is None:
        raise ValueError(f"--usb takes VID:PID in hex as lsusb shows it, e.g. 16c0:05df; "
                         f"got {args.usb!r}")
    options = {"vendor_id": ids[0], "product_id": ids[1], "buttons": DEFAULT_OPTIONS["buttons"],
               "pause_switch_bit": DEFAULT_OPTIONS["pause_switch_bit"],
               "reconnect_seconds": args.reconnect_seconds}
    if args.serial:
        options["serial"] = args.serial
    return "hid_panel", options


def run(args: argparse.Namespace) -> int:
    import logging

    from controller.commands import device_reader
    from controller.service.config.errors import ConfigError
    from drivers import registry
    from drivers.base import DriverConfigError

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        stream=sys.stderr, format=f"{PROG}: %(message)s")
    def print_report(report: bytes) -> None:
        value = int.from_bytes(report, "little")
        bits = [str(n) for n in range(8 * len(report)) if value >> n & 1]
        device_reader.print_problem(
            PROG, f"report {report.hex(' ')} (bits set: {', '.join(bits) or 'none'})")

    try:
        name, options = _driver_spec(args)
        extra = {"report_hook": print_report} if args.raw and name == "hid_panel" else {}
        panel = registry.create(name, device_reader.print_input, options, **extra)
    except (ConfigError, DriverConfigError, ValueError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return device_reader.run_until_signal(panel, PROG, "panel",
                                          lambda: getattr(panel, "counters", {}))
