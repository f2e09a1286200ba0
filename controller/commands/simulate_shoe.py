"""``pokdeng-table simulate-shoe``: a simulated card-reading shoe on a pty.

    pokdeng-table simulate-shoe --link /tmp/shoe [--protocol beetek|rfid|pdt]
        [--script FILE | --seed N] [--speed X] [--faults split,garbage,badsum,silence,unplug]
        [--hold] [--decks N] [--registry FILE] [--framing line|stx_etx]

Sends the shoe side (card, cut_card, misread) of a table script, or a freshly shuffled shoe
with a cut card, to whatever opens PATH; exits when done unless --hold. The script's clock
starts when a reader opens PATH (and carries on when one opens it again after an unplug), so a
reader that comes late gets the cards at the script's pace.
"""

from __future__ import annotations

import argparse
import sys

PROG = "simulate-shoe"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate-shoe", help="run a simulated card-reading shoe on a pty",
        description="Make a pty, link its device end at PATH, and send a table script's shoe "
                    "inputs (or a shuffled shoe) in the chosen shoe protocol.")
    parser.add_argument("--link", required=True, metavar="PATH",
                        help="where to put the symlink to the pty (the driver's url)")
    parser.add_argument("--protocol", default="beetek", choices=("beetek", "rfid", "pdt"),
                        help="the shoe's protocol: beetek (ASCII card codes), rfid (tag ids "
                             "and a card registry) or pdt (checksummed; docs/pdt-protocol.md); "
                             "default beetek")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--script", metavar="FILE",
                        help="table script (JSON lines); its card, cut_card and misread inputs "
                             "are sent at their 'at' times")
    source.add_argument("--seed", type=int, help="shuffle a new shoe with this seed "
                                                 "(default: a random seed, printed)")
    parser.add_argument("--decks", type=int, default=8, help="decks in a shuffled shoe "
                                                             "and in the RFID registry")
    parser.add_argument("--speed", type=float, default=1.0,
                        help="time divisor: 10 plays a script ten times faster")
    parser.add_argument("--faults", default="", metavar="LIST",
                        help="comma-separated: split, garbage, badsum, silence, unplug")
    parser.add_argument("--registry", metavar="FILE",
                        help="rfid: where to write the card registry (default PATH.cards.csv)")
    parser.add_argument("--framing", default="line", choices=("line", "stx_etx"),
                        help="rfid: one UID per line (default), or STX/ETX frames with an XOR "
                             "checksum as 125 kHz reader modules send them")
    parser.add_argument("--hold", action="store_true",
                        help="keep the line open after the last card, until Ctrl-C/SIGTERM")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import logging
    import random
    import signal
    import threading

    from controller.table.inputs import ScriptError, read_script
    from drivers.sim.shoe import ShoeSimulator, SimulatorError, shoe_inputs, shoe_side

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"{PROG}: %(message)s")
    if args.speed <= 0:
        print(f"{PROG}: --speed must be above 0, got {args.speed}", file=sys.stderr)
        return 2
    if args.decks < 1:
        print(f"{PROG}: --decks must be at least 1, got {args.decks}", file=sys.stderr)
        return 2
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    if args.script:
        try:
            with open(args.script, encoding="utf-8") as script:
                inputs = shoe_side(read_script(script, args.script))
        except OSError as exc:
            print(f"{PROG}: cannot read {args.script}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        except ScriptError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 2
    else:
        inputs = shoe_inputs(seed, args.decks)
        print(f"{PROG}: shuffled {args.decks}-deck shoe, seed {seed}", file=sys.stderr)

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        sim = ShoeSimulator(args.link, args.protocol, faults=faults, seed=seed,
                            decks=args.decks, registry_path=args.registry,
                            framing=args.framing)
    except SimulatorError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    if sim.registry_path is not None:
        print(f"{PROG}: card registry written to {sim.registry_path}", file=sys.stderr)
    interrupted = False
    try:
        sim.start()
        sim.play(inputs, speed=args.speed)
        if args.hold:
            print(f"{PROG}: all sent; holding the line open (Ctrl-C to end)", file=sys.stderr)
            stop.wait()
    except KeyboardInterrupt:
        interrupted = True
    except SimulatorError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    finally:
        sim.close(drain_timeout=0.5 if interrupted else 10.0)
        signal.signal(signal.SIGTERM, previous)
    print(f"{PROG}: {'stopped' if interrupted else 'done'}; {len(inputs)} shoe input(s) "
          f"in the script", file=sys.stderr)
    return 0
