"""``python -m bench.soak``: the soak's command line (docs/soak.md)."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import bench.soak
from bench.soak.harness import run_soak
from bench.soak.results import SoakOptions, print_figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak",
                                     description=bench.soak.__doc__.split("\n\n")[0])
    parser.add_argument("--shoes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None, help="default: random, printed")
    parser.add_argument("--clock-speed", type=float, default=10.0,
                        help="table time runs this many times faster (default 10)")
    parser.add_argument("--fault-rate", type=float, default=0.2,
                        help="chance per round of a random fault (default 0.2)")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILL restarts (default 3)")
    parser.add_argument("--rss-from", type=int, default=20,
                        help="reference shoe for RSS/threads/fds (default 20)")
    parser.add_argument("--workdir", help="keep the state, logs and config here")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"soak: {args.shoes} shoes, seed {seed}, clock x{args.clock_speed:g}", flush=True)
    result = run_soak(SoakOptions(shoes=args.shoes, seed=seed, clock_speed=args.clock_speed,
                                  fault_rate=args.fault_rate, kills=args.kills,
                                  rss_from=args.rss_from, workdir=args.workdir,
                                  verbose=args.verbose))
    print_figures(result)
    if args.json:
        Path(args.json).write_text(json.dumps({"seed": seed, **result.figures()}, indent=2) + "\n")
    return 0 if result.ok else 1
