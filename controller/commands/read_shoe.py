"""``pokdeng-table read-shoe``: what is my shoe sending?

    pokdeng-table read-shoe URL [--protocol beetek|rfid|pdt] [--registry FILE] [options]
    pokdeng-table read-shoe URL --learn-cut [options]

Prints each decoded input as a table-script JSON line on stdout (device connects and
disconnects included) and every problem — garbage, bad checksums, lost frames, retries — as a
plain line on stderr. Ctrl-C or SIGTERM ends it cleanly. Times (``at``) are seconds since the
command started.

``--learn-cut`` waits for the cut card instead: the first frame that is not a card is shown and
the config line naming it printed on stdout (``controller/commands/learn_cut.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drivers.base import Clock
    from drivers.shoe import ProblemSink

PROG = "read-shoe"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "read-shoe", help="print what a card-reading shoe sends, as table-script lines",
        description="Open a shoe (any pyserial URL: /dev/…, socket://host:port, spy://…) and "
                    "print each decoded input as a table-script JSON line.")
    parser.add_argument("url", help="serial port or pyserial URL of the shoe")
    parser.add_argument("--protocol", default="beetek", choices=("beetek", "rfid", "pdt"),
                        help="the shoe's protocol: beetek (ASCII card codes), rfid (tag ids "
                             "and a card registry) or pdt (checksummed; docs/pdt-protocol.md); "
                             "default beetek")
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
    parser.add_argument("--learn-cut", action="store_true",
                        help="wait for the cut card to be drawn, show the frame the shoe sent "
                             "for it and print the cut_card_frames line (rfid: the registry "
                             "line) for the config")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show hex dumps of discarded bytes")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import logging

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

    started = time.monotonic()

    def clock() -> float:  # seconds since this command started, as a table script counts
        return round(time.monotonic() - started, 3)

    if args.learn_cut:
        return _learn_cut(args, options, clock, print_problem)
    try:
        shoe = SerialShoe(device_reader.print_input, options, clock=clock,
                          problem_sink=print_problem)
    except DriverConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return device_reader.run_until_signal(shoe, PROG, "shoe", lambda: shoe.counts)


def _learn_cut(args: argparse.Namespace, options: dict[str, Any], clock: Clock,
               print_problem: ProblemSink) -> int:
    from controller.commands import device_reader
    from controller.commands.learn_cut import CutCardLearner, learn_cut
    from drivers.base import DriverConfigError
    from drivers.protocols.beetek import DEFAULT_CUT_CARD_FRAMES
    from drivers.shoe import SerialShoe

    def say(text: str) -> None:
        device_reader.print_problem(PROG, text)

    def answer(text: str) -> None:
        with device_reader.output_lock:
            print(text, flush=True)

    if args.protocol == "beetek":
        options["unknown_frames"] = "pause"  # an unknown frame is the candidate we want
    configured = list(options.get("cut_card_frames") or DEFAULT_CUT_CARD_FRAMES)
    learner = CutCardLearner(args.protocol, configured, say, answer)
    try:
        shoe = SerialShoe(learner, options, clock=clock, problem_sink=print_problem)
    except DriverConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return learn_cut(shoe, learner, say)
