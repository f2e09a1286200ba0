"""``pokdeng-table bench [options]``: every benchmark, one table (bench/report.py).

The benchmarks live in the repository's ``bench/`` folder, next to ``controller/``: an editable
install of a clone (``pip install -e .``, the README's set-up) finds them; an install from a
wheel has no ``bench/`` and says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType


def bench_folder() -> Path:
    return Path(__file__).resolve().parent.parent.parent / "bench"


def _report() -> ModuleType | None:
    """bench/report.py of this clone, or None when installed without the repository."""
    folder = bench_folder()
    if not (folder / "report.py").is_file():
        return None
    root = str(folder.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from bench import report  # stdlib imports only at the top: cheap to load for --help

    return report


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="run every benchmark and print one table of figures",
        description="Run every benchmark and print one table: exact RTP time, replay speed, "
                    "journal appends, card-to-backend latency, daemon start/idle footprint, "
                    "soak. Needs a clone of the repository (bench/); mosquitto for the "
                    "latency and soak parts.")
    report = _report()
    if report is not None:
        report.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = _report()
    if report is None:
        print(f"pokdeng-table bench: no benchmarks at {bench_folder()}; they ship with the "
              f"source repository: clone it and `pip install -e .` there", file=sys.stderr)
        return 2
    code: int = report.run(args)  # bench/report.py, imported from the clone
    return code
