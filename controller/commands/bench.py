"""``pokdeng-table bench [options]``: every benchmark, one table (bench/report.py).

The benchmarks live in the repository's ``bench/`` folder, next to ``controller/``, with the
test kit they borrow backends from: neither is part of the product, so this command does not
import them. It runs the clone's ``bench/report.py`` as a process of its own with the options
it was given (``pokdeng-table bench --help`` shows the benchmarks' own options). An editable
install of a clone (``pip install -e .``, the README's set-up) finds it; an install from a
wheel or the Debian package has no ``bench/`` and says so.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def bench_folder() -> Path:
    return Path(__file__).resolve().parent.parent.parent / "bench"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="run every benchmark and print one table of figures (from a clone)",
        description="Run every benchmark and print one table: exact RTP time, replay speed, "
                    "journal appends, card-to-backend latency, the table under load, a fleet "
                    "through a broker restart, daemon start/idle footprint, soak. Needs a clone "
                    "of the repository (its bench/ folder; the installed package has none) and "
                    "mosquitto for the latency, stress, fleet and soak parts. "
                    "`pokdeng-table bench --help` lists the benchmarks' own options.",
        add_help=False)
    parser.add_argument("options", nargs="*", metavar="OPTION",
                        help="bench/report.py's options, e.g. --skip latency,soak or --full "
                             "(--help lists them)")
    # its options are bench/report.py's: the command line hands them on as they are
    parser.set_defaults(func=run, forwards_options=True)


def run(args: argparse.Namespace) -> int:
    report = bench_folder() / "report.py"
    if not report.is_file():
        print(f"pokdeng-table bench: no benchmarks at {bench_folder()}; they ship with the "
              f"source repository, not with the package: clone it and `pip install -e .` "
              f"there", file=sys.stderr)
        return 2
    options = list(args.options)
    done = subprocess.run([sys.executable, str(report), *options], check=False)
    return done.returncode
