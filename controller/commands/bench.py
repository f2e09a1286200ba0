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
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: after Ctrl-C, how long a benchmark may take to stop its daemons and broker and remove its
#: folders before it is killed (a daemon's own stop takes up to 30 s)
CLEAN_UP_S = 60.0


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
    return run_to_its_end([sys.executable, str(report), *options]).returncode


def run_to_its_end(argv: Sequence[str], timeout: float | None = None,
                   **popen: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run``, except that on Ctrl-C the child is left to clean up: it got the
    same SIGINT (one process group) and stops its daemons and broker and removes its
    folders; ``subprocess.run`` kills it after 0.25 s, leaving them behind. A child the
    SIGINT did not reach (``kill -INT`` of this process alone) is sent one."""
    with subprocess.Popen(list(argv), **popen) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except KeyboardInterrupt:
            try:
                child.wait(2.0)
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGINT)
            try:
                child.communicate(timeout=CLEAN_UP_S)
            except subprocess.TimeoutExpired:
                child.kill()
            raise
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)
