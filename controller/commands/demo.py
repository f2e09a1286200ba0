"""``pokdeng-table demo``: a whole table on this computer, no hardware.

See controller/commands/demo_table.py.
"""

from __future__ import annotations

import argparse
import sys

from controller.service.private_files import creates_private_files


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo", help="play a demo shoe on simulated devices (no config, no hardware)",
        description="Start a simulated shoe (on a pty) and a simulated button panel, run the "
                    "real daemon path (drivers, table machine, journal, outbox to a local "
                    "file) and play a shoe, showing every round and its results. Rerun with "
                    "the same --state-dir after an interruption to carry on with that shoe.")
    parser.add_argument("--rounds", type=int, metavar="N",
                        help="stop after N rounds (default: play the whole shoe)")
    parser.add_argument("--speed", type=float, default=50.0, metavar="X",
                        help="table time runs X times faster than real time (default 50: "
                             "a 15 s betting window lasts 0.3 s)")
    parser.add_argument("--seed", type=int, metavar="N",
                        help="shuffle seed (default: random; a resumed state dir keeps its own)")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="journal and demo state (default: a new directory under /tmp)")
    parser.add_argument("--events", metavar="FILE",
                        help="also write the backend events as JSON Lines to FILE")
    parser.add_argument("--metrics", metavar="FILE.prom",
                        help="also write Prometheus metrics to FILE.prom (node_exporter textfile)")
    parser.add_argument("--quiet", action="store_true", help="print only the round results")
    parser.add_argument("--display-port", type=int, metavar="PORT",
                        help="serve the dealer display on 127.0.0.1:PORT (default: 8080 if "
                             "free, else any free port; 0: any free port)")
    parser.add_argument("--no-display", action="store_true",
                        help="do not serve the dealer display")
    sandbox = parser.add_argument_group(
        "sandbox", "point the demo table at your own game backend (docs/backend.md, "
                   "\"A sandbox\")")
    sandbox.add_argument("--config", metavar="FILE",
                         help="a YAML file with `transports:` (http and/or mqtt, as in "
                              "config/example.yaml) and optionally `table: {id: T01}`: the "
                              "table's events also go there")
    sandbox.add_argument("--faults", metavar="LIST",
                         help="comma-separated, made one round in --fault-every: misread, "
                              "pause, cancel, restart, outage")
    sandbox.add_argument("--fault-every", type=int, default=3, metavar="N",
                         help="every N-th round gets the next fault of --faults (default 3)")
    sandbox.add_argument("--outage-seconds", type=float, default=10.0, metavar="S",
                         help="how long the table stays off in an `outage` (default 10)")
    parser.add_argument("--stay", action="store_true",
                        help="after the last round keep the table and its display up until "
                             "Ctrl-C (to look at the page at leisure)")
    parser.set_defaults(func=run_demo)


@creates_private_files
def run_demo(args: argparse.Namespace) -> int:
    from controller.commands.demo_sandbox import FaultPlan, SandboxError, parse_faults, read_sandbox
    from controller.commands.demo_table import DemoOptions, main
    from controller.service.config.errors import EX_CONFIG, ConfigError

    if args.rounds is not None and args.rounds < 1:
        raise SystemExit("pokdeng-table demo: --rounds must be at least 1")
    if args.speed <= 0:
        raise SystemExit("pokdeng-table demo: --speed must be > 0")
    if args.display_port is not None and not 0 <= args.display_port <= 65535:
        raise SystemExit("pokdeng-table demo: --display-port must be 0..65535")
    if args.fault_every < 1:
        raise SystemExit("pokdeng-table demo: --fault-every must be at least 1")
    if args.outage_seconds < 0:
        raise SystemExit("pokdeng-table demo: --outage-seconds must be >= 0")
    try:
        sandbox = read_sandbox(args.config) if args.config else None
        faults = FaultPlan(parse_faults(args.faults), args.fault_every, args.outage_seconds)
    except SandboxError as exc:
        raise SystemExit(f"pokdeng-table demo: {exc}") from None
    try:
        return main(DemoOptions(rounds=args.rounds, speed=args.speed, seed=args.seed,
                                state_dir=args.state_dir, events=args.events, quiet=args.quiet,
                                display=not args.no_display, display_port=args.display_port,
                                metrics=args.metrics, stay=args.stay, sandbox=sandbox,
                                sandbox_source=args.config, faults=faults))
    except ConfigError as exc:  # an option of the sandbox file the table's config refuses
        print(exc.report(), file=sys.stderr)
        return EX_CONFIG
