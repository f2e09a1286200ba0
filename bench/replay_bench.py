"""Replay speed of the table machine (a benchmark, not a test).

Crash recovery rebuilds the table by replaying the journal through a fresh machine, so the
time to replay one whole shoe is what a restart costs. Goal: one shoe in under 8 ms.

    python bench/replay_bench.py [--shoes 40]
    python bench/replay_bench.py --profile [--top 10]   # where the time goes (cProfile)
    python bench/replay_bench.py --cpu     # CPU time, not wall time (a machine busy elsewhere)

Prints: rounds per second over many shoes (machine only, and with events serialised to JSON
lines as `pokdeng-table replay` does), and the median / worst time for one whole 8-deck shoe.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from controller.table.events import to_json_line
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine


def replay_shoe(script, settings: MachineSettings, serialise: bool) -> tuple[int, int]:
    machine = TableMachine(settings)  # a fresh machine, as recovery builds one
    events = rounds = 0
    for inp in script:
        for event in machine.handle(inp):
            events += 1
            if event["type"] == "round_result":
                rounds += 1
            if serialise:
                to_json_line(event)
    return rounds, events


def measure(shoes: int = 40, clock: Callable[[], float] = time.perf_counter,
            ) -> dict[str, dict[str, float]]:
    """Figures per mode ("machine", "json"): rounds/s, inputs/s, events/s, one shoe's median
    and worst replay time in ms, and the totals. ``clock=time.process_time`` counts this
    process's CPU time only: steadier than wall time on a machine busy with other work."""
    settings = MachineSettings()
    scripts = [shoe_script(seed) for seed in range(shoes)]  # generated before timing
    inputs = sum(len(s) for s in scripts)
    replay_shoe(scripts[0], settings, False)  # warm up imports and caches
    figures: dict[str, dict[str, float]] = {}
    for serialise in (False, True):
        times, rounds, events = [], 0, 0
        for script in scripts:
            start = clock()
            r, e = replay_shoe(script, settings, serialise)
            times.append(clock() - start)
            rounds += r
            events += e
        total = sum(times)
        figures["json" if serialise else "machine"] = {
            "shoes": shoes, "inputs": inputs, "events": events, "rounds": rounds,
            "seconds": total, "rounds_per_s": rounds / total, "inputs_per_s": inputs / total,
            "events_per_s": events / total,
            "shoe_median_ms": statistics.median(times) * 1000, "shoe_worst_ms": max(times) * 1000}
    return figures


def profile(shoes: int, top: int) -> str:
    """cProfile's table of the ``top`` functions by own time, replaying ``shoes`` shoes with
    their events encoded as JSON lines (what recovery and ``replay`` do)."""
    import cProfile
    import io
    import pstats

    settings = MachineSettings()
    scripts = [shoe_script(seed) for seed in range(shoes)]
    replay_shoe(scripts[0], settings, True)  # imports and caches outside the profile
    profiler = cProfile.Profile()
    profiler.enable()
    for script in scripts:
        replay_shoe(script, settings, True)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", type=int, default=40)
    parser.add_argument("--profile", action="store_true",
                        help="print cProfile's top functions (own time) instead of figures")
    parser.add_argument("--top", type=int, default=10, help="rows of the profile (10)")
    parser.add_argument("--cpu", action="store_true",
                        help="time with this process's CPU time instead of the wall clock")
    args = parser.parse_args()
    if args.profile:
        print(profile(args.shoes, args.top), end="")
        return
    clock = time.process_time if args.cpu else time.perf_counter
    for mode, f in measure(args.shoes, clock).items():
        label = "machine + JSON lines" if mode == "json" else "machine only"
        print(f"[{label}] {f['shoes']} shoes, {f['inputs']} inputs, {f['events']} events, "
              f"{f['rounds']} rounds in {f['seconds']:.3f} s")
        print(f"  throughput: {f['rounds_per_s']:,.0f} rounds/s, "
              f"{f['inputs_per_s']:,.0f} inputs/s, "
              f"{f['events_per_s']:,.0f} events/s")
        print(f"  one whole shoe: median {f['shoe_median_ms']:.1f} ms, "
              f"worst {f['shoe_worst_ms']:.1f} ms (goal < 8 ms)")


if __name__ == "__main__":
    main()
