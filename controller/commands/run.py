"""``pokdeng-table run --config FILE``: the table daemon (see controller/service/daemon.py)."""

from __future__ import annotations

import argparse
import sys

from controller.service.config.errors import EX_CONFIG, ConfigError
from controller.service.private_files import creates_private_files


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run", help="run the table daemon",
        description="Run the table daemon: drivers, table machine, journal, outbox, control "
                    "socket. Exits 78 on a bad configuration (systemd does not restart it).")
    parser.add_argument("--config", required=True, metavar="FILE", help="YAML configuration")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                        help="override logging.level")
    parser.add_argument("--log-format", choices=("auto", "json", "console"),
                        help="override logging.format")
    parser.add_argument("--clock-speed", type=float, default=1.0, metavar="X",
                        help="testing only (soak, benchmarks): run table time X times faster "
                             "than the wall clock; never on a live table")
    parser.set_defaults(func=run)


@creates_private_files
def run(args: argparse.Namespace) -> int:
    from controller.service.clock.table_clock import TableClock
    from controller.service.config.startup_checks import load_checked_config
    from controller.service.daemon import Daemon
    from controller.service.telemetry.logging_setup import setup_logging

    try:
        config = load_checked_config(args.config)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return EX_CONFIG
    setup_logging(args.log_level or config.logging.level, args.log_format or config.logging.format,
                  table=config.table.table_id)
    if not args.clock_speed > 0:
        print("--clock-speed must be > 0", file=sys.stderr)
        return 2
    if args.clock_speed != 1.0:
        return Daemon(config, clock=TableClock(args.clock_speed)).run()
    return Daemon(config).run()
