"""``pokdeng-table read-shoe``: what is my shoe sending?

    pokdeng-table read-shoe URL [--protocol beetek|rfid|pdt] [--registry FILE] [options]

Prints each decoded input as a table-script JSON line on stdout (device connects and
disconnects included) and every problem — garbage, bad checksums, lost frames, retries — as a
plain line on stderr. Ctrl-C or SIGTERM ends it cleanly.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

PROG = "read-shoe"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "read-shoe", help="print what a card-reading shoe sends, as table-script lines",
        description="Open a shoe (any pyserial URL: /dev/…, socket://host:port, spy://…) and "
                    "print each decoded input as a table-script JSON line.")
    parser.add_argument("url", help="serial port or pyserial URL of the shoe")
    parser.add_argument("--protocol", default="beetek", choices=("beetek", "rfid", "pdt"))
    parser.add_argument("--registry", metavar="FILE", help="rfid: the uid,card CSV registry")
    parser.add_argument("--baudrate", type=int, help="line speed (default per protocol)")
    parser.add_argument("--cut-card-frame", action="append", metavar="FRAME",
                        help="beetek: a frame meaning the cut card (default <Card:CUT>); "
                             "repeat for several")
    parser.add_argument("--reconnect-seconds", type=float, default=1.0,
                        help="retry period while the shoe is away (default 1)")
    parser.add_argument("--repeat-window-seconds", type=float,
                        help="rfid: a tag reported again within this time is one read "
                             "(default 0 = every repeat is a duplicate)")
    parser.add_argument("--framing", choices=("line", "stx_etx"),
                        help="rfid: line (default) or stx_etx (STX data [checksum] ETX frames "
                             "of 125 kHz reader modules)")
    parser.add_argument("--checksum", choices=("auto", "xor", "none"),
                        help="rfid stx_etx: the frames' XOR checksum (default auto)")
    parser.add_argument("--silence-seconds", type=float,
                        help="pdt: report the shoe lost after this long without a frame "
                             "(default 5, 0 = never)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show hex dumps of discarded bytes")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.commands import device_reader
    from drivers.base import DriverConfigError
    from drivers.protocols.base import Problem, hex_dump
    from drivers.shoe import SerialShoe

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        stream=sys.stderr, format=f"{PROG}: %(message)s")
    options: dict[str, Any] = {"url": args.url, "protocol": args.protocol,
                               "reconnect_seconds": args.reconnect_seconds}
    if args.registry:
        options["registry"] = args.registry
    if args.baudrate is not None:
        options["baudrate"] = args.baudrate
    if args.cut_card_frame:
        options["cut_card_frames"] = args.cut_card_frame
    if args.repeat_window_seconds is not None:
        options["repeat_window_seconds"] = args.repeat_window_seconds
    if args.framing is not None:
        options["framing"] = args.framing
    if args.checksum is not None:
        options["checksum"] = args.checksum
    if args.silence_seconds is not None:
        options["silence_seconds"] = args.silence_seconds

    def print_problem(problem: Problem) -> None:
        if problem.level == "debug" and not args.verbose:
            return
        line = f"{problem.code}: {problem.message}"
        if args.verbose and problem.raw:
            line += f" [{hex_dump(problem.raw)}]"
        device_reader.print_problem(PROG, line)

    try:
        shoe = SerialShoe(device_reader.print_input, options, problem_sink=print_problem)
    except DriverConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return device_reader.run_until_signal(shoe, PROG, "shoe", lambda: shoe.counts)
